"""`DiversifyCompressor`: drop near-duplicates inside a ContextualCompressionRetriever pipeline."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document

from ._common import DiversifySettings, annotated_copies

__all__ = ["DiversifyCompressor"]


class DiversifyCompressor(DiversifySettings, BaseDocumentCompressor):
    """Keep at most ``max_per_cluster`` documents per cluster of an already ranked list.

    A compressor sees a fixed list and cannot fetch more: when the list holds fewer than
    ``top_k`` distinct clusters, fewer come back. Prefer :class:`DiversifyRetriever`, which
    refills from the store, when you can replace the base retriever.

    The better-ranked copy of each cluster is kept (the list order is the rank order); returned
    Documents are copies with the same ``id`` and a new metadata dict carrying
    ``metadata["diversify"] = {"cluster_id", "omitted", "omitted_ids", "score"}``
    (``score`` is None: retrievers do not pass scores on).
    """

    top_k: Optional[int] = None
    """Return at most this many; None keeps every survivor."""

    def compress_documents(self, documents: Sequence[Document], query: str,
                           callbacks: Optional[Callbacks] = None) -> Sequence[Document]:
        docs = list(documents)
        if not docs:
            return []
        ids = [self._doc_id(doc, j) for j, doc in enumerate(docs)]
        k = len(docs) if self.top_k is None else self.top_k
        result = self.diversifier.select_items(docs, ids=ids, scores=[None] * len(docs),
                                               payloads=[doc.metadata for doc in docs], k=k)
        return annotated_copies(result, self.metadata_key)
