"""Markdown of the simhash_text suite (simhash, text-dedup vs diversify MinHash)."""

from __future__ import annotations

from .markdown import command, num, skipped, table

NOTES = [
    "Reading the tables:",
    "",
    "- `simhash` has no Jaccard threshold: its knob is the Hamming tolerance k over 64 bits, split into k+1 "
    "exact-match blocks (pigeonhole). For two equal-size shingle sets at Jaccard J the unweighted SimHash bit "
    "disagreement is θ/π with cos θ = 2J/(1+J), i.e. about 10 of 64 bits at J = 0.8 — so k = 3 only finds "
    "near-verbatim copies (high precision, low recall), and matching J = 0.8 needs k ≈ 10, where the 6-bit blocks "
    "make large buckets that its pure-Python index scans pair by pair. Its decision is a Hamming estimate from 64 "
    "bits, so near the threshold it is noisy in both directions.",
    "- Peak RSS: diversify and simhash rows are measured beyond the loaded texts in a fresh process (VmHWM reset); "
    "text-dedup's is the largest single process of its CLI run (`/usr/bin/time -v`), texts included, its "
    "worker processes not summed; its CPU seconds include the workers.",
    "- text-dedup's `minhash` merges every pair that shares one LSH bucket, with no verification, using "
    "datasketch's (b, r) choice with equal weights, and runs as a `datasets` pipeline (Arrow files, `num_proc` "
    "worker processes); its time includes loading and writing the deduplicated dataset.",
    "",
]


def _generated(g: dict) -> list[str]:
    args = ", ".join(f"{k}={v}" for k, v in g["corpus"].items() if k != "n_docs")
    L = [f"### Generated corpus: {g['n']:,} documents, threshold Jaccard {g['threshold']} (word 5-shingles)", "",
         f"Corpus `generate_corpus({g['n']}, {args})`; truth: exact Jaccard ≥ {g['threshold']} over all pairs "
         f"(benchmarks.truth): **{g['truth']['pairs']:,} pairs**. Pair P/R/F1 over all pairs inside predicted "
         "clusters; comp. F1 against the truth's connected components.", ""]
    head = ["tool", "time (s)", "CPU s", "docs/s", "peak RSS", "pair P", "pair R", "pair F1", "comp. F1",
            "load avg (1 min)"]
    rows = []
    for name, r in g["tools"].items():
        if "skipped" in r:
            rows.append(skipped([name], r["skipped"], len(head)))
            continue
        s = r["scores"]["pairs"]
        rss = r.get("rss_delta_mb")
        rss_s = f"+{num(rss)} MiB beyond texts" if rss is not None else f"{num(r.get('rss_peak_mb'))} MiB (process)"
        tot = r["timings"]["total"]
        rows.append([name, f"{tot:.1f}", num(r.get("cpu_s"), 1), num(r["n_docs"] / tot), rss_s,
                     f"{s['precision']:.4f}", f"{s['recall']:.4f}", f"{s['f1']:.4f}",
                     f"{r['scores']['components']['f1']:.4f}",
                     f"{r['loadavg_before'][0]:.1f} → {r['loadavg_after'][0]:.1f}"])
    L += table(head, "l" + "r" * 9, rows) + [""]
    for name, r in g["tools"].items():
        if "skipped" not in r:
            L.append(f"- {name}: " + ", ".join(f"{k} {x:.2f}" for k, x in r["timings"].items()))
    return L + [""]


def _mrpc(m: dict) -> list[str]:
    L = ["### MRPC sentences (exact-Jaccard truth and paraphrase labels)", ""]
    if "skipped" in m:
        return L + [f"Skipped: {m['skipped']}", ""]
    L += [f"{m['n_docs']:,} unique sentences from {m['n_pairs']:,} labeled pairs ({m['n_positive']:,} "
          "paraphrases). 'vs exact' = pair P/R/F1 against exact Jaccard ≥ t over all sentence pairs; "
          "'labels' = P/R/F1 on the labeled pairs (predicted positive = same cluster).", ""]
    head = ["t", "tool", "seconds", "vs exact P", "R", "F1", "labels P", "R", "F1", "load avg"]
    rows = []
    for t, block in m["results"].items():
        for name, r in block["tools"].items():
            if "skipped" in r:
                rows.append(skipped([t, name], r["skipped"], len(head)))
                continue
            e, lb = r["vs_exact"]["pairs"], r["labels"]
            rows.append([t, name, f"{r['seconds']:.2f}", f"{e['precision']:.4f}", f"{e['recall']:.4f}",
                         f"{e['f1']:.4f}", f"{lb['precision']:.3f}", f"{lb['recall']:.3f}", f"{lb['f1']:.3f}",
                         f"{r['loadavg_before'][0]:.1f}"])
    L += table(head, "ll" + "r" * 8, rows) + [""]
    L.append("Truth pairs: " + ", ".join(f"t={t}: {b['truth_pairs']:,}" for t, b in m["results"].items())
             + ". simhash has no threshold, so each k is run once and the same clustering is scored at both t. "
             "MRPC timings are in-process wall clock (no separate peak-RSS measurement).")
    return L + [""]


def simhash_section(results: dict) -> list[str]:
    env = results.get("env", {})
    v = env.get("versions", {})
    L = ["## Text SimHash and text-dedup vs diversify MinHash", "",
         f"Command: `{command(results.get('command'), 'python -m benchmarks run --suite simhash_text')}` (writes "
         f"`benchmarks/results/simhash_text.json`). Measured {results.get('created')} on {env.get('cpu')} · "
         f"{env.get('usable_cpus')} CPUs · {env.get('memory_gb')} GB RAM · diversify {v.get('diversify')} at "
         f"{str(env.get('diversify_commit'))[:30]} · simhash {v.get('simhash')} · text-dedup {v.get('text-dedup')}.",
         ""]
    if results.get("generated"):
        L += _generated(results["generated"])
    if results.get("mrpc"):
        L += _mrpc(results["mrpc"])
    return L + NOTES
