"""`select`: keep at most ``max_per_cluster`` hits per cluster, in rank order.

A pure function: it reads the hits and their cluster ids and returns new immutable objects
(:class:`~diversify.online.Kept`, :class:`~diversify.online.Group`,
:class:`~diversify.online.Result`). It is on the per-query path, so the common case (no
on-the-fly folding) is a single Python loop over the hits with dict look-ups; numpy is
only touched for vectors.

Ties: hits with equal adjacent scores are ordered by id (ints before strings, then by value),
so the result does not depend on the order a store happens to return ties in. The whole input
is scanned, so ``folded`` lists every hit of a kept cluster that is not itself kept (over the
cluster's ``max_per_cluster``, or past the k-th kept hit). Runs in O(len(hits)), plus
O(len(hits) * kept) comparisons in the on-the-fly mode.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from operator import attrgetter
from typing import Any, Optional

import numpy as np

from ..errors import InputError, InputTypeError
from .checks import check_params, check_text_threshold
from .folding import Features, Folder
from .types import Group, Kept, Result

__all__ = ["select", "select_checked", "extend_tie_order", "UNKNOWN"]

_new_kept = tuple.__new__  # builds Kept without the keyword-argument layer (per kept hit)
_get_score = attrgetter("score")

#: Cluster id value that means "not in the artifact" (as returned by ``ClusterMap.lookup``).
UNKNOWN = -1


def _id_key(value: Any) -> tuple:
    # Total order over mixed id types, for deterministic tie-breaking.
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return (0, int(value), "")
    if isinstance(value, str):
        return (1, 0, value)
    return (2, 0, repr(value))


def _tie_order(hits: Sequence[Any]) -> Optional[list]:
    """Rank order with runs of equal adjacent scores sorted by id; None when that is the input order."""
    try:
        scores = list(map(_get_score, hits))
    except AttributeError:
        scores = [getattr(h, "score", None) for h in hits]
    try:
        if len(set(scores)) == len(scores):  # the common case, checked at C speed
            return None
    except TypeError:  # unhashable scores: compare them one by one below
        pass
    order: Optional[list] = None
    n = len(scores)
    starts = [i for i, (a, b) in enumerate(zip(scores, scores[1:])) if a == b and a is not None]
    end = 0
    for i in starts:
        if i < end:  # inside a run already sorted
            continue
        s = scores[i]
        j = i + 2
        while j < n and scores[j] == s:
            j += 1
        end = j
        ids = [getattr(hits[x], "id", x) for x in range(i, j)]
        types = set(map(type, ids))
        if types == {str} or types == {int}:  # one plain type: its own order is the id order
            run = sorted(range(j - i), key=ids.__getitem__)
        else:
            keys = [_id_key(v) for v in ids]
            run = sorted(range(j - i), key=keys.__getitem__)
        if run != list(range(j - i)):
            if order is None:
                order = list(range(n))
            order[i:j] = [i + x for x in run]
    return order


def extend_tie_order(hits: Sequence[Any], previous: Optional[list], known: int) -> Optional[list]:
    """The tie order of ``hits`` given ``previous``, the tie order of its first ``known`` hits
    (a refetch appends hits): only the new part is scanned unless a run of ties crosses over."""
    if known == 0 or known >= len(hits):
        return _tie_order(hits) if known == 0 else previous
    last, nxt = getattr(hits[known - 1], "score", None), getattr(hits[known], "score", None)
    if last is not None and last == nxt:
        return _tie_order(hits)
    tail = _tie_order(hits[known:])
    if tail is None:
        return None if previous is None else previous + list(range(known, len(hits)))
    return (previous if previous is not None else list(range(known))) + [known + x for x in tail]


def _as_cluster_list(cluster_ids: Any, n: int) -> list:
    if cluster_ids is None:
        return [None] * n
    if isinstance(cluster_ids, np.ndarray):
        if cluster_ids.ndim != 1:
            raise InputError(f"`cluster_ids` must be one-dimensional; got shape {cluster_ids.shape}. "
                             "Pass one cluster id per hit.")
        if cluster_ids.dtype.kind not in "iu":
            raise InputTypeError(f"`cluster_ids` array must have an integer dtype; got {cluster_ids.dtype}. "
                                 "Use ClusterMap.lookup(ids) (int64, -1 for unknown) or a list.")
        out = cluster_ids.tolist()
    else:
        out = list(cluster_ids)
    if len(out) != n:
        raise InputError(f"`cluster_ids` must have one entry per hit ({n}); got {len(out)}. "
                         "Pass cluster_ids aligned with hits (None or -1 for unknown).")
    return out


def select(hits: Sequence[Any], cluster_ids: Optional[Iterable[Optional[Hashable]]] = None, *, k: int = 10,
           max_per_cluster: int = 1, unknown: str = "own", fold_threshold: Optional[float] = None,
           vectors: Optional[Any] = None, fold_text_threshold: Optional[float] = None,
           texts: Optional[Sequence[Optional[str]]] = None, groups: bool = False,
           exclude_clusters: Optional[Iterable[Hashable]] = None) -> Result:
    """Keep at most ``max_per_cluster`` hits per cluster, in rank order, up to ``k``.

    Parameters
    ----------
    hits : sequence
        Ranked hits, best first: :class:`Hit` objects or anything with ``.id`` and ``.score``
        attributes. Never modified; the kept ones are returned as-is inside :class:`Kept`.
    cluster_ids : sequence or numpy.ndarray, optional
        One cluster id per hit, e.g. ``ClusterMap.lookup(ids)`` (int64, ``-1`` for unknown) or
        values read from a payload field (any hashable; ``None`` or ``-1`` for unknown).
        ``None`` means every hit is unknown.
    k : int
        How many hits to return (with ``groups=True``: how many groups).
    max_per_cluster : int
        At most this many hits per cluster; higher -> more near-duplicates allowed.
    unknown : {"own", "drop"}
        What to do with a hit whose cluster is unknown (and that was not folded on the fly):
        ``"own"`` makes it its own cluster, ``"drop"`` leaves it out (counted in ``dropped``).
    fold_threshold : float, optional
        On-the-fly mode for unknown hits that carry a vector (``vectors`` or ``Hit.vector``):
        an unknown hit whose cosine similarity with an already kept hit is at least this
        is folded into the most similar one (joins its cluster); higher -> only closer copies
        are folded. ``None`` disables it. Approximate by nature: it only sees the hits of this
        query, not the corpus; rebuild the artifact to catch what it misses.
    vectors : array_like, optional
        ``(len(hits), d)`` float array or a sequence of 1-d vectors / ``None``; overrides
        ``Hit.vector``. Only read when ``fold_threshold`` is set.
    fold_text_threshold : float, optional
        On-the-fly mode by text, for unknown hits with text (``texts`` or ``Hit.text``): when
        the vector test did not fold it, the hit is folded into the kept hit with the highest
        word 3-shingle Jaccard similarity if that is at least this (in (0, 1]); higher -> only
        closer copies are folded. Exact Jaccard over this query's hits, pure Python.
    texts : sequence of str, optional
        One text (or ``None``) per hit; overrides ``Hit.text``. Only read when
        ``fold_text_threshold`` is set.
    groups : bool
        ``False``: a flat top-k (``Result.hits``). ``True``: up to ``k`` groups of up to
        ``max_per_cluster`` members each (``Result.groups``), ordered by their best member.
    exclude_clusters : iterable, optional
        Cluster ids to leave out entirely (used by the pagination cursor).

    Returns
    -------
    Result
        ``hits`` in rank order, each a :class:`Kept` with its ``cluster_id`` and the hits
        ``folded`` into it; ``omitted`` / ``dropped`` / ``considered`` counts; ``short`` when
        fewer than ``k`` were available.

    Notes
    -----
    Ties, folds and cost: see the module docstring (:mod:`diversify.online.selection`).
    """
    k, n, fold_threshold = check_params(k, max_per_cluster, unknown, fold_threshold)
    fold_text_threshold = check_text_threshold(fold_text_threshold)
    hits = _as_hit_sequence(hits)
    cids = _as_cluster_list(cluster_ids, len(hits))
    excluded = frozenset(exclude_clusters) if exclude_clusters else None
    return select_checked(hits, cids, k, n, unknown == "drop", excluded, fold_threshold, fold_text_threshold,
                          vectors, texts, groups)


def select_checked(hits: Sequence[Any], cids: list, k: int, n: int, drop_unknown: bool,
                   excluded: Optional[frozenset], fold_threshold: Optional[float] = None,
                   fold_text_threshold: Optional[float] = None, vectors: Any = None,
                   texts: Optional[Sequence[Optional[str]]] = None, groups: bool = False,
                   order: Any = False) -> Result:
    """:func:`select` on arguments already validated (what the refetch loop calls every round):
    ``cids`` a list aligned with ``hits``, ``excluded`` a frozenset or None, ``order`` the tie
    order when the caller has it (:func:`extend_tie_order`)."""
    if order is False:
        order = _tie_order(hits)
    folder = None
    if fold_threshold is not None or fold_text_threshold is not None:
        folder = _make_folder(hits, fold_threshold, fold_text_threshold, vectors, texts)
    try:
        if folder is None and not groups:
            return _select_flat(hits, cids, order, k, n, drop_unknown, excluded)
        return _select_general(hits, cids, order, k, n, drop_unknown, excluded, folder, groups)
    except TypeError as exc:
        bad = next((c for c in cids if not _hashable(c)), None)
        if bad is None:
            raise
        raise InputTypeError(f"cluster ids must be hashable (int, str...); got {type(bad).__name__} "
                             f"{bad!r}. Store scalar cluster ids in the payload field.") from exc


def _as_hit_sequence(hits: Any) -> Sequence[Any]:
    if isinstance(hits, (list, tuple)):
        return hits
    if isinstance(hits, (str, bytes)):
        raise InputTypeError("`hits` must be a sequence of hits (Hit objects or objects with .id and "
                             ".score); got a string. Pass a list of hits.")
    return hits if hasattr(hits, "__len__") else list(hits)


def _make_folder(hits: Sequence[Any], fold_threshold: Optional[float], fold_text_threshold: Optional[float],
                 vectors: Any, texts: Optional[Sequence[Optional[str]]]) -> Folder:
    size = len(hits)
    if texts is not None and len(texts) != size:
        raise InputError(f"`texts` must have one entry per hit ({size}); got {len(texts)}.")
    if vectors is not None:
        if isinstance(vectors, np.ndarray) and vectors.ndim == 2:
            if vectors.shape[0] != size:
                raise InputError(f"`vectors` must have one row per hit ({size}); got shape {vectors.shape}.")
        elif len(vectors) != size:
            raise InputError(f"`vectors` must have one entry per hit ({size}); got {len(vectors)}.")
    return Folder(fold_threshold, fold_text_threshold, vectors, texts, hits)


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


class _Own:
    """Cluster key of an unknown hit: its own singleton cluster, equal only to itself."""

    __slots__ = ()


class _Pass:
    """What the general loop has kept, folded and grouped so far."""

    __slots__ = ("k", "n", "groups", "counts", "first", "folds", "reported", "kept", "group_keys",
                 "dropped", "full")

    def __init__(self, k: int, n: int, groups: bool) -> None:
        self.k, self.n, self.groups = k, n, groups
        self.counts: dict = {}        # cluster key -> members kept
        self.first: dict = {}         # cluster key -> slot of its best kept member
        self.folds: dict = {}         # cluster key -> list of folded hits
        self.reported: dict = {}      # cluster key -> reported cluster id (None for unknown singletons)
        self.kept: list[tuple[Any, Hashable, int]] = []   # (hit, key, rank)
        self.group_keys: list[Hashable] = []              # grouped output: keys by first appearance
        self.dropped = 0
        self.full = False             # flat output: k kept, only folds are still recorded

    def offer(self, hit: Any, key: Hashable, cluster_id: Any, rank: int) -> bool:
        """Keep ``hit`` in cluster ``key`` if there is room, else fold it; True when kept."""
        cnt = self.counts.get(key, 0)
        if cnt >= self.n or (self.full and cnt):
            self.folds.setdefault(key, []).append(hit)
            return False
        if self.groups:
            if cnt == 0:
                if len(self.group_keys) >= self.k:
                    return False
                self.group_keys.append(key)
        elif self.full:
            return False
        self.counts[key] = cnt + 1
        if cnt == 0:
            self.first[key] = len(self.kept)
            self.reported.setdefault(key, cluster_id)
        self.kept.append((hit, key, rank))
        if not self.groups and len(self.kept) >= self.k:
            self.full = True
        return True

    def result(self, size: int) -> Result:
        omitted = 0
        out = []
        for slot, (hit, key, rank) in enumerate(self.kept):
            f: tuple = ()
            if self.first[key] == slot:
                lst = self.folds.get(key)
                if lst:
                    f = tuple(lst)
                    omitted += len(f)
            out.append(_new_kept(Kept, (hit, self.reported[key], rank, f)))
        if not self.groups:
            return Result(tuple(out), None, self.k, omitted, self.dropped, size, False, len(out) < self.k)
        members: dict = {key: [] for key in self.group_keys}
        for kp, (_, key, _) in zip(out, self.kept):
            members[key].append(kp)
        group_out = tuple(Group(self.reported[key], tuple(members[key]), tuple(self.folds.get(key, ())))
                          for key in self.group_keys)
        flat = tuple(kp for g in group_out for kp in g.hits)
        return Result(flat, group_out, self.k, omitted, self.dropped, size, False, len(group_out) < self.k)


def _select_general(hits: Sequence[Any], cids: list, order: Optional[list], k: int, n: int, drop_unknown: bool,
                    excluded: Optional[frozenset], folder: Optional[Folder], groups: bool) -> Result:
    """Every option (grouped output, on-the-fly folding): one loop over all hits."""
    acc = _Pass(k, n, groups)
    for rank in range(len(hits)):
        i = rank if order is None else order[rank]
        c = cids[i]
        feats: Optional[Features] = None
        key: Optional[Hashable]
        if c is None or c == -1:
            key = None
            if folder is not None:
                feats = folder.features(i)
                key = folder.match(feats)
            if key is None:
                if drop_unknown:
                    acc.dropped += 1
                    continue
                key = _Own()
                acc.reported[key] = None
        elif excluded is not None and c in excluded:
            acc.dropped += 1
            continue
        else:
            key = c
        if acc.offer(hits[i], key, c, rank) and folder is not None:
            folder.add(folder.features(i) if feats is None else feats, key)
    return acc.result(len(hits))


def _select_flat(hits: Sequence[Any], cids: list, order: Optional[list], k: int, n: int, drop_unknown: bool,
                 excluded: Optional[frozenset]) -> Result:
    """The per-query common case (flat output, no on-the-fly folding).

    A Python loop until k hits are kept, then one comprehension over the rest to collect the
    folds (hits of kept clusters). Same semantics as the general loop in :func:`select`; the
    property tests compare the two.
    """
    if order is not None:
        hits = [hits[i] for i in order]
        cids = [cids[i] for i in order]
    counts: dict = {}     # cluster id -> members kept
    first: dict = {}      # cluster id -> slot of its best kept member
    folds: dict = {}      # cluster id -> folded hits
    kept: list[tuple[Any, Any, int]] = []   # (hit, cluster id or None, rank)
    append = kept.append
    dropped = 0
    size = len(cids)
    stop = size
    for rank, c in enumerate(cids):
        if c is None or c == -1:
            if drop_unknown:
                dropped += 1
                continue
            append((hits[rank], None, rank))
        elif excluded is not None and c in excluded:
            dropped += 1
            continue
        else:
            cnt = counts.get(c, 0)
            if cnt >= n:
                lst = folds.get(c)
                if lst is None:
                    folds[c] = [hits[rank]]
                else:
                    lst.append(hits[rank])
                continue
            counts[c] = cnt + 1
            if not cnt:
                first[c] = len(kept)
            append((hits[rank], c, rank))
        if len(kept) >= k:
            stop = rank + 1
            break
    if stop < size:
        dropped += _fold_rest(hits, cids, stop, counts, folds, drop_unknown, excluded)
    if folds:
        at = {first[c]: tuple(lst) for c, lst in folds.items()}  # folds sit on the best kept member
        get = at.get
        out = [_new_kept(Kept, (hit, c, rank, get(slot, ()))) for slot, (hit, c, rank) in enumerate(kept)]
        omitted = sum(map(len, at.values()))
    else:
        out = [_new_kept(Kept, (hit, c, rank, ())) for hit, c, rank in kept]
        omitted = 0
    return Result(tuple(out), None, k, omitted, dropped, size, False, len(out) < k)


def _fold_rest(hits: Sequence[Any], cids: list, stop: int, counts: dict, folds: dict, drop_unknown: bool,
               excluded: Optional[frozenset]) -> int:
    """After the k-th kept hit: fold the rest of each kept cluster; returns how many more are dropped."""
    if counts:
        for i in [i for i in range(stop, len(cids)) if cids[i] in counts]:
            c = cids[i]
            lst = folds.get(c)
            if lst is None:
                folds[c] = [hits[i]]
            else:
                lst.append(hits[i])
    if not (drop_unknown or excluded is not None):
        return 0
    return sum(1 for c in cids[stop:] if (drop_unknown and (c is None or c == -1))
               or (excluded is not None and c in excluded))
