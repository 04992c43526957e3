"""vectors: the embedding route, diversify's SimHash stage vs FAISS (flat range search, HNSW).

Every tool ends with union-find over the pairs it accepted; clusterings are scored against the
exact cosine pairs (cos ≥ t: FAISS ``IndexFlatIP.range_search`` slightly below t, re-checked in
float64). Each measurement runs in a worker (warm-up on 300 vectors, peak RSS beyond the loaded
vectors). Modes: the generated runs (+ the MRPC/MiniLM row unless ``--no-real``), ``--real-only``
(add the MRPC row to the stored file), ``--scale N DIM`` (add a diversify-only row without
all-pairs truth, recall on the planted pairs).
"""

from __future__ import annotations

import numpy as np

from . import Suite

SUITE = Suite(
    name="vectors",
    summary="SimHash over vectors vs FAISS flat range search and HNSW at 10k/100k (cosine 0.9/0.95): time, CPU s, "
            "peak RSS, pair P/R/F1 vs exact cosine; MRPC embedded with MiniLM; a 1M scale row (--scale)",
    results=("vectors.json",), render="benchmarks.report.vectors:vectors_section",
    peers=("faiss-cpu",), data=("mrpc",), quick={"n": [2000], "dims": [64], "no_real": True}, takes="~30 min")

THRESHOLDS = (0.9, 0.95)
HNSW = dict(M=32, efConstruction=80, efSearch=64, k=16)
# diversify variants: name -> SimHashConfig keyword arguments (threshold added per run)
VARIANTS = {
    "diversify": {},
    "diversify pigeonhole": {"pigeonhole": True},
    "diversify families=2": {"families": 2},
    # giant buckets are compared within a sliding window (BuildConfig.bucket_window, default 64);
    # at 1M vectors with topic structure many SimHash buckets exceed it
    "diversify bucket_window=1024": {"bucket_window": 1024},
}
# Pigeonhole bands are short (radius+1 bands of bits/(radius+1) bits): at t=0.9, 256 bits that is
# 37 bands of ~7 bits, i.e. candidates ≈ n²/2 · 37/128. Above this many documents it is skipped.
PIGEONHOLE_MAX_N = {0.9: 20_000, 0.95: 200_000}
PEERS = (("FAISS IndexFlatIP range search", "faiss_flat", {}), ("FAISS HNSW k-NN + radius", "faiss_hnsw", HNSW))


def add_arguments(p) -> None:
    p.add_argument("--n", type=int, nargs="+", default=[10_000, 10_000, 100_000])
    p.add_argument("--dims", type=int, nargs="+", default=[64, 384, 128], help="one dim per --n")
    p.add_argument("--thresholds", type=float, nargs="+", default=list(THRESHOLDS))
    p.add_argument("--timeout", type=float, default=1800)
    p.add_argument("--no-real", action="store_true", help="skip the MRPC / MiniLM row")
    p.add_argument("--real-only", action="store_true", help="add only the MRPC / MiniLM row to the stored results")
    p.add_argument("--scale", type=int, nargs=2, metavar=("N", "DIM"),
                   help="add a diversify-only scale row (no all-pairs truth) to the stored results, e.g. 1000000 64")
    p.add_argument("--scale-variants", nargs="+", default=["diversify"], choices=list(VARIANTS))


def exact_pairs(v: np.ndarray, t: float, margin: float = 1e-3) -> tuple[np.ndarray, np.ndarray]:
    """All pairs i<j with cosine ≥ t: FAISS flat range search at t - margin (float32), then the
    survivors' cosine recomputed in float64 and cut at t."""
    import faiss

    x = np.ascontiguousarray(v, dtype=np.float32)
    index = faiss.IndexFlatIP(x.shape[1])
    index.add(x)
    lims, _, ids = index.range_search(x, float(t - margin))
    q = np.repeat(np.arange(x.shape[0], dtype=np.int64), np.diff(lims).astype(np.int64))
    ids = ids.astype(np.int64)
    keep = q < ids
    a, b = q[keep], ids[keep]
    x64 = np.asarray(v, dtype=np.float64)
    x64 /= np.linalg.norm(x64, axis=1, keepdims=True)
    cos = np.einsum("ij,ij->i", x64[a], x64[b])
    ok = cos >= t
    return np.stack([a[ok], b[ok]], axis=1), cos[ok]


def truth_for(vec_path: str, t_min: float) -> tuple[np.ndarray, np.ndarray, dict]:
    import os
    import time

    from ..paths import log

    out = vec_path.replace(".npy", f"-truth-{t_min}.npz")
    if not os.path.exists(out):
        log(f"exact cosine truth (≥ {t_min}) for {vec_path.rsplit('/', 1)[-1]} ...")
        t0 = time.perf_counter()
        pairs, cos = exact_pairs(np.load(vec_path), t_min)
        np.savez(out, pairs=pairs, cos=cos, seconds=time.perf_counter() - t0)
    z = np.load(out)
    return z["pairs"], z["cos"], dict(seconds=float(z["seconds"]))


def run_child(job: dict, timeout: float):
    """One vector tool in a worker: (record, {threshold: labels}) or None when it timed out."""
    from ..worker import run_job

    r = run_job("benchmarks.tools.vectors:TASK", job, tag=f"vec-{job['tool']}", timeout=timeout)
    if r is None:
        return None
    meta, arrays = r
    return meta, {k.removeprefix("labels_"): v for k, v in arrays.items()}


def run(args, ctx) -> list:
    from ._vectors import run_real_only, run_scale, run_suite

    if args.scale:
        return [run_scale(args, ctx)]
    if args.real_only:
        return [run_real_only(args, ctx)]
    if len(args.dims) != len(args.n):
        raise SystemExit("vectors: give one --dims value per --n value")
    return [run_suite(args, ctx)]
