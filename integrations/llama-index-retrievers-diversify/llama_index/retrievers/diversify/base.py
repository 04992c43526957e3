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

__all__ = ["DiversifyRetriever", "DiversifiedNodes"]


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
        # Exclusion needs one flat AND list (nested MetadataFilters are not supported everywhere).
        self._supports_exclude = exclude_key is not None and (
            filters is None or filters.condition in (None, FilterCondition.AND))

    @property
    def diversifier(self) -> Diversifier:
        """The :class:`diversify.Diversifier` behind this retriever (created on first use)."""
        return self._lazy.get(self._cluster_map, cluster_field=self._cluster_field, k=self._k,
                              max_per_cluster=self._max_per_cluster, fetch_k=self._fetch_k,
                              max_rounds=self._max_rounds, fold_threshold=self._fold_threshold)

    def _retriever(self, k: int, exclude_ids: Optional[Sequence[Any]]) -> Any:
        filters = self._filters
        if exclude_ids and self._supports_exclude and self._exclude_key is not None:
            exclude = MetadataFilter(key=self._exclude_key, value=list(exclude_ids), operator=FilterOperator.NIN)
            base = list(filters.filters) if filters is not None else []
            filters = MetadataFilters(filters=base + [exclude], condition=FilterCondition.AND)
        kwargs = dict(self._retriever_kwargs)
        if filters is not None:
            kwargs["filters"] = filters
        return self._index.as_retriever(similarity_top_k=k, **kwargs)

    def _hits(self, nodes: list[NodeWithScore]) -> list[Hit]:
        return [Hit(node_id_of(n, j, id_field=self._id_field, id_source=self._id_source, error=StoreError),
                    n.score, n.node.metadata, n.node.embedding if self._fold_threshold is not None else None, n)
                for j, n in enumerate(nodes)]

    def _search(self, query_bundle: QueryBundle, k: int, exclude_ids: Optional[Sequence[Any]] = None) -> list[Hit]:
        return self._hits(self._retriever(k, exclude_ids).retrieve(query_bundle))

    async def _asearch(self, query_bundle: QueryBundle, k: int,
                       exclude_ids: Optional[Sequence[Any]] = None) -> list[Hit]:
        return self._hits(await self._retriever(k, exclude_ids).aretrieve(query_bundle))

    @staticmethod
    def _bundle(query: Any) -> QueryBundle:
        return query if isinstance(query, QueryBundle) else QueryBundle(query_str=query)

    def retrieve_with_result(self, query, *, k: Optional[int] = None,
                             cursor: Optional[str] = None) -> DiversifiedNodes:
        """Like ``retrieve`` but also returns the :class:`diversify.Result`."""
        search = self.diversifier.wrap(self._search, supports_exclude=self._supports_exclude)
        result = search(self._bundle(query), k=k, cursor=cursor)
        return DiversifiedNodes(annotated_copies(result, self._metadata_key), result)

    async def aretrieve_with_result(self, query, *, k: Optional[int] = None,
                                    cursor: Optional[str] = None) -> DiversifiedNodes:
        """Async twin of :meth:`retrieve_with_result`."""
        search = self.diversifier.awrap(self._asearch, supports_exclude=self._supports_exclude)
        result = await search(self._bundle(query), k=k, cursor=cursor)
        return DiversifiedNodes(annotated_copies(result, self._metadata_key), result)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self.retrieve_with_result(query_bundle).nodes

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return (await self.aretrieve_with_result(query_bundle)).nodes
