"""The assignment step of the live index, with the batch builder's own code.

``add`` (and the re-assignment after a representative is deleted) is the incremental ``add`` of
the batch builder run on a small corpus: the stored representatives the batch may join (those
sharing a band key with one of its documents), followed by the batch. :func:`assign` links them
with :func:`diversify.linking.link.link` (pairs among stored representatives are skipped) and cuts
the components with :func:`diversify.clusters.guarantee.guaranteed_clusters` with the stored
representatives as the existing clusters: a new document joins the highest-priority stored
representative it is verified similar to, else the batch's documents form new clusters among
themselves in representative order. So every member is verified similar to its representative,
by exactly the verification the build uses.

:func:`verify_pairs` answers ``query``: each queried document against the stored representatives
it shares a band with (no clustering among the queried documents).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..clusters import component_roots, guaranteed_clusters, priority_rank
from ..clusters.similarity import FoldStats, Similarity
from ..config import BuildConfig
from .payload import Docs, concat

__all__ = ["Assigned", "assign", "verify_pairs"]


@dataclass
class Assigned:
    """The clusters of ``old + new`` after :func:`assign` (local document positions)."""

    n_old: int
    #: int64 (n,): < n_old: the cluster of stored representative ``label``; else a new cluster,
    #: named by the position of its first member
    labels: np.ndarray
    rep: np.ndarray  # bool (n,)
    stages: np.ndarray  # uint8 (n,) stage bits that verified each fold (representatives: OR of their members')
    similarity: np.ndarray  # float64 (n,) verified similarity to the representative; NaN for representatives
    rank: np.ndarray  # int64 (n,) position in representative order (0 = first choice)


def assign(old: Docs, new: Docs, cfg: BuildConfig) -> Assigned:
    """Cluster ``new`` against the stored representatives ``old`` (see the module docstring)."""
    from ..linking.link import link
    from ..staging import linking_config

    docs = concat(old, new)
    sk = docs.sketches
    n_old = old.n
    # edges at the lowest source threshold, folds at each pair's own (docs.thresholds), as the build
    linked = link(sk, linking_config(cfg), source=docs.source, new_start=n_old, timings={})
    root = component_roots(linked.parent)
    rank = priority_rank(cfg.representative, sk.lengths, sk.keys)
    labels, rep, bits, stats = guaranteed_clusters(root, sk, cfg, rank, memo=linked.memo, thresholds=docs.thresholds,
                                                   source=docs.source, n_old=n_old,
                                                   old_labels=np.arange(n_old, dtype=np.int64),
                                                   old_reps=np.ones(n_old, dtype=bool),
                                                   old_flags=np.zeros(n_old, dtype=np.uint8))
    return Assigned(n_old, labels, rep, bits, stats.similarity, rank)


def verify_pairs(old: Docs, new: Docs, cfg: BuildConfig, pairs: list[list[int]]) -> list[list[tuple[int, int, float]]]:
    """For each new document ``q``, the stored documents of ``pairs[q]`` (positions in ``old``) that
    it is verified similar to: ``(position, stage bits, similarity)``, in priority order (the
    representative rule: the first is the one ``add`` would fold it under)."""
    docs = concat(old, new)
    sk = docs.sketches
    n_old = old.n
    sim = Similarity(sk, cfg, FoldStats(), docs.thresholds, docs.source)
    rank = priority_rank(cfg.representative, sk.lengths, sk.keys)
    out: list[list[tuple[int, int, float]]] = []
    for q, cands in enumerate(pairs):
        if not cands:
            out.append([])
            continue
        cand = np.array(sorted(set(cands)), dtype=np.int64)
        bits = sim(n_old + q, cand)
        vals = sim.last_similarity
        hit = np.flatnonzero(bits != 0)
        order = hit[np.argsort(rank[cand[hit]], kind="stable")]
        out.append([(int(cand[j]), int(bits[j]), float(vals[j])) for j in order])
    return out
