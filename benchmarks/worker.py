"""Measured jobs in a fresh process: ``python -m benchmarks.worker <job.json>``.

A job names a :class:`benchmarks.protocol.Task` as ``"module:attribute"`` and its arguments; the
child runs it under :func:`benchmarks.protocol.measure` and writes ``<out>.json`` (the record) and
``<out>.npz`` (the arrays, e.g. cluster labels). The parent side is :func:`run_job`.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from .paths import CACHE, ROOT, key, log


def resolve(ref: str):
    """``"package.module:attribute"`` → the object."""
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


def child_env(threads: int | None = None, extra: dict | None = None) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if threads:
        env["NUMBA_NUM_THREADS"] = str(threads)
    env.update(extra or {})
    return env


def run_job(task: str, args: dict, *, tag: str = "job", threads: int | None = None, priority: bool = True,
            timeout: float = 3600, reuse: bool = False, env: dict | None = None) -> tuple[dict, dict] | None:
    """Run ``task`` on ``args`` in a child process; (record, arrays), or None when it timed out.

    ``reuse=True`` returns an earlier result of the same job when there is one (for truth, which
    depends on the input only). Keys are SHA-256 digests of the job, stable across processes."""
    job = dict(task=task, args=args, threads=threads, priority=priority)
    k = key(job)
    out = CACHE / "runs" / f"{tag}-{k}"
    out.parent.mkdir(parents=True, exist_ok=True)
    if not (reuse and Path(str(out) + ".json").exists()):
        path = Path(str(out) + ".job.json")
        path.write_text(json.dumps(dict(job, out=str(out))), encoding="utf-8")
        t0 = time.perf_counter()
        try:
            # cwd stays the current one: under a HEAD snapshot it is what puts that `diversify` first.
            subprocess.run([sys.executable, "-m", "benchmarks.worker", str(path)], check=True, cwd=os.getcwd(),
                           env=child_env(threads, env), timeout=timeout)
        except subprocess.TimeoutExpired:
            log(f"  {tag}: timed out after {timeout:.0f}s")
            return None
        rec = json.loads(Path(str(out) + ".json").read_text(encoding="utf-8"))
        rec["process_s"] = time.perf_counter() - t0
        Path(str(out) + ".json").write_text(json.dumps(rec, indent=1, default=float), encoding="utf-8")
    rec = json.loads(Path(str(out) + ".json").read_text(encoding="utf-8"))
    with np.load(str(out) + ".npz") as z:
        arrays = {name: z[name] for name in z.files}
    return rec, arrays


def main(argv=None) -> int:
    from .protocol import measure

    argv = sys.argv[1:] if argv is None else argv
    job = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    arrays, rec = measure(resolve(job["task"]), job["args"], priority=job.get("priority", False))
    np.savez(job["out"] + ".npz", **arrays)
    Path(job["out"] + ".json").write_text(json.dumps(rec, indent=1, default=float), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
