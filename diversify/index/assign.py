"""The assignment step of the live index, with the batch builder's own code.

``add`` (and the re-assignment after a representative is deleted) is the incremental ``add`` of
the batch builder run on a small corpus: the stored representatives the batch may join (those
sharing a band key with one of its documents), under ``clustering="clique"`` followed by the other
members of their clusters (:func:`diversify.index.cliques.with_members`), then the batch.
:func:`assign` links them with :func:`diversify.linking.link.link` (pairs among stored documents
are skipped; the members of one stored cluster start joined, as the batch ``add`` starts from the
artifact's clusters) and cuts the components with the cut the config names
(:func:`diversify.clusters.cut_clusters`), the stored clusters being the existing ones:

- ``"star"``: a new document joins the highest-priority stored representative it is verified
  similar to, else the batch's documents form new clusters among themselves in representative
  order; so every member is verified similar to its representative;
- ``"clique"``: a stored cluster takes a new document only when it is verified similar to every
  member of that cluster; the rest are cut into new clusters whose every two members are verified
  similar.

Either way by exactly the verification the build uses.

:func:`verify_pairs` answers ``query``: each queried document against the stored representatives
it shares a band with (no clustering among the queried documents).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..clusters import component_roots, cut_clusters, priority_rank, union_pairs
from ..clusters.similarity import FoldStats, Similarity
from ..config import BuildConfig
from .cliques import StoredClusters
from .payload import Docs, concat

__all__ = ["Assigned", "assign", "verify_pairs"]


@dataclass
class Assigned:
    """The clusters of ``old + new`` after :func:`assign` (local document positions)."""

    n_old: int
    #: int64 (n,): < n_old: the cluster of the stored representative at position ``label``; else a
    #: new cluster, named by the position of its first member
    labels: np.ndarray
    rep: np.ndarray  # bool (n,)
    stages: np.ndarray  # uint8 (n,) stage bits that verified each fold (representatives: OR of their members')
    similarity: np.ndarray  # float64 (n,) verified similarity to the representative; NaN for representatives
    rank: np.ndarray  # int64 (n,) position in representative order (0 = first choice)


def assign(old: Docs, new: Docs, cfg: BuildConfig, stored: Optional[StoredClusters] = None) -> Assigned:
    """Cluster ``new`` against the stored documents ``old`` (see the module docstring): each its
    own cluster's representative, unless ``stored`` says which cluster each belongs to."""
    from ..linking.link import link
    from ..staging import linking_config

    docs = concat(old, new)
    sk = docs.sketches
    n_old = old.n
    if stored is None:
        stored = StoredClusters(np.arange(n_old, dtype=np.int64), np.ones(n_old, dtype=bool))
    parent = None
    if n_old and (stored.labels != np.arange(n_old)).any():  # a stored cluster is one component
        parent = np.arange(sk.n, dtype=np.int64)
        union_pairs(parent, np.stack([np.arange(n_old, dtype=np.int64), stored.labels], axis=1))
    # edges at the lowest source threshold, folds at each pair's own (docs.thresholds), as the build
    linked = link(sk, linking_config(cfg), parent=parent, source=docs.source, new_start=n_old, timings={})
    root = component_roots(linked.parent)
    rank = priority_rank(cfg.representative, sk.lengths, sk.keys)
    labels, rep, bits, stats = cut_clusters(cfg.clustering, root, sk, cfg, rank, memo=linked.memo,
                                            thresholds=docs.thresholds, source=docs.source, n_old=n_old,
                                            old_labels=stored.labels, old_reps=stored.reps,
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
