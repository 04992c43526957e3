"""clique: clusters whose every two members are similar (issue 40), side by side on real text.

One run measures, against exact truth (word 5-shingles, Jaccard t = 0.8, ``benchmarks.truth``):

1. on this machine's man pages and licence files, and on RAG chunks of both (paragraph-bounded
   chunks of ~180 words; fixed windows of 200 words every 50), ``diversify build --clustering X``
   for each clustering asked for (``--clusterings clique,star,components``; ``star`` is spelled
   ``guaranteed`` by commits before it was renamed; a clustering the commit lacks is reported
   unavailable), the references computed here on the truth graph (greedy clique cover with centers
   by degree, star around the longest, star with centers by degree, components:
   ``_clique_scores``), and rensa and datasketch (MinHash LSH at t, clusters = components of their
   accepted candidates: ``peers.real``). Per clustering: pairwise purity, min exact J inside a
   cluster, true-pair recall and its ratio to the clique reference's, clusters, documents folded,
   build wall/CPU seconds, ``pairs_checked`` of the fold checks;
2. a large family: one real page plus N copies made by random word edits, each verified >= 0.9 to
   the page (so every two members are >= 0.8): wall time, ``pairs_checked``, clusters, per N
   (``--family-size 10000 100000``);
3. whole-process build time on the ``cli`` suite's corpus per clustering (median of
   ``--cli-repeat`` alternating rounds after a warm-up round), and clique / star.

Corpora and truth are cached outside the repository (``_real_corpora.DEFAULT_CACHE``).
Results: ``clique.json``; ``--name NAME`` writes ``clique-NAME.json`` beside it (a partial run).
"""

from __future__ import annotations

from ..markdown import command, fixed, num, table
from . import Suite

SUITE = Suite(
    name="clique",
    summary="clique vs star vs components clusters on real pages and RAG chunks vs exact truth: purity, min J, "
            "recall vs a greedy clique cover; a 10^4/10^5-copy family; build time on the cli corpus",
    results=("clique.json", "clique-*.json"), render="benchmarks.suites.clique:render", peers=("rensa", "datasketch"),
    quick={"corpora": ["licenses"], "peers": ["rensa"], "family_size": [1000], "cli_n": 3000, "cli_repeat": 1},
    takes="~40 min on 2 busy cores (the peers half of it; truth cached after the first run)")
DEFAULT_COMMAND = "python -m benchmarks run --suite clique"
CORPORA = ("manpages", "licenses", "chunks-para", "chunks-window")
PEERS = ("rensa", "datasketch")
T = 0.8
TARGET_RECALL_RATIO = 0.99
TARGET_PURITY = 0.999
TARGET_CLI_RATIO = 1.2


def _clusterings(text: str) -> list[str]:
    import argparse

    from ._clique_runs import CLUSTERINGS

    names = [s.strip() for s in text.split(",") if s.strip()]
    bad = [s for s in names if s not in CLUSTERINGS and s != "guaranteed"]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"clusterings are a comma-separated list of {', '.join(CLUSTERINGS)}; "
                                         f"got {text!r}")
    return ["star" if s == "guaranteed" else s for s in dict.fromkeys(names)]


def add_arguments(p) -> None:
    p.add_argument("--corpora", nargs="+", default=list(CORPORA), choices=CORPORA)
    p.add_argument("--clusterings", type=_clusterings, default=["clique", "star", "components"],
                   help="comma-separated: clique,star,components (star = guaranteed in older commits)")
    p.add_argument("--peers", nargs="*", default=list(PEERS), choices=PEERS)
    p.add_argument("--family-size", nargs="*", type=int, default=[1000, 10000],
                   help="copies in the large-family case, one build per size (e.g. 10000 100000; none: skip)")
    p.add_argument("--family-page", default="man1/ls.1.gz", help="the family's page (a manpages id)")
    p.add_argument("--cli-n", type=int, default=100_000, help="documents of the cli suite's corpus (0: skip)")
    p.add_argument("--cli-repeat", type=int, default=3, help="measured rounds on the cli corpus")
    p.add_argument("--max-windows", type=int, default=0, help="fixed windows per page (0: all)")
    p.add_argument("--name", default="", help="write clique-NAME.json instead of clique.json (a partial run)")


def run(args, ctx) -> list:
    from ..paths import log, shown, write_json
    from ._clique_corpora import chunk_corpora
    from ._clique_runs import default_clustering, resolve
    from ._real_corpora import DEFAULT_CACHE, assemble
    from ._real_scores import environment

    path = ctx.results / (f"clique-{args.name}.json" if args.name else "clique.json")
    cache = DEFAULT_CACHE
    out_dir = cache / "clique-runs"
    out_dir.mkdir(parents=True, exist_ok=True)
    assemble(cache)
    results = {"environment": environment(), "threshold": T, "command": ctx.command, "name": args.name,
               "chunks": chunk_corpora(cache, args.max_windows), "default_clustering": default_clustering(),
               "clusterings": {c: dict(zip(("spelling", "note"), resolve(c))) for c in args.clusterings},
               "corpora": {}, "family": {}, "cli": {}}
    spellings = {c: r["spelling"] for c, r in results["clusterings"].items() if r["spelling"]}
    log(f"clusterings: {results['clusterings']}")

    def save() -> None:
        write_json(path, results)

    if args.cli_n:
        results["cli"] = _cli(args, spellings, out_dir)
        save()
    _warm_up(cache, out_dir, spellings)
    for name in args.corpora:
        results["corpora"][name] = _corpus(cache / f"{name}.jsonl", cache, out_dir, spellings, args.peers)
        save()
    for n in args.family_size:
        results["family"][str(n)] = _family(cache, out_dir, n, args.family_page, spellings)
        save()
    import os

    results["environment"]["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    save()
    log(f"wrote {shown(path)}")
    return [path]


def _warm_up(cache, out_dir, spellings: dict) -> None:
    """One unmeasured build per clustering (numba compiles or loads its cache outside the measured runs)."""
    from ._clique_runs import build

    for name, spelling in spellings.items():
        build(cache / "licenses.jsonl", out_dir, spelling, f"warm-{name}")


def _cli(args, spellings: dict, out_dir) -> dict:
    from ..corpora import TEXT_CORPUS, corpus_file
    from ..paths import log
    from ._clique_runs import cli_times
    from .cli import _jsonl

    corpus = _jsonl(corpus_file(args.cli_n, TEXT_CORPUS))
    log(f"cli corpus ({args.cli_n} docs): {', '.join(spellings)} x {args.cli_repeat} rounds ...")
    from pathlib import Path

    rows = cli_times(Path(corpus), out_dir, spellings, args.cli_repeat)
    base = rows.get("star")
    for r in rows.values():
        r["wall_vs_star"] = r["wall_seconds"] / base["wall_seconds"] if base and base["wall_seconds"] else None
        r["cpu_vs_star"] = r["cpu_seconds"] / base["cpu_seconds"] if base and base["cpu_seconds"] else None
    return {"docs": args.cli_n, "repeat": args.cli_repeat, "rows": rows}


def _corpus(corpus, cache, out_dir, spellings: dict, peers) -> dict:
    import time

    import numpy as np

    from .. import truth as truthmod
    from ..paths import log
    from ._clique_runs import build, placed
    from ._clique_scores import ExactJaccard, is_clique_cover, references, score_all
    from ._real_scores import _components, run_peer

    if not corpus.exists():
        return {"skipped": f"{corpus} missing"}
    log(f"[{corpus.stem}] truth ...")
    truth = truthmod.load_or_compute(corpus, T, cache=cache)
    comps = _components(truth.n, truth.pi, truth.pj)
    lengths = _lengths(corpus)
    exact = ExactJaccard(truth)
    entry: dict = {"truth": dict(truth.meta, components=int(np.unique(comps).size)), "rows": {}}
    t0 = time.perf_counter()
    refs = references(truth, lengths)
    entry["references_seconds"] = round(time.perf_counter() - t0, 2)
    assert is_clique_cover(refs["clique-ref"], truth), "the clique reference is not a clique cover"
    for name, labels in refs.items():
        entry["rows"][name] = {"kind": "reference", "scores": score_all(labels, None, truth, comps, lengths, exact)}
    pos = {d: k for k, d in enumerate(truth.ids)}
    for name, spelling in spellings.items():
        log(f"[{corpus.stem}] diversify --clustering {spelling} ...")
        ids, cl, rep, info = build(corpus, out_dir, spelling, name)
        labels, reps = placed(ids, cl, rep, pos)
        entry["rows"][f"diversify-{name}"] = {"kind": "diversify", "clustering": name, "run": info,
                                              "scores": score_all(labels, reps, truth, comps, lengths, exact)}
    for tool in peers:
        log(f"[{corpus.stem}] {tool} ...")
        labels, _, info = run_peer(tool, corpus, out_dir)
        entry["rows"][tool] = {"kind": "peer", "run": info,
                               "scores": score_all(labels, None, truth, comps, lengths, exact)}
    ref = entry["rows"]["clique-ref"]["scores"]["true_pair_recall"]
    for row in entry["rows"].values():
        r = row["scores"]["true_pair_recall"]
        row["scores"]["recall_vs_clique_ref"] = r / ref if ref else None
    for m, row in entry["rows"].items():
        s = row["scores"]
        log(f"[{corpus.stem}] {m}: purity {s['purity']:.4f}, min J {s['min_pair_jaccard']}, "
            f"recall {s['true_pair_recall']:.4f} ({s['recall_vs_clique_ref']:.4f} of clique-ref), "
            f"{s['clusters']} clusters")
    return entry


def _lengths(corpus):
    """Length of each document's normalized text (NFKC, casefold): the rule "longest"."""
    import json
    import unicodedata

    import numpy as np

    with open(corpus, encoding="utf-8") as fh:
        return np.array([len(unicodedata.normalize("NFKC", json.loads(line)["text"]).casefold()) for line in fh])


def _family(cache, out_dir, n: int, page_id: str, spellings: dict) -> dict:
    from ..paths import log
    from ._clique_corpora import family_file, family_page
    from ._clique_runs import family_run

    page = family_page(cache, page_id)
    log(f"family of {n} copies of {page[0]} ...")
    corpus, info = family_file(cache, n, page)
    entry = {"corpus": info, "rows": {}}
    for name, spelling in spellings.items():
        log(f"family {n}: diversify --clustering {spelling} ...")
        entry["rows"][name] = r = family_run(corpus, out_dir, spelling, f"family-{name}")
        log(f"family {n} {name}: {r['wall_seconds']} s, {r['clusters']} clusters, pairs_checked {r['pairs_checked']}")
    return entry


# --- RESULTS.md section


def render(results: dict) -> list[str]:
    env = results["environment"]
    lines = [
        "## Clique clusters (issue 40): purity and recall on real text, side by side"
        + (f" ({results['name']})" if results.get("name") else ""),
        "",
        f"Command: `{command(results.get('command'), DEFAULT_COMMAND)}`, on {env['date']}; diversify "
        f"{env['diversify']} at {env['git_head'][:10]} (source digest {env['library_source_sha256']}); "
        f"{env['cpu_count']} CPUs, load average {env['loadavg_start']} at start, {env.get('loadavg_end')} at end; "
        f"rensa {env['rensa']}, datasketch {env['datasketch']}. Truth: every pair with exact Jaccard >= "
        f"{results['threshold']} of word 5-shingles (no sampling). The library's default clustering here: "
        f"`{results['default_clustering']}`.",
        "",
        "Clusterings asked for: " + "; ".join(
            f"`{c}`: " + (f"built as `--clustering {r['spelling']}` ({r['note']})" if r["spelling"]
                          else f"unavailable ({r['note']})") for c, r in results["clusterings"].items()) + ".",
        "",
    ]
    lines += _corpora_md(results)
    lines += _targets_md(results)
    lines += _library_purity_md(results)
    lines += _by_size_md(results)
    lines += _family_md(results.get("family") or {})
    lines += _cli_md(results.get("cli") or {})
    return lines + _legend(results)


def _corpora_md(results: dict) -> list[str]:
    rows = []
    for name, entry in results["corpora"].items():
        if "skipped" in entry:
            rows.append([name, f"skipped: {entry['skipped']}", *[""] * 10])
            continue
        tr = entry["truth"]
        rows.append([name, "**exact truth**", num(tr["docs"]), f"{num(tr['components'])} components", "",
                     f"{num(tr['pairs'])} pairs", "", "", "", "", "", ""])
        for m, row in entry["rows"].items():
            s, r = row["scores"], row.get("run", {})
            mj = fixed(s["min_pair_jaccard"], 3) + (" (sampled)" if s.get("min_sampled") else "")
            build = f"{r['wall_seconds']} ({r['cpu_seconds']})" if "wall_seconds" in r else ""
            label = f"**{m}**" if m in ("diversify-clique", "clique-ref") else m
            rows.append([name, label, num(s["docs"]), num(s["clusters"]), num(s["folded"]), fixed(s["purity"]),
                         mj, fixed(s["true_pair_recall"]), fixed(s["recall_vs_clique_ref"]),
                         fixed(s["fold_fidelity"]) if s["fold_fidelity"] is not None else "n/a",
                         num(r.get("pairs_checked")) if r.get("pairs_checked") is not None else "", build])
    return table(["corpus", "clustering", "docs", "clusters", "folded", "pairwise purity", "min J in a cluster",
                  "true-pair recall", "recall / clique-ref", "fold fidelity", "pairs_checked", "build s (CPU s)"],
                 "llrrrrrrrrrr", rows) + [""]


def _targets_md(results: dict) -> list[str]:
    out = [f"Issue 40's targets (recall >= {TARGET_RECALL_RATIO} x the clique reference's, pairwise purity >= "
           f"{TARGET_PURITY}), per diversify clustering measured:", ""]
    rows = []
    for name, entry in results["corpora"].items():
        for m, row in entry.get("rows", {}).items():
            if row["kind"] != "diversify":
                continue
            s = row["scores"]
            ok_r = s["recall_vs_clique_ref"] is not None and s["recall_vs_clique_ref"] >= TARGET_RECALL_RATIO
            ok_p = s["purity"] >= TARGET_PURITY
            rows.append([name, m, fixed(s["recall_vs_clique_ref"]), "met" if ok_r else "**not met**",
                         fixed(s["purity"]), "met" if ok_p else "**not met**"])
    return out + table(["corpus", "clustering", "recall / clique-ref", "recall target", "pairwise purity",
                        "purity target"], "llrlrl", rows) + [""]


def _library_purity_md(results: dict) -> list[str]:
    """What each build said about its own clusters (``build_info["purity"]``, when the commit records it)."""
    said = []
    for name, entry in results["corpora"].items():
        for m, row in entry.get("rows", {}).items():
            p = (row.get("run") or {}).get("library_purity") or {}
            if row["kind"] == "diversify" and p.get("purity") is not None:
                said.append(f"{name} {m.removeprefix('diversify-')} {fixed(p['purity'], 3)} "
                            f"({p['pairs_similar']}/{p['pairs_sampled']})")
    if not said:
        return []
    return ["The builds' own sampled purity (`build_info[\"purity\"]`: sampled member pairs checked by the build's "
            "verification): " + "; ".join(said) + ".", ""]


def _by_size_md(results: dict) -> list[str]:
    """True-pair recall split by the size of the pairs' truth component (when the run recorded it)."""
    rows, heads = [], None
    for name, entry in results["corpora"].items():
        first = True
        for m, row in entry.get("rows", {}).items():
            got = row["scores"].get("recall_by_component_size")
            if not got:
                continue
            heads = heads or [f"components of {b['sizes']}" for b in got]
            if first:
                rows.append([name, "truth pairs", *(num(b["pairs"]) for b in got)])
                first = False
            rows.append([name, m, *(fixed(b["recall"]) for b in got)])
    if not rows:
        return []
    return ["True-pair recall by the size of the pair's truth component:", "",
            *table(["corpus", "clustering", *heads], "ll" + "r" * len(heads), rows), ""]


def _family_md(family: dict) -> list[str]:
    if not family:
        return []
    rows = []
    for n, entry in family.items():
        for name, r in entry["rows"].items():
            rows.append([num(int(n)), name, num(r["docs"]), num(r["clusters"]), num(r["largest_cluster"]),
                         fixed(r["pair_recall"]), num(r["pairs_checked"]) if r["pairs_checked"] is not None else "—",
                         fixed(r["pairs_checked_per_doc"], 1), f"{r['wall_seconds']} ({r['cpu_seconds']})",
                         num(r["peak_rss_mb"])])
    first = next(iter(family.values()))["corpus"]
    return [f"Large family: the page `{first['page']}` ({first['page_words']} words) plus N copies, each made by "
            f"1-{first['max_edits']} random word edits and kept only at exact Jaccard >= 0.9 to the page "
            "(checked on every copy; a sample re-checked on shingle strings), so every two members are >= 0.8 "
            "(Jaccard distance is a metric) and the ideal is one cluster. Default settings but the clustering; "
            "whole-process `diversify build`.", "",
            *table(["copies", "clustering", "docs", "clusters", "largest", "share of pairs together",
                    "pairs_checked", "per doc", "build s (CPU s)", "peak RSS MB"], "rlrrrrrrrr", rows), "",
            "Copies' exact J to the page: " + "; ".join(
                f"N={num(int(n))}: min {fixed(e['corpus']['min_jaccard_to_page'], 3)}, median "
                f"{fixed(e['corpus']['median_jaccard_to_page'], 3)}, {num(e['corpus']['redrawn'])} drafts below 0.9 "
                f"redrawn, string audit min {fixed(e['corpus']['string_audit']['min_jaccard'], 3)} over "
                f"{e['corpus']['string_audit']['checked']}" for n, e in family.items()) + ".", ""]


def _cli_md(cli: dict) -> list[str]:
    if not cli:
        return []
    rows = [[name, r["spelling"], fixed(r["wall_seconds"], 2), fixed(r["wall_vs_star"], 2),
             fixed(r["cpu_seconds"], 2), fixed(r["cpu_vs_star"], 2), num(r["peak_rss_mb"]),
             ", ".join(f"{w:.2f}" for w in r["wall_seconds_all"])] for name, r in cli["rows"].items()]
    return [f"Build time on the `cli` suite's corpus ({num(cli['docs'])} generated docs), whole process, median of "
            f"{cli['repeat']} alternating rounds after a warm-up round (target: clique <= {TARGET_CLI_RATIO} x star):",
            "", *table(["clustering", "flag", "wall s", "vs star", "CPU s", "vs star", "peak RSS MB", "wall s of each round"],
                       "llrrrrrl", rows), ""]


def _legend(results: dict) -> list[str]:
    chunks = results.get("chunks", {})
    para, win = chunks.get("chunks-para", {}), chunks.get("chunks-window", {})
    peers = any(row["kind"] == "peer" for e in results["corpora"].values() for row in e.get("rows", {}).values())
    return [
        f"Corpora: this machine's man pages (raw roff) and licence/copyright files; `chunks-para`: both cut into "
        f"paragraph-bounded chunks of ~{para.get('target_words')} words ({num(para.get('docs'))} chunks); "
        f"`chunks-window`: fixed windows of {win.get('width')} words every {win.get('stride')} "
        f"({num(win.get('docs'))} chunks).",
        "",
        "- *pairwise purity*: share of same-cluster pairs with exact J >= t. *min J in a cluster*: the smallest exact "
        "J over every same-cluster pair. *true-pair recall*: share of truth pairs that share a cluster; "
        "*recall / clique-ref*: that over the greedy clique cover's recall on the same truth. *fold fidelity*: "
        "share of folded documents with J >= t to their representative (the longest member for references and peers).",
        "- References, on the exact truth graph: *clique-ref* greedy clique cover, centers by degree (ties: longest, "
        "then position), members taken by degree if adjacent to every member so far; *star-ref* star around the "
        "longest; *star-degree-ref* star with centers by degree; *components-ref* connected components.",
        ("- rensa / datasketch: 128 permutations, LSH at t, clusters = connected components of candidates whose "
         "estimate is >= t. " if peers else "- Peers not run here (`--peers` empty). ")
        + "*pairs_checked*: the fold checks in the artifact's build info.",
        "",
    ]
