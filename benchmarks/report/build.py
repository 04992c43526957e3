"""Markdown of the build, boilerplate and scaling suites."""

from __future__ import annotations

from .markdown import NONE, env_line, fixed, num, table


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
