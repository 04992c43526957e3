"""Text SimHash: the PyPI ``simhash`` package (``Simhash`` + ``SimhashIndex``).

Features = the word 5-shingles of :func:`benchmarks.reference.shingle_strings` (the same
normalization as ours), 64-bit ``Simhash``, ``SimhashIndex(k=...)``; every document queries the
index (``get_near_dups``) and union-find joins the hits. k is the Hamming tolerance.
"""

from __future__ import annotations

import logging
import time

import numpy as np

from ..corpora import load_texts
from ..metrics import labels_from_pairs
from ..protocol import Task
from ..reference import shingle_strings


def run_simhash(texts, k: int, f: int = 64) -> dict:
    from simhash import Simhash, SimhashIndex

    clock = time.perf_counter
    t0 = clock()
    hashes = [Simhash(shingle_strings(t), f=f) for t in texts]
    t1 = clock()
    # its index warns on every bucket over 200 entries; that logging alone costs minutes at k=10
    quiet = logging.getLogger("benchmarks.simhash_index")
    quiet.setLevel(logging.ERROR)
    index = SimhashIndex([(str(i), h) for i, h in enumerate(hashes)], f=f, k=k, log=quiet)
    t2 = clock()
    a, b = [], []
    for i, h in enumerate(hashes):
        for j in index.get_near_dups(h):
            j = int(j)
            if j != i:
                a.append(min(i, j))
                b.append(max(i, j))
    t3 = clock()
    pairs = np.unique(np.stack([np.array(a, dtype=np.int64), np.array(b, dtype=np.int64)], axis=1), axis=0) \
        if a else np.zeros((0, 2), dtype=np.int64)
    labels = labels_from_pairs(len(texts), pairs)
    t4 = clock()
    return dict(labels=labels, timings=dict(simhash=t1 - t0, index=t2 - t1, query=t3 - t2, cluster=t4 - t3,
                                            total=t4 - t0),
                params=dict(f=f, k=k, features="word 5-shingles (benchmarks.reference)", pairs=int(len(pairs))))


def _run(texts, args: dict) -> dict:
    out = run_simhash(texts, args["k"])
    return dict(arrays={"labels": out["labels"]}, tool=f"simhash k={args['k']}", n_docs=len(texts),
                timings=out["timings"], params=out["params"])


# Worker task: args = {"corpus": corpus file prefix, "k": Hamming tolerance}.
TASK = Task(load=lambda args: load_texts(args["corpus"]),
            warm=lambda texts, args: run_simhash(texts[:200], args["k"]), run=_run)
