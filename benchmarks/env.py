"""What a result was measured on: versions, CPU, threads, memory, load."""

from __future__ import annotations

import importlib.metadata as md
import os
import platform
import subprocess
import sys

# Every distribution a suite may measure; the ones not installed are recorded as None.
DISTRIBUTIONS = ("diversify-retrieval", "numpy", "numba", "scipy", "datasketch", "rensa", "simhash", "faiss-cpu",
                 "psutil", "langchain-core", "langchain-community", "dask", "distributed", "pyarrow")
THREAD_VARIABLES = ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def version(dist: str) -> str | None:
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


def loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             cwd=os.path.dirname(os.path.abspath(__file__)), timeout=10)
        return out.stdout.strip() or None
    except Exception:
        return None


def numba_threads() -> int | None:
    try:
        import numba

        return int(numba.config.NUMBA_NUM_THREADS)
    except ImportError:
        return None


def _memory_gb() -> float | None:
    try:
        import psutil

        return round(psutil.virtual_memory().total / 2**30, 1)
    except ImportError:
        return None


def environment(extra_versions: dict | None = None) -> dict:
    """The record every result file carries (keys kept stable: the report reads old files too)."""
    import diversify

    # the version of the library actually imported (a HEAD snapshot may differ from the install)
    versions = {"diversify": getattr(diversify, "__version__", None)}
    versions.update({d: version(d) for d in DISTRIBUTIONS if d != "diversify-retrieval"})
    versions.update(extra_versions or {})
    return {
        "diversify_from": os.path.dirname(os.path.dirname(os.path.abspath(diversify.__file__))),
        "diversify_commit": os.environ.get("DIVERSIFY_BENCH_LIB") or f"working tree of {git_commit()}",
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu": cpu_model(),
        "logical_cpus": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "numba_threads": numba_threads(),
        "thread_env": {v: os.environ.get(v) for v in THREAD_VARIABLES},
        "memory_gb": _memory_gb(),
        "loadavg": loadavg(),
        "git_commit": git_commit(),
        "versions": versions,
    }
