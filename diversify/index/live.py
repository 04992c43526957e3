"""Live cluster ids for the online wrapper: ``diversify.Diversifier(index, ...)``.

:class:`LiveLookup` answers the ``lookup(ids)`` protocol of :class:`~diversify.Diversifier` from the
index itself, so a document added a moment ago is folded on the next query. A small bounded cache
(least recently used, ``cache_size`` ids) keeps hot ids off the storage.

It reads through its own connection (the Diversifier's threads and the application's use of the
``Index`` do not share one), serialized by a lock. Staleness, exactly: an id the index did not know is never cached, so a new document is seen by
the next query after its ``add`` committed. A cached cluster id is at most ``max_age`` seconds old:
a cluster change made by ``delete`` (members of a deleted representative re-assigned) is seen at
most ``max_age`` seconds later, and a deleted id keeps its old cluster for at most as long. With
``max_age=0`` every query reads the storage.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ConfigError

__all__ = ["LiveLookup"]


class LiveLookup:
    """A ``lookup(ids) -> int64 cluster ids (-1 unknown)`` over a live :class:`~diversify.Index`."""

    def __init__(self, index, *, cache_size: int = 4096, max_age: float = 1.0) -> None:
        if isinstance(cache_size, bool) or not isinstance(cache_size, int) or not 0 <= cache_size <= 10_000_000:
            raise ConfigError(f"`cache_size` must be an int in [0, 10000000] (ids cached); got {cache_size!r}.")
        if isinstance(max_age, bool) or not isinstance(max_age, (int, float)) or not 0 <= float(max_age) <= 3600:
            raise ConfigError(f"`max_age` must be a number of seconds in [0, 3600]; got {max_age!r}.")
        self.index = index
        # its own connection: the Diversifier may look up from its threads while the application
        # uses the Index (one connection serves one thread at a time)
        self.storage = index._open_again()
        self.cache_size = cache_size
        self.max_age = float(max_age)
        self.fingerprint = index.meta.fingerprint
        self._cache: OrderedDict[str, tuple[int, float]] = OrderedDict()
        self._lock = threading.Lock()  # the storage connection serves one thread at a time
        self.hits = 0
        self.misses = 0

    @property
    def id_kind(self):
        return None  # ids are matched as given (str or int), like a mapping

    def lookup(self, ids: Sequence[Any]) -> np.ndarray:
        out = np.full(len(ids), -1, dtype=np.int64)
        now = time.monotonic()
        need: dict[str, list[int]] = {}
        with self._lock:
            for j, x in enumerate(ids):
                if isinstance(x, bool) or not isinstance(x, (str, int, np.integer)):
                    continue  # cannot be an id of the index: unknown
                key = str(int(x)) if not isinstance(x, str) else x
                hit = self._cache.get(key)
                if hit is not None and now - hit[1] <= self.max_age:
                    out[j] = hit[0]
                    self._cache.move_to_end(key)
                    self.hits += 1
                else:
                    need.setdefault(key, []).append(j)
            if need:
                self.misses += len(need)
                with self.storage.read() as view:
                    rows = view.docs_by_id(list(need), payload=False)
                for r in rows:
                    for j in need[r.id]:
                        out[j] = r.cluster
                    if self.cache_size:
                        self._cache[r.id] = (r.cluster, now)
                        self._cache.move_to_end(r.id)
                for key in need:
                    if key not in {r.id for r in rows}:
                        self._cache.pop(key, None)  # deleted: forget it
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        return out

    def members(self, cluster_id: int) -> list:
        """The ids of a cluster (read live), for ``Diversifier.expand``; the cluster id rule is
        :meth:`Index.members`'s."""
        from ..ids import check_cluster_id
        from .records import stored_id

        cid = check_cluster_id(cluster_id, param="cluster_id")
        with self._lock, self.storage.read() as view:
            kind = view.state().id_kind
            rows = view.docs_in_clusters([cid], payload=False)
        rows.sort(key=lambda r: (not r.is_rep, r.seq))
        return [stored_id(r.id, kind, self.index.url) for r in rows]

    def close(self) -> None:
        self.storage.close()
