"""`DiversifyRetriever`: wraps any LlamaIndex retriever (or a vector index); at most n nodes per
cluster, refilled when the wrapped thing can give more."""

from __future__ import annotations

import asyncio
import copy
import inspect
import warnings
from collections.abc import Sequence
from typing import Any, Literal, NamedTuple, Optional

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.retrievers import QueryFusionRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle
from llama_index.core.vector_stores.types import FilterCondition, FilterOperator, MetadataFilter, MetadataFilters
from llama_index.postprocessor.diversify.base import annotated_copies, node_id_of

from diversify.errors import ConfigError, StoreError
from diversify.online import Diversifier, Hit, LazyDiversifier, Result
from diversify.online.plugins import check_arguments, check_settings
from diversify.stores.exclusion import plugin_exclusion

__all__ = ["DiversifyRetriever", "DiversifiedNodes", "resized", "own_size", "and_filters", "awaits_the_store",
           "aretrieve"]

# vector stores known to evaluate nested MetadataFilters (others may reject or ignore them)
_NESTED_MODULES = ("llama_index.vector_stores.qdrant", "llama_index.vector_stores.chroma")
_NESTED = object()  # and_filters' answer when only nesting could say it and the store cannot take it


def _vector_store_of(source: Any) -> Any:
    """The vector store behind an index (``vector_store``) or a VectorIndexRetriever (``_vector_store``)."""
    store = getattr(source, "vector_store", None)
    return store if store is not None else getattr(source, "_vector_store", None)


def _takes_nested(source: Any) -> bool:
    mod = type(_vector_store_of(source)).__module__
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


def _with_exclusion(filters: Optional[MetadataFilters], key: str, exclude_ids: Sequence[Any], *,
                    nested_ok: bool) -> Optional[MetadataFilters]:
    """``filters`` AND (``key`` NIN ``exclude_ids``), never instead of them; a ConfigError when
    only nesting could say it and the store cannot take it (the refill then grows k)."""
    exclude = MetadataFilters(filters=[MetadataFilter(key=key, value=list(exclude_ids), operator=FilterOperator.NIN)])
    combined = and_filters(filters, exclude, nested_ok=nested_ok)
    if combined is _NESTED:
        raise ConfigError("the exclusion can only be AND-ed to these filters as nested MetadataFilters, "
                          "which this vector store does not take")
    return combined


def awaits_the_store(retriever: Any) -> bool:
    """Does ``retriever.aretrieve`` await its store? Not when it would run the sync search in the
    event loop's thread (a retriever without its own ``_aretrieve``; a vector store whose
    ``aquery`` is the base class's, which calls ``query``: Chroma, the simple store), nor when it
    cannot run at all (a Qdrant vector store made without ``aclient``). Those are called in a
    worker thread instead, on the same store as the sync path."""
    from llama_index.core.retrievers import VectorIndexRetriever
    from llama_index.core.vector_stores.types import BasePydanticVectorStore

    if isinstance(retriever, VectorIndexRetriever):
        store = retriever._vector_store
        if getattr(type(store), "aquery", None) is BasePydanticVectorStore.aquery:
            return False
        return not (hasattr(store, "_aclient") and getattr(store, "_aclient", None) is None)
    return getattr(type(retriever), "_aretrieve", None) is not BaseRetriever._aretrieve


async def aretrieve(retriever: Any, query_bundle: QueryBundle) -> list[NodeWithScore]:
    """``retriever.aretrieve(query_bundle)`` when it awaits its store (:func:`awaits_the_store`),
    else its sync ``retrieve`` in a worker thread (the event loop is never blocked)."""
    if awaits_the_store(retriever):
        return await retriever.aretrieve(query_bundle)
    return await asyncio.to_thread(retriever.retrieve, query_bundle)


def _filterable(retriever: Any) -> bool:
    """Can an exclusion be AND-ed to the wrapped retriever's own filters (a VectorIndexRetriever)?"""
    from llama_index.core.retrievers import VectorIndexRetriever

    return isinstance(retriever, VectorIndexRetriever) and hasattr(retriever, "_filters")


class DiversifiedNodes(NamedTuple):
    """Annotated node copies (rank order) and the :class:`diversify.Result` behind them
    (``backend_calls``, ``exhausted``, ``cursor``...)."""

    nodes: list[NodeWithScore]
    result: Result


def _is_size(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def own_size(retriever: Any) -> Optional[int]:
    """The retriever's own ``similarity_top_k`` (VectorIndexRetriever, QueryFusionRetriever,
    BM25Retriever...), or None when it has none."""
    value = getattr(retriever, "similarity_top_k", None)
    return value if _is_size(value) else None


def _settable_size(retriever: Any) -> bool:
    prop = getattr(type(retriever), "similarity_top_k", None)
    if isinstance(prop, property):
        return prop.fset is not None
    return _is_size(vars(retriever).get("similarity_top_k"))


def resized(retriever: BaseRetriever, n: int) -> Optional[BaseRetriever]:
    """A shallow copy of ``retriever`` that returns up to ``n`` nodes, or None when it cannot be
    asked for more. A ``QueryFusionRetriever`` is resized with the retrievers it fuses (when every
    one of them can be); any other retriever through a settable ``similarity_top_k``. The caller's
    retriever is never changed."""
    if isinstance(retriever, QueryFusionRetriever):
        inner = [resized(r, n) for r in retriever._retrievers]
        if any(r is None for r in inner):
            return None
        fused = copy.copy(retriever)
        fused.similarity_top_k = n
        fused._retrievers = inner
        return fused
    if not _settable_size(retriever):
        return None
    out = copy.copy(retriever)
    out.similarity_top_k = n  # type: ignore[attr-defined]
    return out


#: Metadata keys LlamaIndex's vector stores write themselves (``node_to_metadata_dict``: the node's
#: ref_doc_id, for Chroma, Pinecone / Qdrant / Redis and Weaviate), over any value the node carries
_STORE_WRITTEN_KEYS = frozenset({"doc_id", "document_id", "ref_doc_id"})


class DiversifyRetriever(BaseRetriever):
    """Top ``similarity_top_k`` nodes of any retriever (or vector index), at most
    ``max_per_cluster`` per cluster.

    ``retriever`` is what is wrapped, and it decides how a short answer is refilled:

    * a vector index (anything with ``as_retriever``, e.g. ``VectorStoreIndex``): each call asks
      ``index.as_retriever(similarity_top_k=fetch_k, filters=..., **retriever_kwargs)`` (a fresh
      retriever per call, so nothing shared is mutated). When fewer than ``similarity_top_k``
      distinct clusters come back it asks again within ``max_rounds``: with ``exclude_key`` (a
      metadata key holding the same id as the artifact, e.g. ``id_field``) the store is asked to
      leave out what was seen (``FilterOperator.NIN``), otherwise for a larger k.
    * any ``BaseRetriever`` with a ``similarity_top_k`` (``VectorIndexRetriever``, BM25, a
      ``QueryFusionRetriever`` over such retrievers): a shallow copy is asked for ``fetch_k``, then
      for more. Its own ``similarity_top_k`` is the default; its filters and settings are kept.
      A wrapped ``VectorIndexRetriever`` with ``exclude_key`` gets the exclusion AND-ed to its
      own filters on the copy (other retrievers cannot say it: they grow k).
    * a retriever without one (``SummaryIndexRetriever``, ``RouterRetriever``, a custom one):
      called once, and what it returned is diversified; ``result.exhausted`` is True when
      fewer than ``similarity_top_k`` distinct clusters were in it (``backend_calls == 1``).

    The user's filters (``filters`` and ``retriever_kwargs["filters"]`` for an index, AND-ed
    together; the wrapped retriever's own) apply to every call, refetches included: the exclusion
    is AND-ed to them, as one flat AND list when they are ANDs, as nested ``MetadataFilters`` for
    an OR on the stores known to take nesting (Qdrant, Chroma); where neither can be said, or the
    store rejects the exclusion, refetches ask for a larger k under the user's filters alone.
    ``refill`` ("auto", "exclude", "grow") chooses between the two; "auto" excludes when
    ``exclude_key`` is set, except on Qdrant's local mode and Chroma (a larger k is cheaper).

    ``k`` and ``index=`` are deprecated aliases of ``similarity_top_k`` and ``retriever``. Unknown
    arguments and bad values raise :class:`~diversify.errors.ConfigError` here, not at query time.

    Cluster ids, ``fold_threshold`` and returned copies: as
    :class:`~llama_index.postprocessor.diversify.DiversifyPostprocessor` (the retriever must
    return embeddings for ``fold_threshold`` to act; most vector stores do not).
    """

    def __init__(
        self,
        retriever: Any = None,
        *,
        cluster_map: Any = None,
        cluster_field: Optional[str] = None,
        id_field: Optional[str] = None,
        id_source: Literal["node_id", "ref_doc_id"] = "node_id",
        similarity_top_k: Optional[int] = None,
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
        **deprecated: Any,
    ) -> None:
        check_arguments("DiversifyRetriever", deprecated, _ARGUMENTS,
                        hints={"top_n": "similarity_top_k", "top_k": "similarity_top_k"})
        retriever, similarity_top_k = _deprecated_arguments(retriever, similarity_top_k, deprecated)
        if exclude_key in _STORE_WRITTEN_KEYS and id_source != "ref_doc_id":
            raise ConfigError(
                f"`exclude_key` must be a metadata key the vector store keeps as each node's own value; got "
                f"exclude_key={exclude_key!r}, which LlamaIndex overwrites with the node's source-document id "
                f"(ref_doc_id, or 'None') when it stores a node, so an exclusion on it would skip nothing, or every "
                f"chunk of a seen document. Keep the node's id under another key (e.g. metadata['chunk_id']) and "
                f"pass exclude_key='chunk_id', or use id_source='ref_doc_id' to diversify whole documents.")
        is_index = not isinstance(retriever, BaseRetriever) and callable(getattr(retriever, "as_retriever", None))
        if not is_index and not isinstance(retriever, BaseRetriever):
            raise ConfigError(f"`retriever` must be a LlamaIndex BaseRetriever or an index with as_retriever() "
                              f"(e.g. a VectorStoreIndex); got {type(retriever).__name__}.")
        if not is_index:
            given = [name for name, value in (("filters", filters), ("retriever_kwargs", retriever_kwargs))
                     if value is not None]
            if exclude_key is not None and not (_filterable(retriever) and resized(retriever, 1) is not None):
                given.insert(0, "exclude_key")
            if given:
                raise ConfigError(f"`{given[0]}` applies to an index (a retriever is made from it per call) or, "
                                  f"for exclude_key, a wrapped VectorIndexRetriever; the wrapped "
                                  f"{type(retriever).__name__} is already a retriever. Set its filters and options "
                                  "on it, or wrap the index to refill with exclusion.")
            if similarity_top_k is None:
                similarity_top_k = own_size(retriever)
        similarity_top_k = 4 if similarity_top_k is None else similarity_top_k
        check_settings(cluster_map, cluster_field=cluster_field, subject="node", k=similarity_top_k,
                       max_per_cluster=max_per_cluster, fetch_k=fetch_k, max_rounds=max_rounds,
                       fold_threshold=fold_threshold)
        _check_options(retriever, is_index, id_source, filters, retriever_kwargs)
        super().__init__(callback_manager=callback_manager)
        self._index = retriever if is_index else None
        self._wrapped: Optional[BaseRetriever] = None if is_index else retriever
        self._resizable = not is_index and resized(retriever, 1) is not None
        self._cluster_map = cluster_map
        self._cluster_field = cluster_field
        self._id_field = id_field
        self._id_source = id_source
        self._k, self._max_per_cluster, self._fetch_k, self._max_rounds = (similarity_top_k, max_per_cluster,
                                                                            fetch_k, max_rounds)
        self._exclude_key = exclude_key
        self._retriever_kwargs = dict(retriever_kwargs or {})
        self._metadata_key = metadata_key
        self._fold_threshold = fold_threshold
        self._lazy = LazyDiversifier("node")
        self._nested_ok = _takes_nested(retriever)
        self._user_filters = and_filters(filters, self._retriever_kwargs.pop("filters", None),
                                         nested_ok=self._nested_ok)
        if self._user_filters is _NESTED:
            raise ConfigError("`filters` and `retriever_kwargs['filters']` are both set and can only be AND-ed as "
                              "nested MetadataFilters, which this index's vector store does not take; got "
                              f"filters={filters!r}, retriever_kwargs['filters']={(retriever_kwargs or {})['filters']!r}. "
                              "Pass one of them.")
        # "auto": exclude when exclude_key is set, except on Qdrant's local mode and Chroma (a larger k is cheaper)
        store = _vector_store_of(retriever)
        self._refill = plugin_exclusion(refill, exclude_key is not None, retriever,
                                        name=type(store if store is not None else retriever).__name__,
                                        needs="Set exclude_key='<metadata key with the id>'")

    @property
    def similarity_top_k(self) -> int:
        """Nodes returned per query."""
        return self._k

    @property
    def refill_how(self) -> Optional[str]:
        """How a short answer is refilled, in words (None: the wrapped retriever is called once)."""
        if self._wrapped is None:
            return "store-side exclusion (NIN filter)" if self._refill.pushes_down else "a larger similarity_top_k"
        if not self._resizable:
            return None
        if self._refill.pushes_down:
            return "store-side exclusion (NIN filter AND its filters) on a copy"
        return "a larger similarity_top_k on a copy"

    @property
    def diversifier(self) -> Diversifier:
        """The :class:`diversify.Diversifier` behind this retriever (created on first use)."""
        return self._lazy.get(self._cluster_map, cluster_field=self._cluster_field, k=self._k,
                              max_per_cluster=self._max_per_cluster, fetch_k=self._fetch_k,
                              max_rounds=self._max_rounds, fold_threshold=self._fold_threshold)

    def _filters_for(self, filters: Optional[MetadataFilters],
                     exclude_ids: Optional[Sequence[Any]]) -> Optional[MetadataFilters]:
        """``filters`` (the user's), AND the exclusion of ``exclude_ids`` when given (never instead of them)."""
        if not exclude_ids or self._exclude_key is None:
            return filters
        return _with_exclusion(filters, self._exclude_key, exclude_ids, nested_ok=self._nested_ok)

    def _retriever(self, k: int, exclude_ids: Optional[Sequence[Any]]) -> Any:
        assert self._index is not None
        kwargs = dict(self._retriever_kwargs)
        filters = self._filters_for(self._user_filters, exclude_ids)
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
            return self._hits(await aretrieve(self._retriever(n, pushed), query_bundle))

        return await self._refill.asearch(call, k, exclude_ids)

    @staticmethod
    def _bundle(query: Any) -> QueryBundle:
        return query if isinstance(query, QueryBundle) else QueryBundle(query_str=query)

    def _sized(self, n: int, pushed: Optional[list]) -> Any:
        """A copy of the wrapped retriever asking for ``n``, its own filters AND the exclusion of ``pushed``."""
        assert self._wrapped is not None
        out = resized(self._wrapped, n)
        assert out is not None
        if pushed:
            out._filters = self._filters_for(out._filters, pushed)  # type: ignore[attr-defined]
        return out

    def _sized_search(self, query_bundle: QueryBundle, k: int,
                      exclude_ids: Optional[Sequence[Any]] = None) -> list[Hit]:
        return self._refill.search(lambda n, pushed: self._hits(self._sized(n, pushed).retrieve(query_bundle)),
                                   k, exclude_ids)

    async def _asized_search(self, query_bundle: QueryBundle, k: int,
                             exclude_ids: Optional[Sequence[Any]] = None) -> list[Hit]:
        async def call(n: int, pushed: Optional[list]) -> list[Hit]:
            return self._hits(await aretrieve(self._sized(n, pushed), query_bundle))

        return await self._refill.asearch(call, k, exclude_ids)

    def _fixed(self, nodes: list[NodeWithScore], k: Optional[int], cursor: Optional[str]) -> Result:
        hits = self._hits(list(nodes))
        return self.diversifier.select_items(
            [h.item for h in hits], ids=[h.id for h in hits], scores=[h.score for h in hits],
            payloads=[h.payload for h in hits], vectors=[h.vector for h in hits] if self._fold_threshold is not None
            else None, k=self._k if k is None else k, cursor=cursor, backend_calls=1)

    def retrieve_with_result(self, query, *, k: Optional[int] = None,
                             cursor: Optional[str] = None) -> DiversifiedNodes:
        """Like ``retrieve`` but also returns the :class:`diversify.Result` (``k`` overrides
        ``similarity_top_k`` for this call)."""
        bundle = self._bundle(query)
        if self._wrapped is None:
            search = self.diversifier.wrap(self._search, supports_exclude=self._refill.pushes_down)
            result = search(bundle, k=k, cursor=cursor)
        elif not self._resizable:
            result = self._fixed(self._wrapped.retrieve(bundle), k, cursor)
        else:
            search = self.diversifier.wrap(self._sized_search, supports_exclude=self._refill.pushes_down)
            result = search(bundle, k=k, cursor=cursor)
        return DiversifiedNodes(annotated_copies(result, self._metadata_key), result)

    async def aretrieve_with_result(self, query, *, k: Optional[int] = None,
                                    cursor: Optional[str] = None) -> DiversifiedNodes:
        """Async twin of :meth:`retrieve_with_result`."""
        bundle = self._bundle(query)
        if self._wrapped is None:
            search = self.diversifier.awrap(self._asearch, supports_exclude=self._refill.pushes_down)
            result = await search(bundle, k=k, cursor=cursor)
        elif not self._resizable:
            result = self._fixed(await aretrieve(self._wrapped, bundle), k, cursor)
        else:
            search = self.diversifier.awrap(self._asized_search, supports_exclude=self._refill.pushes_down)
            result = await search(bundle, k=k, cursor=cursor)
        return DiversifiedNodes(annotated_copies(result, self._metadata_key), result)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self.retrieve_with_result(query_bundle).nodes

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return (await self.aretrieve_with_result(query_bundle)).nodes


#: Every keyword DiversifyRetriever takes (``k`` and ``index`` deprecated), for unknown-argument errors.
_ARGUMENTS = tuple(name for name in inspect.signature(DiversifyRetriever.__init__).parameters
                   if name not in ("self", "deprecated")) + ("k", "index")


def _check_retriever_kwargs(index: Any, kwargs: dict) -> None:
    """Refuse ``retriever_kwargs`` keys that the index's retriever does not name: a
    ``VectorIndexRetriever`` takes ``**kwargs`` and ignores a mistyped ``filter`` silently."""
    from llama_index.core.retrievers import VectorIndexRetriever

    made = index.as_retriever()
    if type(made) is not VectorIndexRetriever:
        return  # another index's retriever: its own constructor checks what it is given
    named = {name for name, p in inspect.signature(VectorIndexRetriever.__init__).parameters.items()
             if name not in ("self", "index") and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    named.add("vector_store_kwargs")  # read from **kwargs
    check_arguments("`retriever_kwargs` (for VectorIndexRetriever)", kwargs, named,
                    hints={"filter": "filters", "top_k": "similarity_top_k"})


def _deprecated_arguments(retriever: Any, similarity_top_k: Optional[int],
                          deprecated: dict) -> tuple[Any, Optional[int]]:
    """``retriever`` and ``similarity_top_k`` with the deprecated ``index=`` and ``k=`` folded in (a
    DeprecationWarning each; both spellings at once is a ConfigError)."""
    if "index" in deprecated:
        if retriever is not None:
            raise ConfigError("DiversifyRetriever got both `retriever` and `index` (deprecated); pass only "
                              "retriever=<a retriever or an index>.")
        warnings.warn("DiversifyRetriever(index=...) is deprecated; pass it as retriever=... (or first).",
                      DeprecationWarning, stacklevel=3)
        retriever = deprecated.pop("index")
    if "k" in deprecated:
        if similarity_top_k is not None:
            raise ConfigError(f"DiversifyRetriever got both `k` (deprecated) and `similarity_top_k`; got "
                              f"k={deprecated['k']!r}, similarity_top_k={similarity_top_k!r}. Pass only "
                              "similarity_top_k.")
        warnings.warn("DiversifyRetriever(k=...) is deprecated; use similarity_top_k=... (the same meaning).",
                      DeprecationWarning, stacklevel=3)
        similarity_top_k = deprecated.pop("k")
    return retriever, similarity_top_k


def _check_options(retriever: Any, is_index: bool, id_source: str, filters: Any, retriever_kwargs: Any) -> None:
    """Refuse a bad ``id_source``, ``filters`` or ``retriever_kwargs`` of :class:`DiversifyRetriever`."""
    if id_source not in ("node_id", "ref_doc_id"):
        raise ConfigError(f"`id_source` must be 'node_id' or 'ref_doc_id'; got id_source={id_source!r}. "
                          "Use id_field='<metadata key>' for an id kept in the metadata.")
    if filters is not None and not isinstance(filters, MetadataFilters):
        raise ConfigError(f"`filters` must be llama_index MetadataFilters; got {type(filters).__name__}. "
                          "Use MetadataFilters(filters=[MetadataFilter(key=..., value=...)]).")
    if retriever_kwargs is not None and not isinstance(retriever_kwargs, dict):
        raise ConfigError(f"`retriever_kwargs` must be a dict of as_retriever() keyword arguments; got "
                          f"{type(retriever_kwargs).__name__}.")
    if retriever_kwargs and "similarity_top_k" in retriever_kwargs:
        raise ConfigError("`retriever_kwargs` cannot set similarity_top_k: the number of candidates is asked "
                          "per call (fetch_k, then more). Pass similarity_top_k=... to DiversifyRetriever.")
    if retriever_kwargs and is_index:
        _check_retriever_kwargs(retriever, retriever_kwargs)
