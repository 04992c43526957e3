"""Word-shingle Jaccard for on-the-fly folding of hits that carry text (pure Python).

This is deliberately not the offline MinHash pipeline (which runs in Numba and must not load on
the online path): it is an exact Jaccard over a handful of short texts per query. Normalization
follows the builder's spirit (Unicode NFKC, casefold, words = runs of word characters) but is
not byte-identical to it, so a pair near the threshold may be judged differently; rebuild the
artifact for the authoritative answer.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Optional

__all__ = ["shingle_set", "jaccard", "TEXT_SHINGLE"]

#: words per shingle
TEXT_SHINGLE = 3
_WORD = re.compile(r"\w+")


def shingle_set(text, k: int = TEXT_SHINGLE) -> Optional[frozenset]:
    """Set of word k-shingles of ``text``; ``None`` for non-strings and texts with no words."""
    if not isinstance(text, str):
        return None
    words = _WORD.findall(unicodedata.normalize("NFKC", text).casefold())
    if not words:
        return None
    if len(words) < k:
        return frozenset((" ".join(words),))
    return frozenset(" ".join(words[j:j + k]) for j in range(len(words) - k + 1))


def jaccard(a: frozenset, b: frozenset) -> float:
    if a is b:
        return 1.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)
