"""Markdown of the quality suite (Clough & Stevenson, MRPC, Twitter URL)."""

from __future__ import annotations

from .markdown import env_line, table


def _clough(cs: dict) -> list[str]:
    if cs.get("skipped"):
        return [f"Clough & Stevenson: skipped ({cs['skipped']}).", ""]
    if not cs:
        return []
    cats = list(cs["counts"])
    ej = cs["exact_jaccard_to_source"]
    L = ["**Clough & Stevenson** (95 answers vs their task's Wikipedia source): share of answers put in the "
         "source's cluster, per category. Mean exact 5-shingle Jaccard to the source: "
         + ", ".join(f"{c} {ej[c]['mean']:.3f} (max {ej[c]['max']:.3f})" for c in cats) + ".", ""]
    rows = [[t, name, *(f"{per[c]:.2f}" for c in cats)] for t, res in cs["results"].items() for name, per in res.items()]
    L += table(["threshold", "method", *(f"{c} (n={cs['counts'][c]})" for c in cats)], "ll" + "r" * len(cats), rows)
    return L + [""]


def _pair_rows(q: dict):
    for t, res in q["results"].items():
        for name, r in res.items():
            lab = r["labels"]
            tail = [f"{lab['precision']:.3f}", f"{lab['recall']:.3f}", f"{lab['f1']:.3f}"]
            if name == "exact Jaccard":
                yield [t, f"exact Jaccard ({r['truth_pairs']:,} pairs ≥ t)", "1", "1", "1", *tail]
            else:
                e = r["vs_exact"]
                yield [t, name, f"{e['precision']:.3f}", f"{e['recall']:.3f}", f"{e['f1']:.3f}", *tail]


def _pairs(title: str, q: dict) -> list[str]:
    if q.get("skipped"):
        return [f"{title}: skipped ({q['skipped']}).", ""]
    if not q:
        return []
    L = [f"**{title}**: {q['n_docs']:,} unique sentences, {q['n_pairs']:,} labeled pairs "
         f"({q['n_positive']:,} paraphrases). Against exact Jaccard truth (all pairs) and against the "
         "paraphrase labels (predicted paraphrase = same cluster).", ""]
    L += table(["threshold", "method", "P vs exact", "R vs exact", "F1 vs exact", "P vs labels", "R vs labels",
                "F1 vs labels"], "llrrrrrr", _pair_rows(q))
    return L + [""]


def quality_section(d: dict) -> list[str]:
    L = ["## Quality on real labeled data", ""]
    if d.get("skipped"):
        return L + [f"Skipped: {d['skipped']}", ""]
    L += [f"Measured {d['created']} on {env_line(d['env'])}.", ""]
    L += _clough(d.get("clough_stevenson", {}))
    L += _pairs("MRPC", d.get("mrpc", {}))
    L += _pairs("Twitter URL corpus (test split, n=3 votes discarded)", d.get("twitter_url", {}))
    return L
