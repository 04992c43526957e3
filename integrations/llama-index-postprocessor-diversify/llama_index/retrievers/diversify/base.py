"""`DiversifyRetriever`: a LlamaIndex retriever over a vector index that refills when short."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, NamedTuple, Optional

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import NodeWithScore, QueryBundle
from llama_index.core.vector_stores.types import FilterCondition, FilterOperator, MetadataFilter, MetadataFilters
from llama_index.postprocessor.diversify.base import annotated_copies, node_id_of

from diversify.errors import ConfigError, StoreError
from diversify.online import Diversifier, Hit, LazyDiversifier, Result, check_cluster_source
from diversify.stores.exclusion import plugin_exclusion

__all__ = ["DiversifyRetriever", "DiversifiedNodes", "and_filters"]

# vector stores known to evaluate nested MetadataFilters (others may reject or ignore them)
_NESTED_MODULES = ("llama_index.vector_stores.qdrant", "llama_index.vector_stores.chroma")
_NESTED = object()  # and_filters' answer when only nesting could say it and the store cannot take it


def _takes_nested(index: Any) -> bool:
    mod = type(getattr(index, "vector_store", None)).__module__
    return any(mod == m or mod.startswith(m + ".") for m in _NESTED_MODULES)


def _flat_and(f: MetadataFilters) -> bool:
    return f.condition in (None, FilterCondition.AND) or len(f.filters) == 1


def and_filters(a: Optional[MetadataFilters], b: Optional[MetadataFilters], *, nested_ok: bool) -> Any:
    """``a`` AND ``b``: one flat AND list when both are ANDs (every vector store takes that), else
    nested ``MetadataFilters`` when the store takes them, else the marker ``_NESTED``."""
    if a is None or b is None:
        return b if a is None else a
    if _flat_and(a) and _flat_and(b):
        return MetadataFilters(filters=list(a.filters) + list(b.filters), condition=FilterCondition.AND)
    if nested_ok:
        return MetadataFilters(filters=[a, b], condition=FilterCondition.AND)
    return _NESTED


class DiversifiedNodes(NamedTuple):
    """Annotated node copies (rank order) and the :class:`diversify.Result` behind them
    (``backend_calls``, ``exhausted``, ``cursor``...)."""

    nodes: list[NodeWithScore]
    result: Result


class DiversifyRetriever(BaseRetriever):
    """Top ``k`` nodes of a vector index with at most ``max_per_cluster`` per cluster, refilled.

    Each call asks the index for ``fetch_k`` candidates (``index.as_retriever(similarity_top_k=
    ...)``, a fresh retriever per call, so nothing shared is mutated). When fewer than ``k``
    distinct clusters come back it asks again within ``max_rounds``: with ``exclude_key`` (a
    metadata key holding the same id as the artifact, e.g. ``id_field``) the store is asked to
    leave out what was seen (``FilterOperator.NIN``), otherwise for a larger k.

    The user's filters (``filters`` and ``retriever_kwargs["filters"]``, AND-ed together) apply
    to every call, refetches included: the exclusion is AND-ed to them, as one flat AND list when
    they are ANDs, as nested ``MetadataFilters`` for an OR on the stores known to take nesting
    (Qdrant, Chroma); where neither can be said, or the store rejects the exclusion, refetches ask
    for a larger k under the user's filters alone.

    Cluster ids, ``fold_threshold`` and returned copies: as
    :class:`~llama_index.postprocessor.diversify.DiversifyPostprocessor` (the index's retriever
    must return embeddings for ``fold_threshold`` to act; most vector stores do not).
    """

    def __init__(
        self,
        index: Any,
        *,
        cluster_map: Any = None,
        cluster_field: Optional[str] = None,
        id_field: Optional[str] = None,
        id_source: Literal["node_id", "ref_doc_id"] = "node_id",
        k: int = 4,
        max_per_cluster: int = 1,
        fetch_k: Optional[int] = None,
        max_rounds: int = 3,
        exclude_key: Optional[str] = None,
        filters: Optional[MetadataFilters] = None,
        retriever_kwargs: Optional[dict] = None,
        metadata_key: str = "diversify",
        fold_threshold: Optional[float] = None,
        refill: str = "auto",
        callback_manager: Optional[CallbackManager] = None,
    ) -> None:
        check_cluster_source(cluster_map, cluster_field, subject="node")
        if not callable(getattr(index, "as_retriever", None)):
            raise ConfigError(f"`index` must have as_retriever(similarity_top_k=...) (e.g. a VectorStoreIndex); "
                              f"got {type(index).__name__}.")
        super().__init__(callback_manager=callback_manager)
        self._index = index
        self._cluster_map = cluster_map
        self._cluster_field = cluster_field
        self._id_field = id_field
        self._id_source = id_source
        self._k, self._max_per_cluster, self._fetch_k, self._max_rounds = k, max_per_cluster, fetch_k, max_rounds
        self._exclude_key = exclude_key
        self._filters = filters
        self._retriever_kwargs = dict(retriever_kwargs or {})
        self._metadata_key = metadata_key
        self._fold_threshold = fold_threshold
        self._lazy = LazyDiversifier("node")
        self._nested_ok = _takes_nested(index)
        self._user_filters = and_filters(filters, self._retriever_kwargs.pop("filters", None),
                                         nested_ok=self._nested_ok)
        if self._user_filters is _NESTED:
            raise ConfigError("`filters` and `retriever_kwargs['filters']` are both set and can only be AND-ed as "
                              "nested MetadataFilters, which this index's vector store does not take; got "
                              f"filters={filters!r}, retriever_kwargs['filters']={(retriever_kwargs or {})['filters']!r}. "
                              "Pass one of them.")
        # "auto": exclude when exclude_key is set, except on Qdrant's local mode and Chroma (a larger k is cheaper)
        self._refill = plugin_exclusion(refill, exclude_key is not None, index,
                                        name=type(getattr(index, "vector_store", index)).__name__,
                                        needs="Set exclude_key='<metadata key with the id>'")

    @property
    def diversifier(self) -> Diversifier:
        """The :class:`diversify.Diversifier` behind this retriever (created on first use)."""
        return self._lazy.get(self._cluster_map, cluster_field=self._cluster_field, k=self._k,
                              max_per_cluster=self._max_per_cluster, fetch_k=self._fetch_k,
                              max_rounds=self._max_rounds, fold_threshold=self._fold_threshold)

    def _filters_for(self, exclude_ids: Optional[Sequence[Any]]) -> Optional[MetadataFilters]:
        """The user's filters, AND the exclusion of ``exclude_ids`` when given (never instead of them)."""
        if not exclude_ids or self._exclude_key is None:
            return self._user_filters
        exclude = MetadataFilters(filters=[MetadataFilter(key=self._exclude_key, value=list(exclude_ids),
                                                          operator=FilterOperator.NIN)])
        combined = and_filters(self._user_filters, exclude, nested_ok=self._nested_ok)
        if combined is _NESTED:  # cannot be said to this store: the caller grows k instead
            raise ConfigError("the exclusion can only be AND-ed to these filters as nested MetadataFilters, "
                              "which this vector store does not take")
        return combined

    def _retriever(self, k: int, exclude_ids: Optional[Sequence[Any]]) -> Any:
        kwargs = dict(self._retriever_kwargs)
        filters = self._filters_for(exclude_ids)
        if filters is not None:
            kwargs["filters"] = filters
        return self._index.as_retriever(similarity_top_k=k, **kwargs)

    def _hits(self, nodes: list[NodeWithScore]) -> list[Hit]:
        return [Hit(node_id_of(n, j, id_field=self._id_field, id_source=self._id_source, error=StoreError),
                    n.score, n.node.metadata, n.node.embedding if self._fold_threshold is not None else None, n)
                for j, n in enumerate(nodes)]

    def _search(self, query_bundle: QueryBundle, k: int, exclude_ids: Optional[Sequence[Any]] = None) -> list[Hit]:
        # the bundle carries the query embedding after the first call: refetches reuse it
        return self._refill.search(lambda n, pushed: self._hits(self._retriever(n, pushed).retrieve(query_bundle)),
                                   k, exclude_ids)

    async def _asearch(self, query_bundle: QueryBundle, k: int,
                       exclude_ids: Optional[Sequence[Any]] = None) -> list[Hit]:
        async def call(n: int, pushed: Optional[list]) -> list[Hit]:
            return self._hits(await self._retriever(n, pushed).aretrieve(query_bundle))

        return await self._refill.asearch(call, k, exclude_ids)

    @staticmethod
    def _bundle(query: Any) -> QueryBundle:
        return query if isinstance(query, QueryBundle) else QueryBundle(query_str=query)

    def retrieve_with_result(self, query, *, k: Optional[int] = None,
                             cursor: Optional[str] = None) -> DiversifiedNodes:
        """Like ``retrieve`` but also returns the :class:`diversify.Result`."""
        search = self.diversifier.wrap(self._search, supports_exclude=self._refill.pushes_down)
        result = search(self._bundle(query), k=k, cursor=cursor)
        return DiversifiedNodes(annotated_copies(result, self._metadata_key), result)

    async def aretrieve_with_result(self, query, *, k: Optional[int] = None,
                                    cursor: Optional[str] = None) -> DiversifiedNodes:
        """Async twin of :meth:`retrieve_with_result`."""
        search = self.diversifier.awrap(self._asearch, supports_exclude=self._refill.pushes_down)
        result = await search(self._bundle(query), k=k, cursor=cursor)
        return DiversifiedNodes(annotated_copies(result, self._metadata_key), result)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self.retrieve_with_result(query_bundle).nodes

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return (await self.aretrieve_with_result(query_bundle)).nodes
