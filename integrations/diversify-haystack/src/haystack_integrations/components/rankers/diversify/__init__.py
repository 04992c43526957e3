"""Haystack integration of diversify: a ranker component that keeps near-duplicates out."""

from .ranker import DiversifyRanker

__all__ = ["DiversifyRanker"]
