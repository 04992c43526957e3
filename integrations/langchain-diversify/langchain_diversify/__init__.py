"""LangChain integration of diversify: at most n near-duplicates per cluster in retrieval results.

- :class:`DiversifyRetriever` wraps any ``VectorStore``; refills from the store when the first
  fetch holds fewer than ``k`` distinct clusters; sync and async.
- :class:`DiversifyCompressor` for existing ``ContextualCompressionRetriever`` pipelines.
"""

from .compressors import DiversifyCompressor
from .retrievers import DiversifiedDocuments, DiversifyRetriever, callable_exclude_filter

__all__ = ["DiversifyRetriever", "DiversifyCompressor", "DiversifiedDocuments", "callable_exclude_filter"]
