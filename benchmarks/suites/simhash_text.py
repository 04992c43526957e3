"""simhash_text: the PyPI ``simhash`` package and ``text-dedup`` vs diversify's MinHash build,
scored against exact Jaccard (word 5-shingles) on the generated corpus and on MRPC.

The generated corpus and its exact truth are the build suite's (``corpora.TEXT_CORPUS``);
diversify, simhash and its warm-up run in workers under the common protocol; text-dedup runs as
its own CLI process (whole-process wall time, ``/usr/bin/time -v`` peak RSS). On MRPC everything
runs in-process after a warm-up (simhash has no threshold: one run per k, scored at every t).
"""

from __future__ import annotations

import subprocess

from ..markdown import command, num, skipped, table
from . import Suite

SUITE = Suite(
    name="simhash_text",
    summary="text SimHash (simhash k=3/6/10) and text-dedup MinHash vs diversify on 20k generated docs and MRPC: "
            "time, CPU s, peak RSS, pair P/R/F1 vs exact Jaccard and vs MRPC labels",
    results=("simhash_text.json",), render="benchmarks.suites.simhash_text:simhash_section",
    peers=("simhash", "text-dedup"), data=("mrpc",), quick={"n": 2000, "ks": [3], "no_mrpc": True},
    takes="~20 min")

NUM_PERM = 128


def add_arguments(p) -> None:
    p.add_argument("--n", type=int, default=20_000)
    p.add_argument("--ks", type=int, nargs="+", default=[3, 6, 10],
                   help="SimhashIndex Hamming tolerances on the generated corpus (k=10 scans buckets of ~n/64 "
                        "documents in Python: it grows ~n²)")
    p.add_argument("--mrpc-ks", type=int, nargs="+", default=[3, 6, 10], help="tolerances on MRPC")
    p.add_argument("--timeout", type=float, default=1200)
    p.add_argument("--no-mrpc", action="store_true")


def _text_dedup(prefix: str, n: int, threshold: float, timeout: float, tag: str) -> dict:
    """text-dedup's labels and record, or {"skipped": why}."""
    from ..peers import text_dedup

    why = text_dedup.unavailable()
    if why:
        return dict(skipped=why)
    try:
        return text_dedup.run(prefix, n, threshold, timeout, tag=tag, num_perm=NUM_PERM)
    except subprocess.TimeoutExpired:
        return dict(skipped=f"timed out after {timeout:.0f}s")


def generated(n: int, ks, timeout: float, threshold: float = 0.8) -> dict:
    from ..corpora import TEXT_CORPUS, corpus_file, corpus_params
    from ..paths import log
    from ..truth import components
    from ..worker import run_job
    from ._minhash import run_tool, scores, truth_for

    prefix = corpus_file(n, TEXT_CORPUS)
    truth_pairs, tstats = truth_for(prefix, threshold)
    truth_labels = components(n, truth_pairs)
    out = dict(n=n, threshold=threshold, corpus=corpus_params(prefix), truth=tstats, tools={})
    rec, labels = run_tool(prefix, "diversify", {}, tag="diversify (MinHash)")
    rec["scores"] = scores(labels["labels"], truth_pairs, truth_labels)
    out["tools"]["diversify MinHash (verify=auto)"] = rec
    for k in ks:
        log(f"simhash k={k} on n={n:,} ...")
        r = run_job("benchmarks.peers.simhash:TASK", dict(corpus=prefix, k=k), tag=f"simhash-k{k}", timeout=timeout)
        if r is None:
            out["tools"][f"simhash k={k}"] = dict(skipped=f"timed out after {timeout:.0f}s")
            continue
        rec, lab = r
        rec["scores"] = scores(lab["labels"], truth_pairs, truth_labels)
        out["tools"][f"simhash k={k}"] = rec
    log(f"text-dedup minhash on n={n:,} ...")
    r = _text_dedup(prefix, n, threshold, timeout, tag=prefix.rsplit("/", 1)[-1])
    if "skipped" not in r:
        r = dict(r["rec"], scores=scores(r["labels"], truth_pairs, truth_labels))
    out["tools"]["text-dedup minhash"] = r
    return out


def _mrpc_scored(labels, truth, tl, a, b, y, seconds, load) -> dict:
    from ..metrics import labeled_pair_scores
    from ._minhash import scores

    return dict(vs_exact=scores(labels, truth, tl), labels=labeled_pair_scores(labels, a, b, y), seconds=seconds,
                loadavg_before=load)


def mrpc(ks, thresholds=(0.8, 0.5), timeout: float = 900) -> dict:
    from .. import data
    from ..corpora import texts_file
    from ..peers.minhash import warm_up
    from ..peers.simhash import run_simhash
    from ..protocol import timed
    from ..truth import components
    from .quality import exact_truth, in_process

    try:
        texts, a, b, y = data.pairs_corpus(data.mrpc())
    except data.DataMissing as e:
        return dict(skipped=str(e))
    n = len(texts)
    out = dict(n_docs=n, n_pairs=int(len(a)), n_positive=int(y.sum()), results={})
    warm_up("diversify")
    run_simhash(texts[:200], ks[0])
    prefix = texts_file("mrpc", texts)  # text-dedup reads a corpus file, like the generated corpora
    sim_runs = []  # simhash has no threshold: one run per k, scored at every threshold
    for k in ks:
        s, rec = timed(lambda k=k: run_simhash(texts, k))
        sim_runs.append((f"simhash k={k}", s["labels"], rec))
    for t in thresholds:
        truth = exact_truth(texts, t)
        tl = components(n, truth)
        d, rec = timed(lambda t=t: in_process("diversify", texts, t))
        res = {}
        for name, labels, rc in [("diversify MinHash (verify=auto)", d["labels"], rec), *sim_runs]:
            res[name] = _mrpc_scored(labels, truth, tl, a, b, y, rc["seconds"], rc["loadavg_before"])
        r = _text_dedup(prefix, n, t, timeout, tag="mrpc")
        res["text-dedup minhash"] = r if "skipped" in r else _mrpc_scored(
            r["labels"], truth, tl, a, b, y, r["rec"]["timings"]["total"], r["rec"]["loadavg_before"])
        out["results"][str(t)] = dict(truth_pairs=int(len(truth)), tools=res)
    return out


def run(args, ctx) -> list:
    from ..env import environment, version
    from ..paths import log, now, shown, write_json
    from ..peers import text_dedup

    payload = dict(suite="simhash_text", created=now(),
                   env=environment({"simhash": version("simhash"), "text-dedup": text_dedup.version()}),
                   num_perm=NUM_PERM, ks=list(args.ks), command=ctx.command)
    path = ctx.results / "simhash_text.json"
    payload["generated"] = generated(args.n, args.ks, args.timeout)
    write_json(path, payload)
    if not args.no_mrpc:
        log("MRPC ...")
        payload["mrpc"] = mrpc(args.mrpc_ks)
    write_json(path, payload)
    log(f"wrote {shown(path)}")
    return [path]


# --- RESULTS.md section

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
