"""Markdown of the plots suite (figures and the numbers drawn)."""

from __future__ import annotations

from .markdown import command

DEFAULT_COMMAND = "python -m benchmarks run --suite plots"


def _s_curve(s: dict) -> list[str]:
    o, d = s["ours"], s["datasketch"]
    return ["### LSH S-curve at threshold 0.8, num_perm 128", "", "![LSH S-curve](plots/lsh_s_curve.png)", "",
            f"diversify picks b={o['bands']} × r={o['rows']} (false-positive / false-negative weights "
            f"{o['weights'][0]} / {o['weights'][1]}: candidates are verified, so misses cost more than extra "
            f"candidates): a pair at the threshold becomes a candidate with probability {o['p_at_threshold']:.3f}, "
            f"a pair at J=0.4 with {o['p_at_half']:.3f}. datasketch's default for the same threshold is "
            f"b={d['bands']} × r={d['rows']} ({d['source']}): {d['p_at_threshold']:.3f} at the threshold, "
            f"{d['p_at_half']:.4f} at J=0.4 — fewer candidates, more missed pairs near 0.8.", ""]


def _pr(p: dict) -> list[str]:
    L = ["### Precision-recall on MRPC (what `diversify tune` computes)", ""]
    if "skipped" in p:
        return L + [f"Skipped: {p['skipped']}", ""]
    b, a8 = p["best"], p["at_0_8"]
    lowest = (" — the F1 maximum is at the lowest threshold of the grid, where sharing a few 5-word runs is enough"
              if b["threshold"] <= 0.05 + 1e-9 else "")
    return L + ["![MRPC PR curve](plots/pr_curve_mrpc.png)", "",
                f"{p['pairs']:,} labeled pairs ({p['positives']:,} paraphrases); score = exact Jaccard of word "
                f"5-shingles (`diversify.evaluate.jaccard_pairs`), curve from `pr_curve`, t = 0.05..0.95. Best F1 "
                f"{b['f1']:.3f} at t = {b['threshold']:.2f} (P {b['precision']:.3f}, R {b['recall']:.3f}), which "
                f"implies b={p['lsh']['bands']}, r={p['lsh']['rows']}; at t = 0.8: P {a8['precision']:.3f}, "
                f"R {a8['recall']:.3f}. MRPC paraphrases are rewordings, not copies: word-shingle Jaccard "
                f"separates them poorly{lowest}. A near-duplicate detector is not a paraphrase detector; this plot "
                "shows what `tune` reports, not a threshold to use for dedup.", ""]


def _hist(h: dict) -> list[str]:
    return ["### Cluster sizes with boilerplate", "", "![cluster sizes](plots/cluster_sizes.png)", "",
            f"`diversify.build` with the default config on `generate_corpus({h['n']}, "
            + ", ".join(f"{k}={v}" for k, v in h["corpus"].items())
            + f")`: {h['singletons']:,} singletons, {h['clusters_ge2']:,} clusters of two or more, the largest "
            f"{h['largest']:,} documents; the {h['boilerplate_docs']:,} boilerplate pages fall into "
            f"{h['boilerplate_clusters']:,} clusters (build {h['build_s']:.1f}s).", ""]


def plots_section(results: dict) -> list[str]:
    L = ["## Plots", "", f"Command: `{command(results.get('command'), DEFAULT_COMMAND)}` (writes "
         "`benchmarks/plots/*.png`).", ""]
    if results.get("s_curve"):
        L += _s_curve(results["s_curve"])
    if results.get("pr_mrpc"):
        L += _pr(results["pr_mrpc"])
    if results.get("cluster_sizes"):
        L += _hist(results["cluster_sizes"])
    return L
