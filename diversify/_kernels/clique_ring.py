"""The clique cut's path for large families: one center, its inner ring certified by the metric bound.

See :mod:`.clique` for the rule. Jaccard distance, MinHash disagreements, Hamming distance and angle
obey the triangle inequality, so two members each within half the threshold's distance of the same
center are within the threshold of each other. A pair is certified that way only when both
distances are of the same kind (both exact Jaccard, both MinHash estimates that the verification
itself would take, both text SimHash, both vector SimHash, both exact cosine); a member whose text
equals the center's is certified with every member joined by a text stage.
"""

from __future__ import annotations

import numpy as np

from ._common import argsort_run, kernel, merge_sort_run, sort_run
from .clique_pairs import (
    AGREE,
    ANGLE,
    COPY,
    JACCARD,
    NONE,
    STAGE_EXACT,
    STAGE_MINHASH,
    STAGE_SIMHASH,
    STAGE_TEXT_SIMHASH,
    TEXT_HAM,
    VEC_HAM,
    finish_cluster,
    pair_all,
)
from .fold import BAND, EXACT_ALL

__all__ = ["ring_round"]

#: members whose signatures make the slot-wise mode a large family's center is chosen by
_MODE_SAMPLE = 1024

@kernel
def _distance(rule, vrule, bit, val, exact, tmax, hi_max):
    """(kind, distance, inner) of a member verified to a center with (bit, val, exact): the metric
    and the distance in it, and whether it lies within half the threshold's distance."""
    if bit == STAGE_EXACT:
        return COPY, 0.0, True
    if bit == STAGE_MINHASH:
        if exact:
            d = 1.0 - val
            return JACCARD, d, 2.0 * d <= (1.0 - tmax) - 1e-12
        p = rule.minhash.shape[1]
        dis = p - int(round(val * p))
        return AGREE, float(dis), 2 * dis <= p - hi_max
    if bit == STAGE_TEXT_SIMHASH:
        return TEXT_HAM, val, 2 * int(val) <= rule.max_hamming
    if bit == STAGE_SIMHASH:
        if exact:
            ang = np.arccos(min(1.0, max(-1.0, val)))
            return ANGLE, ang, ang <= vrule.half_angle
        return VEC_HAM, val, 2 * int(val) <= vrule.max_hamming
    return NONE, 0.0, False


@kernel(inline="always")
def _text_kind(kind):
    return kind == COPY or kind == JACCARD or kind == AGREE or kind == TEXT_HAM


@kernel(inline="always")
def _certified(kind, inner, x, y, agree_ok):
    """Whether the metric bound certifies members x and y (indices into ``kind``/``inner``):
    a copy of the center with a member joined by a text stage (the pair is the center's pair), or
    two members inside the inner ring of the same metric. ``agree_ok``: the verification would take
    the MinHash estimate for this pair (see :func:`_agree_certifiable`)."""
    kx = kind[x]
    ky = kind[y]
    if kx == COPY or ky == COPY:
        other = ky if kx == COPY else kx
        return _text_kind(other) and (other != AGREE or agree_ok)
    if not (inner[x] and inner[y]) or kx != ky:
        return False
    return kx != AGREE or agree_ok


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
def ring_round(rule, vrule, state, docs, u, taken, sample, budget, tmax, hi_max):
    """One round on ``docs[:u]`` (members left, representative order) when they are many: choose a
    center, take its neighbours that the checks and the metric bound keep pairwise similar. Marks
    the members taken in ``taken`` (positions in ``docs``)."""
    counters = state.counters
    center, kinds, dists, inner, bits, vals, exs = _center(rule, vrule, counters, docs, u, sample, tmax, hi_max)
    members = _take(rule, vrule, counters, docs, u, center, kinds, inner, bits, dists, budget, tmax, hi_max)
    n_m = members.size
    ms = members[:n_m].copy()
    sort_run(ms, 0, n_m)
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
    finish_cluster(rule, vrule, state, out, n_m, -1, rbits, rvals, rexs)




@kernel
def _center(rule, vrule, counters, docs, u, sample, tmax, hi_max):
    """The round's center and every member's (kind, distance, inner, bit, similarity, exact) to it."""
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
    # 2. a second candidate nearer the family's middle: with MinHash, the member whose signature
    # agrees most with the slot-wise mode of the members' signatures (a family of copies of one page
    # shares the page's minimum in most slots, so the page or its nearest copy wins); else the
    # member most similar to the first center. Keep whichever has more members within half the
    # threshold's distance.
    near = -1
    if rule.use_minhash:
        near = _modal_member(rule, docs, u, _MODE_SAMPLE)
        if near == center:
            near = -1
    else:
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
    return center, kinds, dists, inner, bits, vals, exs


@kernel
def _modal_member(rule, docs, u, sample):
    """The member of ``docs[:u]`` nearest the middle of its family: with the shingle sets at hand,
    the member with the highest Jaccard to the majority set (the shingles in more than half of an
    evenly spaced sample's sets: a page's own set, when the family is its copies); else the member
    whose MinHash signature agrees with the slot-wise mode of the sample's signatures in the most
    slots. Ties: the first."""
    s = min(sample, u)
    n_sets = 0
    total = 0
    for k in range(s):
        r = rule.rows[docs[(k * u) // s]]
        if r >= 0:
            n_sets += 1
            total += rule.sets.counts[r]
    if 2 * n_sets > s:
        return _majority_member(rule, docs, u, s, total)
    return _mode_member(rule, docs, u, s)


@kernel
def _majority_member(rule, docs, u, s, total):
    sets = rule.sets
    pool = np.empty(total, dtype=sets.hashes.dtype)
    at = 0
    n_sets = 0
    for k in range(s):
        r = rule.rows[docs[(k * u) // s]]
        if r >= 0:
            n_sets += 1
            for i in range(sets.starts[r], sets.starts[r] + sets.counts[r]):
                pool[at] = sets.hashes[i]
                at += 1
    merge_sort_run(pool, 0, total)
    major = np.empty(total, dtype=pool.dtype)
    n_major = 0
    i = 0
    while i < total:
        j = i
        while j < total and pool[j] == pool[i]:
            j += 1
        if 2 * (j - i) > n_sets:
            major[n_major] = pool[i]
            n_major += 1
        i = j
    best = 0
    best_j = -1.0
    for x in range(u):
        r = rule.rows[docs[x]]
        if r < 0:
            continue
        a = sets.starts[r]
        a1 = a + sets.counts[r]
        b = 0
        inter = 0
        while a < a1 and b < n_major:
            if sets.hashes[a] == major[b]:
                inter += 1
                a += 1
                b += 1
            elif sets.hashes[a] < major[b]:
                a += 1
            else:
                b += 1
        union = sets.counts[r] + n_major - inter
        jac = inter / union if union else 1.0
        if jac > best_j:
            best_j = jac
            best = x
    return best


@kernel
def _mode_member(rule, docs, u, s):
    minhash = rule.minhash
    sig_rows = rule.sig_rows
    p = minhash.shape[1]
    mode = np.empty(p, dtype=minhash.dtype)
    col = np.empty(s, dtype=minhash.dtype)
    for t in range(p):
        for k in range(s):
            d = docs[(k * u) // s]
            col[k] = minhash[sig_rows[d] if sig_rows.size else d, t]
        sort_run(col, 0, s)
        best_v = col[0]
        best_n = 0
        run = 0
        for k in range(s):
            run = run + 1 if k and col[k] == col[k - 1] else 1
            if run > best_n:
                best_n = run
                best_v = col[k]
        mode[t] = best_v
    best = 0
    best_agree = -1
    for x in range(u):
        d = docs[x]
        row = sig_rows[d] if sig_rows.size else d
        agree = 0
        for t in range(p):
            agree += minhash[row, t] == mode[t]
        if agree > best_agree:
            best_agree = agree
            best = x
    return best


@kernel
def _take(rule, vrule, counters, docs, u, center, kinds, inner, bits, dists, budget, tmax, hi_max):
    """The members the center takes (positions in ``docs``, the center first)."""
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
    order = argsort_run(key, n_cand)
    members = np.empty(n_cand + 1, dtype=np.int64)
    members[0] = center
    n_m = 1
    # the members taken (the center aside) by group: 0 = outside the inner ring, else the kind of an
    # inner member (COPY .. ANGLE). A whole group is certified at once when the bound covers it,
    # so a family of copies inside the inner ring costs no pass over the members taken per member.
    groups = np.empty((ANGLE + 1, n_cand + 1), dtype=np.int64)
    sizes = np.zeros(ANGLE + 1, dtype=np.int64)
    # the verification takes the MinHash estimate for every pair (no exact check of a clear pair)
    agree_mode = rule.minhash_mode == BAND and not rule.check_consider
    spent = 0
    for k in range(n_cand):
        x = cand[order[k]]
        kx = kinds[x]
        ok = True
        cert = 0
        for g in range(ANGLE + 1):
            cnt = sizes[g]
            if cnt == 0:
                continue
            whole = False
            if g != 0:
                if kx == COPY:
                    whole = _text_kind(g) and (g != AGREE or agree_mode)
                elif g == COPY:
                    whole = _text_kind(kx) and (kx != AGREE or agree_mode)
                elif inner[x] and kx == g:
                    whole = g != AGREE or agree_mode
            if whole:
                cert += cnt
                continue
            for q in range(cnt):
                y = groups[g, q]
                agree_ok = True
                if kx == AGREE or kinds[y] == AGREE:
                    agree_ok = _agree_certifiable(rule, docs[x], docs[y])
                if _certified(kinds, inner, x, y, agree_ok):
                    cert += 1
                    continue
                if spent >= budget:
                    ok = False
                    break
                spent += 1
                bit, _, _ = pair_all(rule, vrule, counters, docs[x], docs[y])
                if bit == 0:
                    ok = False
                    break
            if not ok:
                break
        if ok:
            counters[7] += cert
            members[n_m] = x
            n_m += 1
            g = kx if inner[x] else 0
            groups[g, sizes[g]] = x
            sizes[g] += 1
    return members[:n_m]


@kernel
def _against(rule, vrule, counters, docs, u, center, kinds, dists, inner, bits, vals, exs, tmax, hi_max):
    """Check ``docs[:u]`` against the center; fill each member's (bit, similarity, exact) and its
    (kind, distance, inner); return how many lie within half the threshold's distance."""
    n_inner = 0
    for x in range(u):
        if x == center:
            kinds[x], dists[x], inner[x] = COPY, 0.0, True
            continue
        bit, val, exact = pair_all(rule, vrule, counters, docs[center], docs[x])
        bits[x], vals[x], exs[x] = bit, val, exact
        if bit != 0:
            k, d, inn = _distance(rule, vrule, bit, val, exact, tmax, hi_max)
            kinds[x], dists[x], inner[x] = k, d, inn
            if inn:
                n_inner += 1
        else:
            kinds[x], dists[x], inner[x] = NONE, 0.0, False
    return n_inner


@kernel
def _scaled(rule, vrule, kind, dist, tmax, hi_max):
    """A distance over its kind's threshold radius (0 = copy of the center, 0.5 = the inner ring)."""
    if kind == JACCARD:
        return dist / max(1e-12, 1.0 - tmax)
    if kind == AGREE:
        return dist / max(1, rule.minhash.shape[1] - hi_max)
    if kind == TEXT_HAM:
        return dist / max(1, rule.max_hamming)
    if kind == VEC_HAM:
        return dist / max(1, vrule.max_hamming)
    if kind == ANGLE:
        return dist / max(1e-12, 2.0 * vrule.half_angle)
    return 0.0
