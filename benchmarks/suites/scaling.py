"""scaling: diversify alone at growing corpus sizes (default 10k, 100k, 1M documents)."""

from __future__ import annotations

from . import Suite

SUITE = Suite(
    name="scaling",
    summary="diversify alone at 10k / 100k / 1M generated docs: wall time, docs/s, peak RSS, CPU seconds, "
            "pair F1 where exact truth is affordable (≤ 200k)",
    results=("scaling.json",), render="benchmarks.suites._minhash:scaling_section",
    quick={"n": [2000, 5000]}, takes="~10 min, ~10 GB RAM")

TRUTH_MAX = 200_000


def add_arguments(p) -> None:
    p.add_argument("--n", type=int, nargs="+", default=[10_000, 100_000, 1_000_000], help="corpus sizes")


def run(args, ctx) -> list:
    from ..corpora import TEXT_CORPUS, corpus_file
    from ..env import environment
    from ..paths import log, now, shown, write_json
    from ..truth import components
    from ._minhash import run_tool, scores, truth_for

    rows = []
    for n in args.n:
        prefix = corpus_file(n, TEXT_CORPUS)
        rec, labels = run_tool(prefix, "diversify", {})
        row = dict(rec)
        row["docs_per_s"] = n / rec["timings"]["total"]
        if n <= TRUTH_MAX:
            tp, _ = truth_for(prefix)
            row["scores"] = scores(labels["labels"], tp, components(n, tp))
        rows.append(row)
        log(f"  n={n:,}: {rec['timings']['total']:.1f}s, RSS +{rec['rss_delta_mb']:,.0f} MiB")
        del labels
    path = write_json(ctx.results / "scaling.json", dict(suite="scaling", created=now(), env=environment(),
                                                          corpus=dict(TEXT_CORPUS), rows=rows))
    log(f"wrote {shown(path)}")
    return [path]
