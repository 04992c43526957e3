"""The independent near-duplicate check: exact Jaccard of word 5-shingle sets, written here.

Nothing of diversify's is used (no tokenizer, no hashing, no MinHash): a word is a run of
``\\w`` characters of the lower-cased text, a shingle is the tuple of ``K`` consecutive words (a
text of fewer words is one shingle), two chunks are near-duplicates when the exact Jaccard of
their shingle sets is at least ``THRESHOLD`` (the library's default build threshold).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

K = 5
THRESHOLD = 0.8
_WORD = re.compile(r"\w+")


def shingles(text: str, k: int = K) -> frozenset:
    words = _WORD.findall(text.lower())
    if len(words) <= k:
        return frozenset([tuple(words)]) if words else frozenset()
    return frozenset(tuple(words[i:i + k]) for i in range(len(words) - k + 1))


def jaccard(a: frozenset, b: frozenset) -> float:
    if not a and not b:
        return 1.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


class NearDuplicates:
    """Near-duplicate pairs among a result list; shingle sets computed once per id, on demand."""

    def __init__(self, text_of: Callable[[int], str], threshold: float = THRESHOLD):
        self.text_of, self.threshold = text_of, threshold
        self._sets: dict[int, frozenset] = {}
        self._pairs: dict[tuple[int, int], bool] = {}

    def _set(self, i: int) -> frozenset:
        s = self._sets.get(i)
        if s is None:
            s = self._sets[i] = shingles(self.text_of(i))
        return s

    def is_pair(self, a: int, b: int) -> bool:
        key = (a, b) if a <= b else (b, a)
        hit = self._pairs.get(key)
        if hit is None:
            hit = self._pairs[key] = jaccard(self._set(a), self._set(b)) >= self.threshold
        return hit

    def pairs(self, ids: Sequence[int]) -> int:
        """Pairs of distinct ids in ``ids`` with exact Jaccard >= threshold."""
        ids = list(dict.fromkeys(ids))
        return sum(self.is_pair(ids[i], ids[j]) for i in range(len(ids)) for j in range(i + 1, len(ids)))
