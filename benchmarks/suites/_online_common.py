"""The online suite's settings and its redundancy count, shared by ``online.py`` and its helpers."""

from __future__ import annotations

# The corpus: dup_fraction 0.38 gives ~30% of each top-50 as near-duplicates of a higher hit
# under the built artifact (measured and reported as `dup_share_of_hits`).
CORPUS = dict(n_docs=20_000, words_per_doc=200, dup_fraction=0.38, edit_rate=(0.0, 0.02), seed=11)
DIM = 64
N_QUERIES = 200
N_HITS = 50
K = 10
QUERY_NOISE = 0.3
ERF_THRESHOLD = 0.95  # EmbeddingsRedundantFilter's default
MMR_LAMBDA = 0.5  # maximal_marginal_relevance's default
BAR_P99_US = 25.0


def redundancy(ids, cluster_of) -> int:
    """Kept hits sharing a cluster with a higher kept hit."""
    seen, red = set(), 0
    for i in ids:
        c = cluster_of[i]
        if c in seen:
            red += 1
        seen.add(c)
    return red
