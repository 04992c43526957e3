"""chunks: near-duplicate pages cut into chunks, and what makes their chunks cluster.

This machine's man pages and licence files that have a distinct near-duplicate page (exact page
Jaccard >= 0.8), each cut three ways (fixed windows of 200 words, stride 200 and 150;
``diversify.corpus.chunking.chunk_paragraphs`` at 200 words), clustered four ways (``build`` at
Jaccard 0.8 and 0.5, at 0.8 on word 3-shingles, and ``build_chunks`` with each chunk's page),
scored against exact chunk truth (``_chunk_scores``). Results: ``chunks.json``; the numbers of
docs/recipes/chunked-rag.md.
"""

from __future__ import annotations

from ..markdown import command
from . import Suite

SUITE = Suite(
    name="chunks",
    summary="chunks of real near-duplicate pages: fixed windows vs paragraphs, Jaccard vs parent-scoped containment",
    results=("chunks.json",), render="benchmarks.suites.chunks:render", quick={"pages": 600, "versions": 100}, takes="~6 min")
DEFAULT_COMMAND = "python -m benchmarks run --suite chunks"


def add_arguments(p) -> None:
    from ._chunk_scores import METHODS

    p.add_argument("--max-words", type=int, default=200, help="chunk size in words (default 200)")
    p.add_argument("--pages", type=int, default=None, help="the first N pages with a near-duplicate (default: all)")
    p.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    p.add_argument("--versions", type=int, default=2000,
                   help="versions of the longest page in the large-family cost row (default 2000; 0: no such row)")


def run(args, ctx) -> list:
    import datetime

    from ..env import environment
    from ..paths import log, shown, write_json
    from ._chunk_scores import run as measure

    path = ctx.results / "chunks.json"
    start = dict(environment(), date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))

    def save(results: dict) -> None:
        write_json(path, dict(results, command=ctx.command, environment=start,
                              loadavg_end=environment()["loadavg"]))

    save(measure(args.max_words, args.pages, tuple(args.methods), save, args.versions))
    log(f"wrote {shown(path)}")
    return [path]


def _f(x) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def render(results: dict) -> list[str]:
    env = results.get("environment", {})
    pg = results["pages"]
    lines = [
        "## Chunked pages: what makes chunks of near-duplicate pages cluster",
        "",
        f"Command: `{command(results.get('command'), DEFAULT_COMMAND)}`, on {env.get('date')}; t = "
        f"{results['threshold']}. Pages: {pg['pages']} of this machine's {pg['distinct_pages']} distinct man pages "
        f"and licence files have a near-duplicate (exact page Jaccard >= t, < 1): {pg['sibling_pairs']} sibling "
        "pairs. Truth on exact word 5-shingle sets (benchmarks/reference.py). A chunk is redundant when >= t of its "
        "shingles are in a sibling page (page truth) or in one chunk of a sibling page (chunk truth); recall = "
        "redundant chunks that share a cluster with such a page's chunk (or such a chunk). Fold precision = folded "
        "chunks with >= t of their shingles in their representative; pair purity = same-cluster pairs that each "
        f"cover >= t of the other. Seconds: wall (CPU) of the clustering call, each method run once untimed "
        f"first (on the first chunking); load average {env.get('loadavg')} at start, {results.get('loadavg_end')} at end "
        f"({env.get('usable_cpus')} usable CPUs, shared); library: {env.get('diversify_commit')}.",
        "",
        "| chunking | method | chunks | mean words | recall (page truth) | recall (chunk truth) | folded "
        "| fold precision | pair purity | s (CPU s) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results["rows"]:
        lines.append(f"| {r['chunking']} | {r['method']} | {r['chunks']} | {r['mean_words']} | {_f(r['recall_page'])} "
                     f"({r['redundant_page']}) | {_f(r['recall_chunk'])} ({r['redundant_chunk']}) | {r['folded']} | "
                     f"{_f(r['fold_precision'])} | {_f(r['pair_purity'])} | {r['seconds']} ({r['cpu_seconds']}) |")
    fam = results.get("family")
    if fam:
        b, c = fam["build"], fam["build_chunks"]
        lines += ["", f"Large family (cost of the page scope at its widest): `{fam['page']}` ({fam['page_words']} "
                  f"words) in {fam['versions']} versions, each with one made-up paragraph inserted, "
                  f"{fam['chunks']} paragraph chunks, {c['chunks']['page_clusters_with_copies']} page cluster(s) with "
                  f"copies: build {b['seconds']} s "
                  f"({b['cpu_seconds']} CPU s, {b['clusters']} clusters), build_chunks {c['seconds']} s "
                  f"({c['cpu_seconds']} CPU s, {c['clusters']} clusters, {c['chunks']['containment_folds']} "
                  "containment folds)."]
    return lines + [""]
