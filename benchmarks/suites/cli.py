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

from . import Suite

SUITE = Suite(
    name="cli",
    summary="whole-process `diversify build` on JSONL vs rensa and datasketch (wall, CPU-s, RSS), sketch MB/s on "
            "ASCII vs multilingual text vs a numpy memory-bandwidth baseline, cold/warm `diversify demo`",
    results=("cli-n*.json",), render="benchmarks.report.cli:cli_section",
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
    return [sys.executable, "-m", "benchmarks.tools.whole_process", tool, corpus, out]


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
        got = subprocess.run([sys.executable, "-m", "benchmarks.tools.throughput", ascii_prefix, mprefix],
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
