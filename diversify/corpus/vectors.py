"""Embedding-like vectors for a generated corpus: planted copies sit near their original."""

from __future__ import annotations

import math

import numpy as np

from .planted import Corpus

__all__ = ["generate_vectors"]


def generate_vectors(
    corpus_or_n: Corpus | int,
    *,
    dim: int = 64,
    topics: int | None = None,
    topic_weight: float = 0.6,
    copy_noise: float = 0.12,
    seed: int = 0,
) -> np.ndarray:
    """Embedding-like unit vectors where planted copies sit near their original.

    Each original gets ``topic_weight`` of a topic centroid plus an independent random direction;
    a copy is its original's vector plus noise of relative size ``copy_noise * (1 + 10 * rate)``,
    renormalized, which gives cosine ≈ 0.99 to the original for rate 0 and ≈ 0.98 for rate 0.05.
    Unrelated documents in one topic have cosine ≈ ``topic_weight**2`` (0.36 at the default);
    across topics ≈ 0.

    Parameters
    ----------
    corpus_or_n : Corpus or int
        A corpus (uses its ``source``, ``topics`` and ``edit_rates``) or a count of unrelated
        documents.
    dim : int
        Dimension (>= 2).
    topics : int, optional
        Number of topics when ``corpus_or_n`` is an int (default 20).
    seed : int
        Seed.

    Returns
    -------
    ndarray of float32, shape (n, dim), rows of unit L2 norm.
    """
    if not isinstance(dim, (int, np.integer)) or dim < 2:
        raise ValueError(f"`dim` must be an integer >= 2; got {dim!r}.")
    if isinstance(corpus_or_n, Corpus):
        n = len(corpus_or_n)
        source = np.asarray(corpus_or_n.source, dtype=np.int64)
        doc_topics = np.asarray(corpus_or_n.topics, dtype=np.int64)
        rates = np.asarray(corpus_or_n.edit_rates, dtype=np.float64)
        n_topics = int(doc_topics.max()) + 1 if n else 1
    elif isinstance(corpus_or_n, (int, np.integer)) and corpus_or_n >= 0:
        n = int(corpus_or_n)
        n_topics = topics or 20
        source = np.arange(n, dtype=np.int64)
        doc_topics = np.random.default_rng(np.random.SeedSequence([int(seed), 7])).integers(0, n_topics, size=n)
        rates = np.zeros(n)
    else:
        raise ValueError(f"`corpus_or_n` must be a Corpus or an integer >= 0; got {corpus_or_n!r}.")

    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 6, dim]))
    centroids = rng.standard_normal((n_topics, dim))
    centroids /= np.linalg.norm(centroids, axis=1, keepdims=True)
    own = rng.standard_normal((n, dim))
    own /= np.linalg.norm(own, axis=1, keepdims=True)
    base = topic_weight * centroids[doc_topics] + math.sqrt(1 - topic_weight**2) * own
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    # Copies: start from the source's base vector.
    is_copy = source != np.arange(n)
    out = base.copy()
    if is_copy.any():
        eps = rng.standard_normal((int(is_copy.sum()), dim))
        eps /= np.linalg.norm(eps, axis=1, keepdims=True)
        scale = (copy_noise * (1.0 + 10.0 * rates[is_copy]))[:, None]
        out[is_copy] = base[source[is_copy]] + scale * eps
    # Originals also get a little noise so exact-duplicate vectors are not trivially equal.
    out[~is_copy] += 0.02 * rng.standard_normal((int((~is_copy).sum()), dim)) / math.sqrt(dim)
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out.astype(np.float32)
