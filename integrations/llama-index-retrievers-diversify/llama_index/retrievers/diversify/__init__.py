"""LlamaIndex retriever of diversify: at most n nodes per cluster, refilled from the index."""

from llama_index.retrievers.diversify.base import DiversifiedNodes, DiversifyRetriever

__all__ = ["DiversifyRetriever", "DiversifiedNodes"]
