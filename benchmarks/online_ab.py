"""The wrapper's own CPU per query in the online suite's giant-cluster scenario, now against an
earlier commit, in one process (on a shared machine only such a comparison means something).

``python -m benchmarks.online_ab --baseline REV [--big 1000] [--passes 20]``

The scenario, its replayed store answers and the measurement are the online suite's
(``benchmarks/suites/_online_giant.py``: k=10, a replayed top-50 holding on average 20 members of
a ``--big``-member cluster). The package at ``REV`` is exported (``git archive``) under another
name, ``diversify_at_rev``, and imported next to the working tree's ``diversify``; passes
alternate between the two (old first on even passes), and both must return the same results
(ids, clusters, folds, cursor, exhausted, backend_calls) on every query.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import io
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
ALIAS = "diversify_at_rev"


def import_at(rev: str, where: str):
    """The ``diversify`` package of commit ``rev``, imported as :data:`ALIAS`."""
    blob = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "diversify"], capture_output=True,
                          check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        tar.extractall(where, filter="data")
    pkg = Path(where) / ALIAS
    (Path(where) / "diversify").rename(pkg)
    for path in pkg.rglob("*.py"):  # absolute imports and lazy-import tables name the package
        text = path.read_text()
        new = re.sub(r"\b(from|import) diversify\b", rf"\1 {ALIAS}", text)
        new = re.sub(r"([\"'])diversify\.(?!idkey|clustermap)", rf"\1{ALIAS}.", new)
        if new != text:
            path.write_text(new)
    sys.path.insert(0, where)
    return importlib.import_module(ALIAS)


def _key(res) -> tuple:
    return ([(kp[0].id, kp[1], kp[2], tuple(f.id for f in kp[3])) for kp in res.hits], res.cursor, res.exhausted,
            res.backend_calls, res.omitted, res.dropped)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", required=True, help="the commit to compare with")
    ap.add_argument("--big", type=int, default=1000, help="members of the big cluster (default 1000)")
    ap.add_argument("--passes", type=int, default=20, help="passes over the queries per side (default 20)")
    args = ap.parse_args(argv)
    import diversify

    from .suites._online_giant import ReplayStore, scenario

    with tempfile.TemporaryDirectory() as wd:
        old = import_at(args.baseline, os.path.join(wd, "pkg"))
        sc = scenario(wd, args.big)
        ranks = sc["rankings"]
        old_ranks = [[old.Hit(h.id, h.score, h.payload, h.vector, h.item, h.text) for h in r] for r in ranks]
        sides = {}
        for name, pkg, rankings, cm in (("baseline", old, old_ranks, old.load(os.path.join(wd, f"giant-{args.big}.dvf"))),
                                        ("now", diversify, ranks, sc["cm"])):
            store = ReplayStore(rankings)
            sides[name] = (store, pkg.Diversifier(cm, k=10, max_per_cluster=1).wrap(store))
        nq = len(ranks)
        first = {name: [search(q) for q in range(nq)] for name, (_, search) in sides.items()}
        same = all(_key(a) == _key(b) for a, b in zip(first["baseline"], first["now"]))
        cpu = {name: np.zeros((args.passes, nq)) for name in sides}
        tt = time.thread_time_ns
        for p in range(args.passes):
            for name in (("baseline", "now") if p % 2 == 0 else ("now", "baseline")):
                store, search = sides[name]
                gc.collect()
                gc.disable()
                try:
                    for q in range(nq):
                        s0, c0 = store.cpu, tt()
                        search(q)
                        cpu[name][p, q] = (tt() - c0) - (store.cpu - s0)  # the replay's own time taken out
                finally:
                    gc.enable()
    print(f"giant cluster {args.big:,}: {nq} queries x {args.passes} passes per side; store's own search "
          f"(NumpyStore, top-50) p50 {np.percentile(sc['store_search_ns'], 50) / 1e3:.0f} us")
    for name, a in cpu.items():
        per_query = np.median(a, axis=0)
        print(f"{name:9s} wrapper CPU: all p50 {np.percentile(a, 50) / 1e3:.1f} us, p99 {np.percentile(a, 99) / 1e3:.1f} us"
              f" | per-query medians p50 {np.percentile(per_query, 50) / 1e3:.1f} us, "
              f"p99 {np.percentile(per_query, 99) / 1e3:.1f} us")
    print(f"same results: {same}; load average {os.getloadavg()}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
