"""Online diversification: at query time, at most ``n`` results per cluster in a store's top-k.

Public API
----------
:func:`select`
    Pure function over ranked hits and their cluster ids: keep at most ``max_per_cluster``
    per cluster, in rank order, ties broken by id, up to ``k``; flat or grouped output; each
    kept hit lists the similar hits folded into it. Optional on-the-fly folding of hits the
    artifact does not know (cosine of their vectors, or Jaccard of their texts, against the
    kept hits).
:class:`Diversifier`
    Holds a :class:`~diversify.ClusterMap` (or reads cluster ids from a payload field) and
    ``wrap(search)`` / ``awrap(async_search)`` any search callable: over-fetch, select,
    refetch when short (store-side exclusion where supported, else a larger k) within a round
    budget; a stateless cursor for the next page; ``reload`` swaps the artifact atomically;
    ``select_items`` diversifies a fixed list (what framework plugins call); ``stats()``.
:class:`Hit`, :class:`Kept`, :class:`Group`, :class:`Result`
    Immutable value types (input hit; kept hit with ``cluster_id``, ``folded``, ``omitted``;
    a group of up to n members; the whole answer, a sequence of kept hits with
    ``exhausted``, ``backend_calls``, ``cursor``...).
:class:`SearchFn`, :class:`AsyncSearchFn`, :class:`ClusterLookup`, :class:`DiversifiedSearch`, :class:`AsyncDiversifiedSearch`
    Protocols: ``search(query, k[, exclude_ids]) -> ranked hits``; ``lookup(ids) -> int64``;
    what ``wrap`` / ``awrap`` return.
:class:`LazyDiversifier`, :func:`diversifier_from`, :func:`check_cluster_source`, :func:`annotation`, :func:`serializable_cluster_map`
    What the framework plugins share (:mod:`diversify.online.plugins`).

Modules: :mod:`~diversify.online.types` (value types, protocols), :mod:`~diversify.online.selection`
(``select``), :mod:`~diversify.online.folding` (on-the-fly folding),
:mod:`~diversify.online.checks` (validation), :mod:`~diversify.online.diversifier`
(``Diversifier``), :mod:`~diversify.online.source` (artifact, hot reload, fail-open),
:mod:`~diversify.online.refetch` (the refetch loop), :mod:`~diversify.online.wrappers` (sync and
async), :mod:`~diversify.online.cursor` (pages), :mod:`~diversify.online.hits` (normalizing
search results), :mod:`~diversify.online.idmatch` (matching store ids to the artifact's),
:mod:`~diversify.online.stats`, :mod:`~diversify.online.plugins`.

Example
-------
>>> from diversify.online import Diversifier, Hit
>>> d = Diversifier({"a": 0, "b": 0, "c": 1}, k=2)
>>> def search(query, k, exclude_ids=()):
...     hits = [Hit("a", 0.9), Hit("b", 0.8), Hit("c", 0.7)]
...     return [h for h in hits if h.id not in set(exclude_ids or ())][:k]
>>> res = d.wrap(search)("q")
>>> [(h.id, h.omitted) for h in res]
[('a', 1), ('c', 0)]

This package imports neither numba nor any vendor SDK.
"""

from __future__ import annotations

from .checks import ON_ERROR
from .cursor import MAX_CURSOR_CHARS, MAX_CURSOR_OFFSET
from .diversifier import Diversifier
from .hits import as_hit
from .plugins import LazyDiversifier, annotation, check_cluster_source, diversifier_from, serializable_cluster_map
from .selection import UNKNOWN, select
from .types import (
    AsyncDiversifiedSearch,
    AsyncSearchFn,
    ClusterLookup,
    DiversifiedSearch,
    DocId,
    Fetched,
    Group,
    Hit,
    Kept,
    Result,
    SearchFn,
    Vector,
)
from .wrappers import Capabilities

__all__ = [
    "select",
    "Diversifier",
    "Hit",
    "Kept",
    "Group",
    "Result",
    "DocId",
    "Vector",
    "Fetched",
    "SearchFn",
    "AsyncSearchFn",
    "ClusterLookup",
    "DiversifiedSearch",
    "AsyncDiversifiedSearch",
    "as_hit",
    "UNKNOWN",
    "ON_ERROR",
    "MAX_CURSOR_CHARS",
    "MAX_CURSOR_OFFSET",
    "LazyDiversifier",
    "diversifier_from",
    "check_cluster_source",
    "annotation",
    "serializable_cluster_map",
    "Capabilities",
]
