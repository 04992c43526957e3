"""The counters behind :meth:`Diversifier.stats`: the only mutable state a Diversifier shares
between threads, so every update happens under one lock."""

from __future__ import annotations

import threading
from typing import Any, Optional

from .types import Result

__all__ = ["Counters", "STAT_KEYS", "Tally", "describe", "UNKNOWN_WARN_MIN"]

STAT_KEYS = ("queries", "backend_calls", "refetch_rounds", "short", "exhausted", "returned",
             "omitted", "dropped", "fetched", "looked_up", "unknown", "reloads", "load_errors", "lookup_errors",
             "degraded_queries")

#: The "most hits are unknown" warning needs at least this many hits looked up in one artifact generation.
UNKNOWN_WARN_MIN = 100


def describe(exc: BaseException) -> str:
    """``"Type: message"``, at most 500 characters (for logs and ``stats()["last_error"]``)."""
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= 500 else text[:497] + "..."


class Tally:
    """One query's id accounting: hits whose cluster was looked for, those found nowhere, and
    one of the unknown ids (for the warning's diagnosis)."""

    __slots__ = ("looked", "unknown", "sample")

    def __init__(self) -> None:
        self.looked = 0
        self.unknown = 0
        self.sample: Any = None


class Counters:
    """Thread-safe query and failure counters, the last artifact error, and the window behind
    the once-per-generation "most hits are unknown" warning."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(STAT_KEYS, 0)
        self._last_error: Optional[str] = None
        self._window = [-1, 0, 0, False]  # generation, looked up, unknown, warned

    def add(self, key: str, error: Optional[BaseException] = None) -> None:
        """Count one ``key`` event; ``error`` (if given) becomes ``last_error``."""
        with self._lock:
            self._counts[key] += 1
            if error is not None:
                self._last_error = describe(error)

    def record(self, res: Result, fetched: int, degraded: bool, tally: Optional[Tally] = None,
               generation: int = 0) -> Optional[tuple[int, int]]:
        """Count one answered query.

        Returns ``(looked_up, unknown)`` of this generation the first time most of at least
        :data:`UNKNOWN_WARN_MIN` hits looked up in it were unknown (the caller warns), else None.
        """
        hits, _, _, omitted, dropped, _, exhausted, short, calls, rounds, _, _ = res._f  # no property calls
        with self._lock:
            s = self._counts
            s["queries"] += 1
            s["degraded_queries"] += degraded
            s["backend_calls"] += calls
            s["refetch_rounds"] += rounds
            s["short"] += short
            s["exhausted"] += exhausted
            s["returned"] += len(hits)
            s["omitted"] += omitted
            s["dropped"] += dropped
            s["fetched"] += fetched
            if tally is None or not tally.looked:
                return None
            s["looked_up"] += tally.looked
            s["unknown"] += tally.unknown
            w = self._window
            if w[0] != generation:
                w[:] = [generation, 0, 0, False]
            w[1] += tally.looked
            w[2] += tally.unknown
            if w[3] or w[1] < UNKNOWN_WARN_MIN or 2 * w[2] <= w[1]:
                return None
            w[3] = True
            return w[1], w[2]

    def snapshot(self) -> dict[str, Any]:
        """The counters and ``last_error``, copied."""
        with self._lock:
            out: dict[str, Any] = dict(self._counts)
            out["last_error"] = self._last_error
        return out
