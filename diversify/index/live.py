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
from typing import Any, Optional

import numpy as np

from ..errors import ConfigError
from ..ids import lookup_id

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
        self.misses = 0  # distinct ids read from the storage
        self._id_kind: Optional[str] = None

    @property
    def id_kind(self):
        return None  # the index's own kind is read live (an empty index has none yet): see lookup

    def _kind(self) -> Optional[str]:
        """The index's id kind (None while it is empty); read until it is known (it never changes)."""
        if self._id_kind is None:
            with self.storage.read() as view:
                self._id_kind = view.state().id_kind
        return self._id_kind

    def lookup(self, ids: Sequence[Any]) -> np.ndarray:
        """Cluster id of each id (-1: unknown), by the online id rule (:func:`diversify.ids.lookup_id`):
        an id the index cannot hold (another kind than its ids, a str with lone surrogates, an int
        outside int64, a bool, a float...) is unknown without a read. One read for the ids not
        cached, each distinct id asked once: O(len(ids))."""
        out = np.full(len(ids), -1, dtype=np.int64)
        now = time.monotonic()
        need: dict[str, list[int]] = {}
        with self._lock:
            kind = self._kind()
            if kind is None:
                return out  # an empty index knows no id
            cache = self._cache
            for j, x in enumerate(ids):
                v = lookup_id(x, kind)
                if v is None:
                    continue  # cannot be an id of the index: unknown
                key = v if type(v) is str else str(v)
                hit = cache.get(key)
                if hit is not None and now - hit[1] <= self.max_age:
                    out[j] = hit[0]
                    cache.move_to_end(key)
                    self.hits += 1
                else:
                    need.setdefault(key, []).append(j)
            if need:
                self.misses += len(need)
                with self.storage.read() as view:
                    rows = view.docs_by_id(list(need), payload=False)
                found: set[str] = set()
                for r in rows:
                    at = need.get(r.id)
                    if at is None:
                        continue
                    found.add(r.id)
                    out[at] = r.cluster
                    if self.cache_size:
                        cache[r.id] = (r.cluster, now)
                        cache.move_to_end(r.id)
                for key in need:
                    if key not in found:
                        cache.pop(key, None)  # deleted: forget it
                while len(cache) > self.cache_size:
                    cache.popitem(last=False)
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
