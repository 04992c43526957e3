"""build: diversify vs rensa vs datasketch on one generated corpus (default 200,000 documents)."""

from __future__ import annotations

from . import Suite
from ._minhash import TOOLS

SUITE = Suite(
    name="build",
    summary="text MinHash end to end on 200k generated docs (~550 words): docs/s, docs per CPU-second, "
            "signatures/s, peak RSS beyond the texts, pair P/R/F1 vs exact Jaccard ≥ 0.8",
    results=("build-n*.json",), render="benchmarks.suites._minhash:build_section",
    peers=("datasketch", "rensa"), quick={"n": 2000}, takes="~10 min")


def add_arguments(p) -> None:
    p.add_argument("--n", type=int, default=200_000, help="documents (default 200000)")
    p.add_argument("--tools", nargs="+", default=list(TOOLS), choices=TOOLS,
                   help="tools, in order (default: all)")


def run(args, ctx) -> list:
    from ..corpora import TEXT_CORPUS, corpus_file
    from ..paths import log, shown, write_json
    from ._minhash import compare

    payload = compare(corpus_file(args.n, TEXT_CORPUS), args.tools, suite="build")
    path = write_json(ctx.results / f"build-n{args.n}.json", payload)
    log(f"wrote {shown(path)}")
    return [path]
