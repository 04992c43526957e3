"""Which promise a build makes, and how well its clusters keep it: measured on a sample of member pairs.

A fold says "very similar" about whichever member a query shows next to the one it folds, so the
figure that matters is pairwise: of the pairs of documents that share a cluster, the share that the
build's own verification (exact hash, exact Jaccard where the texts are at hand, else the MinHash
estimate; text SimHash; cosine) finds at or above their threshold. Under ``clique`` that is every
pair by construction; under ``star`` only pairs with the representative are verified, and under
``components`` none. The sample is drawn with the build's seed (same input, config, seed: same
figure), uniformly over the pairs inside clusters.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from ..config import BuildConfig
from ..sketches.batch import Sketches
from ..sketches.source import TextSource
from .similarity import FoldStats, Similarity

__all__ = ["PROMISES", "sampled_purity"]

#: what each clustering promises about two members of one cluster
PROMISES = {
    "clique": "every two members verified similar",
    "star": "every member verified similar to its representative",
    "components": "members linked by a chain of verified pairs",
}
#: member pairs checked at most
SAMPLE_PAIRS = 1000


def sampled_purity(cluster_ids: np.ndarray, sk: Sketches, cfg: BuildConfig,
                   thresholds: Optional[np.ndarray] = None, source: Optional[TextSource] = None,
                   pairs: int = SAMPLE_PAIRS) -> dict:
    """{"promise", "pairs_in_clusters", "pairs_sampled", "pairs_similar", "purity"}: the share of a
    uniform sample of member pairs that the verification finds similar (``purity`` None when no
    cluster has two members). ``source``: the texts at hand (exact Jaccard for the borderline band)."""
    out: dict = {"promise": PROMISES[cfg.clustering]}
    labels, inverse, sizes = np.unique(np.asarray(cluster_ids), return_inverse=True, return_counts=True)
    weight = sizes.astype(np.float64) * (sizes - 1) / 2
    total = int(weight.sum())
    out["pairs_in_clusters"] = total
    if total == 0 or (cfg.minhash is None or sk.minhash is None) and (cfg.simhash is None or sk.simhash is None):
        out.update(pairs_sampled=0, pairs_similar=0, purity=None)
        return out
    rng = np.random.default_rng([cfg.seed, 0x9E3779B9])
    order = np.argsort(inverse, kind="stable")
    starts = np.r_[0, np.cumsum(sizes)[:-1]]
    k = min(pairs, total)
    pick = rng.choice(labels.size, size=k, p=weight / weight.sum())
    first = rng.integers(0, sizes[pick])
    second = rng.integers(0, sizes[pick] - 1)
    second = second + (second >= first)
    a = order[starts[pick] + first]
    b = order[starts[pick] + second]
    sim = Similarity(sk, cfg, FoldStats(), thresholds, source)
    sim.prefetch(np.unique(np.r_[a, b]))
    ok = np.array([bool(sim(int(x), np.array([y], dtype=np.int64))[0]) for x, y in zip(a.tolist(), b.tolist())])
    sim.prefetch(np.zeros(0, dtype=np.int64))
    out.update(pairs_sampled=int(k), pairs_similar=int(ok.sum()), purity=round(float(ok.mean()), 6))
    return out
