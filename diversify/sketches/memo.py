"""The exact-check memo: the exact Jaccard of the document pairs the linking checked from
re-shingled texts, handed to the cut of components into clusters so that it does not re-shingle a pair's documents
again (the same sets give the same value; only the re-shingling is saved).

The linking writes it (:func:`diversify.linking.exact.decide_deferred`) and returns it with its
forest (:class:`diversify.linking.link.Linked`); the cut reads it
(:func:`diversify.clusters.guarantee.guaranteed_clusters`).
"""

from __future__ import annotations

import numpy as np

__all__ = ["ExactMemo"]


class ExactMemo:
    """The exact Jaccard of checked pairs of a build's ``n`` documents, 16 bytes a pair: kept per
    batch as (pairs int64 (m, 2), a < b; values float64 (m,))."""

    def __init__(self, n: int) -> None:
        self.n = int(n)
        self.parts: list[tuple[np.ndarray, np.ndarray]] = []

    def remember(self, pairs: np.ndarray, jaccard: np.ndarray) -> None:
        """Keep the exact Jaccard of document pairs ``pairs`` (int64 (m, 2), each sorted) where it
        was computed (``jaccard`` >= 0)."""
        done = jaccard >= 0
        if done.any():
            self.parts.append((pairs[done], jaccard[done]))

    def known(self) -> tuple[np.ndarray, np.ndarray]:
        """The pairs of :meth:`remember` as sorted keys ``a * n + b`` (int64, a < b, unique) and
        their exact Jaccard (float64): what the cut looks a pair up in."""
        if not self.parts:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        pairs = np.concatenate([p for p, _ in self.parts])
        vals = np.concatenate([v for _, v in self.parts])
        keys, first = np.unique(self.pair_keys(pairs[:, 0], pairs[:, 1]), return_index=True)
        return keys, vals[first]

    def pair_keys(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """The key of each document pair (a, b) in either order: ``min * n + max`` (int64), as
        :meth:`known` and the cut's kernel (diversify._kernels.fold) write it."""
        return np.minimum(a, b).astype(np.int64) * np.int64(self.n) + np.maximum(a, b)

    def lookup(self, pairs: np.ndarray) -> np.ndarray:
        """The exact Jaccard of each pair (int64 (m, 2)) where an earlier exact check of this build
        computed it, else -1.0. A scan hands its borderline pairs out in several calls, and a pair
        that shares several bands may come again in a later call."""
        out = np.full(pairs.shape[0], -1.0)
        keys, vals = self.known()
        if keys.size and pairs.size:
            want = self.pair_keys(pairs[:, 0], pairs[:, 1])
            at = np.minimum(np.searchsorted(keys, want), keys.size - 1)
            hit = keys[at] == want
            out[hit] = vals[at[hit]]
        return out
