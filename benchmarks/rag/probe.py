"""Counting and timing the backend under a wrapper: store calls, embedding calls, their CPU.

Every measured call runs under :meth:`Probe.measure`: process CPU time (all threads: Chroma,
LanceDB and Milvus Lite work in native threads or a child process's socket, see the report's
note) and wall time around the whole call, and the same clocks around each *outermost* backend
call (the store method the wrapper calls, and the embedding model). ``own`` = total - backend is
the wrapper's (and framework's) own work. Store calls nested inside another store call (a
framework's MMR calling its own search) are not counted twice.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any

EMBED_KINDS = ("embed", "embed_documents")


class Probe:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.calls = 0  # outermost store calls
        self.embeds = 0  # embedding-model calls (query or documents)
        self.cpu = 0.0
        self.wall = 0.0
        self._depth = 0

    @contextmanager
    def backend(self, kind: str):
        if kind in EMBED_KINDS:
            self.embeds += 1
        elif self._depth == 0:
            self.calls += 1
        if self._depth:
            yield
            return
        self._depth += 1
        c0, w0 = time.process_time(), time.perf_counter()
        try:
            yield
        finally:
            self.cpu += time.process_time() - c0
            self.wall += time.perf_counter() - w0
            self._depth -= 1

    def wrap(self, fn: Callable, kind: str = "store") -> Callable:
        """``fn`` counted and timed as backend work (its signature kept for inspection)."""

        @functools.wraps(fn)
        def counted(*args: Any, **kwargs: Any):
            with self.backend(kind):
                return fn(*args, **kwargs)

        owner = getattr(fn, "__self__", None)
        if owner is not None:  # what a caller reads off a bound method's object (an adapter's flags) stays
            counted.__self__ = owner  # type: ignore[attr-defined]
        return counted

    def patch(self, obj: Any, name: str, kind: str = "store") -> None:
        """Count ``obj.name(...)`` calls: an instance attribute over the bound method (works on
        pydantic models and Haystack components too)."""
        object.__setattr__(obj, name, self.wrap(getattr(obj, name), kind))

    def measure(self, fn: Callable[[], Any]) -> tuple[Any, dict]:
        """Run ``fn`` once: (its result, {cpu_s, wall_s, backend_cpu_s, backend_wall_s, calls, embeds})."""
        self.reset()
        c0, w0 = time.process_time(), time.perf_counter()
        out = fn()
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        return out, {"cpu_s": cpu, "wall_s": wall, "backend_cpu_s": self.cpu, "backend_wall_s": self.wall,
                     "calls": self.calls, "embeds": self.embeds}
