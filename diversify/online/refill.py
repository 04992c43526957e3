"""The refill loop: over-fetch, select, and fetch again until ``k`` survive, the store runs out
or the round budget is spent.

Written once, as a generator, for the sync and async wrappers (:mod:`diversify.online.wrappers`):
it yields ``(ask_k, exclude_ids)`` requests, receives each raw search result, and returns the
:class:`~diversify.online.Result`. Later rounds are appended after earlier ones, so relevance
order is never reshuffled.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Hashable, Iterable
from typing import Any, Optional

import numpy as np

from ..errors import StoreError
from .checks import Options
from .cursor import CursorState, decode_cursor, next_cursor
from .hits import as_hit, with_text
from .selection import select
from .source import ClusterSource, Snapshot
from .types import DocId, Hit, Kept, Result

__all__ = ["refill", "Request"]

#: What the loop asks the search for: ``(k, exclude_ids or None)``.
Request = tuple[int, Optional[list]]


class _Pool:
    """Every distinct hit fetched so far for one query, with its cluster id."""

    def __init__(self, source: ClusterSource, snap: Snapshot, cur: CursorState, want_text: bool) -> None:
        self.source, self.snap, self.want_text = source, snap, want_text
        self.seen: set = set(cur.ids)
        self.order: list[DocId] = list(cur.order)  # ids seen, in order (earlier pages first)
        self.hits: list[Hit] = []
        self.cids: list = []
        self.fetched = 0

    def add(self, raw: Any) -> int:
        """Add the unseen hits of one search result; returns how many the store returned."""
        if raw is None:
            raw = ()
        try:
            got = len(raw)
        except TypeError:
            raise StoreError(f"the search callable must return a sequence of hits; got "
                             f"{type(raw).__name__}. Return a list.") from None
        self.fetched += got
        new = []
        for r in raw:
            h = as_hit(r)
            if h.id in self.seen:
                continue
            if self.want_text and h.text is None:
                h = with_text(h)
            self.seen.add(h.id)
            self.order.append(h.id)
            new.append(h)
        if new:
            self.hits.extend(new)
            self.cids.extend(self.source.cluster_ids(new, self.snap))
        return got


class _MemberExclusion:
    """Unseen members of clusters that are already full (or shown on earlier pages) can only be
    folded: exclude them in the store too, so refetches bring new clusters.

    Needs an artifact that lists its clusters' ``members`` and a store with exclusion filters;
    at most ``budget`` ids are added.
    """

    def __init__(self, members_of: Optional[Callable[[Any], Iterable[Any]]], budget: int, seen: set,
                 source: ClusterSource, snap: Snapshot) -> None:
        self.members_of, self.budget, self.seen = members_of, budget, seen
        self.source, self.snap = source, snap
        self.ids: list = []
        self._done: set = set()

    @property
    def enabled(self) -> bool:
        return self.members_of is not None

    def add(self, clusters: Iterable[Hashable]) -> None:
        if self.members_of is None:
            return
        budget = self.budget - len(self.ids)
        for c in clusters:
            if budget <= 0:
                return
            if c in self._done or isinstance(c, bool) or not isinstance(c, (int, np.integer)):
                continue
            self._done.add(c)
            try:
                members = self.members_of(c)
            except (LookupError, ValueError, TypeError):  # a payload cluster id the map lacks
                continue
            except Exception as exc:
                if self.source.on_error == "raise":
                    raise
                self.source.note_lookup_error(exc, self.snap)
                continue
            for m in members:
                if m not in self.seen:
                    self.ids.append(m)
                    budget -= 1
                    if budget <= 0:
                        return


def _full_clusters(hits: Iterable[Kept], n: int) -> list:
    counts: dict = {}
    for kp in hits:
        if kp.cluster_id is not None:
            counts[kp.cluster_id] = counts.get(kp.cluster_id, 0) + 1
    return [c for c, m in counts.items() if m >= n]


def refill(opts: Options, source: ClusterSource, *, k: int, n: int, groups: bool, cursor: Optional[str],
           supports_exclude: bool) -> Generator[Request, Any, Result]:
    """One query: yields ``(ask_k, exclude_ids)`` requests, receives raw results, returns the Result.

    ``exclude_ids`` is None when the store has no exclusion filter; then each refetch asks for a
    larger k and skips what was seen. The query's counters are recorded in ``source.counters``.
    """
    snap = source.current  # one snapshot for the whole query: no torn read across a reload
    cur = decode_cursor(cursor)
    excluded = source.excluded_clusters(snap, cur)
    pool = _Pool(source, snap, cur, want_text=opts.fold_text_threshold is not None)
    members_of = None
    if supports_exclude and opts.max_exclude_members and snap.cluster_map is not None:
        members_of = getattr(snap.cluster_map, "members", None)
    members = _MemberExclusion(members_of, opts.max_exclude_members, pool.seen, source, snap)
    if excluded:
        members.add(sorted(c for c in excluded if isinstance(c, int)))
    ask = opts.fetch_k if supports_exclude else min(opts.fetch_k + len(pool.order), opts.max_fetch_k)
    calls = rounds = 0
    while True:
        raw = yield (ask, (pool.order + members.ids) if supports_exclude else None)
        calls += 1
        store_done = pool.add(raw) < ask
        res = select(pool.hits, pool.cids, k=k, max_per_cluster=n, unknown=opts.unknown,
                     fold_threshold=opts.fold_threshold, fold_text_threshold=opts.fold_text_threshold,
                     groups=groups, exclude_clusters=excluded)
        if not res.short or store_done or rounds >= opts.max_rounds:
            break
        if not supports_exclude and ask >= opts.max_fetch_k:
            break
        rounds += 1
        ask = min(ask * 2, opts.max_fetch_k)
        if members.enabled:
            members.add(_full_clusters(res.hits, n))
    out = Result(res.hits, res.groups, k, res.omitted, res.dropped, res.considered, res.short and store_done,
                 res.short, calls, rounds, next_cursor(cur, res.hits, snap.fingerprint), snap.generation)
    source.counters.record(out, pool.fetched, snap.degraded)
    return out
