"""dask: the Dask engine with k worker processes against the local build at k cores.

The corpus is generated once and written as Parquet files of ``--file-docs`` documents (one input
partition each) to ``benchmarks/.cache/dask/``; by default 30% of the documents are copies edited
at a rate of at most 1% of their words (Jaccard of 5-word shingles >= 0.9: really above the
threshold). Local build at k cores: a worker with ``NUMBA_NUM_THREADS=k`` reads the Parquet files
into a list and runs ``diversify.build`` (after a warm-up build), both timed: the Dask build reads
its input in its sketch tasks, so both figures count the same work. Dask build with k workers: the
job starts a scheduler and k workers (one thread each, ``NUMBA_NUM_THREADS=1``) as their own
processes, so the client's, the scheduler's and each worker's peak RSS are measured apart
(each process's VmHWM, reset when the measured build starts; the client's is the harness's own); it warms them up, then runs ``build_dask`` on the Parquet glob
with ``output_dir`` (the workers write the shards), sampling each worker's RSS every 0.5 s. The
cluster ids read back from the shards are compared with the local ones.
"""

from __future__ import annotations

import threading
import time

from ..markdown import command, env_line, skipped, table
from ..protocol import Task
from . import Suite

SUITE = Suite(
    name="dask",
    summary="the Dask engine (2 worker processes, shards written by the workers) vs the local build at equal "
            "cores: wall time, per-stage times, peak RSS of client, scheduler and each worker, identical clusters",
    results=("dask-n*.json",), render="benchmarks.suites.dask:dask_section",
    peers=("dask", "distributed"), quick={"docs": 2000, "file_docs": 500, "workers": [1]}, takes="~6 min")


def add_arguments(p) -> None:
    p.add_argument("--docs", type=int, default=200_000)
    p.add_argument("--words", type=int, default=300)
    p.add_argument("--dup", type=float, default=0.3)
    p.add_argument("--edit-max", type=float, default=0.01, help="copies have up to this share of words edited")
    p.add_argument("--file-docs", type=int, default=20_000, help="documents per Parquet file (= input partition)")
    p.add_argument("--workers", type=int, nargs="+", default=[2])
    p.add_argument("--shuffle-method", default=None, choices=[None, "p2p", "tasks"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=3600)
    p.add_argument("--boilerplate", type=float, default=0.0,
                   help="share of documents rendered from templates (near-identical page families)")
    p.add_argument("--templates", type=int, default=None,
                   help="templates per generated slice of 100,000 documents (default: one per 2,000 pages)")
    p.add_argument("--memory-limit", default="0",
                   help="each Dask worker's memory limit (e.g. 8GiB): past it a worker spills its stored results "
                        "to its local directory; 0 = no limit, no spill")
    p.add_argument("--no-local", action="store_true",
                   help="skip the local build (a corpus larger than one process can build here); no identity check")


def corpus_dir(n: int, words: int, dup: float, file_docs: int, seed: int, edit_max: float = 0.03,
               boilerplate: float = 0.0, templates=None):
    """Parquet files of ``file_docs`` documents each, generated in slices of ≥ 100k documents with
    distinct seeds so memory stays bounded (copies and template families stay within a slice)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from .. import lib
    from ..paths import CACHE, log

    family = f"-b{boilerplate}-t{templates}" if boilerplate else ""
    d = CACHE / "dask" / f"n{n}-w{words}-d{dup}-e{edit_max}-f{file_docs}-s{seed}{family}"
    if (d / "DONE").exists():
        return d
    d.mkdir(parents=True, exist_ok=True)
    done = part = 0
    slice_docs = max(file_docs, 100_000)
    while done < n:
        m = min(slice_docs, n - done)
        extra = {"boilerplate_fraction": boilerplate, "n_templates": templates} if boilerplate else {}
        c = lib.generate_corpus(m, words_per_doc=words, dup_fraction=dup, edit_rate=(0.0, edit_max),
                                seed=seed * 1000 + part, **extra)
        for a in range(0, m, file_docs):
            b = min(m, a + file_docs)
            pq.write_table(pa.table({"id": [f"s{part}-{i}" for i in range(a, b)], "text": list(c.texts[a:b])}),
                           d / f"part-{(done + a) // file_docs:05d}.parquet", row_group_size=file_docs)
        done += m
        part += 1
        log(f"  generated {done:,}/{n:,} docs")
    (d / "DONE").write_text("ok")
    return d


def _read_parquet(args: dict, first: bool = False):
    from pathlib import Path

    import pyarrow.parquet as pq

    t0 = time.perf_counter()
    texts, ids = [], []
    for f in sorted(Path(args["dir"]).glob("*.parquet"))[:1 if first else None]:
        t = pq.read_table(f, columns=["id", "text"])
        ids += t.column("id").to_pylist()
        texts += t.column("text").to_pylist()
    return texts, ids, time.perf_counter() - t0


def _local_load(args: dict) -> dict:
    return args


def _local_run(data, args: dict) -> dict:
    """Read the Parquet files into a list, then build: the same work as the Dask build, which reads
    its input in its sketch tasks (``read_s`` and ``build_s`` apart)."""
    import diversify

    texts, ids, read_s = _read_parquet(args)
    t0 = time.perf_counter()
    res = diversify.build(texts, ids=ids)
    return dict(arrays={"cluster_ids": res.cluster_ids}, read_s=read_s, build_s=time.perf_counter() - t0,
                n_clusters=res.n_clusters, timings=res.timings, exact_checks=res.stats.get("exact_checks"))


def _local_warm(data, args: dict) -> None:
    import diversify

    # the whole first file: a build of a few thousand documents leaves kernels of the large-batch
    # paths uncompiled, and the first run of a new checkout would compile them in the timed build
    texts, ids, _ = _read_parquet(args, first=True)
    diversify.build(texts, ids=ids)


# Worker task (threads = cores): args = {"dir": Parquet folder}.
LOCAL = Task(load=_local_load, warm=_local_warm, run=_local_run)


def _rss() -> int:
    import psutil

    return psutil.Process().memory_info().rss


def _maxrss() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _cpu() -> float:
    """CPU seconds (user + system) of this process so far."""
    import os

    t = os.times()
    return t.user + t.system


def _reset_peak() -> tuple:
    """(RSS now, whether the peak was reset to it): the start of a process's measured window."""
    from ..protocol import reset_peak, status_kb

    return status_kb("VmRSS") * 1024, reset_peak()


def _peak() -> int:
    """Peak RSS since :func:`_reset_peak` (VmHWM), else since the process started."""
    from ..protocol import status_kb

    return status_kb("VmHWM") * 1024


def _start_cluster(args: dict) -> dict:
    """A scheduler and ``workers`` workers, each its own process (so each one's memory is its own)."""
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    import distributed

    tmp = Path(tempfile.mkdtemp(prefix="dvf-dask-bench-"))
    sf = str(tmp / "scheduler.json")
    procs = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                               "--port", "0", "--no-dashboard", "--scheduler-file", sf],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    deadline = time.time() + 60
    while not Path(sf).exists() and time.time() < deadline:
        time.sleep(0.2)
    for _ in range(args["workers"]):
        procs.append(subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", "--scheduler-file", sf,
                                       "--nthreads", "1", "--nworkers", "1", "--memory-limit", args.get("memory_limit", "0"),
                                       "--no-dashboard",
                                       "--local-directory", str(tmp)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    client = distributed.Client(scheduler_file=sf)
    client.wait_for_workers(args["workers"], timeout=120)
    return {"procs": procs, "client": client, "tmp": tmp}


def _dask_warm(state: dict, args: dict) -> None:
    import shutil
    from pathlib import Path

    from .. import lib
    from ..corpora import small_texts

    # a corpus with planted copies, so every stage (candidates, verification) compiles before timing
    lib.build_dask(small_texts(), client=state["client"], npartitions=args["workers"])
    # and the path the timed build takes (Parquet read on the workers, shards written by them), as the
    # local warm-up reads a Parquet file: neither timed run pays a first import
    first = sorted(Path(args["dir"]).glob("*.parquet"))[0]
    out = state["tmp"] / "warm"
    lib.build_dask(first, client=state["client"], output_dir=str(out))
    shutil.rmtree(out, ignore_errors=True)


def _spilled(dask_worker) -> int:
    """Bytes a worker holds spilled to its local directory now (0 without a memory limit)."""
    total = getattr(dask_worker.data, "spilled_total", None)
    return int(total.disk) if total is not None else 0


def _sample(client, peaks: dict, stop: threading.Event, spilled: dict) -> None:
    while not stop.is_set():
        try:
            for w, v in client.run(_rss).items():
                peaks[w] = max(peaks.get(w, 0), v)
            for w, v in client.run(_spilled).items():
                spilled[w] = max(spilled.get(w, 0), v)
        except Exception:  # noqa: BLE001 - sampling is best effort
            pass
        stop.wait(0.5)


def _shard_labels(path: str):
    import numpy as np

    from diversify.artifact.shards import iter_shards

    return np.concatenate([t.column("cluster_id").to_numpy() for _, t in iter_shards(path, columns=["cluster_id"])])


def _dask_run(state: dict, args: dict) -> dict:
    import shutil

    from .. import lib

    client, peaks, spilled, stop = state["client"], {}, {}, threading.Event()
    th = threading.Thread(target=_sample, args=(client, peaks, stop, spilled), daemon=True)
    th.start()
    out = str(state["tmp"] / "result")
    w_base = client.run(_reset_peak)
    s_base = client.run_on_scheduler(_reset_peak)
    w_cpu0, s_cpu0 = client.run(_cpu), client.run_on_scheduler(_cpu)
    t0 = time.perf_counter()
    try:
        res = lib.build_dask(args["dir"] + "/*.parquet", client=client, shuffle_method=args["shuffle_method"],
                             progress=False, output_dir=out)
        build_s = time.perf_counter() - t0  # the build alone: the probes and the teardown below are not the build's
    finally:
        stop.set()
        th.join()
    w_cpu1, s_cpu1 = client.run(_cpu), client.run_on_scheduler(_cpu)
    maxrss = client.run(_peak)
    sched = client.run_on_scheduler(_peak)
    labels = _shard_labels(out)
    client.close()
    for p in state["procs"][::-1]:
        p.terminate()
        p.wait(30)
    shutil.rmtree(state["tmp"], ignore_errors=True)
    return dict(arrays={"cluster_ids": labels}, workers=args["workers"], n_clusters=res.n_clusters, build_s=build_s,
                timings={k: round(v, 3) for k, v in res.timings.items()}, dask=res.stats["dask"],
                scheduler_peak_gib=round(sched / 2**30, 3), scheduler_before_gib=round(s_base[0] / 2**30, 3),
                peak_rss_sampled_gib=sorted(round(v / 2**30, 2) for v in peaks.values()),
                peak_rss_maxrss_gib=sorted(round(v / 2**30, 2) for v in maxrss.values()),
                workers_before_gib=sorted(round(v[0] / 2**30, 2) for v in w_base.values()),
                workers_cpu_s=round(sum(w_cpu1[w] - w_cpu0[w] for w in w_cpu1), 2),
                spilled_peak_gib=sorted(round(v / 2**30, 2) for v in spilled.values()),
                scheduler_cpu_s=round(s_cpu1 - s_cpu0, 2))


# Worker task (threads = 1, inherited by the Dask workers): args = {"dir", "workers", "shuffle_method"}.
DASK = Task(load=_start_cluster, warm=_dask_warm, run=_dask_run)


def run(args, ctx) -> list:
    import numpy as np

    from ..env import environment
    from ..paths import log, now, shown, write_json
    from ..worker import run_job

    d = corpus_dir(args.docs, args.words, args.dup, args.file_docs, args.seed, args.edit_max, args.boilerplate,
                   args.templates)
    payload = dict(suite="dask", created=now(), env=environment(), docs=args.docs, words=args.words,
                   dup_fraction=args.dup, edit_max=args.edit_max, file_docs=args.file_docs,
                   boilerplate=args.boilerplate, templates=args.templates, memory_limit=args.memory_limit,
                   parquet_bytes=sum(f.stat().st_size for f in d.glob("*.parquet")), command=ctx.command, runs=[])
    name = f"dask-n{args.docs}" + (f"-b{args.boilerplate}" if args.boilerplate else "") + \
        ("-spill" if args.memory_limit not in ("0", "") else "")
    path = ctx.results / f"{name}.json"
    for k in args.workers:
        local = None
        if not args.no_local:
            log(f"local build, {k} thread(s) ...")
            local = run_job("benchmarks.suites.dask:LOCAL", {"dir": str(d)}, tag=f"dask-local-c{k}", threads=k,
                            timeout=args.timeout)
        log(f"dask build, {k} worker process(es) ...")
        dask = run_job("benchmarks.suites.dask:DASK", {"dir": str(d), "workers": k, "shuffle_method": args.shuffle_method,
                                                       "memory_limit": args.memory_limit},
                       tag=f"dask-c{k}", threads=1, timeout=args.timeout)
        if dask is None or (local is None and not args.no_local):
            payload["runs"].append({"cores": k, "skipped": f"timed out after {args.timeout:.0f}s"})
            continue
        dk, dk_ids = dask
        if local is None:
            payload["runs"].append({"cores": k, "dask": dk})
        else:
            loc, loc_ids = local
            dk["same_as_local"] = bool(np.array_equal(dk_ids["cluster_ids"], loc_ids["cluster_ids"]))
            payload["runs"].append({"cores": k, "local": loc, "dask": dk,
                                    "overhead": _dask_wall(dk) / (loc["read_s"] + loc["build_s"])})
        write_json(path, payload)
    log(f"wrote {shown(path)}")
    return [path]


def _dask_wall(dk: dict) -> float:
    """The Dask build's wall time: timed around ``build_dask`` (older runs: the whole measured run,
    which also held the memory probes and the cluster's teardown)."""
    return dk.get("build_s", dk["wall_s"])


# --- RESULTS.md section

def dask_section(d: dict) -> list[str]:
    edits = f", copies edited at up to {d['edit_max']:.0%} of their words" if "edit_max" in d else ""
    title = f"## Dask engine vs local build: {d['docs']:,} documents × {d['words']} words"
    if all("local" not in r for r in d["runs"]):
        title = f"## Dask engine alone: {d['docs']:,} documents × {d['words']} words"
    if d.get("boilerplate"):
        title += f", {d['boilerplate']:.0%} template pages"
    if d.get("memory_limit") not in (None, "0", ""):
        title += f", workers limited to {d['memory_limit']} (disk spill)"
    L = [title, "",
         f"{d['parquet_bytes'] / 2**30:.2f} GiB of Parquet, {d['file_docs']:,} documents per file (= input partition), "
         f"{d.get('dup_fraction', 0.2):.0%} copies{edits}. "
         f"Command: `{command(d.get('command'), 'python -m benchmarks run --suite dask')}`. Measured {d['created']} "
         f"on {env_line(d['env'])}.", ""]
    if d.get("boilerplate"):
        L[-2] += (f" {d['boilerplate']:.0%} of the documents are template pages ({d.get('templates') or 'one per 2,000'} "
                  "template(s) per slice of 100,000 documents): families of near-identical pages.")
    if d.get("memory_limit") not in (None, "0", ""):
        L[-2] += f" Each worker's memory limit: {d['memory_limit']} (past it, stored results spill to disk)."
    rows, solo = [], []
    for r in d["runs"]:
        if "skipped" in r:
            rows.append(skipped([r["cores"]], r["skipped"], 11))
            continue
        dk = r["dask"]
        if "local" not in r:
            solo.append([r["cores"], f"{_dask_wall(dk):.1f}", f"{dk['workers_cpu_s'] + dk['scheduler_cpu_s'] + dk['cpu_s']:.1f}",
                         ", ".join(f"{x:.2f}" for x in dk.get("peak_rss_maxrss_gib", dk["peak_rss_sampled_gib"])),
                         ", ".join(f"{x:.2f}" for x in dk.get("spilled_peak_gib", [])) or "-",
                         f"{dk['rss_peak_mb'] / 1024:.2f}", f"{dk.get('scheduler_peak_gib', 0):.2f}", f"{dk['n_clusters']:,}"])
            continue
        loc = r["local"]
        client = dk["rss_peak_mb"] / 1024
        sched = dk.get("scheduler_peak_gib")
        # older runs timed the local build without its read: add it, so the two count the same work
        loc_wall = loc["read_s"] + loc["build_s"] if "build_s" in loc else loc["wall_s"] + loc.get("read_s", 0.0)
        read = f"{loc['read_s']:.1f} + {loc.get('build_s', loc['wall_s']):.1f}" if "read_s" in loc else f"{loc_wall:.1f}"
        cpu = f"{loc['cpu_s']:.1f} / {dk['workers_cpu_s'] + dk['scheduler_cpu_s'] + dk['cpu_s']:.1f}" \
            if "workers_cpu_s" in dk else "-"
        rows.append([r["cores"], read, f"{loc['rss_peak_mb'] / 1024:.2f}", f"{_dask_wall(dk):.1f}",
                     f"{_dask_wall(dk) / loc_wall:.2f}×", cpu, ", ".join(f"{x:.2f}" for x in dk.get("peak_rss_maxrss_gib",
                                                                                  dk["peak_rss_sampled_gib"])),
                     f"{client:.2f}", "in the client" if sched is None else f"{sched:.2f}",
                     "/".join(f"{x:.1f}" for x in dk.get("loadavg_before", [])[:1] + dk.get("loadavg_after", [])[:1]),
                     "yes" if dk["same_as_local"] else "**no**"])
    if rows:
        L += table(["cores", "local read + build s", "local peak RSS GiB", "dask wall s", "dask ÷ local",
                    "CPU-s local / dask", "peak RSS per worker GiB", "client peak RSS GiB", "scheduler peak RSS GiB",
                    "load before/after", "same clusters"],
                   "rrrrrrlrrll", rows) + [""]
    if solo:
        L += table(["workers", "dask wall s", "CPU-s", "peak RSS per worker GiB", "spilled to disk per worker GiB",
                    "client peak RSS GiB", "scheduler peak RSS GiB", "clusters"], "rrrllrrr", solo)
        L += ["", "No local build at this size (`--no-local`): no identity check in this run.", ""]
    for r in (r for r in d["runs"] if "dask" in r):
        stages = ", ".join(f"{k} {v:.2f}" for k, v in r["dask"]["timings"].items())
        spilled = r["dask"].get("spilled_peak_gib") or []
        spill = f"; spilled to disk at most {', '.join(f'{x:.2f}' for x in spilled)} GiB per worker" if any(spilled) else ""
        info = r["dask"].get("dask", {})
        moved = (f"; band rows and records moved {info['band_bytes'] / 1e6:,.0f} MB, distinct candidate pairs "
                 f"{info['scan_pairs']:,}, verified by signature {info['pairs_verified']:,}, handed to the exact check "
                 f"{info.get('borderline_pairs', 0):,}") if "scan_pairs" in info else ""
        L.append(f"- {r['cores']} worker(s): stages {stages}{spill}{moved}")
    return L + ["", "Local: the Parquet files read into a list, then `diversify.build` at `NUMBA_NUM_THREADS=k`, "
                "after a warm-up build (both timed: the Dask build reads its input in its sketch tasks); Dask: a "
                "scheduler and k workers (one thread, one Numba thread each) as separate processes, after a warm-up "
                "`build_dask` on the small corpus and on one Parquet file; the build writes its shards from the workers "
                "(`output_dir`). Wall: the local read + build, and the Dask build timed around `build_dask` (the "
                "memory probes and the cluster's teardown are outside it). CPU-s: user + system of "
                "the local worker process, and of the Dask workers, scheduler and client together. Peak RSS: each "
                "process's VmHWM over the measured build (reset when it starts). Load: the 1-minute load average "
                "before and after the Dask build (the machine is shared).",
                ""]
