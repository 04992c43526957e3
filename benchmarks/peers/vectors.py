"""Vectors: diversify's SimHash stage and FAISS (exact flat range search, HNSW k-NN + radius).

Every tool ends with union-find (connected components) over the pairs it accepted, so each one
yields a clustering per threshold: ``{str(t): {"labels", "timings", "params"}}``.
"""

from __future__ import annotations

import time

import numpy as np

from .. import lib
from ..metrics import labels_from_pairs
from ..protocol import Task


def run_diversify(v: np.ndarray, threshold: float, **kw) -> dict:
    import diversify

    cfg = lib.simhash_config(threshold, **kw)
    t0 = time.perf_counter()
    r = diversify.build(vectors=v, config=cfg)
    total = time.perf_counter() - t0
    return {str(threshold): dict(labels=np.asarray(r.cluster_ids, dtype=np.int64),
                                 timings=dict(r.timings, total=total),
                                 params=dict(lsh=r.stats.get("lsh", {}).get("simhash"),
                                             candidates=int(r.stats["candidates"].get("simhash", 0)),
                                             merged=int(r.stats["merged"].get("simhash", 0))))}


def _unit_rows(v: np.ndarray) -> np.ndarray:
    import faiss

    x = np.ascontiguousarray(v, dtype=np.float32)
    faiss.normalize_L2(x)
    return x


def run_faiss_flat(v: np.ndarray, thresholds) -> dict:
    """Exact: range search at the lowest threshold (one pass), pairs cut per threshold, union-find."""
    import faiss

    t0 = time.perf_counter()
    x = _unit_rows(v)
    index = faiss.IndexFlatIP(x.shape[1])
    index.add(x)
    t1 = time.perf_counter()
    lims, dist, ids = index.range_search(x, float(min(thresholds)))
    t2 = time.perf_counter()
    q = np.repeat(np.arange(x.shape[0], dtype=np.int64), np.diff(lims).astype(np.int64))
    ids = ids.astype(np.int64)
    out = {}
    for t in thresholds:
        t3 = time.perf_counter()
        keep = (q < ids) & (dist >= t)
        labels = labels_from_pairs(x.shape[0], np.stack([q[keep], ids[keep]], axis=1))
        t4 = time.perf_counter()
        out[str(t)] = dict(labels=labels, timings=dict(index=t1 - t0, range_search=t2 - t1, cluster=t4 - t3,
                                                        total=(t2 - t0) + (t4 - t3)),
                           params=dict(candidates=int(lims[-1]), range_search_radius=float(min(thresholds))))
    return out


def run_faiss_hnsw(v: np.ndarray, thresholds, M: int, efConstruction: int, efSearch: int, k: int) -> dict:
    """HNSW (inner product) k-NN of every vector, neighbours kept when similarity ≥ t, union-find."""
    import faiss

    t0 = time.perf_counter()
    x = _unit_rows(v)
    index = faiss.IndexHNSWFlat(x.shape[1], M, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = efConstruction
    index.add(x)
    t1 = time.perf_counter()
    index.hnsw.efSearch = max(efSearch, k)
    sims, ids = index.search(x, k)
    t2 = time.perf_counter()
    q = np.repeat(np.arange(x.shape[0], dtype=np.int64), k)
    ids = ids.ravel().astype(np.int64)
    sims = sims.ravel()
    out = {}
    for t in thresholds:
        t3 = time.perf_counter()
        keep = (ids >= 0) & (ids != q) & (sims >= t)
        a, b = q[keep], ids[keep]
        labels = labels_from_pairs(x.shape[0], np.stack([np.minimum(a, b), np.maximum(a, b)], axis=1))
        t4 = time.perf_counter()
        # neighbour lists that are full at this threshold: the k-th neighbour is still ≥ t, so
        # there may be more duplicates than k (k caps recall for clusters larger than k+1)
        full = int((sims.reshape(-1, k)[:, -1] >= t).sum())
        out[str(t)] = dict(labels=labels, timings=dict(build=t1 - t0, search=t2 - t1, cluster=t4 - t3,
                                                        total=(t2 - t0) + (t4 - t3)),
                           params=dict(M=M, efConstruction=efConstruction, efSearch=max(efSearch, k), k=k,
                                       saturated_queries=full))
    return out


def run_faiss_ivf(v: np.ndarray, thresholds, nprobe: int = 16, lists_per_sqrt_n: float = 4.0) -> dict:
    """IVF (inner product, ``lists_per_sqrt_n``·√n lists trained on a sample), range search of
    every vector at the lowest threshold probing ``nprobe`` lists, pairs cut per threshold, union-find."""
    import faiss

    t0 = time.perf_counter()
    x = _unit_rows(v)
    n, d = x.shape
    nlist = max(1, min(n // 39, int(lists_per_sqrt_n * n**0.5)))
    index = faiss.IndexIVFFlat(faiss.IndexFlatIP(d), d, nlist, faiss.METRIC_INNER_PRODUCT)
    sample = np.random.default_rng(0).choice(n, size=min(n, 64 * nlist), replace=False)
    index.train(x[np.sort(sample)])
    index.add(x)
    index.nprobe = min(nprobe, nlist)
    t1 = time.perf_counter()
    lims, dist, ids = index.range_search(x, float(min(thresholds)))
    t2 = time.perf_counter()
    q = np.repeat(np.arange(n, dtype=np.int64), np.diff(lims).astype(np.int64))
    ids = ids.astype(np.int64)
    out = {}
    for t in thresholds:
        t3 = time.perf_counter()
        keep = (q < ids) & (dist >= t)
        labels = labels_from_pairs(n, np.stack([q[keep], ids[keep]], axis=1))
        t4 = time.perf_counter()
        out[str(t)] = dict(labels=labels, timings=dict(index=t1 - t0, range_search=t2 - t1, cluster=t4 - t3,
                                                        total=(t2 - t0) + (t4 - t3)),
                           params=dict(candidates=int(lims[-1]), nlist=nlist, nprobe=index.nprobe))
    return out


def run(tool: str, v: np.ndarray, thresholds, kwargs: dict) -> dict:
    if tool == "diversify":
        return run_diversify(v, thresholds[0], **kwargs)
    if tool == "faiss_flat":
        return run_faiss_flat(v, thresholds)
    if tool == "faiss_ivf":
        return run_faiss_ivf(v, thresholds, **kwargs)
    return run_faiss_hnsw(v, thresholds, **kwargs)


def _warm(v, args: dict) -> None:
    rng = np.random.default_rng(0)
    w = rng.standard_normal((300, args["dim"])).astype(np.float32)
    w /= np.linalg.norm(w, axis=1, keepdims=True)
    run(args["tool"], w, args["thresholds"], args.get("kwargs", {}))


def _run(v, args: dict) -> dict:
    res = run(args["tool"], v, args["thresholds"], args.get("kwargs", {}))
    return dict(arrays={f"labels_{t}": r["labels"] for t, r in res.items()},
                tool=args["tool"], kwargs=args.get("kwargs", {}), n=int(v.shape[0]), dim=int(v.shape[1]),
                vectors_mb=v.nbytes / 2**20,
                per_threshold={t: dict(timings=r["timings"], params=r["params"]) for t, r in res.items()})


# Worker task: args = {"tool": diversify|faiss_flat|faiss_ivf|faiss_hnsw, "vectors": .npy path, "dim",
# "thresholds": [...], "kwargs": {...}}.
TASK = Task(load=lambda args: np.load(args["vectors"]), warm=_warm, run=_run)
