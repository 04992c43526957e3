"""A serving process whose artifact file is changed under it (run by tests/unit/test_artifact_reader_lies.py).

``python tests/hostile/live_worker.py PATH``: loads PATH every way a server does (``Diversifier``
under each ``on_error`` policy, ``ClusterMap.load`` with and without ``verify``,
``diversify.load``), records each one's answers (wrapped searches with refetch and cursor pages,
``expand``, ``lookup``, ``members``, ``representative_of``, ``doc_index``, ``ids``, extras), prints
``ready``, and after ``go`` on stdin asks the same questions again and again until ``stop``,
comparing every answer with the recorded one. One more map is loaded without touching its
extras; after ``stop`` it reads them: they must be refused or equal, never different. Prints one
JSON line (per loader: rounds, mismatches, errors) and exits 0, unless the process is killed
(a SIGBUS shows as return code -7).
"""

from __future__ import annotations

import json
import sys
import threading

import numpy as np

import diversify
from diversify.artifact import ClusterMap
from diversify.errors import ArtifactError
from diversify.online import Diversifier, Hit


def search_for(ids: list):
    n = len(ids)

    def search(query: int, k: int, exclude_ids=()):
        skip = set(exclude_ids or ())
        out = []
        for j in range(n):
            doc = ids[(query * 37 + j) % n]
            if doc not in skip:
                out.append(Hit(doc, float(n - j)))
            if len(out) == k:
                break
        return out

    return search


def diversifier_answers(d: Diversifier, search) -> list:
    wrapped = d.wrap(search)
    out = []
    for q in range(6):
        page1 = wrapped(q)
        page2 = wrapped(q, cursor=page1.cursor)
        out.append((page1.ids, page2.ids, [d.expand(kept) for kept in page1], d.stats()["lookup_errors"]))
    return out


def map_answers(cm: ClusterMap, ids: list) -> list:
    clusters = cm.cluster_sizes()[0].tolist()
    return [
        cm.lookup(ids + ["not-an-id"]).tolist(),
        cm.doc_index(ids[::7]).tolist(),
        [cm.members(c) for c in clusters[::3]],
        [cm.representative_of(c) for c in clusters[::5]],
        list(cm.ids),
        {name: np.asarray(arr).tolist() for name, arr in cm.extras.items()},
    ]


def main() -> int:
    path = sys.argv[1]
    probe = ClusterMap.load(path)
    ids = list(probe.ids)
    search = search_for(ids)
    askers = {}
    for policy in ("raise", "last_good", "passthrough"):
        d = Diversifier(path, k=5, max_per_cluster=1, on_error=policy)
        askers[f"Diversifier(path, on_error={policy!r})"] = (lambda d=d: diversifier_answers(d, search))
    for name, cm in (("ClusterMap.load(path)", ClusterMap.load(path)),
                     ("ClusterMap.load(path, verify=False)", ClusterMap.load(path, verify=False)),
                     ("diversify.load(path)", diversify.load(path))):
        askers[name] = (lambda cm=cm: map_answers(cm, ids))
    late = ClusterMap.load(path)  # extras not read yet
    del probe
    expected = {name: ask() for name, ask in askers.items()}
    report = {name: {"rounds": 0, "mismatches": 0, "errors": []} for name in askers}

    stop = threading.Event()
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return 3

    def wait_stop():
        sys.stdin.readline()
        stop.set()

    threading.Thread(target=wait_stop, daemon=True).start()
    final = False
    while True:
        final = stop.is_set()  # one last full round after the file has stopped changing
        for name, ask in askers.items():
            r = report[name]
            try:
                got = ask()
            except Exception as exc:  # any exception is a failure of the serving process
                if len(r["errors"]) < 3:
                    r["errors"].append(f"{type(exc).__name__}: {exc}"[:300])
                continue
            r["rounds"] += 1
            r["mismatches"] += got != expected[name]
        if final:
            break
    try:
        extras = {name: np.asarray(arr).tolist() for name, arr in late.extras.items()}
        late_extras = "same" if extras == expected["ClusterMap.load(path)"][-1] else "different"
    except ArtifactError as exc:
        late_extras = "refused: " + str(exc)[:200]
    print(json.dumps({"loaders": report, "late_extras": late_extras}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
