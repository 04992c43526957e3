"""Clique clusters (``clustering="clique"``, the default): every two members of a cluster are verified similar.

Online, a query shows whichever member of a cluster ranks best for it, and says the others are
"very similar". Under ``"star"`` (:mod:`.guarantee`) each member is verified similar to the
representative, which bounds two members only by twice the threshold's distance (Jaccard 2t - 1:
0.6 at 0.8). Here every pair of members is verified (or certified, below) at its threshold, by the
same verification as the linking's edges: exact hash, MinHash estimate with exact Jaccard for the
borderline band, text SimHash, vector SimHash or exact cosine, per-source thresholds included. So
the promise holds for whichever copy is shown.

How a component is cut (:mod:`diversify._kernels.clique` runs it):

- **Small components** (up to ``DENSE_MAX`` members left): every pair is checked, then greedily,
  the member with the most neighbours becomes a center (ties: representative order), and its
  neighbours join in order of degree, each when it is similar to every member taken. Centers by
  degree cover more similar pairs than centers by length (a star around the longest page).
- **Large families**: Jaccard distance, Hamming distance and angle are metrics, so two members each
  within half the threshold's distance of one center are within the threshold of each other and
  need no check. A center is chosen from a sample (most neighbours in the sample; then the member
  nearest to it, if more members lie within half the threshold of that one), every member left is
  checked against it, and its neighbours join nearest first; only pairs outside that inner ring are
  checked, at most ``BUDGET_PER_MEMBER`` checks per member left in the round (past it, a member
  that needs a check waits for a later round). A round costs at most ``SAMPLE**2 / 2 + 2u +
  max(DENSE_MAX**2, BUDGET_PER_MEMBER * u)`` checks for ``u`` members left: a family of 10^5 near
  copies of one page is one round of a few times 10^5 checks when its copies lie within half the
  threshold's distance of the page, instead of 5 * 10^9 pair checks.

The representative of each cluster is then its first member by the user's rule (``longest``,
``first``, ``key``): any member may represent it, since all are similar. ``add`` lets a stored
cluster take a new document only when it is verified similar to every member (so a batch added
later may split what one build would have joined: docs/clustering.md).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from ..config import BuildConfig
from ..sketches.batch import Sketches
from ..sketches.memo import ExactMemo
from ..sketches.source import TextSource
from ..stages import STAGE_SIMHASH, STAGE_TEXT_SIMHASH
from .guarantee import cut_setup, run_batches
from .similarity import FoldStats, Similarity

__all__ = ["clique_clusters", "DENSE_MAX", "SAMPLE", "BUDGET_PER_MEMBER"]

#: members left in a component up to which every pair is checked and centers go by degree
DENSE_MAX = 1024
#: members of the evenly spaced sample a large component's center is chosen from
SAMPLE = 64
#: pair checks outside the inner ring per member left in a large component's round
BUDGET_PER_MEMBER = 16


def clique_clusters(root: np.ndarray, sk: Sketches, cfg: BuildConfig, rank: np.ndarray, *,
                    memo: Optional[ExactMemo] = None, thresholds: Optional[np.ndarray] = None,
                    source: Optional[TextSource] = None, n_old: int = 0,
                    old_labels: Optional[np.ndarray] = None, old_reps: Optional[np.ndarray] = None,
                    old_flags: Optional[np.ndarray] = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, FoldStats]:
    """Cut components into clusters whose every two members are verified similar. Returns (labels,
    representative mask, stage bits per document, stats); the arguments are those of
    :func:`diversify.clusters.guarantee.guaranteed_clusters`. A cluster's label is its smallest
    member's index; each member's similarity (``stats.similarity``) is to its representative."""
    from .._kernels.clique import N_COUNTERS, CliqueState, clique_groups

    n = root.size
    stats, sim, labels, reps, flags, members, bounds = cut_setup(root, sk, cfg, rank, thresholds, source,
                                                                 n_old, old_labels, old_reps, old_flags)
    fold_bit = np.zeros(n, dtype=np.uint8)
    ham_coded = np.zeros(n, dtype=bool)
    state = CliqueState(labels, reps, flags, fold_bit, sim.similarity, ham_coded, np.zeros(N_COUNTERS, dtype=np.int64))
    vrule = _vector_rule(sk, cfg)
    tmax, hi_max = _outer_bounds(sim)

    def call(rule, bnds: np.ndarray) -> None:
        clique_groups(members, bnds, n_old, rule, vrule, state, DENSE_MAX, SAMPLE, BUDGET_PER_MEMBER, tmax, hi_max)

    if bounds.size > 1:
        _await_kernel(clique_groups)
        run_batches(members, bounds, sim, memo or ExactMemo(n), call)
    c = state.counters.tolist()
    stats.pairs_checked += c[0]
    stats.exact_checks += c[1]
    stats.components_cut += c[2]
    stats.pairs_certified += c[7]
    for name, k in (("exact", c[3]), ("minhash", c[4]), ("text_simhash", c[5]), ("simhash", c[6])):
        if k:
            stats.by_stage[name] = stats.by_stage.get(name, 0) + k
    text_ham = ham_coded & (fold_bit == STAGE_TEXT_SIMHASH)
    if text_ham.any():
        sim.similarity[text_ham] = np.cos(np.pi * sim.similarity[text_ham] / 64)
    vec_ham = ham_coded & (fold_bit == STAGE_SIMHASH)
    if vec_ham.any():
        sc = cfg.simhash
        assert sc is not None
        sim.similarity[vec_ham] = np.cos(np.pi * sim.similarity[vec_ham] / (sc.bits * sc.families))
    stats.similarity = sim.similarity
    return labels, reps, flags, stats


#: seconds a build waits for the console script's helper to finish compiling the cut's kernel
_HELPER_WAIT = 300


def _await_kernel(kernel) -> None:
    """If the console script's helper (:mod:`diversify.engines.ahead`) is compiling the kernels and
    this one is not in the cache yet, let the helper finish it rather than compile it twice."""
    from .._kernels._runtime import kernel_ready
    from .._kernels.ahead import wait_for_helper

    if not kernel_ready(kernel):
        wait_for_helper(_HELPER_WAIT)


def _vector_rule(sk: Sketches, cfg: BuildConfig):
    """The vector stage for the kernel (the verification :class:`Similarity` applies to vectors)."""
    from .._kernels.clique import VectorRule
    from ..linking.bands import hamming_radius

    sc = cfg.simhash
    if sc is None or sk.simhash is None:
        return VectorRule(False, False, np.zeros((1, 1), np.uint64), 0, np.zeros((1, 1), np.float32), 1.0, 0.0)
    exact = sc.verify == "exact" and sk.vectors is not None
    half = float(np.arccos(np.clip(sc.threshold, -1.0, 1.0)) / 2 - 1e-6)
    return VectorRule(True, exact, np.ascontiguousarray(sk.simhash.reshape(sk.n, -1)),
                      int(hamming_radius(sc.threshold, sc.bits * sc.families)),
                      np.ascontiguousarray(sk.vectors) if exact else np.zeros((1, 1), np.float32),
                      float(sc.threshold), half)


def _outer_bounds(sim: Similarity) -> tuple[float, int]:
    """(the strictest Jaccard threshold, the strictest agreement count the estimate accepts at):
    the radius the metric bound halves, the same for every pair of a component."""
    mc = sim.cfg.minhash
    if mc is None or sim.sk.minhash is None:
        return 1.0, 0
    from ..staging import agreement_bounds

    if sim.thresholds is not None and sim.thresholds.size:
        t = float(np.max(sim.thresholds))
        _, hi = agreement_bounds(np.array([t]), mc.num_perm, mc.borderline if mc.verify == "auto" else 0.0)
        return t, int(np.max(hi))
    return float(mc.threshold), int(sim.band[1])
