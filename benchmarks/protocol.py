"""The one measurement protocol every suite uses, in a worker process or in-process.

1. ``load``: read the input (texts, vectors) — not measured; memory is counted beyond it.
2. ``warm``: run the tool once on a small input first (Numba JIT, imports, caches), timed apart.
3. Reset the kernel's peak-RSS counter (VmHWM via ``/proc/self/clear_refs``; an RSS sampler every
   5 ms where that is not allowed), record the load average and CPU times, run, record again.

A record carries ``warmup_s``, ``wall_s``, ``cpu_s``, ``loadavg_before/after``, ``niceness``,
``numba_threads``, ``rss_before_mb``, ``rss_peak_mb``, ``rss_delta_mb`` and ``peak_method`` next to
what the task itself reports (``timings``, ``params``, ...). ``worker.run_job`` adds ``process_s``,
the whole child process's wall time, imports and loading included.
"""

from __future__ import annotations

import gc
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Task:
    """One measured job. ``run`` returns ``{"arrays": {name: ndarray}, **record}``."""

    load: Callable[[dict], Any]
    warm: Callable[[Any, dict], None]
    run: Callable[[Any, dict], dict]


def status_kb(field: str) -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1


def reset_peak() -> bool:
    """Reset VmHWM (peak RSS) to the current RSS; Linux ≥ 4.0. False when not allowed."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
        return True
    except OSError:
        return False


class PeakSampler:
    """Fallback when VmHWM cannot be reset: sample RSS every 5 ms in a thread."""

    def __init__(self):
        self.peak = status_kb("VmRSS")
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, status_kb("VmRSS"))

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, status_kb("VmRSS"))


def raise_priority() -> int:
    """On a shared machine, run every measured tool at the same raised priority (nice -10 when
    allowed), so other people's jobs disturb the timings less; returns the niceness in effect."""
    try:
        return os.nice(-10 - os.nice(0))
    except OSError:
        return os.nice(0)


def _numba_threads() -> int | None:
    from .env import numba_threads

    return numba_threads()


def measured(fn: Callable[[], dict]) -> tuple[dict, dict]:
    """Run ``fn`` once under the protocol's clocks and memory probe: (its result, the record)."""
    gc.collect()
    load_before = os.getloadavg()
    cpu0 = os.times()
    base_kb = status_kb("VmRSS")
    exact_peak = reset_peak() and status_kb("VmHWM") <= base_kb + 1024
    t0 = time.perf_counter()
    if exact_peak:
        out = fn()
        wall = time.perf_counter() - t0
        peak_kb = status_kb("VmHWM")
    else:
        with PeakSampler() as s:
            out = fn()
            wall = time.perf_counter() - t0
        peak_kb = s.peak
    cpu1 = os.times()
    rec = dict(wall_s=wall, cpu_s=(cpu1.user - cpu0.user) + (cpu1.system - cpu0.system),
               loadavg_before=load_before, loadavg_after=os.getloadavg(),
               rss_before_mb=base_kb / 1024, rss_peak_mb=peak_kb / 1024, rss_delta_mb=(peak_kb - base_kb) / 1024,
               peak_method="VmHWM reset via /proc/self/clear_refs" if exact_peak else "RSS sampled every 5 ms")
    return out, rec


def measure(task: Task, args: dict, *, priority: bool = False) -> tuple[dict, dict]:
    """Load, warm up, then measure one run of ``task``: (arrays, record)."""
    niceness = raise_priority() if priority else os.nice(0)
    data = task.load(args)
    t = time.perf_counter()
    task.warm(data, args)
    warm = time.perf_counter() - t
    out, rec = measured(lambda: task.run(data, args))
    arrays = out.pop("arrays", {})
    return arrays, {**out, "warmup_s": warm, **rec, "niceness": niceness, "numba_threads": _numba_threads()}


def timed(fn: Callable[[], Any]) -> tuple[Any, dict]:
    """Wall and CPU seconds and load average around one in-process call (no memory probe)."""
    load0 = os.getloadavg()
    cpu0 = os.times()
    t0 = time.perf_counter()
    out = fn()
    wall = time.perf_counter() - t0
    cpu1 = os.times()
    return out, dict(seconds=wall, cpu_s=(cpu1.user - cpu0.user) + (cpu1.system - cpu0.system),
                     loadavg_before=load0, loadavg_after=os.getloadavg())
