"""A heartbeat task: does the event loop run other work while something is awaited?"""

from __future__ import annotations

import asyncio
import time


class Heartbeat:
    """A task that ticks every ``period`` seconds (0: as often as the loop lets it). ``gaps`` are
    the times between ticks (a blocked loop shows as one long gap); :meth:`counting` counts the
    ticks during each call of a search (zero when the call blocked the loop)."""

    def __init__(self):
        self.ticks = 0
        self.gaps: list[float] = []

    async def beat(self, period: float = 0.0):
        last = time.perf_counter()
        while True:
            await asyncio.sleep(period)
            now = time.perf_counter()
            self.gaps.append(now - last)
            last = now
            self.ticks += 1

    def counting(self, search):
        """``search`` (a store adapter's), recording the ticks during each of its calls."""
        per_call: list[int] = []

        async def counted(query, k, exclude_ids=None):
            before = self.ticks
            out = search(query, k, exclude_ids)
            if asyncio.iscoroutine(out):
                out = await out
            per_call.append(self.ticks - before)
            return out

        return counted, per_call
