"""Markdown of the cli suite: whole-process builds, sketch throughput by script, cold start."""

from __future__ import annotations

import re

from .markdown import NONE, env_line, fixed, num, table


def _verbose(output: str) -> str:
    """diversify's own breakdown from its ``--verbose`` lines (start-up, phases, kernels)."""
    keep = [m.group(1).strip() for m in re.finditer(r"^(?:phases|kernels)\s+(.*)$", output, re.M)]
    start = re.search(r"start-up ([0-9.]+s)", output)
    return "; ".join(([f"start-up {start.group(1)}"] if start else []) + keep)


def _whole(d: dict) -> list[str]:
    rows = d["whole"]
    base = rows.get("diversify")
    out = []
    for name, r in rows.items():
        wall = base["wall_s"] and r["wall_s"] / base["wall_s"] if base else None
        cpu = base["cpu_s"] and r["cpu_s"] / base["cpu_s"] if base else None
        n = d["corpus"]["n_docs"]
        out.append([name, num(r["wall_s"], 2), f"{fixed(wall, 1)}×", num(r["cpu_s"], 2), f"{fixed(cpu, 1)}×",
                    num(r["cpu_s"] / n * 100_000, 2), num(r["peak_rss_mb"]),
                    _verbose(r.get("output", "")) if name.startswith("diversify") else ""])
    return table(["tool", "wall s", "wall vs diversify", "CPU-s", "CPU vs diversify", "CPU-s / 100k docs",
                  "peak RSS MiB", "diversify --verbose"], "lrrrrrrl", out)


def _throughput(t: dict) -> list[str]:
    if "skipped" in t:
        return [f"Sketch throughput: skipped ({t['skipped']}).", ""]
    a, m = t["ascii"], t["multilingual"]
    rows = [[name, num(r["docs"]), num(r["mib"], 1), num(r["sketch_mb_s"]), num(r["build_mb_s"]),
             num(r["mib"] * 2**20 / r["build_cpu_s"] / 1e6), num(r["numpy_sum_mb_s"]),
             f"{r['sketch_mb_s'] / a['sketch_mb_s']:.0%}",
             f"{(r['mib'] / r['build_cpu_s']) / (a['mib'] / a['build_cpu_s']):.0%}"]
            for name, r in (("ASCII (generated)", a), ("multilingual (gettext catalogs)", m))]
    scripts = ", ".join(f"{k}: {v['messages']:,} messages ({', '.join(v['languages'])})"
                        for k, v in (t.get("scripts") or {}).items())
    return ["Sketch throughput (texts in memory, best of 3; encode + kernels, then the whole `diversify.build`), "
            "next to numpy summing the same bytes:", "",
            *table(["corpus", "docs", "MiB", "sketch MB/s", "build MB/s", "build MB per CPU-s", "numpy sum MB/s",
                    "sketch vs ASCII", "per CPU-s vs ASCII"], "lrrrrrrrr", rows), "", f"Multilingual text: {scripts}.", ""]


def _demo(dm: dict | None) -> list[str]:
    if not dm:
        return []
    return ["`diversify demo` as a whole process: empty numba cache (a fresh install) "
            f"{num(dm['cold']['wall_s'], 1)}s wall / {num(dm['cold']['cpu_s'], 1)} CPU-s; warm "
            f"{num(dm['warm']['wall_s'], 1)}s wall / {num(dm['warm']['cpu_s'], 1)} CPU-s.", ""]


def _big(b: dict | None) -> list[str]:
    if not b:
        return []
    if "skipped" in b:
        return [f"Large corpus: skipped ({b['skipped']}).", ""]
    rows = [[name, num(r["wall_s"], 1), num(r["cpu_s"], 1), num(r["peak_rss_mb"])] for name, r in b["rows"].items()]
    return [f"{b['n']:,} documents ({num(b['jsonl_mb'])} MiB of JSONL; the quarter row: {b['n'] // 4:,}):", "",
            *table(["run", "wall s", "CPU-s", "peak RSS MiB"], "lrrr", rows), ""]


def cli_section(d: dict) -> list[str]:
    n = d["corpus"]["n_docs"]
    return [f"## Whole process: `diversify build` on {n:,} JSONL documents ({num(d['jsonl_mb'])} MiB)", "",
            f"Measured {d['created']} on {env_line(d['env'])}. Each row is one fresh process reading the same "
            "file (numba cache warm); CPU-s is user + sys of the process and its children. The peers read the "
            "JSONL with the standard library's `json` and shingle in Python (rensa: `RMinHash`, its accurate "
            f"path). {NONE} = not measured.", "",
            *_whole(d), "", *_throughput(d.get("throughput", {})), *_demo(d.get("demo")), *_big(d.get("big"))]
