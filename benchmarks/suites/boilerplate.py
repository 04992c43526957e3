"""boilerplate: the build comparison on a corpus where a fifth of the pages come from 8 templates."""

from __future__ import annotations

from . import Suite
from ._minhash import TOOLS

SUITE = Suite(
    name="boilerplate",
    summary="the build comparison on 20k docs, a fifth rendered from 8 templates (giant LSH buckets)",
    results=("boilerplate-n*.json",), render="benchmarks.suites._minhash:build_section",
    peers=("datasketch", "rensa"), quick={"n": 2000}, takes="~3 min")


def add_arguments(p) -> None:
    p.add_argument("--n", type=int, default=20_000, help="documents (default 20000)")
    p.add_argument("--tools", nargs="+", default=list(TOOLS), choices=TOOLS, help="tools, in order (default: all)")


def run(args, ctx) -> list:
    from ..corpora import BOILERPLATE_CORPUS, corpus_file
    from ..paths import log, shown, write_json
    from ._minhash import compare

    payload = compare(corpus_file(args.n, BOILERPLATE_CORPUS), args.tools, suite="boilerplate")
    path = write_json(ctx.results / f"boilerplate-n{args.n}.json", payload)
    log(f"wrote {shown(path)}")
    return [path]
