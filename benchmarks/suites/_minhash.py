"""Shared by the text MinHash suites (build, boilerplate, scaling, simhash_text): exact truth,
one tool run in a worker, scores."""

from __future__ import annotations

import time

import numpy as np

from ..corpora import corpus_params, load_texts
from ..markdown import NONE, env_line, fixed, num, table
from ..paths import log, now
from ..protocol import Task
from ..worker import run_job

NUM_PERM, THRESHOLD = 128, 0.8
TOOL_VARIANTS = {
    "diversify": ("diversify", {}),
    "diversify-exact": ("diversify", {"verify": "exact"}),
    "rensa": ("rensa", {}),
    "datasketch": ("datasketch", {}),
}
TOOLS = tuple(TOOL_VARIANTS)


def _truth_run(texts, args: dict) -> dict:
    from ..reference import ShingleHasher
    from ..truth import similarity_join

    t0 = time.perf_counter()
    hasher = ShingleHasher()
    ptrs, vals = [np.zeros(1, dtype=np.int64)], []
    for s in range(0, len(texts), 5000):
        ip, hs = hasher.hash_many(texts[s : s + 5000])
        ptrs.append(ip[1:] + ptrs[-1][-1])
        vals.append(hs)
    texts.clear()  # the join needs the memory more than the texts
    indptr = np.concatenate(ptrs)
    hashes = np.concatenate(vals) if vals else np.zeros(0, np.uint64)
    del vals
    t1 = time.perf_counter()
    pairs, jac, stats = similarity_join(indptr, hashes, args["threshold"])
    stats.update(hash_s=t1 - t0, join_s=time.perf_counter() - t1)
    return dict(arrays=dict(pairs=pairs, jaccard=jac), stats=stats)


# Worker task: exact pairs with Jaccard ≥ threshold; args = {"corpus": prefix, "threshold": t}.
TRUTH = Task(load=lambda args: load_texts(args["corpus"]), warm=lambda texts, args: None, run=_truth_run)


def truth_for(prefix: str, threshold: float = THRESHOLD) -> tuple[np.ndarray, dict]:
    """Exact truth pairs of a corpus file (computed once per corpus and threshold) and their stats."""
    log(f"exact truth (threshold {threshold}) for {prefix.rsplit('/', 1)[-1]} ...")
    rec, arrays = run_job("benchmarks.suites._minhash:TRUTH", dict(corpus=prefix, threshold=threshold),
                          tag="truth", priority=False, reuse=True)
    stats = dict(rec["stats"], peak_rss_mb=rec["rss_peak_mb"])
    return arrays["pairs"], stats


def run_tool(prefix: str, tool: str, kwargs: dict | None = None, tag: str | None = None,
             threads: int | None = None) -> tuple[dict, dict]:
    """One MinHash tool on a corpus file in a worker: (record, {"labels", maybe "labels_verified"})."""
    kwargs = dict(num_perm=NUM_PERM, threshold=THRESHOLD, **(kwargs or {}))
    log(f"{tag or tool} on {prefix.rsplit('/', 1)[-1]} ...")
    result = run_job("benchmarks.peers.minhash:TASK", dict(tool=tool, corpus=prefix, kwargs=kwargs),
                     tag=f"{tool}-{prefix.rsplit('/', 1)[-1]}", threads=threads)
    if result is None:
        raise RuntimeError(f"{tag or tool} timed out")
    return result


def scores(labels: np.ndarray, truth_pairs: np.ndarray, truth_labels: np.ndarray) -> dict:
    from ..metrics import cluster_pair_scores, pair_scores

    return dict(pairs=pair_scores(labels, truth_pairs), components=cluster_pair_scores(labels, truth_labels))


def score_row(rec: dict, labels: dict, truth_pairs, truth_labels) -> dict:
    row = dict(rec)
    row["scores"] = scores(labels["labels"], truth_pairs, truth_labels)
    if "labels_verified" in labels:
        row["scores_verified"] = scores(labels["labels_verified"], truth_pairs, truth_labels)
    n = rec["n_docs"]
    t = rec["timings"]
    row["docs_per_s"] = n / t["total"]
    if "total_verified" in t:
        row["docs_per_s_verified"] = n / t["total_verified"]
    sk = t.get("sketch_incl_tokenize") or t.get("sketch")
    row["signatures_per_s"] = n / sk if sk else None
    return row


def compare(prefix: str, tools, suite: str) -> dict:
    """Every tool on one corpus file against its exact truth: the build/boilerplate payload."""
    from ..env import environment
    from ..truth import components

    params = corpus_params(prefix)
    n = params["n_docs"]
    truth_pairs, truth_stats = truth_for(prefix)
    truth_labels = components(n, truth_pairs)
    rows = {}
    for name in tools:
        tool, kw = TOOL_VARIANTS[name]
        rec, labels = run_tool(prefix, tool, kw, tag=name)
        r = rows[name] = score_row(rec, labels, truth_pairs, truth_labels)
        log(f"  {name}: {r['docs_per_s']:,.0f} docs/s, RSS +{r['rss_delta_mb']:,.0f} MiB, "
            f"pair F1 {r['scores']['pairs']['f1']:.4f}")
    return dict(suite=suite, created=now(), env=environment(), corpus=params, num_perm=NUM_PERM,
                threshold=THRESHOLD, truth=truth_stats, tools=rows)


# --- RESULTS.md section

def _cpu(r) -> str:
    return num(r["n_docs"] / r["cpu_s"]) if r.get("cpu_s") else NONE


def _intro(d: dict) -> list[str]:
    c, tr, tools = d["corpus"], d["truth"], d["tools"]
    n = c["n_docs"]
    title = "Build" if d.get("suite", "build") == "build" else "Boilerplate (giant buckets)"
    args = ", ".join(f"{k}={tuple(v) if isinstance(v, list) else v}" for k, v in c.items() if k != "n_docs")
    return [f"## {title}: {n:,} documents, word 5-shingles, num_perm={d['num_perm']}, threshold {d['threshold']}", "",
            f"Corpus: `generate_corpus({n}, {args})`; "
            f"{num(next(iter(tools.values()))['text_mb'])} MiB of text. "
            f"Truth: exact Jaccard ≥ {d['threshold']} over all pairs (prefix-filtered similarity join, "
            f"{tr['candidates']:,} candidates checked exactly): **{tr['pairs']:,} pairs**.", "",
            f"Measured {d['created']} on {env_line(d['env'])}.", ""]


def _rows(tools: dict):
    base = tools.get("diversify")
    for name, r in tools.items():
        ratio = base["docs_per_s"] / r["docs_per_s"] if base else None
        s = r["scores"]["pairs"]
        yield [name, num(r["docs_per_s"]), f"{num(ratio, 1)}×", _cpu(r), num(r["signatures_per_s"]),
               f"{num(r['rss_delta_mb'])} MiB", fixed(s["precision"]), fixed(s["recall"]), fixed(s["f1"]),
               fixed(r["scores"]["components"]["f1"])]
        if "scores_verified" in r:
            sv = r["scores_verified"]["pairs"]
            ratio_v = base["docs_per_s"] / r["docs_per_s_verified"] if base else None
            yield [f"{name} + verify (own estimate ≥ t)", num(r["docs_per_s_verified"]), f"{num(ratio_v, 1)}×", NONE,
                   num(r["signatures_per_s"]), f"{num(r['rss_delta_mb'])} MiB", fixed(sv["precision"]),
                   fixed(sv["recall"]), fixed(sv["f1"]), fixed(r["scores_verified"]["components"]["f1"])]


def _bars(tools: dict) -> list[str]:
    base = tools.get("diversify")
    if not base:
        return []
    checks = []
    for peer, bar in (("datasketch", 20.0), ("rensa", 5.0)):
        if peer in tools:
            ratio = base["docs_per_s"] / tools[peer]["docs_per_s"]
            msg = f"end-to-end vs {peer} {ratio:.1f}× wall (bar ≥ {bar:.0f}×: {'met' if ratio >= bar else 'NOT met'})"
            if base.get("cpu_s") and tools[peer].get("cpu_s"):
                msg += f", {tools[peer]['cpu_s'] / base['cpu_s']:.1f}× per CPU-second"
            checks.append(msg)
    f1 = base["scores"]["pairs"]["f1"]
    checks.append(f"pair F1 {f1:.4f} (bar ≥ 0.97: {'met' if f1 >= 0.97 else 'NOT met'})")
    return ["Bars (issue): " + "; ".join(checks) + ".", ""]


def _caveat(d: dict) -> list[str]:
    loads = [r["loadavg_before"][0] for r in d["tools"].values() if "loadavg_before" in r]
    cpus = d["env"].get("usable_cpus")
    if not loads or max(loads) <= 1.5 * (cpus or 1):
        return []
    return [f"**Caveat:** the machine was shared while this ran (1-min load average {min(loads):.1f}-"
            f"{max(loads):.1f} on {cpus} CPUs), so wall-clock rates are depressed and "
            "noisy; each tool's CPU seconds are below, and docs per CPU-second is the steadier comparison "
            "(it does not credit diversify's use of both cores).", ""]


def _stage_line(name: str, r: dict) -> str:
    t = ", ".join(f"{k} {v:.2f}" for k, v in r["timings"].items())
    p = r.get("params", {})
    extra = ""
    if "bands" in p:
        extra = f" — LSH bands={p['bands']} rows={p['rows']}, candidate pairs {p.get('candidates'):,}"
    elif p.get("lsh"):
        lsh = p["lsh"].get("minhash", {})
        extra = (f" — LSH bands={lsh.get('bands')} rows={lsh.get('rows')}, candidates {p.get('candidates')}, "
                 f"verified {p.get('verified')}, merged {p.get('merged')}")
    if "loadavg_before" in r:
        extra += (f" — CPU time {r['cpu_s']:.1f}s over {r['timings']['total']:.1f}s wall; 1-min load average "
                  f"{r['loadavg_before'][0]:.2f} before, {r['loadavg_after'][0]:.2f} after")
    return f"- **{name}**: {t}{extra}"


def build_section(d: dict) -> list[str]:
    """A build or boilerplate result: the comparison table, bars, caveat and stage times."""
    L = _intro(d)
    L += table(["tool", "end-to-end docs/s", "ours ÷ tool", "docs per CPU-second", "signatures/s",
                "peak RSS beyond texts", "pair P", "pair R", "pair F1", "F1 vs truth components"],
               "lrrrrrrrrr", _rows(d["tools"]))
    L += [""] + _bars(d["tools"]) + _caveat(d) + ["Stage times (s):", ""]
    L += [_stage_line(name, r) for name, r in d["tools"].items()]
    return L + [""]


def _load(r) -> str:
    if "loadavg_before" not in r:
        return NONE
    return f"{r['loadavg_before'][0]:.2f} → {r['loadavg_after'][0]:.2f}"


def scaling_section(d: dict) -> list[str]:
    rows, bars = [], []
    for r in d["rows"]:
        if r["n_docs"] >= 1_000_000:
            ok_t, ok_m = r["timings"]["total"] < 60, r["rss_delta_mb"] < 2048
            bars += [f"Bar at {r['n_docs']:,} docs (< 60 s, < 2 GB beyond the texts): time "
                     f"{r['timings']['total']:.1f}s {'met' if ok_t else 'NOT met'}, memory "
                     f"{r['rss_delta_mb']:,.0f} MiB {'met' if ok_m else 'NOT met'}.", ""]
        f1 = r.get("scores", {}).get("pairs", {}).get("f1")
        rows.append([f"{r['n_docs']:,}", num(r["text_mb"]), f"{r['timings']['total']:.2f}", num(r["docs_per_s"]),
                     f"{num(r['rss_delta_mb'])} MiB", fixed(f1), num(r.get("cpu_s"), 1), _load(r)])
    L = ["## Scaling (diversify only, default config, same generator)", "",
         f"Measured {d['created']} on {env_line(d['env'])}.", ""]
    L += table(["documents", "text MiB", "wall time (s)", "docs/s", "peak RSS beyond texts", "pair F1 (exact truth)",
                "CPU s", "load avg before → after"], "rrrrrrrr", rows)
    return L + [""] + bars
