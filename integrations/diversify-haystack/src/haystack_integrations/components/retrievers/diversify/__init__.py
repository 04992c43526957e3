"""Haystack integration of diversify: a retriever wrapper that refills when near-duplicates are dropped."""

from .retriever import DiversifyRetriever

__all__ = ["DiversifyRetriever"]
