"""What the clique cut asks of two documents, and how it writes a cluster (:mod:`.clique`).

:func:`pair_all` is the verification of the edges for one pair: the text stages of
:func:`diversify._kernels.fold.pair_check`, then the vector stage (SimHash Hamming distance or exact
cosine). :func:`finish_cluster` writes a cut cluster's labels, representative, stage bits and
similarities.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import stages
from ._common import kernel
from .fold import pair_check

__all__ = ["VectorRule", "CliqueState", "pair_all", "finish_cluster", "N_COUNTERS", "STAGE_EXACT", "STAGE_MINHASH",
           "STAGE_TEXT_SIMHASH", "STAGE_SIMHASH", "COPY", "JACCARD", "AGREE", "TEXT_HAM", "VEC_HAM", "ANGLE", "NONE"]

STAGE_EXACT = np.uint8(stages.STAGE_EXACT)
STAGE_MINHASH = np.uint8(stages.STAGE_MINHASH)
STAGE_TEXT_SIMHASH = np.uint8(stages.STAGE_TEXT_SIMHASH)
STAGE_SIMHASH = np.uint8(stages.STAGE_SIMHASH)

#: counters: pairs checked, exact checks, components cut, folds by exact, minhash, text simhash,
#: vector simhash, pairs certified by the metric bound without a check
N_COUNTERS = 8

# kinds of distance to a center (which pairs the metric bound may certify)
NONE = 0
COPY = 1  # same normalized text as the center
JACCARD = 2  # exact Jaccard distance
AGREE = 3  # MinHash disagreements (the estimate)
TEXT_HAM = 4  # text SimHash Hamming distance
VEC_HAM = 5  # vector SimHash Hamming distance
ANGLE = 6  # angle between the vectors


class VectorRule(NamedTuple):
    """The vector stage of the cut (cosine of embeddings); 1-element dummies when it is off."""

    use: bool
    exact: bool  # exact cosine of ``vectors`` (else the SimHash Hamming distance)
    simhash: np.ndarray  # uint64 (n, words)
    max_hamming: int  # bits within which two SimHash codes are similar
    vectors: np.ndarray  # float (n, d), L2-normalized
    threshold: float  # cosine threshold
    half_angle: float  # half the threshold's angle, less a margin for rounding


class CliqueState(NamedTuple):
    """What the cut writes (updated in place)."""

    labels: np.ndarray  # int64 (n,)
    reps: np.ndarray  # bool (n,)
    flags: np.ndarray  # uint8 (n,) stage bits
    fold_bit: np.ndarray  # uint8 (n,) the stage that verified each member with its representative
    similarity: np.ndarray  # float64 (n,) that similarity (SimHash stages: the Hamming distance)
    ham_coded: np.ndarray  # bool (n,) ``similarity`` holds a Hamming distance
    counters: np.ndarray  # int64 (N_COUNTERS,)


@kernel(inline="always")
def _popcount64(x):
    h = 0
    while x:
        x &= x - np.uint64(1)
        h += 1
    return h


@kernel
def pair_all(rule, vrule, counters, a, b):
    """(bit, similarity, exact) of documents a and b: the text stages (:func:`pair_check`), then the
    vector stage. Counts the check."""
    counters[0] += 1
    bit, val, exact = pair_check(rule, counters, a, b)
    if bit != 0 or not vrule.use:
        return bit, val, exact
    if vrule.exact:
        dot = 0.0
        for j in range(vrule.vectors.shape[1]):
            dot += float(vrule.vectors[a, j]) * float(vrule.vectors[b, j])
        if dot >= vrule.threshold - 1e-12:
            return STAGE_SIMHASH, dot, True
        return np.uint8(0), 0.0, False
    h = 0
    for j in range(vrule.simhash.shape[1]):
        h += _popcount64(vrule.simhash[a, j] ^ vrule.simhash[b, j])
    if h <= vrule.max_hamming:
        return STAGE_SIMHASH, float(h), False
    return np.uint8(0), 0.0, False


@kernel
def finish_cluster(rule, vrule, state, docs, n_taken, label_of, bits_rep, vals_rep, exact_rep):
    """Write one cluster: ``docs[:n_taken]`` in representative order (``docs[0]`` represents it
    unless ``label_of`` >= 0: a stored cluster's label, whose representative stays), each member's
    verified (bit, similarity) to the representative in ``bits_rep``/``vals_rep``."""
    counters = state.counters
    r = docs[0]
    label = label_of
    if label < 0:
        label = r
        for k in range(n_taken):
            if docs[k] < label:
                label = docs[k]
        state.reps[r] = True
        state.labels[r] = label
    for k in range(n_taken):
        c = docs[k]
        if label_of < 0 and k == 0:
            continue
        bit = bits_rep[k]
        state.labels[c] = label
        state.reps[c] = False
        state.flags[c] = bit
        state.fold_bit[c] = bit
        state.similarity[c] = vals_rep[k]
        state.ham_coded[c] = (bit == STAGE_TEXT_SIMHASH) or (bit == STAGE_SIMHASH and not exact_rep[k])
        if label_of < 0:
            state.flags[r] |= bit
        counters[3 if bit == STAGE_EXACT else (4 if bit == STAGE_MINHASH else (5 if bit == STAGE_TEXT_SIMHASH else 6))] += 1
