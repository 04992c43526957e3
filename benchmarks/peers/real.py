"""One peer run in its own process: rensa or datasketch on a JSONL corpus.

Both peers get the same shingle sets (``reference.shingle_set``, the harness's one reference rule),
threshold 0.8 and 128 permutations. Their clusters are the connected components of their LSH
candidate pairs whose MinHash estimate is >= t (documents without words are left as singletons:
an empty MinHash would collide with every other empty one).

- rensa: ``RMinHash.from_token_sets`` (R-MinHash over the full set, the accurate path),
  ``RMinHashLSH(threshold, num_perm, num_bands).insert_many`` + ``query_all``; the band count is
  the fewest bands dividing num_perm whose S-curve midpoint is <= t (16 x 8; rensa needs bands
  that divide num_perm and has no default).
- datasketch: ``MinHash.update_batch`` + ``MinHashLSH(threshold, num_perm)`` (its own bands).

The quality_real suite runs ``python -m benchmarks.peers.real {rensa,datasketch} corpus.jsonl out_prefix``;
writes ``out_prefix.npz`` (labels, accepted edges) and ``out_prefix.json`` (phase timings, versions).
"""

from __future__ import annotations

import importlib.metadata
import json
import sys
import time
from pathlib import Path

import numpy as np

from ..reference import shingle_set
from ..truth import read_corpus

NUM_PERM = 128
THRESHOLD = 0.8
SEED = 1


def rensa_bands(num_perm: int = NUM_PERM, threshold: float = THRESHOLD) -> int:
    """The fewest bands (dividing num_perm) whose S-curve midpoint (1/b)**(1/r) is <= threshold:
    pairs at the threshold are then likely candidates (16 x 8 at 0.8: P = 0.95 at s = 0.8) and the
    estimate check decides. (Minimizing the FP + FN area instead picks 8 x 16, P = 0.20 at 0.8.)"""
    for b in range(1, num_perm + 1):
        if num_perm % b == 0 and (1.0 / b) ** (b / num_perm) <= threshold:
            return b
    return num_perm


def _components(n: int, pairs) -> np.ndarray:
    parent = list(range(n))

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in pairs:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return np.array([find(i) for i in range(n)], dtype=np.int64)


def run(tool: str, corpus: Path) -> tuple[np.ndarray, dict]:
    phases = {}
    t0 = time.perf_counter()
    ids, texts = read_corpus(corpus)
    phases["read"] = time.perf_counter() - t0
    t = time.perf_counter()
    sets = [sorted(shingle_set(x)) for x in texts]
    del texts
    phases["tokenize"] = time.perf_counter() - t
    n = len(sets)
    live = [i for i in range(n) if sets[i]]
    info = {"tool": tool, "num_perm": NUM_PERM, "threshold": THRESHOLD, "seed": SEED, "docs": n,
            "empty_docs": n - len(live)}
    t = time.perf_counter()
    if tool == "rensa":
        from rensa import RMinHash, RMinHashLSH

        bands = rensa_bands()
        mh = RMinHash.from_token_sets([sets[i] for i in live], NUM_PERM, SEED)
        phases["sketch"] = time.perf_counter() - t
        t = time.perf_counter()
        lsh = RMinHashLSH(THRESHOLD, NUM_PERM, bands)
        lsh.insert_many(mh, 0)
        found = lsh.query_all(mh)
        phases["lsh"] = time.perf_counter() - t
        info.update(version=importlib.metadata.version("rensa"), bands=bands, rows=NUM_PERM // bands,
                    api="RMinHash.from_token_sets + RMinHashLSH.insert_many/query_all + RMinHash.jaccard")
    elif tool == "datasketch":
        from datasketch import MinHash, MinHashLSH

        mh = []
        for i in live:
            m = MinHash(num_perm=NUM_PERM, seed=SEED)
            m.update_batch([s.encode("utf-8", "surrogatepass") for s in sets[i]])
            mh.append(m)
        phases["sketch"] = time.perf_counter() - t
        t = time.perf_counter()
        lsh = MinHashLSH(threshold=THRESHOLD, num_perm=NUM_PERM)
        with lsh.insertion_session() as session:
            for k, m in enumerate(mh):
                session.insert(k, m, check_duplication=False)
        found = [lsh.query(m) for m in mh]
        phases["lsh"] = time.perf_counter() - t
        info.update(version=importlib.metadata.version("datasketch"), bands=lsh.b, rows=lsh.r,
                    api="MinHash.update_batch + MinHashLSH insertion_session/query + MinHash.jaccard")
    else:
        raise SystemExit(f"unknown tool {tool!r}; use rensa or datasketch")
    t = time.perf_counter()
    cand = {(min(a, b), max(a, b)) for a, got in enumerate(found) for b in got if b != a}
    accepted = [(live[a], live[b]) for a, b in cand if mh[a].jaccard(mh[b]) >= THRESHOLD]
    phases["verify"] = time.perf_counter() - t
    t = time.perf_counter()
    labels = _components(n, accepted)
    phases["components"] = time.perf_counter() - t
    info["_edges"] = sorted((min(a, b), max(a, b)) for a, b in accepted)
    info["candidate_pairs"] = len(cand)
    info["accepted_pairs"] = len(accepted)
    info["phases_seconds"] = {k: round(v, 3) for k, v in phases.items()}
    info["seconds_without_tokenize"] = round(sum(v for k, v in phases.items() if k not in ("read", "tokenize")), 3)
    return labels, info


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    tool, corpus, out = argv[0], Path(argv[1]), Path(argv[2])
    labels, info = run(tool, corpus)
    np.savez(out.with_suffix(".npz"), labels=labels, edges=np.array(info.pop("_edges"), dtype=np.int64).reshape(-1, 2))
    out.with_suffix(".json").write_text(json.dumps(info, indent=1))


if __name__ == "__main__":
    main()
