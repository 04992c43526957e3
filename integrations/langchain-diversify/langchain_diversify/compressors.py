"""`DiversifyCompressor`: drop near-duplicates inside a ContextualCompressionRetriever pipeline."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any, Optional

from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document

from diversify.errors import ConfigError
from diversify.online.plugins import check_settings, take_deprecated

from ._common import MODEL_CONFIG, DiversifySettings, annotated_copies

__all__ = ["DiversifyCompressor"]


class DiversifyCompressor(DiversifySettings, BaseDocumentCompressor):
    """Keep at most ``max_per_cluster`` documents per cluster of an already ranked list.

    A compressor sees a fixed list and cannot fetch more: when the list holds fewer than
    ``top_n`` distinct clusters, fewer come back. Prefer :class:`DiversifyRetriever`, which
    refills from the store, when you can replace the base retriever.

    The better-ranked copy of each cluster is kept (the list order is the rank order); returned
    Documents are copies with the same ``id`` and a new metadata dict carrying
    ``metadata["diversify"] = {"cluster_id", "omitted", "omitted_ids", "score"}``
    (``score`` is None: retrievers do not pass scores on).

    ``top_n`` is the name LangChain's rerank compressors use (``CohereRerank``,
    ``CrossEncoderReranker``...); ``top_k`` is a deprecated alias. Unknown or mistyped arguments
    (``k=3``) are refused with a :class:`~diversify.errors.ConfigError`, as are bad values.
    """

    model_config = MODEL_CONFIG

    top_n: Optional[int] = None
    """Return at most this many; None keeps every survivor."""

    def __init__(self, **data: Any) -> None:
        take_deprecated(data, "top_k", "top_n", owner="DiversifyCompressor")
        self._check_arguments(data, hints={"k": "top_n", "n": "top_n"})
        top_n = data.get("top_n")
        if top_n is not None and (isinstance(top_n, bool) or not isinstance(top_n, int) or top_n < 1):
            raise ConfigError(f"`top_n` must be None or an int >= 1; got top_n={top_n!r}. "
                              "Use None to keep every document that survives diversification.")
        check_settings(data.get("cluster_map"), cluster_field=data.get("cluster_field"),
                       k=10 if top_n is None else top_n, max_per_cluster=data.get("max_per_cluster", 1))
        super().__init__(**data)

    @property
    def top_k(self) -> Optional[int]:
        """Deprecated alias of :attr:`top_n`."""
        warnings.warn("DiversifyCompressor.top_k is deprecated; use top_n.", DeprecationWarning, stacklevel=2)
        return self.top_n

    def compress_documents(self, documents: Sequence[Document], query: str,
                           callbacks: Optional[Callbacks] = None) -> Sequence[Document]:
        docs = list(documents)
        if not docs:
            return []
        ids = [self._doc_id(doc, j) for j, doc in enumerate(docs)]
        k = len(docs) if self.top_n is None else self.top_n
        result = self.diversifier.select_items(docs, ids=ids, scores=[None] * len(docs),
                                               payloads=[doc.metadata for doc in docs], k=k)
        return annotated_copies(result, self.metadata_key)
