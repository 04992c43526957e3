"""`DiversifyRetriever`: wraps any LangChain retriever (or a VectorStore); at most n per cluster, refilled."""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, Optional

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
    Callbacks,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig
from langchain_core.vectorstores import VectorStore, VectorStoreRetriever
from pydantic import Field, PrivateAttr

from diversify.errors import ConfigError, StoreError
from diversify.online import Fetched, Hit, Result
from diversify.online.plugins import check_settings
from diversify.stores.exclusion import REFILL_MODES, Exclusion, plugin_exclusion

from ._common import MODEL_CONFIG, DiversifySettings, annotated_copies
from ._search import VectorStoreSearch
from ._sizing import own_size, resized, sizing

__all__ = ["DiversifyRetriever", "DiversifiedDocuments", "callable_exclude_filter"]


class DiversifiedDocuments(NamedTuple):
    """The documents (annotated copies, rank order) and the :class:`diversify.Result` behind them.

    ``result.backend_calls`` counts calls to the store or wrapped retriever, ``result.exhausted``
    says it ran out before ``k`` distinct clusters were found, ``result.cursor`` gives the next page.
    """

    documents: list[Document]
    result: Result


def callable_exclude_filter(ids: Sequence[Any]) -> dict:
    """``exclude_filter`` for stores whose ``filter`` takes a callable on Document
    (``InMemoryVectorStore``): refetch everything but the ids already seen."""
    seen = frozenset(ids)
    return {"filter": lambda doc: doc.id not in seen}


class DiversifyRetriever(DiversifySettings, BaseRetriever):
    """Top ``k`` documents of any retriever (or vector store), at most ``max_per_cluster`` per cluster.

    ``retriever`` is what is wrapped, and it decides how a short answer is refilled:

    * a ``VectorStore``, or its ``as_retriever()`` (``search_type="similarity"``): searched with
      ``similarity_search_with_score`` (the scores break ties deterministically) for ``fetch_k``
      candidates; when fewer than ``k`` distinct clusters come back it asks again, within
      ``max_rounds``: with ``exclude_filter`` the store leaves out what was already seen,
      otherwise it is asked for a larger k. The ``as_retriever`` ``search_kwargs`` (a filter...)
      are kept; its ``k`` is the default ``k``.
    * any other ``BaseRetriever`` that can be asked for more results (``BM25Retriever`` and
      others with a ``k``; ``search_kwargs["k"]``; an ``EnsembleRetriever`` or
      ``MultiQueryRetriever`` over such retrievers): asked for ``fetch_k``, refilled by asking a
      copy of it for more (the wrapped object is never changed). Its own ``k`` is the default ``k``.
    * a retriever that cannot be asked for more (``ContextualCompressionRetriever``, a custom
      one): called once, and what it returned is diversified; ``result.exhausted`` is True
      when fewer than ``k`` distinct clusters were in it (``backend_calls == 1``).

    When the source runs out, fewer than ``k`` come back and ``result.exhausted`` says so.
    Arguments are checked when the object is built: unknown names, bad values and
    ``search_kwargs`` keys the store's search does not take raise
    :class:`~diversify.errors.ConfigError`.

    Each returned Document is a copy of the better-ranked original (same ``id``, same
    ``page_content``) whose metadata gains ``metadata["diversify"] = {"cluster_id", "omitted",
    "omitted_ids", "score"}``. The store's own Documents are never modified.

    Example
    -------
    >>> retriever = DiversifyRetriever(retriever=bm25, cluster_map="clusters.dvf", k=5)
    >>> retriever = DiversifyRetriever(retriever=store.as_retriever(search_kwargs={"filter": f}),
    ...                                cluster_map="clusters.dvf", k=5)
    >>> docs = retriever.invoke("what is a near-duplicate?")
    >>> docs, result = retriever.retrieve_with_result("...")   # result.backend_calls, .exhausted
    """

    model_config = MODEL_CONFIG

    retriever: Any = None
    """What is wrapped: any ``BaseRetriever``, or a ``VectorStore``."""
    vectorstore: Optional[VectorStore] = None
    """The vector store searched (given directly, or the one behind a wrapped ``as_retriever()``);
    None when the wrapped retriever is not a vector store's."""
    k: int = 4
    """Number of documents to return; default the wrapped retriever's own ``k``, else 4."""
    fetch_k: Optional[int] = None
    """Candidates asked for in the first call; default from k and max_per_cluster."""
    max_rounds: int = 3
    """Refetch rounds after the first call; higher -> fewer short answers, more store calls."""
    search_kwargs: dict = Field(default_factory=dict)
    """Extra keyword arguments for every ``similarity_search_with_score`` call (e.g. a filter);
    vector stores only (set a retriever's own options on the retriever)."""
    exclude_filter: Optional[Callable[[Sequence[Any]], dict]] = None
    """``exclude_filter(seen_ids) -> search kwargs`` that make the store skip those ids on a
    refetch, AND-ed with what ``search_kwargs`` holds under the same key (never replacing it).
    See :func:`callable_exclude_filter`. Vector stores only."""
    refill: str = "auto"
    """How refetches from a vector store skip what was seen: ``"exclude"`` (``exclude_filter``, at
    most 256 ids per call, then a larger k), ``"grow"`` (a larger k), ``"auto"`` (exclude when
    ``exclude_filter`` is set, except on Qdrant's local mode and Chroma, where an id filter was
    measured slower than a larger k). A wrapped retriever that is not a vector store's grows k."""
    check_search_kwargs: bool = True
    """Refuse ``search_kwargs`` keys that the store's search methods do not name; False for a key
    the store reads from ``**kwargs`` only."""

    def __init__(self, **data: Any) -> None:
        self._check_arguments(data, hints=_HINTS)
        _resolve_source(data)
        check_settings(data.get("cluster_map"), cluster_field=data.get("cluster_field"), k=data.get("k", 4),
                       max_per_cluster=data.get("max_per_cluster", 1), fetch_k=data.get("fetch_k"),
                       max_rounds=data.get("max_rounds", 3))
        super().__init__(**data)

    _exclusion: Optional[Exclusion] = PrivateAttr(default=None)

    def _diversifier_kwargs(self) -> dict:
        return {"k": self.k, "fetch_k": self.fetch_k, "max_rounds": self.max_rounds}

    @property
    def refill_how(self) -> Optional[str]:
        """How a short answer is refilled, in words (None: the wrapped retriever is called once)."""
        if self.vectorstore is not None:
            return "store-side exclusion (exclude_filter)" if self._refill().pushes_down else "a larger k"
        how = sizing(self.retriever)
        return None if how is None else f"a larger k through {how}"

    def _hits(self, pairs: Sequence[tuple[Document, float]]) -> list[Hit]:
        return [Hit(self._doc_id(doc, j, StoreError), float(score), doc.metadata, None, doc)
                for j, (doc, score) in enumerate(pairs)]

    def _counted_hits(self, pairs: Fetched) -> Fetched:
        """The hits of one :meth:`VectorStoreSearch.search`, with the store calls it made."""
        return Fetched(self._hits(pairs), pairs.calls)

    def _searcher(self) -> VectorStoreSearch:
        return VectorStoreSearch(self.vectorstore, self.search_kwargs, self.exclude_filter)

    def _refill(self) -> Exclusion:
        """The refetch strategy, shared by this retriever's queries (it remembers a store that
        rejected the exclusion: then refetches ask for a larger k)."""
        ex = self._exclusion
        if ex is None:
            ex = plugin_exclusion(self.refill, self.exclude_filter is not None, self.vectorstore,
                                  name=type(self.vectorstore).__name__, needs="Set exclude_filter=")
            self._exclusion = ex
        return ex

    def _retriever_hits(self, docs: Sequence[Document]) -> list[Hit]:
        return [Hit(self._doc_id(doc, j, StoreError), None, doc.metadata, None, doc) for j, doc in enumerate(docs)]

    def _fixed(self, docs: Sequence[Document], k: Optional[int], cursor: Optional[str]) -> Result:
        docs = list(docs)
        ids = [self._doc_id(doc, j, StoreError) for j, doc in enumerate(docs)]
        return self.diversifier.select_items(
            docs, ids=ids, scores=[None] * len(docs), payloads=[doc.metadata for doc in docs],
            k=self.k if k is None else k, cursor=cursor, backend_calls=1)

    def _result(self, query: str, k: Optional[int], cursor: Optional[str], callbacks: Callbacks) -> Result:
        if self.vectorstore is not None:
            vs, refill = self._searcher(), self._refill()

            def search(q: Any, kk: int, exclude_ids: Optional[list] = None) -> list[Hit]:
                return refill.search(lambda n, pushed: self._counted_hits(vs.search(q, n, pushed)), kk, exclude_ids)

            # the query is embedded once (vs.query), refetches reuse the vector
            return self.diversifier.wrap(search, supports_exclude=refill.pushes_down)(vs.query(query), k=k,
                                                                                      cursor=cursor)
        config = _config(callbacks)
        if sizing(self.retriever) is None:
            return self._fixed(self.retriever.invoke(query, config), k, cursor)

        def search_retriever(q: str, n: int) -> list[Hit]:
            return self._retriever_hits(resized(self.retriever, n).invoke(q, config))

        return self.diversifier.wrap(search_retriever, supports_exclude=False)(query, k=k, cursor=cursor)

    async def _aresult(self, query: str, k: Optional[int], cursor: Optional[str], callbacks: Callbacks) -> Result:
        if self.vectorstore is not None:
            vs, refill = self._searcher(), self._refill()

            async def asearch(q: Any, kk: int, exclude_ids: Optional[list] = None) -> list[Hit]:
                async def call(n: int, pushed: Optional[list]) -> list[Hit]:
                    return self._counted_hits(await vs.asearch(q, n, pushed))

                return await refill.asearch(call, kk, exclude_ids)

            return await self.diversifier.awrap(asearch, supports_exclude=refill.pushes_down)(
                await vs.aquery(query), k=k, cursor=cursor)
        config = _config(callbacks)
        if sizing(self.retriever) is None:
            return self._fixed(await self.retriever.ainvoke(query, config), k, cursor)

        async def search_retriever(q: str, n: int) -> list[Hit]:
            return self._retriever_hits(await resized(self.retriever, n).ainvoke(q, config))

        return await self.diversifier.awrap(search_retriever, supports_exclude=False)(query, k=k, cursor=cursor)

    def retrieve_with_result(self, query: str, *, k: Optional[int] = None,
                             cursor: Optional[str] = None) -> DiversifiedDocuments:
        """Like ``invoke`` but also returns the :class:`diversify.Result` (backend calls,
        exhaustion, omitted counts, cursor for the next page)."""
        result = self._result(query, k, cursor, None)
        return DiversifiedDocuments(annotated_copies(result, self.metadata_key), result)

    async def aretrieve_with_result(self, query: str, *, k: Optional[int] = None,
                                    cursor: Optional[str] = None) -> DiversifiedDocuments:
        """Async twin of :meth:`retrieve_with_result` (``asimilarity_search_with_score``, or the
        wrapped retriever's ``ainvoke``)."""
        result = await self._aresult(query, k, cursor, None)
        return DiversifiedDocuments(annotated_copies(result, self.metadata_key), result)

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                k: Optional[int] = None, cursor: Optional[str] = None) -> list[Document]:
        return annotated_copies(self._result(query, k, cursor, run_manager.get_child()), self.metadata_key)

    async def _aget_relevant_documents(self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun,
                                       k: Optional[int] = None, cursor: Optional[str] = None) -> list[Document]:
        result = await self._aresult(query, k, cursor, run_manager.get_child())
        return annotated_copies(result, self.metadata_key)


# ---------------------------------------------------------------------- construction-time checks

#: Names from other retrievers and rerankers, and what this class calls them.
_HINTS = {"top_n": "k", "top_k": "k", "similarity_top_k": "k", "base_retriever": "retriever",
          "vector_store": "vectorstore", "filter": "search_kwargs", "filters": "search_kwargs"}
#: The store methods whose named parameters are the search_kwargs keys a store takes.
_SEARCH_METHODS = ("similarity_search_with_score", "similarity_search_with_score_by_vector",
                   "similarity_search_by_vector_with_relevance_scores", "asimilarity_search_with_score")
_POSITIONAL = ("self", "query", "embedding", "k")


def _config(callbacks: Callbacks) -> Optional[RunnableConfig]:
    return None if callbacks is None else {"callbacks": callbacks}


def _check_k(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"`{where}` must be an int >= 1; got {value!r} ({type(value).__name__}). "
                          "Use e.g. k=5 on DiversifyRetriever (the number of documents returned).")
    return value


def _store_parameters(store: VectorStore) -> set[str]:
    names: set[str] = set()
    for method in _SEARCH_METHODS:
        fn = getattr(store, method, None)
        if fn is None:
            continue
        try:
            params = inspect.signature(fn).parameters.values()
        except (TypeError, ValueError):
            continue
        names.update(p.name for p in params if p.name not in _POSITIONAL
                     and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
    return names


def _check_search_kwargs(store: VectorStore, kwargs: Mapping[str, Any], strict: bool) -> None:
    for key in kwargs:
        if not isinstance(key, str):
            raise ConfigError(f"`search_kwargs` keys must be strings (keyword arguments of the store's search); "
                              f"got {key!r} ({type(key).__name__}).")
        if key in ("query", "embedding"):
            raise ConfigError(f"`search_kwargs` cannot set {key!r}: the query is what invoke() is given.")
    if not strict:
        return
    named = _store_parameters(store)
    unknown = sorted(key for key in kwargs if key not in named)
    if unknown:
        key = unknown[0]
        close = difflib.get_close_matches(key, sorted(named), n=1, cutoff=0.6)
        fix = f"Did you mean {close[0]!r}? " if close else ""
        raise ConfigError(
            f"`search_kwargs` has a key {key!r} that {type(store).__name__}.similarity_search_with_score does not "
            f"take (it names: {', '.join(sorted(named)) or 'nothing but k'}); the store would ignore it. {fix}"
            "If the store reads that key from **kwargs, pass check_search_kwargs=False.")


def _resolve_source(data: dict) -> None:
    """Fill ``vectorstore`` / ``search_kwargs`` / ``k`` from what is wrapped, and check them (in place)."""
    retriever, store = data.get("retriever"), data.get("vectorstore")
    if retriever is not None and store is not None:
        raise ConfigError("DiversifyRetriever takes one of `retriever` and `vectorstore`; got both. "
                          "Pass retriever=<a retriever or a vector store>.")
    if retriever is None and store is None:
        raise ConfigError("DiversifyRetriever needs `retriever` (any LangChain retriever, or a VectorStore); got "
                          "neither. Pass e.g. retriever=bm25_retriever or retriever=vectorstore.")
    if isinstance(retriever, VectorStore):
        store, retriever = retriever, None
        data["retriever"] = None
    elif retriever is not None and not isinstance(retriever, BaseRetriever):
        raise ConfigError(f"`retriever` must be a LangChain BaseRetriever or a VectorStore; got "
                          f"{type(retriever).__name__}. Wrap the object in a retriever or pass its vector store.")
    if store is not None and not isinstance(store, VectorStore):
        raise ConfigError(f"`vectorstore` must be a LangChain VectorStore; got {type(store).__name__}.")
    kwargs = data.get("search_kwargs", {})
    if not isinstance(kwargs, Mapping):
        raise ConfigError(f"`search_kwargs` must be a dict of keyword arguments for the store's search; got "
                          f"{type(kwargs).__name__}. Use e.g. search_kwargs={{'filter': {{...}}}}.")
    kwargs = dict(kwargs)
    if "k" in kwargs:  # our own k, written the as_retriever way
        own = _check_k(kwargs.pop("k"), "search_kwargs['k']")
        if "k" in data and data["k"] != own:
            raise ConfigError(f"`k` is given twice with different values: k={data['k']!r} and "
                              f"search_kwargs['k']={own!r}. Pass k= only.")
        data.setdefault("k", own)
    if isinstance(retriever, VectorStoreRetriever) and retriever.search_type == "similarity":
        store = retriever.vectorstore
        inner = dict(retriever.search_kwargs)
        if "k" in inner:
            data.setdefault("k", _check_k(inner.pop("k"), "retriever.search_kwargs['k']"))
        kwargs = {**inner, **kwargs}
    if store is not None:
        data["vectorstore"] = store
        _check_search_kwargs(store, kwargs, data.get("check_search_kwargs", True))
        data["search_kwargs"] = kwargs
        return
    if kwargs:
        raise ConfigError(f"`search_kwargs` ({sorted(kwargs)}) go to a vector store's search, and the wrapped "
                          f"{type(retriever).__name__} is not one. Set them on the wrapped retriever itself.")
    if data.get("exclude_filter") is not None:
        raise ConfigError(f"`exclude_filter` needs a vector store; the wrapped {type(retriever).__name__} takes no "
                          "exclusion filter (it is refilled by asking for a larger k, or called once). Wrap the "
                          "vector store, or its as_retriever(), to refill with exclusion.")
    if data.get("refill", "auto") not in REFILL_MODES or data.get("refill") == "exclude":
        raise ConfigError(f"`refill` for the wrapped {type(retriever).__name__} (not a vector store's retriever) "
                          f"can be 'auto' or 'grow' (it is refilled by asking for a larger k); got "
                          f"refill={data.get('refill')!r}. Wrap the vector store to refill with exclusion.")
    if "k" not in data:
        own = own_size(retriever)
        if own is not None:
            data["k"] = _check_k(own, f"{type(retriever).__name__}'s own k")
