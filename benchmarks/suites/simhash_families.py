"""simhash_families: planted-pair recall and build time of the vector SimHash stage per number of
hyperplane families (what chose SimHashConfig.families)."""

from __future__ import annotations

from . import Suite

SUITE = Suite(
    name="simhash_families",
    summary="vector SimHash: planted-pair recall (cosine 0.955-0.995) and build time for 1, 2, 3 families",
    results=("simhash_families-n*.json",), render="benchmarks.suites.simhash_families:render",
    quick={"n": 10_000, "planted": 1_000}, takes="~2 min")


def add_arguments(p) -> None:
    p.add_argument("--n", type=int, default=100_000, help="unrelated vectors (default 100000)")
    p.add_argument("--planted", type=int, default=10_000, help="planted near-copies (default 10000)")
    p.add_argument("--dim", type=int, default=384, help="dimension (default 384, MiniLM-sized)")


def _vectors(n: int, m: int, dim: int):
    import numpy as np

    rng = np.random.default_rng(5)
    base = rng.standard_normal((n, dim))
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    src = rng.choice(n, m, replace=False)
    cos = rng.uniform(0.955, 0.995, m)
    u = rng.standard_normal((m, dim))
    u -= (u * base[src]).sum(1, keepdims=True) * base[src]
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    copies = cos[:, None] * base[src] + np.sqrt(1 - cos[:, None] ** 2) * u
    return np.vstack([base, copies]).astype(np.float32), src, cos


def run(args, ctx) -> list:
    import time

    import numpy as np

    import diversify
    from diversify import BuildConfig, SimHashConfig

    from ..env import environment
    from ..paths import log, shown, write_json

    vecs, src, cos = _vectors(args.n, args.planted, args.dim)
    diversify.build(vectors=vecs[:2000], config=BuildConfig(minhash=None, exact=False))  # JIT warm-up
    rows = []
    for families in (1, 2, 3):
        cfg = BuildConfig(minhash=None, exact=False, simhash=SimHashConfig(families=families))
        t0 = time.perf_counter()
        res = diversify.build(vectors=vecs, config=cfg)
        seconds = time.perf_counter() - t0
        hit = res.cluster_ids[src] == res.cluster_ids[args.n + np.arange(src.size)]
        lsh = res.stats["lsh"]["simhash"]
        rows.append({"families": families, "seconds": round(seconds, 2), "recall": float(hit.mean()),
                     "recall_below_0.97": float(hit[cos < 0.97].mean()),
                     "reported_recall_at_threshold": lsh["recall_at_threshold"],
                     "recall_per_family": lsh["recall_per_family"]})
        log(f"families={families}: recall {rows[-1]['recall']:.4f} in {seconds:.1f} s")
    payload = {"suite": "simhash_families", "n": args.n, "planted": args.planted, "dim": args.dim,
               "threshold": 0.95, "rows": rows, "env": environment()}
    path = write_json(ctx.results / f"simhash_families-n{args.n}.json", payload)
    log(f"wrote {shown(path)}")
    return [path]


def render(d: dict) -> list[str]:
    lines = [f"## Vector SimHash families: {d['n']:,} unrelated + {d['planted']:,} planted {d['dim']}-d vectors, "
             f"cosine threshold {d['threshold']}", "",
             "| families | planted-pair recall | recall, cosine < 0.97 | recall at the threshold (reported) | build s |",
             "|---:|---:|---:|---:|---:|"]
    for r in d["rows"]:
        lines.append(f"| {r['families']} | {r['recall']:.4f} | {r['recall_below_0.97']:.4f} | "
                     f"{r['reported_recall_at_threshold']:.3f} | {r['seconds']} |")
    return lines + [""]
