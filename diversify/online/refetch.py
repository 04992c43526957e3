"""The refetch loop: over-fetch, select, and fetch again until ``k`` survive, the store runs out
or the round budget is spent.

Written once, as a generator, for the sync and async wrappers (:mod:`diversify.online.wrappers`):
it yields :data:`SearchRequest` tuples, receives each raw search result, and returns the
:class:`~diversify.online.Result`. Later rounds are appended after earlier ones, so relevance
order is never reshuffled.

What the store is asked (the search callable's side of the contract):

* **without exclusion filters** ``search(query, k)``: the ranking is asked for from the top, for
  ``offset + fetch_k`` hits, then ``offset + 2 * fetch_k``... up to ``offset + max_fetch_k``,
  where ``offset`` is the cursor's (0 on page 1; at most ``MAX_CURSOR_PAGES * max_fetch_k``).
  The first ``offset`` hits of each answer (used up by earlier pages) are not looked at again;
  every other hit is checked against what earlier pages showed, so a store that reorders
  between calls can repeat nothing.
* **with exclusion filters** ``search(query, k, exclude_ids)``: the first call excludes the
  cursor's anchor ids and the members of the clusters earlier pages showed; each refetch also
  excludes every id seen so far and the members of clusters that are already full. Members
  are listed only for clusters whose unseen members fit in ``max_exclude_members`` (the
  artifact's cluster sizes are read first), so the work never grows with a cluster's size; a
  bigger cluster is left to the larger k of the next round.
* **with cluster exclusion** (the callable, or its adapter, has ``supports_exclude_clusters =
  True``, and the Diversifier reads ``cluster_field``): those clusters are excluded by value
  instead, ``search(query, k, exclude_ids, exclude_clusters=[...], cluster_field="cluster_id")``,
  with no member list at all.

Per query, the work is O(hits fetched + ids the cursor carries + ``max_exclude_members``): hits
a store returns past the ``k`` it was asked for are cut before anything is looked up, and a
cursor carries at most :func:`~diversify.online.cursor.cursor_id_limit` ids for the request's k.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Hashable, Iterable
from itertools import islice
from typing import Any, Optional

import numpy as np

from ..errors import StoreError
from .checks import Options
from .cursor import MAX_CURSOR_PAGES, CursorState, decode_cursor, encode_cursor
from .hits import as_hit, with_text
from .selection import extend_tie_order, select_checked
from .source import MEMBER_CACHE_CLUSTERS, ClusterSource, Snapshot
from .stats import Tally
from .types import Deferred, DocId, Hit, Kept, Result, calls_of

__all__ = ["refetch", "SearchRequest", "page_end", "next_cursor"]

#: What the loop asks the search for: ``(k, exclude_ids or None, exclude_clusters or None)``.
SearchRequest = tuple[int, Optional[list], Optional[list]]


class _Pool:
    """Every distinct hit fetched so far for one query (anchors of earlier pages left out), with
    its cluster id and, for a store without exclusion, its position in the store's ranking."""

    __slots__ = ("source", "snap", "want_text", "shown", "seen", "order", "hits", "cids", "pos", "fetched",
                 "tally", "skip")

    def __init__(self, source: ClusterSource, snap: Snapshot, shown: frozenset, want_text: bool,
                 positions: bool, skip: int = 0) -> None:
        self.source, self.snap, self.want_text, self.shown = source, snap, want_text, shown
        #: the top of the ranking that earlier pages used up (the cursor's offset, a store without
        #: exclusion): never looked at again, so a page costs its own hits, not its depth
        self.skip = skip
        self.seen: set = set()
        self.order: list[DocId] = []  # ids seen by this query, in order (for store-side exclusion)
        self.hits: list[Hit] = []
        self.cids: list = []
        self.pos: Optional[list[int]] = [] if positions else None
        self.fetched = 0
        self.tally = Tally()

    def add(self, raw: Any, ask: int) -> int:
        """Add the unseen hits of one search result; returns how many of them were used: the
        store's answer, cut to the ``ask`` it was asked for before anything is looked up."""
        if raw is None:
            raw = ()
        try:
            got = len(raw)
        except TypeError:
            raise StoreError(f"the search callable must return a sequence of hits; got "
                             f"{type(raw).__name__}. Return a list.") from None
        if got > ask:  # a store that answers more than asked: the work stays that of the request
            got = ask
        skip = self.skip
        if skip or got < len(raw):
            raw = raw[skip:got] if isinstance(raw, (list, tuple)) else list(islice(raw, skip, got))
        self.fetched += got
        if not self.shown and not self.want_text and self._add_fresh(raw, skip):
            return got
        new = []
        seen, order, shown, pos = self.seen, self.order, self.shown, self.pos
        want_text = self.want_text
        for j, r in enumerate(raw):
            h = r if type(r) is Hit else as_hit(r)
            hid = h.id
            try:
                if hid in seen:
                    continue
            except TypeError:
                raise StoreError(f"the search returned a hit whose id is unhashable ({type(hid).__name__} "
                                 f"{hid!r:.60}). Return str or int ids.") from None
            if hid is None:
                raise StoreError(f"the search returned a hit without an id ({type(r).__name__} at position "
                                 f"{j + self.skip}). "
                                 "Return Hit objects, (id, score) tuples or mappings with an 'id'.")
            seen.add(hid)
            order.append(hid)
            if shown and hid in shown:
                continue
            if want_text and h.text is None:
                h = with_text(h)
            new.append(h)
            if pos is not None:
                pos.append(j + skip)
        if new:
            self.hits.extend(new)
            self.cids.extend(self.source.cluster_ids(new, self.snap, self.tally, -1))
        return got

    def _add_fresh(self, raw: Any, skip: int) -> bool:
        """The common case without a Python loop per hit: every item a :class:`Hit`, ids distinct,
        none seen before (the first call; a refetch that excluded what was seen). False (nothing
        added) otherwise."""
        if not isinstance(raw, (list, tuple)) or set(map(type, raw)) != {Hit}:
            return False
        ids = [h.id for h in raw]
        try:
            fresh = set(ids)
        except TypeError:  # an unhashable id: the loop reports it
            return False
        if len(fresh) != len(ids) or None in fresh or not self.seen.isdisjoint(fresh):
            return False
        self.seen |= fresh
        self.order.extend(ids)
        if self.pos is not None:
            self.pos.extend(range(skip, skip + len(ids)))
        self.hits.extend(raw)
        self.cids.extend(self.source.cluster_ids(raw, self.snap, self.tally, -1))
        return True


class _MemberExclusion:
    """Unseen members of clusters that are already full (or shown on earlier pages) can only be
    folded: exclude them in the store too, so refetches bring new clusters.

    Needs an artifact that lists its clusters' ``members`` and a store with exclusion filters;
    at most ``budget`` ids are added, and a cluster is only listed when its size (read from
    ``member_indices``, without listing it) leaves its unseen members a chance to fit.
    """

    def __init__(self, cluster_map: Any, budget: int, seen: set, source: ClusterSource, snap: Snapshot) -> None:
        self.members_of: Optional[Callable[[Any], Iterable[Any]]] = getattr(cluster_map, "members", None)
        self.size_of = getattr(cluster_map, "member_indices", None)
        self.budget, self.seen, self.source, self.snap = budget, seen, source, snap
        self.ids: list = []
        self._done: set = set()

    @property
    def enabled(self) -> bool:
        return self.members_of is not None

    def add(self, clusters: Iterable[tuple[Hashable, int]]) -> None:
        """Exclude the unseen members of each ``(cluster, members fetched)``, the clusters with the
        most unseen members first (sizes read from the artifact without listing any member)."""
        if self.members_of is None:
            return
        todo = []
        for c, fetched in clusters:
            if c in self._done or isinstance(c, bool) or not isinstance(c, (int, np.integer)):
                continue
            self._done.add(c)
            size = self._size(c)
            if size is None or size > fetched:  # unknown size, or members left to exclude
                todo.append((-(size or 0) + fetched, c))
        todo.sort(key=lambda t: t[0])
        budget = self.budget - len(self.ids)
        for _, c in todo:
            if budget <= 0:
                return
            members = self._members(c, budget)
            if members is None:
                continue
            if len(members) <= budget:  # all of them fit: no per-member work in Python
                self.ids.extend(members)
                budget -= len(members)
                continue
            for m in members:
                if m not in self.seen:
                    self.ids.append(m)
                    budget -= 1
                    if budget <= 0:
                        return

    def _size(self, c: Any) -> Optional[int]:
        listed = self.snap.members.get(c)
        if listed is not None:  # a hot cluster listed before: no look-up in the artifact
            return len(listed)
        if self.size_of is None:
            return None
        try:
            return len(self.size_of(c))
        except Exception:  # a payload cluster id the map lacks, or a damaged artifact: _members decides
            return None

    def _members(self, c: Any, budget: int) -> Optional[tuple]:
        """The member ids of cluster ``c`` (from the snapshot's cache when it was listed before), or
        None when it is too big for ``budget`` or unknown to the map."""
        cache = self.snap.members
        members = cache.get(c)
        if members is not None:
            return members if len(members) <= budget + len(self.seen) else None
        try:
            if self.size_of is not None and len(self.size_of(c)) > budget + len(self.seen):
                return None  # more unseen members than the budget: the next round's larger k handles it
            members = tuple(self.members_of(c))  # type: ignore[misc]
        except (LookupError, ValueError, TypeError):  # a payload cluster id the map lacks
            return None
        except Exception as exc:
            if self.source.on_error == "raise":
                raise
            self.source.note_lookup_error(exc, self.snap)
            return None
        if self.size_of is not None and len(members) >= 32:  # bounded (size checked) and worth keeping
            if len(cache) >= MEMBER_CACHE_CLUSTERS:
                cache.clear()
            cache[c] = members
        return members


def _full_clusters(hits: Iterable[Kept], n: int) -> list[tuple[Hashable, int]]:
    """``(cluster, members fetched)`` of the clusters that are full (``n`` kept)."""
    counts: dict = {}
    fetched: dict = {}
    for kp in hits:
        c = kp[1]
        if c is not None:
            counts[c] = counts.get(c, 0) + 1
            fetched[c] = fetched.get(c, 0) + 1 + len(kp[3])
    return [(c, fetched[c]) for c, m in counts.items() if m >= n]


def _first_remaining(hits: list, cids: list, res: Result, excluded: frozenset, drop_unknown: bool,
                     folding: bool) -> Optional[int]:
    """Index of the first hit that this page neither showed, folded nor dropped (the next page
    starts there), or None when every hit was used."""
    kept_clusters = set()
    own = set()  # identities of hits without a cluster that were shown (or folded on the fly)
    for kp in res.hits:
        c = kp[1]
        if c is None:
            own.add(id(kp[0]))
        else:
            kept_clusters.add(c)
        if folding:
            own.update(map(id, kp[3]))
    for i, c in enumerate(cids):
        if c is None or c == -1:
            if drop_unknown or id(hits[i]) in own:
                continue
            return i
        if c in kept_clusters or (excluded and c in excluded):
            continue
        return i
    return None


def next_cursor(cur: CursorState, carried: frozenset, res: Result, offset: int, cluster_field: Optional[str],
                unknown_folds: Iterable[DocId] = ()) -> str:
    """The token for the page after ``res``: the earlier anchors, one id per newly shown cluster
    (its cluster's value when it came from the payload), every shown hit without a cluster and
    ``unknown_folds`` (hits without a cluster folded on the fly)."""
    anchors = list(cur.anchors)
    clusters = set(carried)
    new_clusters: set = set()
    for kp in res.hits:
        c = kp[1]
        hit = kp[0]
        if c is None:
            anchors.append(hit.id)
            continue
        if cluster_field is not None:
            p = getattr(hit, "payload", None)
            if p is not None and p.get(cluster_field) == c:
                clusters.add(c)
                continue
        if c not in new_clusters:
            new_clusters.add(c)
            anchors.append(hit.id)
    anchors.extend(unknown_folds)
    return encode_cursor(anchors, clusters, offset)


def page_end(opts: Options, cur: CursorState, carried: frozenset, hits: list, cids: list, res: Result,
             excluded: frozenset, store_done: bool, positions: Optional[list], last_got: int) -> tuple[bool, Deferred]:
    """``(exhausted, cursor)`` of a page: exhausted when the store gave everything it had and
    every hit was used (a next page would be empty); the cursor is encoded when first read."""
    folding = opts.fold_threshold is not None or opts.fold_text_threshold is not None
    first = _first_remaining(hits, cids, res, excluded, opts.unknown == "drop", folding)
    if positions is not None:  # a store without exclusion: the position in its ranking
        offset = positions[first] if first is not None else last_got
    else:  # with exclusion: hits used but not anchored, which the next page's first call may meet again
        offset = max(0, (len(hits) if first is None else first) - len(res.hits))
    unknown_folds: list = []
    if folding and res.omitted:
        unknown_ids = {id(h) for h, c in zip(hits, cids) if c is None or c == -1}
        # at most k per page (cursor_id_limit): further ones may show on a later page
        unknown_folds = [f.id for kp in res.hits for f in kp[3] if id(f) in unknown_ids][:max(res.k, 1)]
    field = opts.cluster_field
    return store_done and first is None, Deferred(lambda: next_cursor(cur, carried, res, offset, field, unknown_folds))


def refetch(opts: Options, source: ClusterSource, *, k: int, n: int, groups: bool, cursor: Optional[str],
           supports_exclude: bool, exclude_clusters: bool = False) -> Generator[SearchRequest, Any, Result]:
    """One query: yields :data:`SearchRequest` tuples, receives raw results, returns the Result.

    ``exclude_ids`` is None when the store has no exclusion filter; then each refetch asks for a
    larger k. ``exclude_clusters`` (a list, else None) is only sent when the store supports it
    and cluster ids come from the payload field. The query's counters are recorded in
    ``source.counters``.
    """
    snap = source.current  # one snapshot for the whole query: no torn read across a reload
    cur = decode_cursor(cursor, k)
    shown_ids, excluded, carried = source.shown_before(snap, cur)
    # the offset is a hint: no deeper than the pages a cursor stands for, each of which went at
    # most max_fetch_k down the ranking
    base, new = min(cur.offset, MAX_CURSOR_PAGES * opts.max_fetch_k), opts.fetch_k
    pool = _Pool(source, snap, shown_ids, opts.fold_text_threshold is not None, positions=not supports_exclude,
                 skip=0 if supports_exclude else base)
    by_cluster = supports_exclude and exclude_clusters and opts.cluster_field is not None
    store_clusters: Optional[list] = sorted(excluded, key=repr) if by_cluster else None
    members = _MemberExclusion(snap.cluster_map if supports_exclude and not by_cluster and opts.max_exclude_members
                               else None, opts.max_exclude_members, pool.seen, source, snap)
    if excluded and members.enabled:
        members.add((c, 0) for c in sorted(c for c in excluded if isinstance(c, int)))
    anchors = list(cur.anchors)
    drop = opts.unknown == "drop"
    ask = base + new
    calls = rounds = 0
    order: Optional[list] = None
    while True:
        if supports_exclude:
            raw = yield (ask, anchors + pool.order + members.ids,
                         None if store_clusters is None else list(store_clusters))
        else:
            raw = yield (ask, None, None)
        calls += calls_of(raw)  # an adapter that asked its store twice says so
        known = len(pool.hits)
        got = pool.add(raw, ask)
        store_done = got < ask
        order = extend_tie_order(pool.hits, order, known)
        res = select_checked(pool.hits, pool.cids, k, n, drop, excluded or None, opts.fold_threshold,
                             opts.fold_text_threshold, groups=groups, order=order)
        if not res.short or store_done or rounds >= opts.max_rounds:
            break
        if not supports_exclude and new >= opts.max_fetch_k:
            break
        rounds += 1
        new = min(new * 2, opts.max_fetch_k)
        if supports_exclude:
            ask = new  # everything seen is excluded: only new hits come back
            full = _full_clusters(res.hits, n)
            if store_clusters is not None:
                store_clusters.extend(c for c, _ in full if c not in excluded and c not in store_clusters)
            elif members.enabled:
                members.add(full)
        else:
            ask = base + new
    exhausted, token = page_end(opts, cur, carried, pool.hits, pool.cids, res, excluded, store_done, pool.pos, got)
    out = Result(res.hits, res.groups, k, res.omitted, res.dropped, res.considered, exhausted, res.short, calls,
                 rounds, token, snap.generation)
    source.record(out, pool.fetched, snap, pool.tally)
    return out
