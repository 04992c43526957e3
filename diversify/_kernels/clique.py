"""The clique cut in one kernel: components into clusters whose every two members are verified similar.

The rule is :mod:`diversify.clusters.clique`'s (read its docstring first). Per component, members
in representative order:

1. stored clusters (``add``) take, in order, each new member that is verified similar to every
   one of their members;
2. while more than ``dense_max`` members are left, a center is chosen (the member of an evenly
   spaced sample with the most neighbours inside the sample, then the member most similar to it if
   more members lie within half the threshold's distance of that one), every member left is checked
   against the center, and the center's neighbours join, nearest first, each checked against the
   members taken before it except where the metric bound certifies the pair (below);
3. the last ``dense_max`` or fewer members are checked pair by pair, and clusters are cut greedily:
   center = the member with the most neighbours left (ties: representative order), its neighbours
   in order of degree each join when adjacent to every member taken.

The metric bound: Jaccard distance, Hamming distance and angle obey the triangle inequality, so two
members each within half the threshold's distance of the same center are within the threshold of
each other. A pair is certified that way only when both distances are of the same kind (both exact
Jaccard, both MinHash estimates that the verification itself would take, both text SimHash, both
vector SimHash, both exact cosine); a member whose text equals the center's is certified with every
member. Checks per round are capped (``budget``): past the cap a member that would need a check is
left for a later round.

Every document's similarity to its representative (the first member in representative order) comes
out as the verification measured it; text SimHash and vector SimHash Hamming distances are written
as distances, which the caller turns into cosines with numpy.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import stages
from ._common import kernel
from .fold import BAND, EXACT_ALL, pair_check

__all__ = ["VectorRule", "CliqueState", "clique_groups", "N_COUNTERS"]

STAGE_EXACT = np.uint8(stages.STAGE_EXACT)
STAGE_MINHASH = np.uint8(stages.STAGE_MINHASH)
STAGE_TEXT_SIMHASH = np.uint8(stages.STAGE_TEXT_SIMHASH)
STAGE_SIMHASH = np.uint8(stages.STAGE_SIMHASH)

#: counters: pairs checked, exact checks, components cut, folds by exact, minhash, text simhash,
#: vector simhash, pairs certified by the metric bound without a check
N_COUNTERS = 8

# kinds of distance to a center (which pairs the metric bound may certify)
_NONE = 0
_COPY = 1  # same normalized text as the center
_JACCARD = 2  # exact Jaccard distance
_AGREE = 3  # MinHash disagreements (the estimate)
_TEXT_HAM = 4  # text SimHash Hamming distance
_VEC_HAM = 5  # vector SimHash Hamming distance
_ANGLE = 6  # angle between the vectors


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
def _distance(rule, vrule, bit, val, exact, tmax, hi_max):
    """(kind, distance, inner) of a member verified to a center with (bit, val, exact): the metric
    and the distance in it, and whether it lies within half the threshold's distance."""
    if bit == STAGE_EXACT:
        return _COPY, 0.0, True
    if bit == STAGE_MINHASH:
        if exact:
            d = 1.0 - val
            return _JACCARD, d, 2.0 * d <= (1.0 - tmax) - 1e-12
        p = rule.minhash.shape[1]
        dis = p - int(round(val * p))
        return _AGREE, float(dis), 2 * dis <= p - hi_max
    if bit == STAGE_TEXT_SIMHASH:
        return _TEXT_HAM, val, 2 * int(val) <= rule.max_hamming
    if bit == STAGE_SIMHASH:
        if exact:
            ang = np.arccos(min(1.0, max(-1.0, val)))
            return _ANGLE, ang, ang <= vrule.half_angle
        return _VEC_HAM, val, 2 * int(val) <= vrule.max_hamming
    return _NONE, 0.0, False


@kernel(inline="always")
def _text_kind(kind):
    return kind == _COPY or kind == _JACCARD or kind == _AGREE or kind == _TEXT_HAM


@kernel(inline="always")
def _certified(kind, inner, x, y, agree_ok):
    """Whether the metric bound certifies members x and y (indices into ``kind``/``inner``):
    a copy of the center with a member joined by a text stage (the pair is the center's pair), or
    two members inside the inner ring of the same metric. ``agree_ok``: the verification would take
    the MinHash estimate for this pair (see :func:`_agree_certifiable`)."""
    kx = kind[x]
    ky = kind[y]
    if kx == _COPY or ky == _COPY:
        other = ky if kx == _COPY else kx
        return _text_kind(other) and (other != _AGREE or agree_ok)
    if not (inner[x] and inner[y]) or kx != ky:
        return False
    return kx != _AGREE or agree_ok


@kernel
def _agree_certifiable(rule, a, b):
    """Whether the verification would take the MinHash estimate for documents a and b (so that the
    estimate's metric bound may stand for it): the band mode without exact checks of clear pairs,
    or no exact Jaccard at hand for the pair."""
    if rule.minhash_mode == EXACT_ALL:
        return False
    if rule.minhash_mode == BAND and not rule.check_consider:
        return True
    if rule.rows[a] >= 0 and rule.rows[b] >= 0:
        return False
    if rule.known_keys.size:
        key = min(a, b) * rule.text_ok.size + max(a, b)
        i = np.searchsorted(rule.known_keys, key)
        if i < rule.known_keys.size and rule.known_keys[i] == key:
            return False
    return True


@kernel
def _finish_cluster(rule, vrule, state, docs, n_taken, label_of, bits_rep, vals_rep, exact_rep):
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


@kernel
def _to_rep(rule, vrule, counters, r, c, kind_c, dist_c, kind_r, dist_r, tmax):
    """(bit, similarity, exact) of member c to its representative r after the cut certified them:
    checked, and where the check cannot take the pair by itself, the bound's own figure. Only an
    exact-Jaccard certification can get there (the estimate below the band of a pair whose sets
    are at hand): every other certified kind is a distance the check itself measures."""
    bit, val, exact = pair_all(rule, vrule, counters, r, c)
    if bit != 0:
        return bit, val, exact
    # the bound certified an exact Jaccard the estimate alone would not reach: its figure stands
    return STAGE_MINHASH, max(tmax, 1.0 - dist_c - dist_r), True


@kernel
def _dense(rule, vrule, state, docs, u, taken, adj_bit, adj_val, adj_exact):
    """Check every pair of ``docs[:u]`` (into the adjacency tables) and cut them greedily by degree."""
    counters = state.counters
    for i in range(u):
        adj_bit[i, i] = 0
        for j in range(i + 1, u):
            bit, val, exact = pair_all(rule, vrule, counters, docs[i], docs[j])
            adj_bit[i, j] = bit
            adj_bit[j, i] = bit
            adj_val[i, j] = val
            adj_val[j, i] = val
            adj_exact[i, j] = exact
            adj_exact[j, i] = exact
    done = np.zeros(u, dtype=np.bool_)
    deg = np.zeros(u, dtype=np.int64)
    members = np.empty(u, dtype=np.int64)
    cand = np.empty(u, dtype=np.int64)
    n_clusters = 0
    left = u
    while left:
        for i in range(u):
            deg[i] = 0
            if done[i]:
                continue
            for j in range(u):
                if not done[j] and adj_bit[i, j] != 0:
                    deg[i] += 1
        center = -1
        for i in range(u):
            if not done[i] and (center < 0 or deg[i] > deg[center]):
                center = i
        n_cand = 0
        for j in range(u):
            if not done[j] and adj_bit[center, j] != 0:
                cand[n_cand] = j
                n_cand += 1
        # neighbours by degree (largest first), ties in representative order: a stable sort
        keys = np.empty(n_cand, dtype=np.int64)
        for k in range(n_cand):
            keys[k] = -deg[cand[k]] * (u + 1) + cand[k]
        order = np.argsort(keys)
        n_m = 1
        members[0] = center
        for k in range(n_cand):
            x = cand[order[k]]
            ok = True
            for q in range(n_m):
                if adj_bit[x, members[q]] == 0:
                    ok = False
                    break
            if ok:
                members[n_m] = x
                n_m += 1
        ms = np.sort(members[:n_m])  # representative order: the first member represents
        rep = ms[0]
        out = np.empty(n_m, dtype=np.int64)
        bits = np.zeros(n_m, dtype=np.uint8)
        vals = np.zeros(n_m)
        exs = np.zeros(n_m, dtype=np.bool_)
        for k in range(n_m):
            out[k] = docs[ms[k]]
            if k:
                bits[k] = adj_bit[rep, ms[k]]
                vals[k] = adj_val[rep, ms[k]]
                exs[k] = adj_exact[rep, ms[k]]
            done[ms[k]] = True
            taken[ms[k]] = True
        _finish_cluster(rule, vrule, state, out, n_m, -1, bits, vals, exs)
        left -= n_m
        n_clusters += 1
    return n_clusters


@kernel
def _round(rule, vrule, state, docs, u, taken, sample, budget, tmax, hi_max):
    """One round on ``docs[:u]`` (members left, representative order) when they are many: choose a
    center, take its neighbours that the checks and the metric bound keep pairwise similar. Marks
    the members taken in ``taken`` (positions in ``docs``)."""
    counters = state.counters
    # 1. a center: the best-connected member of an evenly spaced sample
    s = min(sample, u)
    pos = np.empty(s, dtype=np.int64)
    for k in range(s):
        pos[k] = (k * u) // s
    deg = np.zeros(s, dtype=np.int64)
    tot = np.zeros(s)
    for i in range(s):
        for j in range(i + 1, s):
            bit, val, _ = pair_all(rule, vrule, counters, docs[pos[i]], docs[pos[j]])
            if bit != 0:
                deg[i] += 1
                deg[j] += 1
                tot[i] += val
                tot[j] += val
    best = 0
    for i in range(1, s):
        if deg[i] > deg[best] or (deg[i] == deg[best] and tot[i] > tot[best]):
            best = i
    kinds = np.zeros(u, dtype=np.int64)
    dists = np.zeros(u)
    inner = np.zeros(u, dtype=np.bool_)
    bits = np.zeros(u, dtype=np.uint8)
    vals = np.zeros(u)
    exs = np.zeros(u, dtype=np.bool_)
    center = pos[best]
    n_inner = _against(rule, vrule, counters, docs, u, center, kinds, dists, inner, bits, vals, exs, tmax, hi_max)
    # 2. the member most similar to that center may sit nearer the family's middle: keep whichever
    # has more members within half the threshold's distance
    near = -1
    for x in range(u):
        if x != center and bits[x] != 0 and (near < 0 or vals[x] > vals[near]):
            near = x
    if near >= 0:
        kinds2 = np.zeros(u, dtype=np.int64)
        dists2 = np.zeros(u)
        inner2 = np.zeros(u, dtype=np.bool_)
        bits2 = np.zeros(u, dtype=np.uint8)
        vals2 = np.zeros(u)
        exs2 = np.zeros(u, dtype=np.bool_)
        n2 = _against(rule, vrule, counters, docs, u, near, kinds2, dists2, inner2, bits2, vals2, exs2, tmax, hi_max)
        if n2 > n_inner:
            center, kinds, dists, inner, bits, vals, exs = near, kinds2, dists2, inner2, bits2, vals2, exs2
    # 3. the center's neighbours, nearest first (distance over the kind's radius), each kept when
    # every pair with the members taken is certified or checked
    n_cand = 0
    cand = np.empty(u, dtype=np.int64)
    key = np.empty(u)
    for x in range(u):
        if x != center and bits[x] != 0:
            cand[n_cand] = x
            key[n_cand] = _scaled(rule, vrule, kinds[x], dists[x], tmax, hi_max)
            n_cand += 1
    order = np.argsort(key[:n_cand], kind="mergesort")
    members = np.empty(n_cand + 1, dtype=np.int64)
    members[0] = center
    n_m = 1
    spent = 0
    for k in range(n_cand):
        x = cand[order[k]]
        ok = True
        for q in range(1, n_m):
            y = members[q]
            agree_ok = True
            if kinds[x] == _AGREE or kinds[y] == _AGREE:
                agree_ok = _agree_certifiable(rule, docs[x], docs[y])
            if _certified(kinds, inner, x, y, agree_ok):
                counters[7] += 1
                continue
            if spent >= budget:
                ok = False
                break
            spent += 1
            bit, _, _ = pair_all(rule, vrule, counters, docs[x], docs[y])
            if bit == 0:
                ok = False
                break
        if ok:
            members[n_m] = x
            n_m += 1
    ms = np.sort(members[:n_m])
    rep = ms[0]
    out = np.empty(n_m, dtype=np.int64)
    rbits = np.zeros(n_m, dtype=np.uint8)
    rvals = np.zeros(n_m)
    rexs = np.zeros(n_m, dtype=np.bool_)
    for k in range(n_m):
        x = ms[k]
        out[k] = docs[x]
        taken[x] = True
        if k == 0:
            continue
        if rep == center:
            rbits[k], rvals[k], rexs[k] = bits[x], vals[x], exs[x]
        else:
            rbits[k], rvals[k], rexs[k] = _to_rep(rule, vrule, counters, docs[rep], docs[x], kinds[x], dists[x],
                                                  kinds[rep], dists[rep], tmax)
    _finish_cluster(rule, vrule, state, out, n_m, -1, rbits, rvals, rexs)


@kernel
def _against(rule, vrule, counters, docs, u, center, kinds, dists, inner, bits, vals, exs, tmax, hi_max):
    """Check ``docs[:u]`` against the center; fill each member's (bit, similarity, exact) and its
    (kind, distance, inner); return how many lie within half the threshold's distance."""
    n_inner = 0
    for x in range(u):
        if x == center:
            kinds[x], dists[x], inner[x] = _COPY, 0.0, True
            continue
        bit, val, exact = pair_all(rule, vrule, counters, docs[center], docs[x])
        bits[x], vals[x], exs[x] = bit, val, exact
        if bit != 0:
            k, d, inn = _distance(rule, vrule, bit, val, exact, tmax, hi_max)
            kinds[x], dists[x], inner[x] = k, d, inn
            if inn:
                n_inner += 1
        else:
            kinds[x], dists[x], inner[x] = _NONE, 0.0, False
    return n_inner


@kernel
def _scaled(rule, vrule, kind, dist, tmax, hi_max):
    """A distance over its kind's threshold radius (0 = copy of the center, 0.5 = the inner ring)."""
    if kind == _JACCARD:
        return dist / max(1e-12, 1.0 - tmax)
    if kind == _AGREE:
        return dist / max(1, rule.minhash.shape[1] - hi_max)
    if kind == _TEXT_HAM:
        return dist / max(1, rule.max_hamming)
    if kind == _VEC_HAM:
        return dist / max(1, vrule.max_hamming)
    if kind == _ANGLE:
        return dist / max(1e-12, 2.0 * vrule.half_angle)
    return 0.0


@kernel
def _join_stored(rule, vrule, state, comp, n_old, todo, n_todo, taken):
    """``add``: each stored cluster of the component (representatives in order) takes each new
    member verified similar to every one of its members."""
    counters = state.counters
    m = comp.size
    cl = np.empty(m, dtype=np.int64)
    for i in range(m):
        r = comp[i]
        if r >= n_old or not state.reps[r]:
            continue
        label = state.labels[r]
        n_cl = 0
        for j in range(m):
            if comp[j] < n_old and state.labels[comp[j]] == label:
                cl[n_cl] = comp[j]
                n_cl += 1
        for k in range(n_todo):
            if taken[k]:
                continue
            x = todo[k]
            ok = True
            bit_r = np.uint8(0)
            val_r = 0.0
            ex_r = False
            for q in range(n_cl):
                bit, val, exact = pair_all(rule, vrule, counters, cl[q], x)
                if bit == 0:
                    ok = False
                    break
                if cl[q] == r:
                    bit_r, val_r, ex_r = bit, val, exact
            if not ok:
                continue
            taken[k] = True
            cl[n_cl] = x
            n_cl += 1
            docs = np.empty(1, dtype=np.int64)
            docs[0] = x
            _finish_cluster(rule, vrule, state, docs, 1, label, np.array([bit_r]), np.array([val_r]),
                            np.array([ex_r]))
            state.flags[r] |= bit_r


@kernel
def clique_groups(order, bounds, n_old, rule, vrule, state, dense_max, sample, budget_per_member, tmax, hi_max):
    """Cut the components ``order[bounds[g]:bounds[g + 1]]`` (members in representative order).
    Documents below ``n_old`` are stored: their clusters take new members first and are never
    reassigned."""
    counters = state.counters
    width = 0
    for g in range(bounds.size - 1):
        width = max(width, bounds[g + 1] - bounds[g])
    d = min(width, dense_max)
    adj_bit = np.zeros((d, d), dtype=np.uint8)
    adj_val = np.zeros((d, d))
    adj_exact = np.zeros((d, d), dtype=np.bool_)
    todo = np.empty(width, dtype=np.int64)
    for g in range(bounds.size - 1):
        comp = order[bounds[g]: bounds[g + 1]]
        n_todo = 0
        for j in range(comp.size):
            if comp[j] >= n_old:
                todo[n_todo] = comp[j]
                n_todo += 1
        taken = np.zeros(n_todo, dtype=np.bool_)
        if n_old:
            _join_stored(rule, vrule, state, comp, n_old, todo, n_todo, taken)
        n_clusters = 0
        while True:
            u = 0
            for k in range(n_todo):
                if not taken[k]:
                    todo[u] = todo[k]
                    u += 1
            n_todo = u
            if u == 0:
                break
            taken = np.zeros(u, dtype=np.bool_)
            if u <= dense_max:
                n_clusters += _dense(rule, vrule, state, todo, u, taken, adj_bit, adj_val, adj_exact)
                break
            _round(rule, vrule, state, todo, u, taken, sample, max(dense_max * dense_max, budget_per_member * u),
                   tmax, hi_max)
            n_clusters += 1
        if n_old == 0 and n_clusters > 1:
            counters[2] += 1
