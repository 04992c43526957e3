"""quality_real: the command line on real text nobody here wrote, scored against exact truth.

Man pages, licence/copyright files and both mixed (assembled from this machine), plus Clough &
Stevenson: fold fidelity, true-pair recall, pair precision, components F1 and build time for
`diversify build` (default, --clustering components, --verify exact), rensa and datasketch.
The work lives in benchmarks/quality_real/ (its README); this registers it with the harness.
"""

from __future__ import annotations

from . import Suite

SUITE = Suite(
    name="quality_real",
    summary="CLI builds on real man pages / licence files vs exact Jaccard truth: fold fidelity, recall, precision",
    results=("quality_real.json",), render="benchmarks.suites.quality_real:render",
    peers=("rensa", "datasketch"), quick={"corpora": ["licenses", "clough"]}, takes="~10 min (truth cached)")


def add_arguments(p) -> None:
    from ..quality_real.run import CORPORA, METHODS, SWEEP

    p.add_argument("--corpora", nargs="+", default=list(CORPORA), choices=CORPORA)
    p.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS + SWEEP)
    p.add_argument("--repeat", type=int, default=1, help="runs per method (median wall time reported)")
    p.add_argument("--check", action="store_true", help="also check the tokenizer and the join against brute force")


def run(args, ctx) -> list:
    import json

    from ..paths import log, shown
    from ..quality_real.assemble import DEFAULT_CACHE, assemble
    from ..quality_real.run import run as run_quality

    assemble(DEFAULT_CACHE)
    results = run_quality(args.corpora, DEFAULT_CACHE, args.methods, args.check, args.repeat)
    path = ctx.results / "quality_real.json"
    path.write_text(json.dumps(results, indent=1) + "\n")
    log(f"wrote {shown(path)}")
    return [path]


def render(d: dict) -> list[str]:
    from ..quality_real.run import markdown

    return markdown(d).splitlines()
