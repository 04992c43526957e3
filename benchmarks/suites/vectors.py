"""vectors: the embedding route, diversify's SimHash stage vs FAISS (flat range search, HNSW).

Every tool ends with union-find over the pairs it accepted; clusterings are scored against the
exact cosine pairs (cos ≥ t: FAISS ``IndexFlatIP.range_search`` slightly below t, re-checked in
float64). Each measurement runs in a worker (warm-up on 300 vectors, peak RSS beyond the loaded
vectors). Modes: the generated runs (+ the MRPC/MiniLM row unless ``--no-real``), ``--real-only``
(add the MRPC row to the stored file), ``--scale N DIM`` (add a diversify-only row without
all-pairs truth, recall on the planted pairs).
"""

from __future__ import annotations

from . import Suite
from ._vectors import VARIANTS

SUITE = Suite(
    name="vectors",
    summary="SimHash over vectors vs FAISS flat range search and HNSW at 10k/100k (cosine 0.9/0.95): time, CPU s, "
            "peak RSS, pair P/R/F1 vs exact cosine; MRPC embedded with MiniLM; a 1M scale row (--scale)",
    results=("vectors.json",), render="benchmarks.report.vectors:vectors_section",
    peers=("faiss-cpu",), data=("mrpc",), quick={"n": [2000], "dims": [64], "no_real": True}, takes="~30 min")

THRESHOLDS = (0.9, 0.95)


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


def run(args, ctx) -> list:
    from ._vectors import run_real_only, run_scale, run_suite

    if args.scale:
        return [run_scale(args, ctx)]
    if args.real_only:
        return [run_real_only(args, ctx)]
    if len(args.dims) != len(args.n):
        raise SystemExit("vectors: give one --dims value per --n value")
    return [run_suite(args, ctx)]
