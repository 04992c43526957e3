"""How :class:`DiversifyRetriever` calls a VectorStore.

- **The user's filter is never dropped.** ``search_kwargs`` go to every call; a refetch's
  exclusion (``exclude_filter(seen_ids)``) is AND-ed to any key it shares with them
  (:func:`and_filters`), in a form the store is known to evaluate. When no such form exists the
  refetch asks for a larger k under the user's filter alone instead (one WARNING), never a call
  with the exclusion in place of the user's filter.
- **The query is embedded once per user query** when the store can search by vector
  (``similarity_search_with_score_by_vector``; the Chroma classes'
  ``similarity_search_by_vector_with_relevance_scores``); refetches reuse the vector.
- **Post-filtering stores** (a ``fetch_k`` parameter: LangChain's FAISS filters only its first
  ``fetch_k`` candidates) get a ``fetch_k`` large enough that a short answer means the store is
  out of matching documents, not that the filter ran over too few candidates.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Optional

from diversify.errors import ConfigError
from diversify.online import Fetched

__all__ = ["and_filters", "VectorStoreSearch", "NotComposable"]

_BY_VECTOR = "similarity_search_with_score_by_vector"
# named like a relevance-score method but returns what similarity_search_with_score does, and is
# trusted only where it is known to pass `filter` on (LangChain's LanceDB drops it)
_BY_VECTOR_CHROMA = "similarity_search_by_vector_with_relevance_scores"
_CHROMA_MODULES = ("langchain_chroma", "langchain_community.vectorstores.chroma")
# stores whose dict filters take Mongo-style {"$and": [...]}
_AND_DICT_MODULES = ("langchain_chroma", "langchain_community.vectorstores.chroma",
                     "langchain_community.vectorstores.faiss", "langchain_postgres",
                     "langchain_community.vectorstores.pgvector", "langchain_pinecone", "langchain_astradb",
                     "langchain_mongodb")
# stores whose string filters are SQL predicates
_AND_SQL_MODULES = ("langchain_community.vectorstores.lancedb",)


class NotComposable(ConfigError):
    """The exclusion and the user's filter cannot be AND-ed in this store's filter language."""


class _All:
    """AND of callable filters (``filter(doc_or_metadata) -> bool``)."""

    __slots__ = ("parts",)

    def __init__(self, *parts: Callable[[Any], Any]) -> None:
        self.parts = parts

    def __call__(self, x: Any) -> bool:
        return all(p(x) for p in self.parts)


def _is_qdrant_filter(f: Any) -> bool:
    t = type(f)
    return t.__name__ == "Filter" and t.__module__.startswith("qdrant_client")


def _module_in(store: Any, modules: Sequence[str]) -> bool:
    mod = type(store).__module__
    return any(mod == m or mod.startswith(m + ".") for m in modules)


def and_filters(user: Any, exclusion: Any, *, store: Any = None, key: str = "filter") -> Any:
    """``user`` AND ``exclusion`` in the store's filter language.

    Callables (filters on a Document or its metadata) and Qdrant ``Filter`` objects compose
    anywhere; dict filters as ``{"$and": [...]}`` for the stores known to take that form
    (Chroma, FAISS, PGVector, Pinecone...), SQL strings for LanceDB. Anything else raises
    :class:`NotComposable` (the caller then grows k instead of pushing the exclusion down).
    """
    if user is None:
        return exclusion
    if exclusion is None:
        return user
    if callable(user) and callable(exclusion) and not _is_qdrant_filter(user):
        return _All(user, exclusion)
    if _is_qdrant_filter(user) and _is_qdrant_filter(exclusion):
        return type(user)(must=[user, exclusion])
    if isinstance(user, Mapping) and isinstance(exclusion, Mapping) and _module_in(store, _AND_DICT_MODULES):
        return {"$and": [dict(user), dict(exclusion)]}
    if isinstance(user, str) and isinstance(exclusion, str) and _module_in(store, _AND_SQL_MODULES):
        return f"({user}) AND ({exclusion})"
    raise NotComposable(
        f"search_kwargs[{key!r}] ({type(user).__name__}) and the exclusion filter ({type(exclusion).__name__}) "
        f"cannot be AND-ed for {type(store).__name__}; refetches ask for a larger k under your filter instead. "
        "Return the exclusion in the same filter form as your filter (both callables, both dicts...).")


def _accepts(method: Callable[..., Any], name: str) -> bool:
    try:
        return name in inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False


def _store_size(store: Any) -> Optional[int]:
    ntotal = getattr(getattr(store, "index", None), "ntotal", None)
    return int(ntotal) if isinstance(ntotal, int) else None


class VectorStoreSearch:
    """One retriever's way of calling its VectorStore (see the module docstring)."""

    def __init__(self, vectorstore: Any, search_kwargs: Mapping[str, Any],
                 exclude_filter: Optional[Callable[[Sequence[Any]], Mapping[str, Any]]]) -> None:
        self.store = vectorstore
        self.search_kwargs = dict(search_kwargs)
        self.exclude_filter = exclude_filter
        cls = type(vectorstore)
        self.by_vector: Optional[str] = None
        if callable(getattr(cls, _BY_VECTOR, None)):
            self.by_vector = _BY_VECTOR
        elif callable(getattr(cls, _BY_VECTOR_CHROMA, None)) and _module_in(vectorstore, _CHROMA_MODULES):
            self.by_vector = _BY_VECTOR_CHROMA
        method = getattr(vectorstore, self.by_vector or "similarity_search_with_score")
        self.post_filter = _accepts(method, "fetch_k")

    def _embeddings(self) -> Any:
        if self.by_vector is None:
            return None
        try:
            return getattr(self.store, "embeddings", None)
        except NotImplementedError:  # the VectorStore base raises for stores that embed server-side
            return None

    def query(self, text: str) -> Any:
        """What the calls search with: the query's vector (embedded here, once) or its text."""
        emb = self._embeddings()
        return text if emb is None else _Vector(emb.embed_query(text))

    async def aquery(self, text: str) -> Any:
        emb = self._embeddings()
        return text if emb is None else _Vector(await emb.aembed_query(text))

    def kwargs(self, exclude_ids: Optional[list]) -> dict:
        """``search_kwargs``, with the exclusion of ``exclude_ids`` AND-ed in when given."""
        kwargs = dict(self.search_kwargs)
        if exclude_ids and self.exclude_filter is not None:
            for key, value in dict(self.exclude_filter(list(exclude_ids))).items():
                kwargs[key] = and_filters(kwargs.get(key), value, store=self.store, key=key)
        return kwargs

    def _method(self, query: Any, asynchronous: bool = False) -> tuple[Callable[..., Any], bool]:
        """The store method for this query (by vector or by text), and whether it is a coroutine."""
        name = self.by_vector if isinstance(query, _Vector) and self.by_vector else "similarity_search_with_score"
        if asynchronous:
            method = getattr(self.store, "a" + name, None)
            if method is not None:
                return method, True
        return getattr(self.store, name), False

    def _fetch_plan(self, k: int, kwargs: dict) -> tuple[Optional[int], Optional[int]]:
        """(first fetch_k, the store's size) for a post-filtering store with a filter; else (None, None)."""
        if not self.post_filter or not any(kwargs.get(key) is not None for key in ("filter", "where")):
            return None, None
        user = kwargs.get("fetch_k")
        first = max(int(user) if isinstance(user, int) else 20, 4 * k)
        return first, _store_size(self.store)

    def search(self, query: Any, k: int, exclude_ids: Optional[list]) -> Fetched:
        """``[(Document, score)]``: top-``k`` under the user's filter (and the exclusion), with
        the number of store calls it took (a post-filtering store may be asked again)."""
        kwargs = self.kwargs(exclude_ids)
        method, _ = self._method(query)
        arg = query.vector if isinstance(query, _Vector) else query
        fetch_k, size = self._fetch_plan(k, kwargs)
        calls = 0
        while True:
            if fetch_k is not None:
                kwargs["fetch_k"] = fetch_k
            pairs = list(method(arg, k=k, **kwargs))
            calls += 1
            if fetch_k is None or len(pairs) >= k or size is None or fetch_k >= size:
                return Fetched(pairs, calls)
            fetch_k = min(fetch_k * 4, size)

    async def asearch(self, query: Any, k: int, exclude_ids: Optional[list]) -> Fetched:
        kwargs = self.kwargs(exclude_ids)
        method, native = self._method(query, asynchronous=True)
        arg = query.vector if isinstance(query, _Vector) else query
        fetch_k, size = self._fetch_plan(k, kwargs)
        calls = 0
        while True:
            if fetch_k is not None:
                kwargs["fetch_k"] = fetch_k
            if native:
                pairs = list(await method(arg, k=k, **kwargs))
            else:  # no async twin: the sync call in a worker thread
                pairs = list(await asyncio.to_thread(method, arg, k=k, **kwargs))
            calls += 1
            if fetch_k is None or len(pairs) >= k or size is None or fetch_k >= size:
                return Fetched(pairs, calls)
            fetch_k = min(fetch_k * 4, size)


class _Vector:
    """A query already embedded (marks it apart from a query text)."""

    __slots__ = ("vector",)

    def __init__(self, vector: Sequence[float]) -> None:
        self.vector = list(vector)
