"""The result type of the generators: a corpus and where each planted copy came from."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["Corpus"]


@dataclass(frozen=True)
class Corpus:
    """A generated corpus with planted near-duplicates.

    Attributes
    ----------
    ids : list of str
        ``"doc-0000000"``-style identifiers, unique.
    texts : list of str
        Document texts.
    source : ndarray of int64, shape (n,)
        Index of the original a planted copy (or boilerplate page) was made from; an original's
        own index otherwise.
    edit_rates : ndarray of float64, shape (n,)
        Word edit rate applied to make the document from its source (0.0 for originals).
    topics : ndarray of int64, shape (n,)
        Topic of each document (a copy has its source's topic).
    is_boilerplate : ndarray of bool, shape (n,)
        True for pages rendered from a boilerplate template.
    params : dict
        The arguments the corpus was generated with.
    """

    ids: list[str]
    texts: list[str]
    source: np.ndarray
    edit_rates: np.ndarray
    topics: np.ndarray
    is_boilerplate: np.ndarray
    params: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.texts)

    def planted_clusters(self) -> np.ndarray:
        """Planted cluster label per document: the smallest index in its group, int64 (n,)."""
        src = np.asarray(self.source, dtype=np.int64)
        smallest = np.full(src.size, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(smallest, src, np.arange(src.size, dtype=np.int64))
        return smallest[src]

    def planted_pairs(self) -> np.ndarray:
        """All pairs ``(i, j)``, ``i < j``, planted in the same group; int64 (m, 2), sorted."""
        labels = self.planted_clusters()
        order = np.argsort(labels, kind="stable")
        sorted_labels = labels[order]
        starts = np.flatnonzero(np.r_[True, sorted_labels[1:] != sorted_labels[:-1]])
        sizes = np.diff(np.r_[starts, labels.size])
        chunks = []
        for start, size in zip(starts[sizes > 1], sizes[sizes > 1]):
            members = np.sort(order[start : start + size])
            a, b = np.triu_indices(size, k=1)
            chunks.append(np.stack([members[a], members[b]], axis=1))
        if not chunks:
            return np.empty((0, 2), dtype=np.int64)
        pairs = np.concatenate(chunks).astype(np.int64, copy=False)
        return pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]
