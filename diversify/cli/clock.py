"""What a build cost, as `diversify build|add` reports it: wall time, CPU seconds, where they went.

CPU seconds are the process's user + system time, its finished children included (what
``/usr/bin/time`` would print), so a shared machine's other work does not count, and a build on
two busy cores can be compared with one on two idle cores. ``--verbose`` adds the time before the
command ran (interpreter start and imports), the phases (read, build stages, write) and the time
Numba spent compiling kernels or loading them from its cache.
"""

from __future__ import annotations

import os
import time
from typing import Optional

__all__ = ["cpu_seconds", "process_age", "peak_rss_mib", "Clock"]


def cpu_seconds() -> float:
    """User + system CPU seconds of this process and its finished children so far."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return float(sum(os.times()[:4]))  # user, system, children's user and system
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def process_age() -> Optional[float]:
    """Seconds since this process started (Linux: from /proc), or None where that is unknown."""
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        with open("/proc/uptime", "rb") as f:
            uptime = float(f.read().split()[0])
        return max(0.0, uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def peak_rss_mib() -> Optional[float]:
    """This process's peak resident set size in MiB (Linux: VmHWM), or None where unknown."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


class Clock:
    """Wall and CPU time of one command, with named phases (``with clock.phase("read"): ...``)."""

    def __init__(self) -> None:
        self.age_at_start = process_age()
        self.t0 = time.perf_counter()
        self.cpu0 = cpu_seconds()
        self.phases: dict[str, float] = {}
        self.phase_cpu: dict[str, float] = {}

    def phase(self, name: str):
        clock = self

        class _Phase:
            def __enter__(self):
                self.t = time.perf_counter()
                self.cpu = time.process_time()  # every thread of this process

            def __exit__(self, *exc):
                clock.phases[name] = clock.phases.get(name, 0.0) + time.perf_counter() - self.t
                clock.phase_cpu[name] = clock.phase_cpu.get(name, 0.0) + time.process_time() - self.cpu
                return False

        return _Phase()

    def rename(self, old: str, new: str) -> None:
        """Call phase ``old`` ``new`` (its wall and CPU seconds), e.g. a "read" that only opened a file."""
        if old in self.phases:
            self.phases[new] = self.phases.pop(old)
            self.phase_cpu[new] = self.phase_cpu.pop(old)

    def wall(self) -> float:
        return time.perf_counter() - self.t0

    def cost_line(self, n_docs: int) -> str:
        """``N CPU-s (M per 100k docs)``: the process's CPU seconds so far, start-up included."""
        cpu = cpu_seconds()
        per = cpu / max(n_docs, 1) * 100_000
        return f"{cpu:.2f} CPU-s user+sys ({per:.2f} CPU-s per 100k docs)"

    def verbose_lines(self, n_docs: int, timings: dict) -> list[str]:
        """The ``--verbose`` report: process, phases, build stages, kernels."""
        from .._kernels._runtime import compile_clock

        wall, cpu = self.wall(), cpu_seconds()
        start = f"start-up {self.age_at_start:.2f}s (interpreter and imports), " if self.age_at_start is not None else ""
        total = (self.age_at_start or 0.0) + wall
        per = 100_000 / max(n_docs, 1)
        peak = peak_rss_mib()
        lines = [
            f"process          {start}command {wall:.2f}s; whole process {total:.2f}s wall, {cpu:.2f} CPU-s "
            f"user+sys incl. children ({cpu / max(total, 1e-9):.2f} cores busy)"
            + (f"; peak RSS {peak:,.0f} MiB" if peak is not None else ""),
            f"per 100k docs    {total * per:.2f}s wall, {cpu * per:.2f} CPU-s",
            "phases           " + ", ".join(f"{k} {v:.2f}s" for k, v in self.phases.items())
            + " (CPU-s: " + ", ".join(f"{k} {v:.2f}" for k, v in self.phase_cpu.items()) + ")",
        ]
        if timings:
            lines.append("build stages     " + ", ".join(f"{k} {v:.2f}s" for k, v in timings.items()))
        c = compile_clock.snapshot()
        from ..engines import ahead

        helper = ""
        if ahead.last_helper is not None:  # the cold-cache helper ran beside the command (its CPU-s are counted above)
            helper = f"; a helper process compiled the linking kernels alongside ({ahead.last_helper} with the command)"
        lines.append(f"kernels          compiled {c['compiled']} in {c['compile_s']:.2f}s, loaded from the numba cache "
                     f"in {c['load_s']:.2f}s (part of the phases above){helper}")
        return lines
