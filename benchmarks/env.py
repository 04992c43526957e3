"""What a result was measured on: versions, CPU, threads, memory."""

from __future__ import annotations

import importlib.metadata as md
import os
import platform
import subprocess
import sys


def _version(dist: str):
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             cwd=os.path.dirname(os.path.abspath(__file__)), timeout=10)
        return out.stdout.strip() or None
    except Exception:
        return None


def environment() -> dict:
    try:
        import psutil

        mem_gb = round(psutil.virtual_memory().total / 2**30, 1)
    except ImportError:
        mem_gb = None
    threads = None
    try:
        import numba

        threads = numba.config.NUMBA_NUM_THREADS
    except ImportError:
        pass
    import diversify

    return {
        "diversify_from": os.path.dirname(os.path.dirname(os.path.abspath(diversify.__file__))),
        "diversify_commit": os.environ.get("DIVERSIFY_BENCH_LIB") or f"working tree of {git_commit()}",
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu": cpu_model(),
        "logical_cpus": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "numba_threads": threads,
        "memory_gb": mem_gb,
        "git_commit": git_commit(),
        "versions": {d: _version(d) for d in ("diversify", "numpy", "numba", "scipy", "datasketch", "rensa", "psutil")},
    }
