"""Markdown of the retrieval suite (Cranfield nDCG before/after, STS-B)."""

from __future__ import annotations

from .markdown import command, fixed, table

DEFAULT_COMMAND = "python -m benchmarks run --suite retrieval"


def _code(x) -> str:
    return "–" if x is None else str(x)


def _cranfield_changes(c: dict) -> list[str]:
    L = []
    for r in c["runs"]:
        if r["multi_member_clusters"]:
            L.append(f"- threshold {r['threshold']}: multi-member clusters (doc ids) "
                     + ", ".join("{" + ", ".join(map(str, m)) + "}" for m in r["multi_member_clusters"]) + ".")
        else:
            L.append(f"- threshold {r['threshold']}: no multi-member clusters.")
    for r in c["runs"]:
        if not r["changed_queries"]:
            continue
        L.append(f"- threshold {r['threshold']}, every query whose top 10 changed "
                 "(query: removed doc (code) → backfilled doc (code), graded nDCG@10 before → after; "
                 "'–' = unjudged):")
        for q, v in r["changed_queries"].items():
            rem = ", ".join(f"{d} ({_code(cd)})" for d, cd in v["removed"])
            rem += "".join(f" [twin {t} ({_code(ct)}) kept]" for t, ct in v.get("kept_twin", []))
            add = ", ".join(f"{d} ({_code(cd)})" for d, cd in v["added"])
            nb, na = v["ndcg10_graded"]
            L.append(f"  - q{q}: {rem} → {add}; {fixed(nb)} → {fixed(na)}")
    return L


def _cranfield(c: dict) -> list[str]:
    L = [f"### Cranfield: nDCG@{c['k']} before / after `select` (BM25 top-{c['top_n']} → k={c['k']})", ""]
    if "skipped" in c:
        return L + [f"Skipped: {c['skipped']}", ""]
    L += [f"{c['docs']:,} abstracts (`.W`), {c['queries_evaluated']} of {c['queries_in_file']} queries with at "
          f"least one judged-relevant document, {c['qrels_rows']:,} qrels rows. BM25 k1={c['bm25']['k1']}, "
          f"b={c['bm25']['b']}, lowercase `[a-z0-9]+` tokens, distinct query terms. Graded gain = 5 − code "
          "(code 1 'complete answer' → 4, code 4 'minimum interest' → 1; −1 and unjudged → 0), discount "
          "1/log2(rank+1), ideal DCG from all judged gains of the query. Binary: codes 1–4 relevant. "
          "Query numbers by position in `cran.qry`.", ""]
    rows = []
    for r in c["runs"]:
        g, bn, rd = r["ndcg10_graded"], r["ndcg10_binary"], r["redundancy10"]
        rows.append([f"`{r['config']}`", f"{r['n_clusters']:,}", r["n_duplicates"],
                     f"{fixed(g['before'])} → {fixed(g['after'])}", f"{fixed(bn['before'])} → {fixed(bn['after'])}",
                     f"{r['queries_ndcg_up']} / {r['queries_ndcg_down']}", r["queries_top10_changed"],
                     f"{rd['before_total']} → {rd['after_total']}"])
    L += table(["clustering", "clusters", "duplicates", "nDCG@10 graded before → after", "binary before → after",
                "queries up / down", "top-10 changed", "redundancy@10 before → after (total)"], "lrrlllrl",
               rows) + [""]
    L += _cranfield_changes(c)
    L += ["- Where nDCG drops, the removed hit was judged relevant and its kept twin was unjudged or judged "
          "equally (Cranfield judges papers, so two distinct papers with a shared title and overlapping "
          "abstract can both be relevant); at the default threshold 0.8 nothing is merged and nothing changes.",
          "- Cranfield has almost no near-duplicates, so this checks that diversification does no harm; it cannot "
          "show a gain. `select` only removes a hit when a higher one shares its cluster and backfills from the "
          "top-50.", ""]
    return L


def _stsb(s: dict) -> list[str]:
    if "skipped" in s:
        return ["### STS-B test", "", f"Skipped: {s['skipped']}", ""]
    L = [f"### STS-B test: shingle Jaccard vs human similarity ({s['pairs']:,} pairs, positives = "
         f"{s['positive_rule']}: {s['positives']})", "",
         f"Read with `csv.QUOTE_NONE`, tab-separated. {s['short_pairs_word5']} pairs have a sentence of fewer "
         "than 5 words; such a sentence is one shingle made of all its words (diversify's short-document "
         "rule), so its word-5 Jaccard is 0 unless the other sentence normalizes to the same words.", ""]
    rows = [[f"exact {name} Jaccard", fixed(j["spearman"]), f"{fixed(j['mean_positive'], 3)} / "
             f"{fixed(j['mean_negative'], 3)}", f"J ≥ {t}", fixed(m["precision"]), fixed(m["recall"]), fixed(m["f1"])]
            for name, j in s["jaccard"].items() for t, m in j["rules"].items()]
    L += table(["similarity", "Spearman ρ vs score", "mean J (pos / neg)", "rule", "P", "R", "F1"], "lrllrrr", rows)
    L += ["", f"diversify clusters over the {s['unique_sentences']:,} unique sentences (a pair is predicted same when "
          "both sentences share a cluster):", ""]
    rows = [[f"`{r['config']}`", f"{r['n_clusters']:,}", r["n_duplicates"],
             f"{r['metrics']['tp']} / {r['metrics']['fp']} / {r['metrics']['fn']}", fixed(r["metrics"]["precision"]),
             fixed(r["metrics"]["recall"]), fixed(r["metrics"]["f1"])] for r in s["clusters"]]
    L += table(["config", "clusters", "duplicates", "TP / FP / FN", "P", "R", "F1"], "lrrlrrr", rows)
    L += ["", "- STS-B scores semantic similarity, not copying: most 'score ≥ 4' pairs are paraphrases with different "
          "wording, so shingle Jaccard (and diversify's MinHash clusters) has low recall by design; precision "
          "is the number that matters for a near-duplicate filter.", ""]
    return L


def retrieval_section(results: dict) -> list[str]:
    env = results.get("environment", {})
    commit = f", diversify at {env.get('diversify_commit') or env.get('git_commit')}" if isinstance(env, dict) else ""
    L = ["## Retrieval quality on real labeled data (Cranfield, STS-B)", "",
         f"Command: `{command(results.get('command'), DEFAULT_COMMAND)}` (data from `../shared/data`, not in the "
         f"repository). Measured {results.get('measured_at')}{commit}.", ""]
    if "cranfield" in results:
        L += _cranfield(results["cranfield"])
    if "stsb" in results:
        L += _stsb(results["stsb"])
    return L
