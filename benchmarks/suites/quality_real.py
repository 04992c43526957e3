"""quality_real: the command line on real text nobody here wrote, scored against exact truth.

Man pages, licence/copyright files and both mixed (assembled from this machine by
``_real_corpora``), plus Clough & Stevenson: fold fidelity, true-pair recall, pair precision,
components F1 and build time for ``diversify build`` (default, ``--clustering components``,
``--verify exact``), rensa and datasketch (:mod:`benchmarks.peers.real`), against the exact truth of
:mod:`benchmarks.truth`. The measurements are in ``_real_scores``. Results: ``quality_real.json``;
a sweep of other settings (``--methods diversify-borderline-1 ... --name borderline``) writes
``quality_real-<name>.json`` beside it.
"""

from __future__ import annotations

from ..markdown import command
from . import Suite

SUITE = Suite(
    name="quality_real",
    summary="CLI builds on real man pages / licence files vs exact Jaccard truth: fold fidelity, recall, precision",
    results=("quality_real.json", "quality_real-*.json"), render="benchmarks.suites.quality_real:render",
    peers=("rensa", "datasketch"), quick={"corpora": ["clough"], "methods": ["diversify", "rensa"]},
    takes="~10 min (truth cached)")
DEFAULT_COMMAND = "python -m benchmarks run --suite quality_real"


def add_arguments(p) -> None:
    from ._real_corpora import CORPORA
    from ._real_scores import METHODS, SWEEP

    p.add_argument("--corpora", nargs="+", default=list(CORPORA), choices=CORPORA)
    p.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS + SWEEP)
    p.add_argument("--repeat", type=int, default=1, help="runs per method (median wall time reported)")
    p.add_argument("--check", action="store_true", help="also check the truth join against brute force")
    p.add_argument("--name", default="", help="a sweep's name: results in quality_real-NAME.json (e.g. borderline)")


def run(args, ctx) -> list:
    from ..paths import log, shown, write_json
    from ._real_corpora import DEFAULT_CACHE, assemble
    from ._real_scores import run as run_quality

    path = ctx.results / (f"quality_real-{args.name}.json" if args.name else "quality_real.json")

    def save(results: dict) -> None:
        write_json(path, dict(results, command=ctx.command))

    assemble(DEFAULT_CACHE)
    save(run_quality(args.corpora, DEFAULT_CACHE, args.methods, args.check, args.repeat, save=save))
    log(f"wrote {shown(path)}")
    return [path]


# --- RESULTS.md section

def _f(x, digits=4):
    return "n/a" if x is None else f"{x:.{digits}f}"


def _sweep(results: dict) -> str:
    """A title suffix naming the sweep's settings when the run measured only sweep methods."""
    from ._real_scores import METHODS

    methods = {m for entry in results["corpora"].values() for m in entry.get("methods", {})}
    extra = sorted(m for m in methods if m not in METHODS)
    return f" (sweep: {', '.join(extra)})" if extra else ""


def _where(env: dict) -> str:
    """Where the measured library came from: the harness's export of a commit, or the working tree."""
    return "an export of git" if "/.cache/lib-" in str(env.get("diversify_path")) else "the worktree"


def render(results: dict) -> list[str]:
    """The RESULTS.md section of one result file (``quality_real.json`` or a sweep's)."""
    return markdown(results).splitlines()


def markdown(results: dict) -> str:
    env = results["environment"]
    lines = [
        f"## Real-corpus quality: `diversify build` vs exact truth and peers{_sweep(results)}",
        "",
        f"Command: `{command(results.get('command'), DEFAULT_COMMAND)}`, on {env['date']}; threshold t = {results['threshold']} "
        "(word 5-shingles, Jaccard). Truth: every pair with exact Jaccard >= t (prefix-filtered all-pairs join, "
        "no sampling). Build seconds = wall time of the whole process, median of "
        f"{results.get('repeat', 1)} run(s) (CPU seconds of that run in brackets).",
        "",
        f"Machine: {env['cpu_count']} CPUs, load average {env['loadavg_start']} at start, "
        f"{env.get('loadavg_end')} at end (other work was running). diversify {env['diversify']} from {_where(env)} "
        f"(HEAD {env['git_head'][:10]}, uncommitted library files: {len(env['library_uncommitted_files'])}, "
        f"source digest {env['library_source_sha256']}), numpy {env['numpy']}, numba {env['numba']}, "
        f"rensa {env['rensa']}, datasketch {env['datasketch']}, Python {env['python']}. "
        f"Warm-up build (numba cache) before measuring: {env.get('warmup_build_seconds')} s.",
        "",
        "| corpus | method | docs | clusters | folded share | fold fidelity (min J) | true-pair recall "
        "| pair precision | F1 vs truth components | build s (CPU s) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, entry in results["corpora"].items():
        if "skipped" in entry:
            lines.append(f"| {name} | skipped: {entry['skipped']} |||||||||")
            continue
        tr = entry["truth"]
        lines.append(f"| {name} | **exact truth** | {tr['docs']} | {tr['components']} (components) | "
                     f"{(tr['docs'] - tr['components']) / tr['docs']:.4f} | | {tr['pairs']} pairs | | | "
                     f"{tr['seconds']} (truth) |")
        for m, got in entry["methods"].items():
            s, r = got["scores"], got["run"]
            fid = "n/a (none folded)" if s["fold_fidelity"] is None else \
                f"{s['fold_fidelity']:.4f} ({_f(s['fold_min_jaccard'], 3)})"
            if not m.startswith("diversify"):
                fid += "\\*"
            lines.append(f"| {name} | {m} | {s['docs']} | {s['clusters']} | {s['folded_share']:.4f} | {fid} | "
                         f"{_f(s['true_pair_recall'])} | {_f(s['pair_precision'])} | {_f(s['components_f1'])} | "
                         f"{r['wall_seconds']} ({r['cpu_seconds']}) |")
    return "\n".join(lines + _legend() + _details(results)) + "\n"


def _legend() -> list[str]:
    return [
        "",
        "\\* rensa and datasketch have no representative: fold fidelity is measured against the longest text of "
        "each of their clusters (connected components of LSH candidates whose MinHash estimate is >= t).",
        "",
        "- *fold fidelity*: share of folded (non-representative) documents whose exact Jaccard to their cluster's "
        "representative is >= t; min J in brackets.",
        "- *true-pair recall*: share of exact pairs (J >= t) that share a cluster. *pair precision*: share of "
        "same-cluster pairs with J >= t (exact: the numerator is counted over the truth pairs, the denominator "
        "is the sum of m(m-1)/2 over clusters; no sampling).",
        "- *F1 vs truth components*: pair F1 against the connected components of the truth graph (the target "
        "of `--clustering components` and of the peers; informative only for `guaranteed`).",
        "",
        "### Details",
        "",
    ]


def _details(results: dict) -> list[str]:
    lines: list[str] = []
    for name, entry in results["corpora"].items():
        if "skipped" in entry:
            continue
        tr = entry["truth"]
        lines.append(f"**{name}**: {tr['docs']} docs ({tr['empty_docs']} without words), {tr['total_shingles']} "
                     f"distinct shingles summed over docs; truth: {tr['pairs']} pairs ({tr['pairs_identical_sets']} "
                     f"between identical shingle sets), {tr['components_with_copies']} components with copies, "
                     f"largest {tr['largest_component']}; {tr['candidates_verified']} candidates verified; truth "
                     f"computed in {tr['seconds']} s (tokenizing {tr['tokenize_seconds']} s)"
                     f"{', loaded from cache' if tr.get('cached') else ''}. String audit: "
                     f"{entry['string_audit']['pairs_checked']} pairs re-checked on shingle strings, "
                     f"{len(entry['string_audit']['mismatches'])} mismatches.")
        if "checks" in entry:
            c = entry["checks"]
            rule = f"tokenizer vs the reference rule {c['rule_vs_tests_reference']}; " \
                if "rule_vs_tests_reference" in c else ""
            lines.append(f"Checks: {rule}join vs brute force {c['join_vs_brute_force']}.")
        lines.append("")
        for m, got in entry["methods"].items():
            s, r = got["scores"], got["run"]
            extra = f"; wall s of each run {r.get('wall_seconds_all')}, identical output across runs: " \
                    f"{r.get('identical_across_repeats')}"
            if "edge_precision" in s:
                extra += (f"; accepted edges {s['edges_accepted']}: edge precision {s['edge_precision']:.4f}, "
                          f"edge recall {s['edge_recall']:.4f}")
            if "phases_seconds" in r:
                extra += (f"; phases {r['phases_seconds']} (without tokenizing: {r['seconds_without_tokenize']} s), "
                         f"bands x rows {r['bands']} x {r['rows']}, {r['candidate_pairs']} candidates, "
                         f"{r['accepted_pairs']} accepted")
            lines.append(f"- {m}: {s['clusters_with_copies']} clusters with copies, largest {s['largest_cluster']}; "
                         f"{s['folds_below_t']} folds below t (median fold J {_f(s['fold_median_jaccard'], 3)}); "
                         f"peak RSS {r['peak_rss_mb']} MB; load {r['loadavg_before']} -> {r['loadavg_after']}{extra}"
                         + (f"; **{r['warning']}**" if "warning" in r else ""))
            if s["worst_folds"]:
                w = "; ".join(f"`{x['doc']}` under `{x['representative']}` J={x['jaccard']}" for x in s["worst_folds"][:3])
                lines.append(f"  - worst folds: {w}")
            if s.get("clustered_with_source_by_category"):
                lines.append(f"  - clustered with the Wikipedia source, by human category: "
                             f"{s['clustered_with_source_by_category']}")
        lines.append("")
    return lines


