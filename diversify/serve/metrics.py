"""The server's counters, written out in the Prometheus text format (version 0.0.4) by ``GET /metrics``.

Requests by route and status, a latency histogram by route, the hits folded away by
``/v1/diversify``, artifact reloads (and failed ones), and errors by kind. One lock guards the
counters; a request takes it once, after its answer is made.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections import defaultdict

__all__ = ["Metrics", "LATENCY_BUCKETS"]

#: upper bounds (seconds) of the latency histogram's buckets
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class _Histogram:
    __slots__ = ("counts", "total", "n")

    def __init__(self) -> None:
        self.counts = [0] * (len(LATENCY_BUCKETS) + 1)
        self.total = 0.0
        self.n = 0


class Metrics:
    """Counters of one server; :meth:`render` writes them out."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: dict[tuple[str, str, int], int] = defaultdict(int)
        self._latency: dict[str, _Histogram] = {}
        self._errors: dict[str, int] = defaultdict(int)
        self.folded = 0
        self.reloads = 0
        self.reload_failures = 0

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        """One answered request (``route`` is the route's template, never the raw path)."""
        with self._lock:
            self._requests[(route, method, status)] += 1
            h = self._latency.get(route)
            if h is None:
                h = self._latency[route] = _Histogram()
            h.counts[bisect_left(LATENCY_BUCKETS, seconds)] += 1
            h.total += seconds
            h.n += 1
            if status >= 400:
                self._errors["client" if status < 500 else "server"] += 1

    def add_folded(self, n: int) -> None:
        with self._lock:
            self.folded += n

    def reloaded(self, ok: bool) -> None:
        with self._lock:
            if ok:
                self.reloads += 1
            else:
                self.reload_failures += 1
                self._errors["reload"] += 1

    def render(self, generation: int) -> str:
        """The Prometheus text exposition of every counter."""
        with self._lock:
            lines = ["# HELP diversify_requests_total HTTP requests answered, by route, method and status.",
                     "# TYPE diversify_requests_total counter"]
            for (route, method, status), n in sorted(self._requests.items()):
                lines.append(f'diversify_requests_total{{route="{_label(route)}",method="{method}",'
                             f'status="{status}"}} {n}')
            lines += ["# HELP diversify_request_duration_seconds Time from a request's arrival to its answer.",
                      "# TYPE diversify_request_duration_seconds histogram"]
            for route, h in sorted(self._latency.items()):
                r = _label(route)
                running = 0
                for bound, n in zip(LATENCY_BUCKETS, h.counts):
                    running += n
                    lines.append(f'diversify_request_duration_seconds_bucket{{route="{r}",le="{bound}"}} {running}')
                lines.append(f'diversify_request_duration_seconds_bucket{{route="{r}",le="+Inf"}} {h.n}')
                lines.append(f'diversify_request_duration_seconds_sum{{route="{r}"}} {h.total:.6f}')
                lines.append(f'diversify_request_duration_seconds_count{{route="{r}"}} {h.n}')
            lines += ["# HELP diversify_folded_total Hits folded under a shown hit by /v1/diversify.",
                      "# TYPE diversify_folded_total counter", f"diversify_folded_total {self.folded}",
                      "# HELP diversify_reloads_total Artifact reloads after the file was replaced.",
                      "# TYPE diversify_reloads_total counter", f"diversify_reloads_total {self.reloads}",
                      "# HELP diversify_reload_failures_total Replaced artifacts that failed to load (the last "
                      "good one kept serving).",
                      "# TYPE diversify_reload_failures_total counter",
                      f"diversify_reload_failures_total {self.reload_failures}",
                      "# HELP diversify_errors_total Errors by kind: client (4xx), server (5xx), reload.",
                      "# TYPE diversify_errors_total counter"]
            for kind in ("client", "server", "reload"):
                lines.append(f'diversify_errors_total{{kind="{kind}"}} {self._errors.get(kind, 0)}')
            lines += ["# HELP diversify_generation The loaded source's generation (bumps on every reload).",
                      "# TYPE diversify_generation gauge", f"diversify_generation {generation}"]
        return "\n".join(lines) + "\n"
