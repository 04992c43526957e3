"""Markdown of the dask suite."""

from __future__ import annotations

from .markdown import command, env_line, skipped, table


def dask_section(d: dict) -> list[str]:
    L = [f"## Dask engine vs local build: {d['docs']:,} documents × {d['words']} words", "",
         f"{d['parquet_bytes'] / 2**30:.2f} GiB of Parquet, {d['file_docs']:,} documents per file (= input partition). "
         f"Command: `{command(d.get('command'), 'python -m benchmarks run --suite dask')}`. Measured {d['created']} "
         f"on {env_line(d['env'])}.", ""]
    rows = []
    for r in d["runs"]:
        if "skipped" in r:
            rows.append(skipped([r["cores"]], r["skipped"], 8))
            continue
        loc, dk = r["local"], r["dask"]
        rows.append([r["cores"], f"{loc['wall_s']:.1f}", f"{loc['rss_peak_mb'] / 1024:.2f}", f"{dk['wall_s']:.1f}",
                     f"{r['overhead']:.2f}×", ", ".join(f"{x:.2f}" for x in dk["peak_rss_sampled_gib"]),
                     f"{dk['rss_peak_mb'] / 1024:.2f}", "yes" if dk["same_as_local"] else "**no**"])
    L += table(["cores", "local build s", "local peak RSS GiB", "dask wall s", "dask ÷ local",
                "peak RSS per worker GiB", "client peak RSS GiB", "same clusters"], "rrrrrlrl", rows) + [""]
    for r in (r for r in d["runs"] if "dask" in r):
        stages = ", ".join(f"{k} {v:.2f}" for k, v in r["dask"]["timings"].items())
        L.append(f"- {r['cores']} worker(s): stages {stages}")
    return L + ["", "Local: `diversify.build` at `NUMBA_NUM_THREADS=k` after a warm-up build; Dask: "
                "`LocalCluster(n_workers=k, threads_per_worker=1)`, one Numba thread per worker, after a warm-up "
                "`build_dask`. Peak RSS per worker is sampled every 0.5 s.", ""]
