"""cli: `diversify build` as a whole process, as users meet it, next to rensa and datasketch.

One command (``python -m benchmarks run --suite cli``) measures, on this machine, in one run:

1. whole-process builds of one JSONL corpus (default 100,000 generated docs of ~550 words):
   ``diversify build`` (in memory and ``--stream``), rensa (RMinHash over Python shingles, the
   accurate path) and datasketch, each a fresh process reading the file with its own reader
   (the peers: stdlib ``json``), wall and CPU seconds (user + sys, children included), peak RSS;
   diversify's ``--verbose`` breakdown (start-up, read, stages, write, kernel compile/load);
2. sketch throughput in MB/s on ASCII (the generated corpus) and on real multilingual text (this
   machine's gettext catalogs: accented Latin, Cyrillic, Greek, CJK), next to numpy summing the
   same bytes (a memory-bandwidth baseline);
3. cold start: ``diversify demo`` with an empty numba cache, then again warm;
4. ``--big N`` (off by default): whole-process build of N docs, in memory and ``--stream`` (and
   ``--stream`` at N/4, to show its peak memory flat in corpus size).

Numbers on a shared machine are noise in absolute terms: compare the ratios of one run.
"""

from __future__ import annotations

import re

from ..markdown import NONE, env_line, fixed, num, table
from . import Suite

SUITE = Suite(
    name="cli",
    summary="whole-process `diversify build` on JSONL vs rensa and datasketch (wall, CPU-s, RSS), sketch MB/s on "
            "ASCII vs multilingual text vs a numpy memory-bandwidth baseline, cold/warm `diversify demo`",
    results=("cli-n*.json",), render="benchmarks.suites.cli:cli_section",
    peers=("rensa", "datasketch"), quick={"n": 3000, "multilingual": 1000, "skip_demo": True}, takes="~15 min")

TOOLS = ("diversify", "diversify-stream", "rensa", "datasketch")


def add_arguments(p) -> None:
    p.add_argument("--n", type=int, default=100_000, help="documents of the JSONL corpus (default 100000)")
    p.add_argument("--tools", nargs="+", default=list(TOOLS), choices=TOOLS, help="whole-process runs (default: all)")
    p.add_argument("--multilingual", type=int, default=20_000, help="documents of the multilingual corpus")
    p.add_argument("--big", type=int, default=0, help="also build N docs (e.g. 1000000: ~3.3 GB of JSONL; check df)")
    p.add_argument("--skip-demo", action="store_true", help="skip the cold/warm `diversify demo` runs")


def _jsonl(prefix: str) -> str:
    """The corpus file as JSONL (``{"id": "doc-0000000", "text": ...}`` per line), written once."""
    import json
    import os

    from ..corpora import load_texts

    path = prefix + ".jsonl"
    if os.path.exists(path):
        return path
    if not os.environ.get("_BENCH_JSONL_CHILD"):
        # in a child: the texts would raise this process's peak RSS, which a forked child inherits as the
        # floor of its own ru_maxrss (every measured build would report at least the parent's peak)
        import subprocess
        import sys

        from ..worker import child_env

        code = f"from benchmarks.suites.cli import _jsonl; _jsonl({prefix!r})"
        subprocess.run([sys.executable, "-c", code], check=True, cwd=os.getcwd(),
                       env=child_env(extra={"_BENCH_JSONL_CHILD": "1"}))
        return path
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        for i, t in enumerate(load_texts(prefix)):
            f.write(json.dumps({"id": f"doc-{i:07d}", "text": t}) + "\n")
    os.replace(path + ".tmp", path)
    return path


def _timed(cmd: list, out_path: str, env: dict) -> dict:
    """Run ``cmd`` once as a child: wall, CPU (user+sys of it and its children), peak RSS, stdout."""
    import os
    import subprocess
    import time

    with open(out_path, "wb") as out:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=os.getcwd())
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    with open(out_path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    if p.returncode != 0:
        raise RuntimeError(f"{cmd[:5]} exited {p.returncode}: {text[-2000:]}")
    return dict(wall_s=wall, cpu_s=ru.ru_utime + ru.ru_stime, user_s=ru.ru_utime, sys_s=ru.ru_stime,
                peak_rss_mb=ru.ru_maxrss / 1024, output=text[-4000:])


def _cmd(tool: str, corpus: str, out: str) -> list:
    import sys

    if tool.startswith("diversify"):
        return [sys.executable, "-m", "diversify", "build", corpus, "-o", out, "--no-progress", "--verbose",
                *(["--stream"] if tool == "diversify-stream" else [])]
    return [sys.executable, "-m", "benchmarks.peers.whole_process", tool, corpus, out]


def _whole(tools, corpus: str, tag: str) -> dict:
    from ..paths import CACHE, log
    from ..worker import child_env

    env = child_env()
    runs = CACHE / "cli"
    runs.mkdir(parents=True, exist_ok=True)
    rows = {}
    for tool in tools:
        out = str(runs / f"{tag}-{tool}") + (".dvf" if tool.startswith("diversify") else ".npy")
        log(f"{tool} on {corpus.rsplit('/', 1)[-1]} (whole process) ...")
        rows[tool] = r = _timed(_cmd(tool, corpus, out), str(runs / f"{tag}-{tool}.txt"), env)
        log(f"  {tool}: {r['wall_s']:.2f}s wall, {r['cpu_s']:.2f} CPU-s, peak RSS {r['peak_rss_mb']:,.0f} MiB")
    return rows


def _demo(env_extra: dict, tag: str) -> dict:
    import sys

    from ..paths import CACHE
    from ..worker import child_env

    return _timed([sys.executable, "-m", "diversify", "demo"], str(CACHE / "cli" / f"demo-{tag}.txt"),
                  child_env(extra=env_extra))


def run(args, ctx) -> list:
    import json
    import os
    import shutil
    import subprocess
    import sys
    import tempfile

    from ..corpora import TEXT_CORPUS, corpus_file, corpus_params, multilingual_texts, write_texts
    from ..env import environment
    from ..paths import CACHE, log, now, shown, write_json
    from ..worker import child_env

    prefix = corpus_file(args.n, TEXT_CORPUS)
    corpus = _jsonl(prefix)
    (CACHE / "cli").mkdir(parents=True, exist_ok=True)
    # a warm numba cache: what a user has from the second run on. The warm-up builds the measured
    # corpus itself: a small one would leave kernels that only large builds use (the fold kernel
    # takes over from 1,024 components) to be compiled inside the measured run; --stream too (its
    # allocator is left untuned, so its ASCII chunks take the copy kernels the default path does not)
    for tool in ("diversify", "diversify-stream"):
        _timed(_cmd(tool, corpus, str(CACHE / "cli" / "warm.dvf")), str(CACHE / "cli" / "warm.txt"), child_env())
    payload: dict = dict(suite="cli", created=now(), env=environment(), corpus=corpus_params(prefix),
                         jsonl_mb=os.path.getsize(corpus) / 2**20)
    payload["whole"] = _whole(args.tools, corpus, f"n{args.n}")

    mprefix = str(CACHE / f"multilingual-{args.multilingual}")
    if not os.path.exists(mprefix + ".npz"):
        texts, found = multilingual_texts(args.multilingual)
        if texts:
            write_texts(mprefix, texts, params=json.dumps(dict(n_docs=len(texts), scripts=found)))
    if os.path.exists(mprefix + ".npz"):
        log("sketch throughput: ASCII vs multilingual ...")
        ascii_prefix = corpus_file(args.multilingual, TEXT_CORPUS)
        got = subprocess.run([sys.executable, "-m", "benchmarks.peers.throughput", ascii_prefix, mprefix],
                             check=True, capture_output=True, text=True, env=child_env(), cwd=os.getcwd())
        tp = json.loads(got.stdout.strip().splitlines()[-1])
        payload["throughput"] = dict(ascii=tp[ascii_prefix], multilingual=tp[mprefix],
                                     scripts=corpus_params(mprefix).get("scripts"))
    else:
        payload["throughput"] = dict(skipped="no gettext catalogs (.mo) of the scripts found on this machine")

    if not args.skip_demo:
        cold_dir = tempfile.mkdtemp(prefix="numba-cold-")
        try:
            log("diversify demo, empty numba cache ...")
            cold = _demo({"NUMBA_CACHE_DIR": cold_dir}, "cold")
            log("diversify demo, warm ...")
            warm = _demo({"NUMBA_CACHE_DIR": cold_dir}, "warm")
        finally:
            shutil.rmtree(cold_dir, ignore_errors=True)
        payload["demo"] = dict(cold=cold, warm=warm)

    if args.big:
        free = shutil.disk_usage(CACHE).free
        need = args.big * 3600 * 2.2  # the corpus blob and its JSONL
        if free < need:
            payload["big"] = dict(skipped=f"{free / 2**30:.0f} GiB free, {need / 2**30:.0f} GiB needed")
        else:
            big = _jsonl(corpus_file(args.big, TEXT_CORPUS))
            rows = _whole(["diversify", "diversify-stream"], big, f"n{args.big}")
            quarter = _jsonl(corpus_file(args.big // 4, TEXT_CORPUS))
            rows["diversify-stream-quarter"] = _whole(["diversify-stream"], quarter, f"n{args.big // 4}")["diversify-stream"]
            payload["big"] = dict(n=args.big, jsonl_mb=os.path.getsize(big) / 2**20, rows=rows)
    path = write_json(ctx.results / f"cli-n{args.n}.json", payload)
    log(f"wrote {shown(path)}")
    return [path]


# --- RESULTS.md section

def _verbose(output: str) -> str:
    """diversify's own breakdown from its ``--verbose`` lines (start-up, phases, kernels)."""
    keep = [m.group(1).strip() for m in re.finditer(r"^(?:phases|kernels)\s+(.*)$", output, re.M)]
    start = re.search(r"start-up ([0-9.]+s)", output)
    return "; ".join(([f"start-up {start.group(1)}"] if start else []) + keep)


def _whole_md(d: dict) -> list[str]:
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


def _demo_md(dm: dict | None) -> list[str]:
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
            *_whole_md(d), "", *_throughput(d.get("throughput", {})), *_demo_md(d.get("demo")), *_big(d.get("big"))]
