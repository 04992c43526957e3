"""Shared by the store suites (refill_cost, write_rate, async_latency): a corpus of clustered unit
vectors, the artifact of its clusters, and one timed ``write_clusters``."""

from __future__ import annotations

import time

import numpy as np


def clustered_vectors(rng: np.random.Generator, n: int, dim: int) -> tuple[np.ndarray, list[int], list[np.ndarray]]:
    """``n`` unit float32 vectors in groups of 1-8 near-copies of random centers: (vectors, group of
    each vector, the centers)."""
    rows, groups, centers = [], [], []
    while len(rows) < n:
        center = rng.normal(size=dim)
        centers.append(center)
        for _ in range(int(rng.integers(1, 9))):
            rows.append(center + 0.05 * rng.normal(size=dim))
            groups.append(len(centers) - 1)
    x = np.asarray(rows[:n], dtype=np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x, groups[:n], centers


def corpus(n: int, dim: int, seed: int = 0):
    """(vectors, int ids 0..n-1, tenant a/b/c of each, {id: group})."""
    x, groups, _ = clustered_vectors(np.random.default_rng(seed), n, dim)
    ids = list(range(n))
    tenants = [("a", "b", "c")[i % 3] for i in ids]
    return x, ids, tenants, {i: groups[i] for i in ids}


def cluster_map(cluster_of: dict):
    """The real ClusterMap (representative = first member) for the write-back."""
    from diversify.artifact import ClusterMap

    ids = list(cluster_of)
    first: dict = {}
    cids = np.empty(len(ids), dtype=np.int64)
    rep = np.zeros(len(ids), dtype=bool)
    for j, i in enumerate(ids):
        g = cluster_of[i]
        if g not in first:
            first[g] = j
            rep[j] = True
        cids[j] = first[g]
    n = len(ids)
    return ClusterMap.from_arrays(ids, cids, rep, np.zeros(n, dtype=np.uint8), np.zeros(n, dtype=np.uint32),
                                  config={}, fingerprint="bench", seed=0, hash_scheme="", build_info={})


def timed_write(store, cm) -> dict:
    """One ``store.write_clusters(cm)``: points written, seconds, points/s."""
    t = time.perf_counter()
    written = store.write_clusters(cm)
    s = time.perf_counter() - t
    return {"points": written, "seconds": round(s, 3), "points_per_s": round(written / s) if s else None}
