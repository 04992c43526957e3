"""index_clique: what a live-index ``add`` costs when it reaches a large cluster, clique against star.

Under ``clustering="clique"`` a stored cluster takes a new document only when it is verified
similar to every member, so an ``add`` that reaches a cluster reads every member's row, and loads
and checks the members the metric bound does not vouch for (docs/index.md, "Cost of clique");
under ``"star"`` it reads and checks the representative alone. For each cluster size ``s``: a
fresh SQLite index holding one family of ``s`` near-copies of one generated 550-word page (one
word replaced each: every two are ~0.96 similar, one cluster under either clustering), then
``repeats`` single-document adds of one more copy (each joins the family's cluster) and
``repeats`` of an unrelated page (reaches nothing): the median and p90 milliseconds of each.

``python -m benchmarks run --suite index_clique [--sizes 100 1000 10000] [--repeats 30]``.
"""

from __future__ import annotations

import tempfile
import time

import numpy as np

from . import Suite

SUITE = Suite(
    name="index_clique",
    summary="live index (SQLite): one-document add into a cluster of s members, clique vs star, ms",
    results=("index_clique.json",), render="benchmarks.suites.index_clique:render",
    quick={"sizes": [100, 1000], "repeats": 10}, takes="~3 min")

_WORDS = 550


def add_arguments(p) -> None:
    p.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 10_000], help="cluster sizes")
    p.add_argument("--repeats", type=int, default=30, help="timed single-document adds per kind")


def _page(seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return [f"w{x}" for x in rng.integers(0, 20_000, _WORDS)]


def _copy(base: list[str], j: int) -> str:
    words = list(base)
    words[(37 * j) % _WORDS] = f"edit{j}"
    return " ".join(words)


def measure(url: str, clustering: str, size: int, repeats: int) -> dict:
    import diversify

    idx = diversify.Index(url, config=diversify.BuildConfig(clustering=clustering))
    base = _page(1)
    for lo in range(0, size, 1000):
        part = range(lo, min(size, lo + 1000))
        idx.add([_copy(base, j) for j in part], ids=[f"f{j}" for j in part])
    cluster = idx.cluster_of(["f0"])[0]
    start = len(idx.members(cluster))
    into, alone = [], []
    joined = 0
    for r in range(repeats):
        t0 = time.perf_counter()
        m = idx.add([_copy(base, size + r)], ids=[f"n{r}"])[0]
        into.append(time.perf_counter() - t0)
        joined += m.cluster == cluster
        t0 = time.perf_counter()
        idx.add([" ".join(_page(10_000 + r))], ids=[f"u{r}"])
        alone.append(time.perf_counter() - t0)
    out = {"clustering": clustering, "size": size, "cluster_before": start, "joined": joined, "repeats": repeats,
           "into_p50_ms": round(float(np.median(into)) * 1e3, 2),
           "into_p90_ms": round(float(np.percentile(into, 90)) * 1e3, 2),
           "alone_p50_ms": round(float(np.median(alone)) * 1e3, 2),
           "alone_p90_ms": round(float(np.percentile(alone, 90)) * 1e3, 2),
           "bytes_per_document": idx.stats()["bytes_per_document"]}
    idx.close()
    return out


def run(args, ctx) -> list:
    from ..env import environment
    from ..paths import log, now, shown, write_json

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        warm = f"sqlite:///{tmp}/warm.db"
        measure(warm, "clique", 300, 2)  # compile / load the kernels, large-family path included
        for size in args.sizes:
            for clustering in ("clique", "star"):
                row = measure(f"sqlite:///{tmp}/{clustering}-{size}.db", clustering, size, args.repeats)
                log(f"  {row}")
                rows.append(row)
    path = write_json(ctx.results / "index_clique.json",
                      {"suite": "index_clique", "created": now(), "env": environment(), "rows": rows})
    log(f"wrote {shown(path)}")
    return [path]


def render(d: dict) -> list[str]:
    rows = d.get("rows") or []
    if not rows:
        return []
    env = d.get("env") or {}
    at = f" at {(env.get('diversify_commit') or '')[:12]}" if env.get("diversify_commit") else ""
    lines = [f"## Live index: an add that reaches a large cluster, clique vs star (SQLite), measured "
             f"{d.get('created', '?')}{at}", "",
             "One document added (one transaction) into an index holding one cluster of near-copies of "
             "a 550-word page, which it joins, against one that reaches no cluster. Clique reads every "
             "member's row and loads and checks those the metric bound does not vouch for (here: none); "
             "star reads and checks the representative alone.", "",
             "| clustering | cluster size | add joining it, ms p50 / p90 | add reaching nothing, ms p50 / p90 | joined |",
             "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['clustering']} | {r['cluster_before']:,} | {r['into_p50_ms']} / {r['into_p90_ms']} | "
                     f"{r['alone_p50_ms']} / {r['alone_p90_ms']} | {r['joined']} of {r['repeats']} |")
    return lines + [""]
