"""LSH band keys and bucket scanning with verification, joining verified pairs in the union-find forest.

Buckets are runs of equal keys in a sorted key array (no dicts of lists). A bucket of m members is
checked pairwise when m <= window, otherwise each member against the next ``window - 1`` members,
so a giant bucket costs O(m * window), never O(m**2). A pair already in one component is skipped
(connected components do not depend on it), so m near-copies cost about m verifications.

Joins go through :mod:`._kernels.union` (the smaller index is always the root).
"""

from __future__ import annotations

import numba
import numpy as np

from ._common import fmix64, kernel
from .simhash import hamming_rows
from .union import find, union_roots

KIND_ACCEPT = 0
KIND_MINHASH_ESTIMATE = 1
KIND_MINHASH_EXACT = 2
KIND_SIMHASH_ESTIMATE = 3
KIND_SIMHASH_EXACT = 4


@kernel(parallel=True)
def fill_minhash_band_keys(sigs, docs, rows, seed_h, out):
    """out[t, b] = hash of sigs[docs[t], b*rows:(b+1)*rows], salted by band b.

    sigs : uint32 (n, num_perm); docs : int64 (m,); out : uint64 (m, bands)
    """
    bands = out.shape[1]
    for t in numba.prange(docs.size):
        d = docs[t]
        for b in range(bands):
            h = fmix64(seed_h ^ np.uint64(b))
            base = b * rows
            for r in range(rows):
                h = fmix64(h ^ np.uint64(sigs[d, base + r]))
            out[t, b] = h


@kernel(parallel=True)
def fill_simhash_band_keys(sigs, docs, bits, band_starts, seed_h, out):
    """Band keys of packed SimHash rows: every family is cut into the same bit ranges.

    sigs : uint64 (n, families * bits // 64); band_starts : int64 (bands + 1,) within a family;
    out : uint64 (m, families * bands)
    """
    nb = band_starts.size - 1
    families = sigs.shape[1] * 64 // bits
    for t in numba.prange(docs.size):
        d = docs[t]
        for f in range(families):
            for b in range(nb):
                v = np.uint64(0)
                for pos in range(band_starts[b], band_starts[b + 1]):
                    bit = f * bits + pos
                    if (sigs[d, bit // 64] >> np.uint64(bit % 64)) & np.uint64(1):
                        v |= np.uint64(1) << np.uint64(pos - band_starts[b])
                h = fmix64(seed_h ^ np.uint64(f * nb + b))
                out[t, f * nb + b] = fmix64(h ^ v)


@kernel
def _jaccard_sorted(h, ia0, ia1, ib0, ib1):
    """Exact Jaccard of two sorted unique uint64 runs h[ia0:ia1], h[ib0:ib1]."""
    na = ia1 - ia0
    nb = ib1 - ib0
    if na == 0 and nb == 0:
        return 1.0
    i = ia0
    j = ib0
    inter = 0
    while i < ia1 and j < ib1:
        if h[i] == h[j]:
            inter += 1
            i += 1
            j += 1
        elif h[i] < h[j]:
            i += 1
        else:
            j += 1
    return inter / (na + nb - inter)


ACCEPT = 1
REJECT = 0
DEFER = 2


@kernel
def _verify(kind, a, b, mh, agree_lo, agree_hi, sh_indptr, sh_hashes, jacc_t, sh, max_ham, vecs, cos_t):
    """ACCEPT, REJECT, or DEFER (MinHash agreement strictly inside [agree_lo, agree_hi): borderline,
    to be decided by exact Jaccard later)."""
    if kind == KIND_ACCEPT:
        return ACCEPT
    if kind == KIND_MINHASH_ESTIMATE:
        agree = 0
        for j in range(mh.shape[1]):
            if mh[a, j] == mh[b, j]:
                agree += 1
        if agree >= agree_hi:
            return ACCEPT
        if agree < agree_lo:
            return REJECT
        return DEFER
    if kind == KIND_MINHASH_EXACT:
        if _jaccard_sorted(sh_hashes, sh_indptr[a], sh_indptr[a + 1], sh_indptr[b], sh_indptr[b + 1]) >= jacc_t:
            return ACCEPT
        return REJECT
    if kind == KIND_SIMHASH_ESTIMATE:
        return ACCEPT if hamming_rows(sh[a], sh[b]) <= max_ham else REJECT
    s = 0.0
    for t in range(vecs.shape[1]):
        s += vecs[a, t] * vecs[b, t]
    return ACCEPT if s >= cos_t else REJECT


@kernel
def link_scan(perm, skeys, docs, stride, window, kind, mh, agree_lo, agree_hi, sh_indptr, sh_hashes, jacc_t,
              sh, max_ham, vecs, cos_t, new_start, parent, flags, stage_bit, counters, deferred, n_deferred,
              state, resumable):
    """Scan runs of equal keys, verify candidate pairs and union the accepted ones.

    Parameters
    ----------
    perm : int64 (M,)      stable argsort of the flattened key matrix
    skeys : uint64 (M,)    keys in sorted order
    docs : int64 (m,)      document index of each key-matrix row; row = perm // stride
    window : int           all pairs for buckets up to this size, else a sliding window
    kind : int             verifier (KIND_*)
    new_start : int        only pairs with at least one document >= new_start are considered
    parent : int64 (n,)    union-find forest, updated in place
    flags : uint8 (n,)     ``stage_bit`` is or-ed into both ends of every merging edge
    counters : int64 (3,)  += [candidate pairs, verifications, merges]
    deferred : int64 (cap, 2), n_deferred : int64 (1,)
        borderline pairs (DEFER) are appended here instead of being joined
    state : int64 (3,)     scan position (bucket start, x, y); start with [0, -1, -1]
    resumable : bool       when the buffer is full: True -> save the position in ``state`` and
                           return False (the caller decides the buffered pairs, empties the
                           buffer and calls again); False -> decide by the midpoint estimate

    Returns True when the scan is complete.
    """
    M = perm.size
    i = state[0]
    x0 = state[1]
    y0 = state[2]
    while i < M:
        j = i + 1
        while j < M and skeys[j] == skeys[i]:
            j += 1
        m = j - i
        if m >= 2:
            xs = x0 if x0 >= i else i
            for x in range(xs, j):
                ub = j if m <= window else min(j, x + window)
                a = docs[perm[x] // stride]
                ys = y0 if (x == x0 and y0 > x) else x + 1
                for y in range(ys, ub):
                    b = docs[perm[y] // stride]
                    if a == b or (a < new_start and b < new_start):
                        continue
                    ra = find(parent, a)
                    rb = find(parent, b)
                    if ra == rb:
                        counters[0] += 1
                        continue
                    v = _verify(kind, a, b, mh, agree_lo, agree_hi, sh_indptr, sh_hashes, jacc_t, sh, max_ham, vecs, cos_t)
                    if v == DEFER:
                        if n_deferred[0] < deferred.shape[0]:
                            deferred[n_deferred[0], 0] = a
                            deferred[n_deferred[0], 1] = b
                            n_deferred[0] += 1
                            counters[0] += 1
                            counters[1] += 1
                            continue
                        if resumable:
                            state[0] = i
                            state[1] = x
                            state[2] = y
                            return False
                        agree = 0
                        for t in range(mh.shape[1]):
                            if mh[a, t] == mh[b, t]:
                                agree += 1
                        v = ACCEPT if 2 * agree >= agree_lo + agree_hi else REJECT
                    counters[0] += 1
                    counters[1] += 1
                    if v == ACCEPT:
                        union_roots(parent, ra, rb)
                        flags[a] |= stage_bit
                        flags[b] |= stage_bit
                        counters[2] += 1
        x0 = -1
        y0 = -1
        i = j
    state[0] = M
    return True


@kernel
def link_sorted(perm, skeys, docs, stride, window, kind, mh, agree_lo, agree_hi, sh_indptr, sh_hashes, jacc_t,
                sh, max_ham, vecs, cos_t, new_start, parent, flags, stage_bit, counters, deferred, n_deferred):
    """One-shot :func:`link_scan`: a full buffer decides further borderline pairs by the midpoint."""
    state = np.array([0, -1, -1], dtype=np.int64)
    link_scan(perm, skeys, docs, stride, window, kind, mh, agree_lo, agree_hi, sh_indptr, sh_hashes, jacc_t,
              sh, max_ham, vecs, cos_t, new_start, parent, flags, stage_bit, counters, deferred, n_deferred,
              state, False)


@kernel
def link_pairs_exact(pairs, rows, sh_indptr, sh_hashes, jacc_t, parent, flags, stage_bit, counters):
    """Decide deferred pairs by exact Jaccard of their sorted unique shingles and join the accepted.

    pairs : int64 (m, 2) documents; rows : int64 (m, 2) their rows in the CSR ``sh_*`` arrays
    counters : int64 (3,) += [0, exact verifications, merges]
    """
    link_pairs_exact_rows(pairs, rows, sh_indptr[:-1], sh_indptr[1:] - sh_indptr[:-1], sh_hashes, jacc_t, parent,
                          flags, stage_bit, counters)


@kernel
def link_pairs_accept(pairs, parent, flags, stage_bit, counters):
    """Join already-accepted pairs; flags and counts only the pairs that merge two components."""
    for t in range(pairs.shape[0]):
        a = pairs[t, 0]
        b = pairs[t, 1]
        ra = find(parent, a)
        rb = find(parent, b)
        if ra == rb:
            continue
        union_roots(parent, ra, rb)
        flags[a] |= stage_bit
        flags[b] |= stage_bit
        counters[2] += 1


@kernel
def link_pairs_exact_rows(pairs, rows, starts, counts, hashes, jacc_t, parent, flags, stage_bit, counters):
    """:func:`link_pairs_exact` over rows laid out as ``hashes[starts[r]:starts[r]+counts[r]]``."""
    for t in range(pairs.shape[0]):
        a = pairs[t, 0]
        b = pairs[t, 1]
        ra = find(parent, a)
        rb = find(parent, b)
        if ra == rb:
            continue
        counters[1] += 1
        x = rows[t, 0]
        y = rows[t, 1]
        if _jaccard_sorted(hashes, starts[x], starts[x] + counts[x], starts[y], starts[y] + counts[y]) >= jacc_t:
            union_roots(parent, ra, rb)
            flags[a] |= stage_bit
            flags[b] |= stage_bit
            counters[2] += 1
