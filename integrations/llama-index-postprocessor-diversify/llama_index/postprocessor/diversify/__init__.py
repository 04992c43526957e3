"""LlamaIndex integration of diversify: a node postprocessor that keeps near-duplicates out."""

from llama_index.postprocessor.diversify.base import DiversifyPostprocessor

__all__ = ["DiversifyPostprocessor"]
