"""`select`: keep at most ``max_per_cluster`` hits per cluster, in rank order.

A pure function: it reads the hits and their cluster ids and returns new immutable objects
(:class:`~diversify.online.Kept`, :class:`~diversify.online.Group`,
:class:`~diversify.online.Result`). It is on the per-query path, so the common case (no
on-the-fly folding) is a single Python loop over the hits with dict look-ups; numpy is
only touched for vectors.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from operator import attrgetter
from typing import Any, Optional

import numpy as np

from ..errors import ConfigError, InputError, InputTypeError
from ._textsim import jaccard, shingle_set
from ._types import Group, Kept, Result

__all__ = ["select", "UNKNOWN"]

_new_tuple = tuple.__new__  # builds Kept / Result without the keyword-argument layer
_get_score = attrgetter("score")

#: Cluster id value that means "not in the artifact" (as returned by ``ClusterMap.lookup``).
UNKNOWN = -1

_UNKNOWN_POLICIES = ("own", "drop")


def _check_int(name: str, value: Any, *, minimum: int, hint: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ConfigError(f"`{name}` must be an int >= {minimum}; got {value!r} "
                          f"({type(value).__name__}). {hint}")
    if value < minimum:
        raise ConfigError(f"`{name}` must be >= {minimum}; got {name}={value!r}. {hint}")
    return int(value)


def check_params(k, max_per_cluster, unknown, fold_threshold):
    """Validate the knobs shared by :func:`select` and :class:`Diversifier`."""
    k = _check_int("k", k, minimum=1, hint="Ask for at least one result, e.g. k=10.")
    n = _check_int("max_per_cluster", max_per_cluster, minimum=1,
                   hint="Use 1 to keep one hit per cluster, more to allow that many near-duplicates.")
    if unknown not in _UNKNOWN_POLICIES:
        raise ConfigError(f"`unknown` must be one of {_UNKNOWN_POLICIES}; got unknown={unknown!r}. "
                          "Use 'own' (an unknown id is its own cluster) or 'drop' (leave it out).")
    if fold_threshold is not None:
        if isinstance(fold_threshold, bool) or not isinstance(fold_threshold, (int, float, np.floating)) \
                or not (-1.0 < float(fold_threshold) <= 1.0):
            raise ConfigError("`fold_threshold` must be a cosine similarity in (-1, 1] or None; "
                              f"got fold_threshold={fold_threshold!r}. Use e.g. 0.95 "
                              "(higher -> only closer copies are folded) or None to disable folding.")
        fold_threshold = float(fold_threshold)
    return k, n, fold_threshold


def check_text_threshold(value):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)) \
            or not (0.0 < float(value) <= 1.0):
        raise ConfigError("`fold_text_threshold` must be a Jaccard similarity in (0, 1] or None; "
                          f"got fold_text_threshold={value!r}. Use e.g. 0.7 (higher -> only closer "
                          "copies are folded) or None to disable text folding.")
    return float(value)


def _id_key(value):
    # Total order over mixed id types, for deterministic tie-breaking.
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return (0, int(value), "")
    if isinstance(value, str):
        return (1, 0, value)
    return (2, 0, repr(value))


def _tie_order(hits: Sequence[Any]) -> Optional[list]:
    """Rank order with runs of equal adjacent scores sorted by id; None when there is no tie."""
    try:
        if len(set(map(_get_score, hits))) == len(hits):  # the common case, checked at C speed
            return None
    except AttributeError:
        pass
    except TypeError:  # unhashable scores: compare them one by one below
        pass
    scores = [getattr(h, "score", None) for h in hits]
    prev = None
    ties = False
    for s in scores:
        if s is not None and s == prev:
            ties = True
            break
        prev = s
    if not ties:
        return None
    order = []
    n = len(hits)
    i = 0
    while i < n:
        j = i + 1
        s = scores[i]
        if s is not None:
            while j < n and scores[j] == s:
                j += 1
        if j - i > 1:
            order.extend(sorted(range(i, j), key=lambda x: _id_key(getattr(hits[x], "id", x))))
        else:
            order.append(i)
        i = j
    return order


def _as_cluster_list(cluster_ids, n: int) -> list:
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


class _Folder:
    """On-the-fly folding: compares an unknown hit with the kept hits.

    First by cosine of unit vectors (``fold_threshold``) when both carry a vector, then by
    word-shingle Jaccard (``fold_text_threshold``) when both carry text.
    """

    __slots__ = ("threshold", "text_threshold", "vectors", "texts", "hits", "mat", "owners", "m",
                 "dim", "shingles", "text_owners")

    def __init__(self, threshold, text_threshold, vectors, texts, hits):
        self.threshold = threshold
        self.text_threshold = text_threshold
        self.vectors = vectors
        self.texts = texts
        self.hits = hits
        self.mat = None
        self.owners: list = []
        self.m = 0
        self.dim = None
        self.shingles: list = []
        self.text_owners: list = []

    def features(self, i: int):
        return (self._unit(i) if self.threshold is not None else None,
                self._shingles(i) if self.text_threshold is not None else None)

    def _shingles(self, i: int):
        t = self.texts[i] if self.texts is not None else getattr(self.hits[i], "text", None)
        return shingle_set(t)

    def _unit(self, i: int):
        v = self.vectors[i] if self.vectors is not None else getattr(self.hits[i], "vector", None)
        if v is None:
            return None
        v = np.asarray(v, dtype=np.float64)
        if v.ndim != 1:
            raise InputError(f"the vector of hit {i} must be one-dimensional; got shape {v.shape}.")
        if self.dim is None:
            self.dim = v.shape[0]
        elif v.shape[0] != self.dim:
            raise InputError(f"all hit vectors must have the same dimension; hit {i} has {v.shape[0]}, "
                             f"earlier ones {self.dim}. Pass vectors from one embedding model.")
        norm = math.sqrt(float(v @ v))
        if not math.isfinite(norm) or norm == 0.0:
            return None  # NaN / zero vectors cannot be compared: never folded, never fold others
        return v / norm

    def add(self, feats, owner) -> None:
        unit, sh = feats
        if unit is not None:
            if self.mat is None:
                self.mat = np.empty((max(len(self.hits), 1), unit.shape[0]), dtype=np.float64)
            self.mat[self.m] = unit
            self.owners.append(owner)
            self.m += 1
        if sh is not None:
            self.shingles.append(sh)
            self.text_owners.append(owner)

    def match(self, feats):
        unit, sh = feats
        if unit is not None and self.m:
            sims = self.mat[: self.m] @ unit
            j = int(np.argmax(sims))  # most similar kept hit; first one on ties
            if sims[j] >= self.threshold:
                return self.owners[j]
        if sh is not None and self.shingles:
            best, owner = -1.0, None
            for other, o in zip(self.shingles, self.text_owners):
                sim = jaccard(sh, other)
                if sim > best:
                    best, owner = sim, o
            if best >= self.text_threshold:
                return owner
        return None


def select(
    hits: Sequence[Any],
    cluster_ids: Optional[Iterable[Optional[Hashable]]] = None,
    *,
    k: int = 10,
    max_per_cluster: int = 1,
    unknown: str = "own",
    fold_threshold: Optional[float] = None,
    vectors: Optional[Any] = None,
    fold_text_threshold: Optional[float] = None,
    texts: Optional[Sequence[Optional[str]]] = None,
    groups: bool = False,
    exclude_clusters: Optional[Iterable[Hashable]] = None,
) -> Result:
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
    Ties: hits with equal adjacent scores are ordered by id (ints before strings, then by
    value), so the result does not depend on the order a store happens to return ties in.
    The whole input is scanned, so ``folded`` lists every hit of a kept cluster that is not
    itself kept (over the cluster's ``max_per_cluster``, or past the k-th kept hit). Runs in
    O(len(hits)), plus O(len(hits) * kept) comparisons in the on-the-fly mode.
    """
    k, n, fold_threshold = check_params(k, max_per_cluster, unknown, fold_threshold)
    fold_text_threshold = check_text_threshold(fold_text_threshold)
    if not isinstance(hits, (list, tuple)):
        if isinstance(hits, (str, bytes)) or not hasattr(hits, "__len__"):
            hits = list(hits) if not isinstance(hits, (str, bytes)) else None
        if hits is None:
            raise InputTypeError("`hits` must be a sequence of hits (Hit objects or objects with .id and "
                                 ".score); got a string. Pass a list of hits.")
    size = len(hits)
    cids = _as_cluster_list(cluster_ids, size)
    order = _tie_order(hits)
    excluded = frozenset(exclude_clusters) if exclude_clusters else None

    folder = None
    if fold_threshold is not None or fold_text_threshold is not None:
        if texts is not None and len(texts) != size:
            raise InputError(f"`texts` must have one entry per hit ({size}); got {len(texts)}.")
        if vectors is not None:
            if isinstance(vectors, np.ndarray) and vectors.ndim == 2:
                if vectors.shape[0] != size:
                    raise InputError(f"`vectors` must have one row per hit ({size}); got shape {vectors.shape}.")
            elif len(vectors) != size:
                raise InputError(f"`vectors` must have one entry per hit ({size}); got {len(vectors)}.")
        folder = _Folder(fold_threshold, fold_text_threshold, vectors, texts, hits)

    try:
        if folder is None and not groups:
            return _select_flat(hits, cids, order, k, n, unknown == "drop", excluded)
        return _select_general(hits, cids, order, k, n, unknown == "drop", excluded, folder, groups)
    except TypeError as exc:
        bad = next((c for c in cids if not _hashable(c)), None)
        if bad is None:
            raise
        raise InputTypeError(f"cluster ids must be hashable (int, str...); got {type(bad).__name__} "
                             f"{bad!r}. Store scalar cluster ids in the payload field.") from exc


def _hashable(value) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


class _Own:
    """Cluster key of an unknown hit: its own singleton cluster, equal only to itself."""

    __slots__ = ()


def _select_general(hits, cids, order, k, n, drop_unknown, excluded, folder, groups) -> Result:
    """Every option (grouped output, on-the-fly folding): one loop over all hits."""
    size = len(hits)

    counts: dict = {}        # cluster key -> members kept
    first: dict = {}         # cluster key -> slot of its best kept member
    folds: dict = {}         # cluster key -> list of folded hits
    reported: dict = {}      # cluster key -> reported cluster id (None for unknown singletons)
    kept = []                # [hit, key, rank]
    group_keys = []          # grouped output: cluster keys in order of first appearance
    dropped = 0
    full = False             # flat output: k kept, only folds are still recorded

    for rank in range(size):
        i = rank if order is None else order[rank]
        hit = hits[i]
        c = cids[i]
        unit = None
        if c is None or c == -1:
            key = None
            if folder is not None:
                unit = folder.features(i)
                key = folder.match(unit)
            if key is None:
                if drop_unknown:
                    dropped += 1
                    continue
                key = _Own()
                reported[key] = None
        else:
            if excluded is not None and c in excluded:
                dropped += 1
                continue
            key = c
        cnt = counts.get(key, 0)
        if cnt >= n or (full and cnt):
            lst = folds.get(key)
            if lst is None:
                folds[key] = [hit]
            else:
                lst.append(hit)
            continue
        if groups:
            if cnt == 0:
                if len(group_keys) >= k:
                    continue
                group_keys.append(key)
        elif full:
            continue
        counts[key] = cnt + 1
        if cnt == 0:
            first[key] = len(kept)
            if key not in reported:
                reported[key] = c
        kept.append((hit, key, rank))
        if folder is not None:
            if unit is None:
                unit = folder.features(i)
            folder.add(unit, key)
        if not groups and len(kept) >= k:
            full = True

    omitted = 0
    out = []
    for slot, (hit, key, rank) in enumerate(kept):
        f = ()
        if first[key] == slot:
            lst = folds.get(key)
            if lst:
                f = tuple(lst)
                omitted += len(f)
        out.append(_new_tuple(Kept, (hit, reported[key], rank, f)))

    group_out = None
    if groups:
        members: dict = {key: [] for key in group_keys}
        for kp, (hit, key, rank) in zip(out, kept):
            members[key].append(kp)
        group_out = tuple(Group(reported[key], tuple(members[key]), tuple(folds.get(key, ())))
                          for key in group_keys)
        out = [kp for g in group_out for kp in g.hits]
        short = len(group_out) < k
    else:
        short = len(out) < k
    return _new_tuple(Result, (tuple(out), group_out, k, omitted, dropped, size, False, short,
                               0, 0, None, 0))


def _select_flat(hits, cids, order, k: int, n: int, drop_unknown: bool, excluded) -> Result:
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
    kept = []             # (hit, cluster id or None, rank)
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
        if counts:
            for i in [i for i in range(stop, size) if cids[i] in counts]:
                c = cids[i]
                lst = folds.get(c)
                if lst is None:
                    folds[c] = [hits[i]]
                else:
                    lst.append(hits[i])
        if drop_unknown or excluded is not None:
            dropped += sum(1 for c in cids[stop:] if (drop_unknown and (c is None or c == -1))
                           or (excluded is not None and c in excluded))
    if folds:
        at = {first[c]: tuple(lst) for c, lst in folds.items()}  # folds sit on the best kept member
        get = at.get
        out = [_new_tuple(Kept, (hit, c, rank, get(slot, ()))) for slot, (hit, c, rank) in enumerate(kept)]
        omitted = sum(map(len, at.values()))
    else:
        out = [_new_tuple(Kept, (hit, c, rank, ())) for hit, c, rank in kept]
        omitted = 0
    return _new_tuple(Result, (tuple(out), None, k, omitted, dropped, size, False,
                               len(out) < k, 0, 0, None, 0))
