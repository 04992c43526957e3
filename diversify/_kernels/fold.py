"""The fold check's greedy in one kernel: cut components into clusters around representatives.

The rule is :mod:`diversify.clusters.guarantee`'s (that module's Python loop is the reference and
stays in use for the vector stages): within each component, in representative order, the stored
representatives claim first, then the first unassigned member becomes a representative and folds
every unassigned member verified similar to it. A member is verified by the first stage that
accepts it, in the order exact hash, MinHash (the estimate's band, exact Jaccard where the sets are
at hand), text SimHash. Per component this was a dozen numpy calls per representative; here it is
one pass over the members.

Similarities come out as the numbers the Python path computes with the same operations
(agreements / num_perm, intersection / union); the text SimHash stage writes its Hamming distance,
which the caller turns into a cosine with numpy (so that the transcendental function is numpy's on
every machine).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import stages
from ._common import kernel
from .linking import ShingleRows, _jaccard_rows, agreement_inline, sig_agreement

__all__ = ["FoldRule", "FoldState", "fold_groups", "pair_check", "BAND", "EXACT_ALL", "EXACT_WITH_TEXTS"]

# how MinHash candidates are decided (see FoldRule.minhash_mode)
BAND = 0  # the estimate's band; pairs inside it (all pairs reaching it if ``check_consider``) by exact Jaccard
EXACT_ALL = 1  # exact Jaccard for every pair (verify="exact" with every set at hand)
EXACT_WITH_TEXTS = 2  # verify="exact" with texts: exact Jaccard where the sets are at hand, else the estimate

STAGE_EXACT = np.uint8(stages.STAGE_EXACT)
STAGE_MINHASH = np.uint8(stages.STAGE_MINHASH)
STAGE_TEXT_SIMHASH = np.uint8(stages.STAGE_TEXT_SIMHASH)


class FoldRule(NamedTuple):
    """What the fold check reads per document; disabled stages carry 1-element dummies."""

    text_ok: np.ndarray  # bool (n,) the document has words
    use_exact: bool
    exact: np.ndarray  # uint64 (n,) exact-text hashes
    use_minhash: bool
    minhash: np.ndarray  # uint32 (n, num_perm), or the rows ``sig_rows`` names
    sig_rows: np.ndarray  # int64 (n,) each document's row in ``minhash``; empty: row = document
    per_doc: bool  # bounds per document (per-source thresholds), else element 0 for all
    agree_lo: np.ndarray  # int64 below this many agreements: not similar
    agree_hi: np.ndarray  # int64 at or above: similar by the estimate (unless checked exactly)
    threshold: np.ndarray  # float64 Jaccard threshold
    minhash_mode: int  # BAND / EXACT_ALL / EXACT_WITH_TEXTS
    check_consider: bool  # BAND: every pair reaching agree_lo is checked exactly when both sets are at hand
    count_exact: bool  # EXACT_ALL: count the checks in ``exact_checks``
    rows: np.ndarray  # int64 (n,) row of each document in ``sets``, -1 when its set is not at hand
    sets: ShingleRows  # sorted distinct shingle hashes (uint64 or uint32)
    use_text_simhash: bool
    text_simhash: np.ndarray  # uint64 (n,)
    max_hamming: int
    #: pairs whose exact Jaccard the linking computed (sorted keys a * n + b, a < b) and its values:
    #: the pair is then exact without its sets (diversify.sketches.memo.ExactMemo.known)
    known_keys: np.ndarray  # int64 (k,)
    known_vals: np.ndarray  # float64 (k,)


class FoldState(NamedTuple):
    """What the greedy writes (updated in place)."""

    labels: np.ndarray  # int64 (n,)
    reps: np.ndarray  # bool (n,)
    flags: np.ndarray  # uint8 (n,) stage bits
    fold_bit: np.ndarray  # uint8 (n,) the stage that verified each document folded here
    similarity: np.ndarray  # float64 (n,) its similarity (text SimHash: the Hamming distance)
    #: int64 (6,) += [pairs checked, exact checks, components cut, folds by exact, minhash, text simhash]
    counters: np.ndarray


@kernel(inline="always")
def _bound(rule, r, c):
    """(lo, hi, threshold) of the pair: the stricter of the two documents' sources."""
    if not rule.per_doc:
        return rule.agree_lo[0], rule.agree_hi[0], rule.threshold[0]
    s = c if rule.threshold[c] > rule.threshold[r] else r
    return rule.agree_lo[s], rule.agree_hi[s], rule.threshold[s]


@kernel(inline="always")
def _known(rule, r, c):
    """The exact Jaccard of documents r and c if the linking computed it, else -1.0."""
    if rule.known_keys.size == 0:
        return -1.0
    key = min(r, c) * rule.text_ok.size + max(r, c)
    i = np.searchsorted(rule.known_keys, key)
    if i < rule.known_keys.size and rule.known_keys[i] == key:
        return rule.known_vals[i]
    return -1.0


@kernel(inline="always")
def pair_check(rule, counters, r, c):
    """(stage bit, similarity, decided exactly) of documents r and c by the text stages: the bit
    of the first stage that verifies the pair (0: not similar), the similarity that stage measured
    (exact hash 1.0; MinHash the exact Jaccard where it was computed, else agreements / num_perm;
    text SimHash the Hamming distance) and whether the MinHash stage decided by exact Jaccard.
    Exact checks are counted in ``counters[1]``."""
    if not (rule.text_ok[c] and rule.text_ok[r]):
        return np.uint8(0), 0.0, False
    if rule.use_exact and rule.exact[c] == rule.exact[r]:
        return STAGE_EXACT, 1.0, False
    if rule.use_minhash:
        agree = sig_agreement(rule.minhash, rule.sig_rows, r, c)
        lo, hi, t = _bound(rule, r, c)
        val = agree / rule.minhash.shape[1]
        rr = rule.rows[r]
        rc = rule.rows[c]
        mode = rule.minhash_mode
        ok = agree >= hi
        exact = False
        known = -1.0
        if mode == EXACT_ALL:
            exact = True
        elif mode == EXACT_WITH_TEXTS:
            ok = False
            exact = rr >= 0 and rc >= 0
            if not exact:
                known = _known(rule, r, c)
                exact = known >= 0
                ok = 2 * agree >= lo + hi
        elif agree >= lo and (rule.check_consider or not ok):
            exact = rr >= 0 and rc >= 0
            if not exact:
                known = _known(rule, r, c)
                exact = known >= 0
                ok = ok or 2 * agree >= lo + hi
        if exact:
            val = known if known >= 0 else _jaccard_rows(rule.sets, rr, rc)
            if mode != EXACT_ALL or rule.count_exact:
                counters[1] += 1
            ok = val >= t
        if ok:
            return STAGE_MINHASH, val, exact
    if rule.use_text_simhash:
        x = rule.text_simhash[c] ^ rule.text_simhash[r]
        h = 0
        while x:
            x &= x - np.uint64(1)
            h += 1
        if h <= rule.max_hamming:
            return STAGE_TEXT_SIMHASH, float(h), False
    return np.uint8(0), 0.0, False


@kernel(inline="always")
def _similar(rule, state, r, c):
    """The stage bit that verifies member c under representative r (0: not similar); writes the
    similarity to ``state.similarity[c]`` when it does."""
    bit, val, _ = pair_check(rule, state.counters, r, c)
    if bit != 0:
        state.similarity[c] = val
    return bit


@kernel
def fold_groups(order, bounds, n_old, rule, state, todo, got):
    """Run the greedy on the components ``order[bounds[g]:bounds[g + 1]]`` (members in
    representative order). Documents below ``n_old`` are stored: their representatives claim
    first and they are never reassigned. ``todo`` and ``got`` are int64 scratch of at least the
    largest component's size.

    Each claim folds the unassigned members ``todo[start:n_todo]`` verified similar to its
    representative and moves the rest to the front, order kept. A new representative's cluster is
    labelled by its smallest member; a stored one keeps its label.
    """
    labels = state.labels
    counters = state.counters
    # The common outcome, a member that the estimate alone rejects, is decided in the loop below
    # from arrays taken out of ``rule`` once; every other pair goes to _similar. Read through the
    # record at every check, the arrays were reference-counted each time, which dominated the cost
    # of a large component of near-copies.
    fast = rule.use_minhash and rule.minhash_mode == BAND and not rule.use_text_simhash
    text_ok, exact, minhash, sig_rows, agree_lo, threshold = (rule.text_ok, rule.exact, rule.minhash, rule.sig_rows,
                                                              rule.agree_lo, rule.threshold)
    for g in range(bounds.size - 1):
        a = bounds[g]
        b = bounds[g + 1]
        n_todo = 0
        for j in range(a, b):
            if order[j] >= n_old:
                todo[n_todo] = order[j]
                n_todo += 1
        n_clusters = 0
        start = 0
        j = a  # the stored representatives, in order, claim first
        while start < n_todo:
            if j < b:
                r = order[j]
                j += 1
                if r >= n_old or not state.reps[r]:
                    continue
                new_rep = False
            else:
                r = todo[start]
                start += 1
                n_clusters += 1
                state.reps[r] = True
                new_rep = True
            counters[0] += n_todo - start
            keep = start
            n_got = 0
            label = r if new_rep else labels[r]
            for k in range(start, n_todo):
                c = todo[k]
                bit = np.uint8(0)
                if fast and text_ok[c] and text_ok[r] and not (rule.use_exact and exact[c] == exact[r]):
                    agree = agreement_inline(minhash, sig_rows, r, c)
                    stricter = (c if threshold[c] > threshold[r] else r) if rule.per_doc else 0  # as _bound
                    if agree >= agree_lo[stricter]:  # below it _similar returns 0 in BAND mode
                        bit = _similar(rule, state, r, c)
                else:
                    bit = _similar(rule, state, r, c)
                if bit == 0:
                    todo[keep] = c
                    keep += 1
                    continue
                got[n_got] = c
                n_got += 1
                state.reps[c] = False
                state.flags[c] = bit
                state.fold_bit[c] = bit
                state.flags[r] |= bit
                counters[3 if bit == STAGE_EXACT else (4 if bit == STAGE_MINHASH else 5)] += 1
                if new_rep and c < label:
                    label = c
            if n_got:
                labels[r] = label
                for k in range(n_got):
                    labels[got[k]] = label
            n_todo = keep
        if n_old == 0 and n_clusters > 1:
            counters[2] += 1
