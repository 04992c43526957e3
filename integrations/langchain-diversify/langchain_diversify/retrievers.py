"""`DiversifyRetriever`: a LangChain retriever over any VectorStore, at most n per cluster, refilled."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Optional

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import VectorStore
from pydantic import Field, PrivateAttr

from diversify.errors import StoreError
from diversify.online import Hit, Result
from diversify.stores.exclusion import Exclusion, plugin_exclusion

from ._common import DiversifySettings, annotated_copies
from ._search import VectorStoreSearch

__all__ = ["DiversifyRetriever", "DiversifiedDocuments", "callable_exclude_filter"]


class DiversifiedDocuments(NamedTuple):
    """The documents (annotated copies, rank order) and the :class:`diversify.Result` behind them.

    ``result.backend_calls`` counts vector store calls, ``result.exhausted`` says the store ran
    out before ``k`` distinct clusters were found, ``result.cursor`` gives the next page.
    """

    documents: list[Document]
    result: Result


def callable_exclude_filter(ids: Sequence[Any]) -> dict:
    """``exclude_filter`` for stores whose ``filter`` takes a callable on Document
    (``InMemoryVectorStore``): refetch everything but the ids already seen."""
    seen = frozenset(ids)
    return {"filter": lambda doc: doc.id not in seen}


class DiversifyRetriever(DiversifySettings, BaseRetriever):
    """Retrieve the top ``k`` of a VectorStore with at most ``max_per_cluster`` per cluster.

    Calls ``vectorstore.similarity_search_with_score`` (``as_retriever()`` would drop the
    scores that break ties deterministically), asking for ``fetch_k`` candidates. When fewer
    than ``k`` distinct clusters come back it asks again, within ``max_rounds``: with
    ``exclude_filter`` the store is asked to leave out what was already seen, otherwise it is
    asked for a larger k. When the store runs out, fewer than ``k`` are returned.

    Each returned Document is a copy of the better-ranked original (same ``id``, same
    ``page_content``) whose metadata gains ``metadata["diversify"] = {"cluster_id", "omitted",
    "omitted_ids", "score"}``. The store's own Documents are never modified.

    Example
    -------
    >>> retriever = DiversifyRetriever(vectorstore=store, cluster_map="clusters.dvf", k=5)
    >>> docs = retriever.invoke("what is a near-duplicate?")
    >>> docs, result = retriever.retrieve_with_result("...")   # result.backend_calls, .exhausted
    """

    vectorstore: VectorStore
    k: int = 4
    """Number of documents to return."""
    fetch_k: Optional[int] = None
    """Candidates asked for in the first call; default from k and max_per_cluster."""
    max_rounds: int = 3
    """Refetch rounds after the first call; higher -> fewer short answers, more store calls."""
    search_kwargs: dict = Field(default_factory=dict)
    """Extra keyword arguments for every ``similarity_search_with_score`` call (e.g. a filter)."""
    exclude_filter: Optional[Callable[[Sequence[Any]], dict]] = None
    """``exclude_filter(seen_ids) -> search kwargs`` that make the store skip those ids on a
    refetch, AND-ed with what ``search_kwargs`` holds under the same key (never replacing it).
    See :func:`callable_exclude_filter`."""

    refill: str = "auto"
    """How refetches skip what was seen: ``"exclude"`` (``exclude_filter``, at most 256 ids per
    call, then a larger k), ``"grow"`` (a larger k), ``"auto"`` (exclude when ``exclude_filter``
    is set, except on Qdrant's local mode and Chroma, where an id filter was measured slower than a larger k.."""

    _exclusion: Optional[Exclusion] = PrivateAttr(default=None)

    def _diversifier_kwargs(self) -> dict:
        return {"k": self.k, "fetch_k": self.fetch_k, "max_rounds": self.max_rounds}

    def _hits(self, pairs: Sequence[tuple[Document, float]]) -> list[Hit]:
        return [Hit(self._doc_id(doc, j, StoreError), float(score), doc.metadata, None, doc)
                for j, (doc, score) in enumerate(pairs)]

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

    def retrieve_with_result(self, query: str, *, k: Optional[int] = None,
                             cursor: Optional[str] = None) -> DiversifiedDocuments:
        """Like ``invoke`` but also returns the :class:`diversify.Result` (backend calls,
        exhaustion, omitted counts, cursor for the next page)."""
        vs, refill = self._searcher(), self._refill()

        def search(q: Any, kk: int, exclude_ids: Optional[list] = None) -> list[Hit]:
            return refill.search(lambda n, pushed: self._hits(vs.search(q, n, pushed)), kk, exclude_ids)

        result = self.diversifier.wrap(search, supports_exclude=refill.pushes_down)(vs.query(query), k=k,
                                                                                     cursor=cursor)
        return DiversifiedDocuments(annotated_copies(result, self.metadata_key), result)

    async def aretrieve_with_result(self, query: str, *, k: Optional[int] = None,
                                    cursor: Optional[str] = None) -> DiversifiedDocuments:
        """Async twin of :meth:`retrieve_with_result`."""
        vs, refill = self._searcher(), self._refill()

        async def search(q: Any, kk: int, exclude_ids: Optional[list] = None) -> list[Hit]:
            async def call(n: int, pushed: Optional[list]) -> list[Hit]:
                return self._hits(await vs.asearch(q, n, pushed))

            return await refill.asearch(call, kk, exclude_ids)

        result = await self.diversifier.awrap(search, supports_exclude=refill.pushes_down)(
            await vs.aquery(query), k=k, cursor=cursor)
        return DiversifiedDocuments(annotated_copies(result, self.metadata_key), result)

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                k: Optional[int] = None, cursor: Optional[str] = None) -> list[Document]:
        return self.retrieve_with_result(query, k=k, cursor=cursor).documents

    async def _aget_relevant_documents(self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun,
                                       k: Optional[int] = None, cursor: Optional[str] = None) -> list[Document]:
        return (await self.aretrieve_with_result(query, k=k, cursor=cursor)).documents
