"""Exact brute-force store over a numpy matrix (no dependency; the reference adapter)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Optional

import numpy as np

from ..errors import ConfigError, DuplicateIdError, InputError
from ..online import Hit
from ._base import Store, check_field, check_where, query_vector, representative_flags
from .scan import DEFAULT_SCAN_BATCH, Batch, check_scan, field_value, text_list

__all__ = ["NumpyStore"]

_METRICS = ("cosine", "dot", "l2")


class NumpyStore(Store):
    """Exact nearest neighbours over an in-memory matrix.

    Parameters
    ----------
    vectors : array_like, shape (n, d)
        Copied (float32); later changes to the caller's array have no effect.
    ids : sequence of str or int
        One unique id per row.
    payloads : sequence of Mapping, optional
        Copied shallowly; :meth:`write_clusters` writes into the copies, never the caller's.
    metric : {"cosine", "dot", "l2"}
        ``cosine`` / ``dot`` scores are similarities; ``l2`` scores are (squared-free) distances.
    where : callable, optional
        ``where(payload) -> bool``: the user's filter (a tenant, an access rule); every search,
        refetches included, returns only rows whose payload it accepts.
    refill : {"auto", "exclude", "grow"}
        How refetches skip seen ids (see :mod:`diversify.stores.exclusion`); ``auto`` = exclude
        (a boolean mask: free).
    max_exclude : int, optional
        Ids pushed down per call (default 256); the rest is answered by a larger k.

    Ties are broken by insertion order, so results are deterministic.
    """

    exact_exclusion = True

    def __init__(self, vectors, ids: Sequence[Any], *, payloads: Optional[Sequence[Mapping]] = None,
                 metric: str = "cosine", where: Optional[Callable[[Mapping], Any]] = None, refill: str = "auto",
                 max_exclude: Optional[int] = None):
        check_where(where)
        self._setup_refill(refill, max_exclude)
        if metric not in _METRICS:
            raise ConfigError(f"`metric` must be one of {_METRICS}; got metric={metric!r}.")
        x = np.array(vectors, dtype=np.float32, copy=True)
        if x.ndim != 2 or x.shape[0] == 0:
            raise InputError(f"`vectors` must be a non-empty 2-d array (n, d); got shape {x.shape}.")
        if not np.isfinite(x).all():
            raise InputError("`vectors` must be finite; got NaN or inf. Drop or re-embed those rows.")
        ids = list(ids)
        if len(ids) != x.shape[0]:
            raise InputError(f"`ids` must have one entry per vector ({x.shape[0]}); got {len(ids)}.")
        pos: dict[Any, int] = {}
        for j, i in enumerate(ids):
            if i in pos:
                raise DuplicateIdError(f"`ids` must be unique; id {i!r} occurs at rows {pos[i]} and {j}.")
            pos[i] = j
        if payloads is not None and len(payloads) != len(ids):
            raise InputError(f"`payloads` must have one entry per vector ({len(ids)}); got {len(payloads)}.")
        self.metric = metric
        if metric == "cosine":
            norms = np.linalg.norm(x, axis=1, keepdims=True)
            if (norms == 0).any():
                raise InputError("`vectors` must be non-zero for metric='cosine'; got a zero row "
                                 f"(row {int(np.argmin(norms))}). Drop it or use metric='dot'.")
            x /= norms
        x.flags.writeable = False  # hits expose row views; nobody may write through them
        self._x = x
        self._sq = (x * x).sum(axis=1) if metric == "l2" else None
        self._ids = ids
        self._pos = pos
        self._payloads = [dict(p) if p is not None else {} for p in payloads] if payloads is not None \
            else [{} for _ in ids]
        self.where = where
        self._allowed: Optional[np.ndarray] = None  # rows `where` accepts; recomputed after write_clusters

    @property
    def dim(self) -> int:
        return self._x.shape[1]

    def __len__(self) -> int:
        return len(self._ids)

    def payload(self, doc_id) -> Mapping:
        """Read-only view of one document's payload."""
        return MappingProxyType(self._payloads[self._pos[doc_id]])

    @property
    def scores_are(self) -> str:
        return "distance" if self.metric == "l2" else "similarity"

    def _query(self, query):
        return query_vector(query, self.dim)

    def _allowed_rows(self) -> Optional[np.ndarray]:
        if self.where is None:
            return None
        allowed = self._allowed
        if allowed is None:
            allowed = np.fromiter((bool(self.where(MappingProxyType(p))) for p in self._payloads), dtype=bool,
                                  count=len(self._payloads))
            self._allowed = allowed
        return allowed

    def _search(self, q, k: int, exclude: Optional[list]) -> list[Hit]:
        if self.metric == "cosine":
            nq = float(np.linalg.norm(q))
            if nq == 0:
                raise InputError("`query` must be non-zero for metric='cosine'.")
            scores = self._x @ (q / nq)
            key = -scores
        elif self.metric == "dot":
            scores = self._x @ q
            key = -scores
        else:
            scores = np.sqrt(np.maximum(self._sq - 2.0 * (self._x @ q) + float(q @ q), 0.0))
            key = scores
        key = key.astype(np.float64)
        blocked = np.zeros(len(self._ids), dtype=bool)
        allowed = self._allowed_rows()
        if allowed is not None:
            blocked |= ~allowed
        if exclude:
            blocked[[self._pos[i] for i in exclude if i in self._pos]] = True
        key[blocked] = np.inf
        avail = len(self._ids) - int(blocked.sum())
        take = min(k, avail)
        if take <= 0:
            return []
        if take < key.size:
            cand = np.argpartition(key, take - 1)[:take]
        else:
            cand = np.arange(key.size)
        cand = cand[np.lexsort((cand, key[cand]))]  # by score, then row: deterministic ties
        return [Hit(self._ids[j], float(scores[j]), MappingProxyType(self._payloads[j]), self._x[j])
                for j in cand.tolist()]

    def scan(self, *, batch_size: int = DEFAULT_SCAN_BATCH, with_vectors: bool = True,
             text_field: Optional[str] = None) -> Iterator[Batch]:
        """Every row, ``batch_size`` at a time (:mod:`.scan`): its id, its vector as the store holds
        it (unit length for ``metric="cosine"``) and its ``text_field`` payload value."""
        size = check_scan(batch_size, with_vectors, text_field)
        for s in range(0, len(self._ids), size):
            ids = self._ids[s:s + size]
            texts = None
            if text_field is not None:
                texts = text_list([field_value(p, text_field) for p in self._payloads[s:s + size]], ids, text_field,
                                  "the NumpyStore")
            yield Batch(ids, self._x[s:s + size] if with_vectors else None, texts)

    def _scan_size(self) -> Optional[int]:
        return len(self._ids)

    def write_clusters(self, cluster_map, *, ids=None, cluster_field="cluster_id",
                       representative_field="is_representative") -> int:
        check_field("cluster_field", cluster_field)
        ids = self._ids if ids is None else list(ids)
        cids, flags = representative_flags(cluster_map, ids)
        written = 0
        for j, (i, c) in enumerate(zip(ids, cids.tolist())):
            if c < 0 or i not in self._pos:
                continue
            p = dict(self._payloads[self._pos[i]])  # copy-on-write: old views stay consistent
            p[cluster_field] = c
            if representative_field and flags is not None:
                p[representative_field] = bool(flags[j])
            self._payloads[self._pos[i]] = p
            written += 1
        self._allowed = None  # `where` may read the fields just written
        return written
