"""Shared base of the store adapters."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar, Optional

import numpy as np

from ..errors import ConfigError, InputError, InputTypeError
from ..online import Hit
from ..online.budget import MAX_EXCLUDE_PER_CALL
from ..online.wrappers import Capabilities
from .exclusion import Exclusion, check_refill

__all__ = ["Store", "AsyncStore", "representative_flags", "query_vector", "check_k"]


def check_k(k) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ConfigError(f"`k` must be an int >= 1; got k={k!r}. Ask for at least one result.")
    return int(k)


def query_vector(query, dim: Optional[int] = None) -> np.ndarray:
    """Validate a query vector: 1-d, finite, of the store's dimension."""
    try:
        q = np.asarray(query, dtype=np.float32)
    except (TypeError, ValueError):
        raise InputTypeError(f"`query` must be a vector (sequence of floats); got {type(query).__name__}. "
                             "Embed the query text first.") from None
    if q.ndim == 2 and q.shape[0] == 1:
        q = q[0]
    if q.ndim != 1:
        raise InputError(f"`query` must be one vector of shape (d,); got shape {q.shape}.")
    if dim is not None and q.shape[0] != dim:
        raise InputError(f"`query` must have the store's dimension {dim}; got {q.shape[0]}. "
                         "Use the same embedding model as the indexed vectors.")
    if not np.isfinite(q).all():
        raise InputError("`query` must be finite; got NaN or inf values. Check the embedding call.")
    return q


def representative_flags(cluster_map, ids: Sequence[Any]):
    """Cluster id and representative flag of each id, from a ClusterMap.

    Returns ``(cluster_ids int64, is_representative bool or None)``; ``-1`` for ids the
    artifact does not know. The flag comes from the artifact's per-document
    ``is_representative`` array (via ``doc_index``) or its ``representative_of(cluster_id)``;
    ``None`` when the lookup object offers neither (then no flag is written).
    """
    ids = list(ids)
    if isinstance(cluster_map, Mapping):  # a plain {id: cluster_id} dict: no representative flags
        get = cluster_map.get
        return np.fromiter((get(i, -1) for i in ids), dtype=np.int64, count=len(ids)), None
    cids = np.asarray(cluster_map.lookup(ids), dtype=np.int64)
    rep_arr = getattr(cluster_map, "is_representative", None)
    doc_index = getattr(cluster_map, "doc_index", None)
    if isinstance(rep_arr, np.ndarray) and callable(doc_index):
        docs = np.asarray(doc_index(ids), dtype=np.int64)
        flags = np.zeros(len(ids), dtype=bool)
        known = docs >= 0
        flags[known] = rep_arr[docs[known]]
        return cids, flags
    rep = getattr(cluster_map, "representative_of", None)
    if not callable(rep):
        return cids, None
    cache: dict = {}
    flags = np.zeros(len(ids), dtype=bool)
    for j, (i, c) in enumerate(zip(ids, cids.tolist())):
        if c < 0:
            continue
        if c not in cache:
            cache[c] = rep(c)
        flags[j] = cache[c] == i
    return cids, flags


class _Refilling:
    """What the sync and async adapters share: the refetch strategy (``refill``,
    ``max_exclude``), the query check and the spelling of excluded ids. No I/O."""

    #: which optional extra installs the vendor SDK (for the error hint)
    extra: ClassVar[str] = ""
    #: what ``refill="auto"`` resolves to (measured per store; docs/online.md); adapters whose
    #: choice depends on the client or index override :meth:`_auto_refill`
    auto_refill: ClassVar[str] = "exclude"
    #: a pushed-down answer shorter than asked proves the store has no more (exact, pre-filtering)
    exact_exclusion: ClassVar[bool] = False
    #: a call whose exclusion the store rejects is retried growing k (and exclusion given up)
    exclusion_fallback: ClassVar[bool] = False

    _refill_setting: str = "auto"
    _max_exclude: int = MAX_EXCLUDE_PER_CALL
    _exclusion: Optional[Exclusion] = None

    def _setup_refill(self, refill: str, max_exclude: Optional[int]) -> None:
        self._refill_setting, self._max_exclude = check_refill(refill, max_exclude)
        self._exclusion = None  # resolved on first use (``auto`` may look at the client or index)

    def _auto_refill(self) -> str:
        return self.auto_refill

    def _exact_exclusion(self) -> bool:
        return self.exact_exclusion

    def _strategy(self) -> Exclusion:
        ex = self._exclusion
        if ex is None:
            mode = self._refill_setting
            if mode == "auto":
                mode = self._auto_refill()
            ex = Exclusion(mode, self._max_exclude, name=type(self).__name__, exact=self._exact_exclusion(),
                           fallback_on_error=self.exclusion_fallback)
            self._exclusion = ex
        return ex

    @property
    def refill(self) -> str:
        """The refetch strategy in force: ``"exclude"`` (push seen ids down, at most
        ``max_exclude`` per call) or ``"grow"`` (ask for a larger k)."""
        return "exclude" if self._strategy().pushes_down else "grow"

    @property
    def max_exclude(self) -> int:
        """At most this many ids are pushed down per call; the rest is answered by a larger k."""
        return self._max_exclude

    @property
    def supports_exclude(self) -> bool:
        """Should :meth:`diversify.Diversifier.wrap` pass seen ids to :meth:`search`?"""
        return self._strategy().pushes_down

    @property
    def capabilities(self) -> Capabilities:
        """What :meth:`diversify.Diversifier.wrap` reads first (never the signature of
        :meth:`search`, which takes ``exclude_ids`` whether or not the strategy pushes it down)."""
        return Capabilities(exclude=self._strategy().pushes_down,
                            exclude_clusters=getattr(self, "supports_exclude_clusters", False) is True,
                            is_async=getattr(self, "is_async", False) is True)

    @property
    def scores_are(self) -> str:
        """``"similarity"`` (higher is better) or ``"distance"`` (lower is better)."""
        return "similarity"

    def _query(self, query: Any) -> Any:
        """The query as the store takes it (validated); once per :meth:`search`."""
        return query_vector(query)

    def _exclude_ids(self, ids: Iterable[Any]) -> list:
        """``exclude_ids`` as the hits spell ids (Qdrant: canonical UUIDs), for the store and for
        the ids dropped here."""
        return list(ids)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(scores_are={self.scores_are!r})"


class Store(_Refilling):
    """Base of the store adapters.

    Subclasses set ``scores_are`` and implement :meth:`_search` (one store call: top-``k`` under
    the user's filter, AND the pushed-down exclusion when one is given) and
    :meth:`write_clusters`; they call :meth:`_setup_refill` in their constructor. :meth:`search`
    turns a request into store calls through the adapter's :class:`~.exclusion.Exclusion`
    strategy (push the exclusion down, bounded by ``max_exclude``, or ask for a larger k).

    ``supports_exclude`` tells :meth:`diversify.Diversifier.wrap` whether refetches should pass
    the seen ids (``refill`` resolved to ``"exclude"``) or ask for a larger k (``"grow"``).
    """

    def _search(self, q: Any, k: int, exclude: Optional[list]) -> list[Hit]:
        """One store call: top-``k`` under the user's filter, none of ``exclude`` (if given)."""
        raise NotImplementedError

    def search(self, query: Any, k: int, exclude_ids: Optional[Iterable[Any]] = None) -> list[Hit]:
        """Top-``k`` hits for ``query``, best first, none of ``exclude_ids``, all matching the
        adapter's filter; fewer than ``k`` only when the store has no more matching documents."""
        k = check_k(k)
        q = self._query(query)
        excl = self._exclude_ids(exclude_ids) if exclude_ids else None
        return self._strategy().search(lambda n, ex: self._search(q, n, ex), k, excl)

    def write_clusters(self, cluster_map, *, ids: Optional[Sequence[Any]] = None,
                       cluster_field: str = "cluster_id",
                       representative_field: Optional[str] = "is_representative") -> int:
        """Write each document's cluster id (and representative flag) into its payload.

        Documents the artifact does not know are left untouched. Returns how many documents carry
        the artifact's values afterwards (adapters that read the current values skip those that
        already hold them).
        """
        raise NotImplementedError


class AsyncStore(_Refilling):
    """Base of the async store adapters (``AsyncQdrantStore``, ``AsyncChromaStore``,
    ``AsyncLanceDBStore``): the same contract as :class:`Store`, with :meth:`search` and
    :meth:`write_clusters` coroutines, for :meth:`diversify.Diversifier.awrap`.

    Each one shares its sync twin's request building and result parsing (the filter AND-ed with
    the exclusion, payload ids, canonical UUIDs, the write-back batches): only the awaited client
    calls differ. A cancelled :meth:`search` (``asyncio.timeout``) leaves no work behind: every
    store call is awaited in the caller's task, none runs in a thread.
    """

    #: :meth:`diversify.Diversifier.wrap` refuses it (its search is a coroutine): use ``awrap``
    is_async: ClassVar[bool] = True

    async def _search(self, q: Any, k: int, exclude: Optional[list]) -> list[Hit]:
        """One awaited store call: top-``k`` under the user's filter, none of ``exclude``."""
        raise NotImplementedError

    async def search(self, query: Any, k: int, exclude_ids: Optional[Iterable[Any]] = None) -> list[Hit]:
        """``await store.search(query, k, exclude_ids)``: as :meth:`Store.search`."""
        k = check_k(k)
        q = self._query(query)
        excl = self._exclude_ids(exclude_ids) if exclude_ids else None
        return await self._strategy().asearch(lambda n, ex: self._search(q, n, ex), k, excl)

    async def write_clusters(self, cluster_map, *, ids: Optional[Sequence[Any]] = None,
                             cluster_field: str = "cluster_id",
                             representative_field: Optional[str] = "is_representative") -> int:
        """``await store.write_clusters(cluster_map)``: as :meth:`Store.write_clusters`."""
        raise NotImplementedError


def check_field(name: str, value) -> None:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"`{name}` must be a non-empty string; got {name}={value!r}.")


def check_where(where) -> None:
    if where is not None and not callable(where):
        raise ConfigError(f"`where` must be a callable where(payload) -> bool or None; got {type(where).__name__} "
                          f"{where!r}. E.g. where=lambda p: p.get('tenant') == 'acme'.")


def is_finite_number(x) -> bool:
    return isinstance(x, (int, float, np.floating, np.integer)) and math.isfinite(float(x))
