"""How many results a wrapped LangChain retriever gives, and how to ask it for more.

A refill needs a retriever that can be asked for a larger number of results. LangChain has no
common parameter for that, so each known shape is handled:

* ``VectorStoreRetriever`` and other retrievers with a ``search_kwargs`` dict (``SelfQueryRetriever``,
  ``MultiVectorRetriever``, ``ParentDocumentRetriever``): ``search_kwargs["k"]`` (and
  ``fetch_k`` for ``search_type="mmr"``, which cannot return more than it fetches);
* retrievers with an int ``k`` or ``top_k`` field (``BM25Retriever``, ``TFIDFRetriever``,
  ``KNNRetriever``, ``SVMRetriever``...);
* retrievers that merge others (``EnsembleRetriever``, ``MergerRetriever``: a ``retrievers``
  list) or rewrite the query for another (``MultiQueryRetriever``, ``RePhraseQueryRetriever``: a
  ``retriever`` field): resizable when every retriever inside is.

Anything else (``ContextualCompressionRetriever``, whose compressor decides how many come back;
a custom retriever with no size) is *fixed*: it is called once and what it gives is diversified.
A resized retriever is a shallow ``model_copy``: the caller's object is never changed.
"""

from __future__ import annotations

from typing import Any, Optional

from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import VectorStoreRetriever

__all__ = ["resized", "own_size", "sizing"]

_SIZE_FIELDS = ("k", "top_k")


def _is_size(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _fields(retriever: BaseRetriever) -> dict:
    return type(retriever).model_fields


def _children(retriever: BaseRetriever) -> Optional[tuple[str, Any]]:
    fields = _fields(retriever)
    inner = getattr(retriever, "retrievers", None) if "retrievers" in fields else None
    if isinstance(inner, (list, tuple)) and inner and all(isinstance(r, BaseRetriever) for r in inner):
        return "retrievers", list(inner)
    one = getattr(retriever, "retriever", None) if "retriever" in fields else None
    if isinstance(one, BaseRetriever):
        return "retriever", one
    return None


def sizing(retriever: BaseRetriever) -> Optional[str]:
    """How ``retriever`` can be asked for more results, in words, or None when it cannot."""
    fields = _fields(retriever)
    if isinstance(getattr(retriever, "search_kwargs", None), dict) and "search_kwargs" in fields:
        return "search_kwargs['k']"
    for name in _SIZE_FIELDS:
        if name in fields and _is_size(getattr(retriever, name, None)):
            return f"its `{name}`"
    children = _children(retriever)
    if children is None:
        return None
    name, inner = children
    parts = [sizing(r) for r in (inner if isinstance(inner, list) else [inner])]
    if any(p is None for p in parts):
        return None
    return f"the `{name}` inside it"


def own_size(retriever: BaseRetriever) -> Optional[int]:
    """How many results ``retriever`` returns by itself, when it says (``search_kwargs["k"]``,
    ``k``, ``top_k``); None otherwise."""
    kwargs = getattr(retriever, "search_kwargs", None)
    if isinstance(kwargs, dict) and "search_kwargs" in _fields(retriever):
        k = kwargs.get("k")
        return k if _is_size(k) else None
    for name in _SIZE_FIELDS:
        if name in _fields(retriever) and _is_size(getattr(retriever, name, None)):
            return getattr(retriever, name)
    return None


def resized(retriever: BaseRetriever, n: int) -> Optional[BaseRetriever]:
    """A copy of ``retriever`` that returns up to ``n`` results, or None when it cannot be resized."""
    fields = _fields(retriever)
    kwargs = getattr(retriever, "search_kwargs", None)
    if isinstance(kwargs, dict) and "search_kwargs" in fields:
        new = dict(kwargs)
        new["k"] = n
        if isinstance(retriever, VectorStoreRetriever) and retriever.search_type == "mmr":
            fetch = new.get("fetch_k", 20)
            new["fetch_k"] = max(fetch if _is_size(fetch) else 20, n)
        return retriever.model_copy(update={"search_kwargs": new})
    for name in _SIZE_FIELDS:
        if name in fields and _is_size(getattr(retriever, name, None)):
            return retriever.model_copy(update={name: n})
    children = _children(retriever)
    if children is None:
        return None
    name, inner = children
    if isinstance(inner, list):
        parts = [resized(r, n) for r in inner]
        if any(p is None for p in parts):
            return None
        return retriever.model_copy(update={name: parts})
    part = resized(inner, n)
    return None if part is None else retriever.model_copy(update={name: part})
