"""The counters behind :meth:`Diversifier.stats`: the only mutable state a Diversifier shares
between threads, so every update happens under one lock."""

from __future__ import annotations

import threading
from typing import Any, Optional

from .types import Result

__all__ = ["Counters", "STAT_KEYS", "describe"]

STAT_KEYS = ("queries", "backend_calls", "refetch_rounds", "short", "exhausted", "returned",
             "omitted", "dropped", "fetched", "reloads", "load_errors", "lookup_errors", "degraded_queries")


def describe(exc: BaseException) -> str:
    """``"Type: message"``, at most 500 characters (for logs and ``stats()["last_error"]``)."""
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= 500 else text[:497] + "..."


class Counters:
    """Thread-safe query and failure counters, and the last artifact error."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(STAT_KEYS, 0)
        self._last_error: Optional[str] = None

    def add(self, key: str, error: Optional[BaseException] = None) -> None:
        """Count one ``key`` event; ``error`` (if given) becomes ``last_error``."""
        with self._lock:
            self._counts[key] += 1
            if error is not None:
                self._last_error = describe(error)

    def record(self, res: Result, fetched: int, degraded: bool) -> None:
        """Count one answered query."""
        with self._lock:
            s = self._counts
            s["queries"] += 1
            s["degraded_queries"] += degraded
            s["backend_calls"] += res.backend_calls
            s["refetch_rounds"] += res.rounds
            s["short"] += res.short
            s["exhausted"] += res.exhausted
            s["returned"] += len(res.hits)
            s["omitted"] += res.omitted
            s["dropped"] += res.dropped
            s["fetched"] += fetched

    def snapshot(self) -> dict[str, Any]:
        """The counters and ``last_error``, copied."""
        with self._lock:
            out: dict[str, Any] = dict(self._counts)
            out["last_error"] = self._last_error
        return out
