"""On-the-fly folding: hits the artifact does not know, compared with the hits already kept.

First by the cosine of unit vectors (``fold_threshold``) when both carry a vector, then by
word-shingle Jaccard (``fold_text_threshold``) when both carry text.

The text similarity is deliberately not the offline MinHash pipeline (which runs in Numba and
must not load on the online path): it is an exact Jaccard over a handful of short texts per
query, in pure Python. Normalization follows the builder's spirit (Unicode NFKC, casefold, words
= runs of word characters) but is not byte-identical to it, so a pair near the threshold may be
judged differently; rebuild the artifact for the authoritative answer.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Hashable, Sequence
from typing import Any, Optional

import numpy as np

from ..errors import InputError

__all__ = ["Folder", "Features", "shingle_set", "jaccard", "TEXT_SHINGLE"]

#: words per shingle
TEXT_SHINGLE = 3
_WORD = re.compile(r"\w+")

#: What a hit is compared by: its unit vector and its shingle set (either may be None).
Features = tuple[Optional[np.ndarray], Optional[frozenset]]


def shingle_set(text: Any, k: int = TEXT_SHINGLE) -> Optional[frozenset]:
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
    """Exact Jaccard similarity of two non-empty sets."""
    if a is b:
        return 1.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


class Folder:
    """Compares an unknown hit with the kept hits of one query (see the module docstring).

    ``vectors`` / ``texts`` (one entry per hit) override ``hit.vector`` / ``hit.text``.
    """

    __slots__ = ("threshold", "text_threshold", "vectors", "texts", "hits", "mat", "owners", "m",
                 "dim", "shingles", "text_owners")

    def __init__(self, threshold: Optional[float], text_threshold: Optional[float], vectors: Any,
                 texts: Optional[Sequence[Optional[str]]], hits: Sequence[Any]) -> None:
        self.threshold = threshold
        self.text_threshold = text_threshold
        self.vectors = vectors
        self.texts = texts
        self.hits = hits
        self.mat: Optional[np.ndarray] = None
        self.owners: list = []
        self.m = 0
        self.dim: Optional[int] = None
        self.shingles: list[frozenset] = []
        self.text_owners: list = []

    def features(self, i: int) -> Features:
        """What hit ``i`` is compared by (only what the thresholds ask for)."""
        return (self._unit(i) if self.threshold is not None else None,
                self._shingles(i) if self.text_threshold is not None else None)

    def _shingles(self, i: int) -> Optional[frozenset]:
        t = self.texts[i] if self.texts is not None else getattr(self.hits[i], "text", None)
        return shingle_set(t)

    def _unit(self, i: int) -> Optional[np.ndarray]:
        v = self.vectors[i] if self.vectors is not None else getattr(self.hits[i], "vector", None)
        if v is None:
            return None
        v = np.asarray(v, dtype=np.float64)
        if v.ndim != 1:
            raise InputError(f"the vector of hit {i} must be one-dimensional; got shape {v.shape}.")
        if self.dim is None:
            self.dim = v.shape[0]
        elif v.shape[0] != self.dim:
            raise InputError(f"all hit vectors must have the same dimension; hit {i} has {v.shape[0]}, "
                             f"earlier ones {self.dim}. Pass vectors from one embedding model.")
        norm = math.sqrt(float(v @ v))
        if not math.isfinite(norm) or norm == 0.0:
            return None  # NaN / zero vectors cannot be compared: never folded, never fold others
        return v / norm

    def add(self, feats: Features, owner: Hashable) -> None:
        """Record a kept hit's features under its cluster key ``owner``."""
        unit, sh = feats
        if unit is not None:
            if self.mat is None:
                self.mat = np.empty((max(len(self.hits), 1), unit.shape[0]), dtype=np.float64)
            self.mat[self.m] = unit
            self.owners.append(owner)
            self.m += 1
        if sh is not None:
            self.shingles.append(sh)
            self.text_owners.append(owner)

    def match(self, feats: Features) -> Optional[Hashable]:
        """The cluster key of the most similar kept hit at or over a threshold, else None."""
        unit, sh = feats
        if unit is not None and self.mat is not None and self.threshold is not None:
            sims = self.mat[: self.m] @ unit
            j = int(np.argmax(sims))  # most similar kept hit; first one on ties
            if sims[j] >= self.threshold:
                return self.owners[j]
        if sh is not None and self.shingles and self.text_threshold is not None:
            best, owner = -1.0, None
            for other, o in zip(self.shingles, self.text_owners):
                sim = jaccard(sh, other)
                if sim > best:
                    best, owner = sim, o
            if best >= self.text_threshold:
                return owner
        return None
