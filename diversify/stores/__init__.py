"""Store adapters: fetch ranked candidates from a vector store, with store-side exclusion.

Every adapter has the same small surface (see :class:`Store`):

``search(query, k, exclude_ids=None) -> list[Hit]``
    Top-``k`` for a query vector, best first, never returning an id in ``exclude_ids``
    (pushed down to the store as a filter). Pass the adapter straight to
    :meth:`diversify.Diversifier.wrap`.
``scores_are``
    ``"similarity"`` (higher is better) or ``"distance"`` (lower is better).
``write_clusters(cluster_map, ...)``
    The other direction: write cluster ids and representative flags from an artifact into the
    store's payload / metadata, so ``Diversifier(cluster_field=...)`` or the store's own
    grouping (Qdrant ``query_points_groups``, Milvus ``group_by_field``) can use them.
``scan(batch_size=4096, with_vectors=True, text_field=None)`` (sync adapters)
    Every document the store holds, a page at a time with the vendor's paging call
    (:mod:`.scan`), for :func:`diversify.build_from` (:mod:`.building`).

Adapters import their vendor SDK lazily (on first use, never at ``import diversify.stores``)
and raise :class:`~diversify.errors.MissingDependencyError` with the ``pip install`` command
when it is missing. Constructors do no I/O.

Async twins (:class:`AsyncStore`): ``AsyncQdrantStore`` (``qdrant_client.AsyncQdrantClient``),
``AsyncChromaStore`` (``chromadb.AsyncHttpClient``), ``AsyncLanceDBStore``
(``lancedb.connect_async``): ``await store.search(...)``, ``await store.write_clusters(...)``,
for :meth:`diversify.Diversifier.awrap`. Each shares its sync twin's requests and parses.
"""

from __future__ import annotations

import importlib

from ._base import AsyncStore, Store, representative_flags

__all__ = ["Store", "AsyncStore", "NumpyStore", "QdrantStore", "ChromaStore", "FaissStore", "LanceDBStore",
           "MilvusStore", "AsyncQdrantStore", "AsyncChromaStore", "AsyncLanceDBStore", "representative_flags"]

_LAZY = {
    "NumpyStore": "diversify.stores.numpy_store",
    "QdrantStore": "diversify.stores.qdrant",
    "ChromaStore": "diversify.stores.chroma",
    "FaissStore": "diversify.stores.faiss",
    "LanceDBStore": "diversify.stores.lancedb",
    "MilvusStore": "diversify.stores.milvus",
    "AsyncQdrantStore": "diversify.stores.qdrant",
    "AsyncChromaStore": "diversify.stores.chroma",
    "AsyncLanceDBStore": "diversify.stores.lancedb",
}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'diversify.stores' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return __all__
