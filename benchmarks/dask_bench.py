"""Dask engine benchmark: 1 vs 2 worker processes, against the local build at equal cores.

Run (from the repository root)::

    python benchmarks/dask_bench.py --docs 200000 --words 550            # ~6 min on 2 cores
    python benchmarks/dask_bench.py --docs 1000000 --words 550 --workers 2   # needs ~16 GB RAM

What it does
------------
1. Generates the corpus once (``diversify.datagen.generate_corpus``: planted near-duplicates) and
   writes it as Parquet files of ``--file-docs`` documents to ``benchmarks/.cache/dask/`` (git-ignored).
2. Local build at k cores: a subprocess with ``NUMBA_NUM_THREADS=k`` reads the same Parquet files
   into a list and runs ``diversify.build`` (after a warm-up build for the JIT). Wall time
   and peak RSS (``ru_maxrss``) are recorded; cluster ids are saved for the equality check.
3. Dask build with k worker processes: ``LocalCluster(n_workers=k, threads_per_worker=1)`` with
   ``NUMBA_NUM_THREADS=1`` in every worker (one core each), reading the Parquet glob. Wall time,
   per-stage times, peak RSS per worker (sampled every 0.5 s, plus each worker's ``ru_maxrss``)
   and the client's peak RSS are recorded, and the cluster ids are compared with the local ones.

Writes JSON (``--out``, default ``benchmarks/.cache/dask_bench-n{docs}.json``) and prints a
markdown table. Versions, CPU and thread counts are recorded with the numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "benchmarks" / ".cache" / "dask"


def corpus_dir(n: int, words: int, dup: float, file_docs: int, seed: int) -> Path:
    d = CACHE / f"n{n}-w{words}-d{dup}-f{file_docs}-s{seed}"
    if (d / "DONE").exists():
        return d
    import pyarrow as pa
    import pyarrow.parquet as pq

    from diversify.corpus.datagen import generate_corpus

    d.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    done = 0
    part = 0
    # generate in slices with distinct seeds so memory stays bounded; copies stay within a slice
    slice_docs = max(file_docs, 100_000)
    while done < n:
        m = min(slice_docs, n - done)
        c = generate_corpus(m, words_per_doc=words, dup_fraction=dup, seed=seed * 1000 + part)
        for a in range(0, m, file_docs):
            b = min(m, a + file_docs)
            ids = [f"s{part}-{i}" for i in range(a, b)]
            pq.write_table(pa.table({"id": ids, "text": list(c.texts[a:b])}),
                           d / f"part-{(done + a) // file_docs:05d}.parquet", row_group_size=file_docs)
        done += m
        part += 1
        print(f"  generated {done:,}/{n:,} docs ({time.perf_counter() - t0:.0f}s)", file=sys.stderr)
    (d / "DONE").write_text("ok")
    return d


_LOCAL = r"""
import json, os, resource, sys, time
import numpy as np, pyarrow.parquet as pq
from pathlib import Path
from diversify import build
d = Path(sys.argv[1]); out = sys.argv[2]
files = sorted(d.glob("*.parquet"))
t0 = time.perf_counter()
texts, ids = [], []
for f in files:
    t = pq.read_table(f, columns=["id", "text"])
    ids += t.column("id").to_pylist(); texts += t.column("text").to_pylist()
t_read = time.perf_counter() - t0
build(texts[:2000], ids=ids[:2000])  # JIT warm-up
t0 = time.perf_counter()
res = build(texts, ids=ids)
t_build = time.perf_counter() - t0
np.save(out + ".npy", res.cluster_ids)
json.dump({"read_s": t_read, "build_s": t_build, "n_clusters": res.n_clusters, "timings": res.timings,
           "exact_checks": res.stats.get("exact_checks"),
           "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}, open(out, "w"))
"""


def run_local(d: Path, cores: int, tag: str) -> dict:
    out = str(CACHE / f"local-{tag}.json")
    env = dict(os.environ, NUMBA_NUM_THREADS=str(cores))
    subprocess.run([sys.executable, "-c", _LOCAL, str(d), out], check=True, env=env)
    r = json.load(open(out))
    r["cluster_ids"] = out + ".npy"
    return r


def _rss() -> int:
    import psutil

    return psutil.Process().memory_info().rss


def _maxrss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def run_dask(d: Path, workers: int, shuffle_method, local_ids: str) -> dict:
    os.environ["NUMBA_NUM_THREADS"] = "1"  # inherited by the worker processes
    import logging

    import distributed

    from diversify.engines.dask.engine import build_dask

    cluster = distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                       dashboard_address=None, silence_logs=logging.ERROR)
    client = distributed.Client(cluster)
    try:
        build_dask([f"warm up {i} " * 20 for i in range(500)], client=client, npartitions=workers)
        peaks: dict = {}
        stop = threading.Event()

        def sample():
            while not stop.is_set():
                try:
                    for w, v in client.run(_rss).items():
                        peaks[w] = max(peaks.get(w, 0), v)
                except Exception:  # noqa: BLE001 - sampling is best effort
                    pass
                stop.wait(0.5)

        th = threading.Thread(target=sample, daemon=True)
        th.start()
        t0 = time.perf_counter()
        res = build_dask(str(d / "*.parquet"), client=client, shuffle_method=shuffle_method, progress=True)
        wall = time.perf_counter() - t0
        stop.set()
        th.join()
        maxrss = client.run(_maxrss)
        same = bool(np.array_equal(res.cluster_ids, np.load(local_ids)))
        return {"workers": workers, "wall_s": wall, "n_clusters": res.n_clusters, "same_as_local": same,
                "timings": {k: round(v, 3) for k, v in res.timings.items()}, "dask": res.stats["dask"],
                "peak_rss_sampled_gib": sorted(round(v / 2**30, 2) for v in peaks.values()),
                "peak_rss_maxrss_gib": sorted(round(v / 2**30, 2) for v in maxrss.values()),
                "client_peak_rss_gib": round(_maxrss() / 2**30, 2)}
    finally:
        client.close()
        cluster.close()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, default=200_000)
    ap.add_argument("--words", type=int, default=550)
    ap.add_argument("--dup", type=float, default=0.2)
    ap.add_argument("--file-docs", type=int, default=20_000, help="documents per Parquet file (= input partition)")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--shuffle-method", default=None, choices=[None, "p2p", "tasks"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    import dask
    import distributed
    import numba

    import diversify

    d = corpus_dir(a.docs, a.words, a.dup, a.file_docs, a.seed)
    size = sum(f.stat().st_size for f in d.glob("*.parquet"))
    result = {
        "what": "dask engine vs local build", "docs": a.docs, "words": a.words, "dup_fraction": a.dup,
        "file_docs": a.file_docs, "parquet_bytes": size,
        "versions": {"diversify": diversify.__version__, "dask": dask.__version__, "distributed": distributed.__version__,
                     "numba": numba.__version__, "python": platform.python_version()},
        "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
        "loadavg_before": os.getloadavg(), "runs": [],
    }
    for k in a.workers:
        tag = f"n{a.docs}-c{k}"
        print(f"local build, {k} thread(s)...", file=sys.stderr)
        loc = run_local(d, k, tag)
        print(f"dask build, {k} worker process(es)...", file=sys.stderr)
        dk = run_dask(d, k, a.shuffle_method, loc["cluster_ids"])
        result["runs"].append({"cores": k, "local": loc, "dask": dk, "overhead": dk["wall_s"] / loc["build_s"],
                               "loadavg_after": os.getloadavg()})
        out = Path(a.out or CACHE.parent / f"dask_bench-n{a.docs}.json")
        out.write_text(json.dumps(result, indent=1))
    print(f"\n{a.docs:,} docs x {a.words} words, {size / 2**30:.2f} GiB Parquet, {a.file_docs:,} docs per partition\n")
    print("| cores | local build s | local peak RSS GiB | dask wall s | dask/local | peak RSS per worker GiB | client peak GiB | same clusters |")
    print("|---|---|---|---|---|---|---|---|")
    for r in result["runs"]:
        loc, dk = r["local"], r["dask"]
        print(f"| {r['cores']} | {loc['build_s']:.1f} | {loc['peak_rss_gib']:.2f} | {dk['wall_s']:.1f} | "
              f"{r['overhead']:.2f}x | {dk['peak_rss_sampled_gib']} | {dk['client_peak_rss_gib']} | {dk['same_as_local']} |")
    for r in result["runs"]:
        print(f"\n{r['cores']} worker(s): stages {r['dask']['timings']}\n  {r['dask']['dask']}")
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
