"""LSH band keys and bucket scanning with verification, joining verified pairs in the union-find forest.

Buckets are runs of equal keys in a sorted key array (no dicts of lists). A bucket of m members is
checked pairwise when m <= window, otherwise each member against the next ``window - 1`` members,
so a giant bucket costs O(m * window), never O(m**2). A pair already in one component is skipped
(connected components do not depend on it), so m near-copies cost about m verifications.

The kernels take their inputs grouped in small records (numba passes named tuples of arrays and
scalars in nopython mode, and ``cache=True`` keys on their field types), so that a call reads as a
sentence: ``link_scan(buckets, verifier, forest, borderline, resumable)``. The per-pair helpers are
inlined at numba's IR level (``inline="always"``): called per candidate pair, they would otherwise
receive the records by value, which slows a verification-heavy scan.

Joins go through :mod:`._kernels.union` (the smaller index is always the root).
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from ._common import fmix64, kernel
from .hashsort import argsort_hashes as argsort_hashes  # at home in .hashsort; named here for its caller
from .simhash import hamming_rows
from .union import find, union_roots

__all__ = [
    "KIND_ACCEPT",
    "KIND_MINHASH_ESTIMATE",
    "KIND_MINHASH_EXACT",
    "KIND_SIMHASH_ESTIMATE",
    "KIND_SIMHASH_EXACT",
    "ACCEPT",
    "REJECT",
    "DEFER",
    "ShingleRows",
    "Verifier",
    "Forest",
    "Buckets",
    "Borderline",
    "fill_minhash_band_keys",
    "fill_simhash_band_keys",
    "link_scan",
    "link_sorted",
    "mark_apart",
    "link_pairs_exact",
    "link_pairs_accept",
]

KIND_ACCEPT = 0
KIND_MINHASH_ESTIMATE = 1
KIND_MINHASH_EXACT = 2
KIND_SIMHASH_ESTIMATE = 3
KIND_SIMHASH_EXACT = 4

ACCEPT = 1
REJECT = 0
DEFER = 2


class ShingleRows(NamedTuple):
    """Sorted unique shingle hashes per row: row r is ``hashes[starts[r]:starts[r] + counts[r]]``.

    A CSR table (``indptr``) is the case ``starts = indptr[:-1]``, ``counts = diff(indptr)``; the
    rows may also leave gaps between them (as :func:`diversify.text.sorted_unique_shingles` does).
    """

    starts: np.ndarray  # int64 (rows,)
    counts: np.ndarray  # int64 (rows,)
    hashes: np.ndarray  # uint64


class Verifier(NamedTuple):
    """How a candidate pair (a, b) of documents is verified: one ``kind``; the fields the other
    kinds read may be 1-element dummies."""

    kind: int  # KIND_*
    minhash: np.ndarray  # uint32 (n, num_perm) signatures, or the rows ``sig_rows`` names
    #: int64 (n,) the row of each document's signature in ``minhash`` (a spilled build holds only
    #: the documents a stage can compare: diversify._spill); empty: row = document
    sig_rows: np.ndarray
    agree_lo: int  # MinHash agreements below this: REJECT
    agree_hi: int  # at or above this: ACCEPT; strictly between: DEFER (borderline)
    shingles: ShingleRows  # per document (KIND_MINHASH_EXACT)
    jaccard_threshold: float
    simhash: np.ndarray  # uint64 (n, words) packed SimHash signatures
    max_hamming: int  # KIND_SIMHASH_ESTIMATE: the radius; KIND_SIMHASH_EXACT: the cutoff before the exact check
    vectors: np.ndarray  # float32/64 (n, d) L2-normalized (KIND_SIMHASH_EXACT)
    cosine_threshold: float


class Forest(NamedTuple):
    """The union-find forest a stage joins into, with what it records about each join."""

    parent: np.ndarray  # int64 (n,) updated in place
    flags: np.ndarray  # uint8 (n,) ``stage_bit`` is or-ed into both ends of every merging edge
    stage_bit: np.uint8
    counters: np.ndarray  # int64 (3,) += [candidate pairs, verifications, merges]


class Buckets(NamedTuple):
    """Band keys in sorted order, scanned as runs of equal keys (the buckets)."""

    perm: np.ndarray  # int64 (M,) stable argsort of the flattened key matrix
    keys: np.ndarray  # uint64 (M,) the keys in sorted order
    docs: np.ndarray  # int64 (m,) document of each key-matrix row; row = perm // stride
    stride: int  # keys per row of the key matrix
    window: int  # all pairs for buckets up to this size, else a sliding window
    new_start: int  # only pairs with at least one document >= new_start are considered


class Borderline(NamedTuple):
    """Borderline pairs (DEFER) a scan buffers instead of joining, and where a paused scan stands."""

    pairs: np.ndarray  # int64 (capacity, 2)
    n_pairs: np.ndarray  # int64 (1,) pairs in the buffer
    position: np.ndarray  # int64 (3,) (bucket start, x, y); [0, -1, -1] before the scan


@kernel(parallel=True)
def fill_minhash_band_keys(sigs, docs, rows, seed_h, out):
    """out[b, t] = hash of sigs[docs[t], b*rows:(b+1)*rows], salted by band b.

    sigs : uint32 (n, num_perm); docs : int64 (m,); out : uint64 (bands, m), band-major: each
    band's keys are one contiguous row, sorted and scanned on their own.
    """
    bands = out.shape[0]
    for t in numba.prange(docs.size):
        d = docs[t]
        for b in range(bands):
            h = fmix64(seed_h ^ np.uint64(b))
            base = b * rows
            for r in range(rows):
                h = fmix64(h ^ np.uint64(sigs[d, base + r]))
            out[b, t] = h


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


@kernel(inline="always")
def _jaccard_rows(shingles, x, y):
    """Exact Jaccard of the sorted unique rows x and y of ``shingles`` (1.0 for two empty rows)."""
    h = shingles.hashes
    i = shingles.starts[x]
    ia1 = i + shingles.counts[x]
    j = shingles.starts[y]
    ib1 = j + shingles.counts[y]
    na = shingles.counts[x]
    nb = shingles.counts[y]
    if na == 0 and nb == 0:
        return 1.0
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


@kernel
def sig_agreement(minhash, sig_rows, a, b):
    """Slots where the MinHash signatures of documents a and b agree: rows ``sig_rows[a]`` and
    ``sig_rows[b]`` of ``minhash`` (rows a and b when ``sig_rows`` is empty). Called, not inlined:
    its three callers share one compiled loop (a cold start compiles less)."""
    if sig_rows.size:
        a = sig_rows[a]
        b = sig_rows[b]
    agree = 0
    for j in range(minhash.shape[1]):
        if minhash[a, j] == minhash[b, j]:
            agree += 1
    return agree


@kernel(inline="always")
def agreement_inline(minhash, sig_rows, a, b):
    """:func:`sig_agreement` inlined, for a loop that took ``minhash`` and ``sig_rows`` out of their
    record once (read through a record at every pair, arrays are reference-counted each time)."""
    if sig_rows.size:
        a = sig_rows[a]
        b = sig_rows[b]
    agree = 0
    for t in range(minhash.shape[1]):
        agree += minhash[a, t] == minhash[b, t]
    return agree


@kernel(inline="always")
def _verify(verifier, a, b):
    """ACCEPT, REJECT, or DEFER (MinHash agreement strictly inside [agree_lo, agree_hi): borderline,
    to be decided by exact Jaccard later)."""
    kind = verifier.kind
    if kind == KIND_ACCEPT:
        return ACCEPT
    if kind == KIND_MINHASH_ESTIMATE:
        agree = sig_agreement(verifier.minhash, verifier.sig_rows, a, b)
        if agree >= verifier.agree_hi:
            return ACCEPT
        if agree < verifier.agree_lo:
            return REJECT
        return DEFER
    if kind == KIND_MINHASH_EXACT:
        return ACCEPT if _jaccard_rows(verifier.shingles, a, b) >= verifier.jaccard_threshold else REJECT
    if kind == KIND_SIMHASH_ESTIMATE:
        return ACCEPT if hamming_rows(verifier.simhash[a], verifier.simhash[b]) <= verifier.max_hamming else REJECT
    if hamming_rows(verifier.simhash[a], verifier.simhash[b]) > verifier.max_hamming:
        return REJECT  # signatures too far apart for the threshold (diversify.linking.bands.hamming_cutoff)
    vecs = verifier.vectors
    s = 0.0
    for t in range(vecs.shape[1]):
        s += vecs[a, t] * vecs[b, t]
    return ACCEPT if s >= verifier.cosine_threshold else REJECT


@kernel(inline="always")
def _join(forest, ra, rb, a, b):
    """Join the distinct roots ra, rb of the pair (a, b); flag both ends and count the merge."""
    union_roots(forest.parent, ra, rb)
    forest.flags[a] |= forest.stage_bit
    forest.flags[b] |= forest.stage_bit
    forest.counters[2] += 1


@kernel(inline="always")
def _link_pair(a, b, verifier, forest, borderline, resumable):
    """Verify the candidate pair (a, b) and join it if accepted; buffer it if borderline.

    Returns False (and leaves the pair untouched) when the buffer is full and ``resumable``: the
    scan must pause here. Without ``resumable`` a pair that finds the buffer full is decided by
    the midpoint of the agreement band.
    """
    ra = find(forest.parent, a)
    rb = find(forest.parent, b)
    counters = forest.counters
    if ra == rb:
        counters[0] += 1
        return True
    v = _verify(verifier, a, b)
    if v == DEFER:
        n = borderline.n_pairs[0]
        if n < borderline.pairs.shape[0]:
            borderline.pairs[n, 0] = a
            borderline.pairs[n, 1] = b
            borderline.n_pairs[0] = n + 1
            counters[0] += 1
            counters[1] += 1
            return True
        if resumable:
            return False
        agree = sig_agreement(verifier.minhash, verifier.sig_rows, a, b)
        v = ACCEPT if 2 * agree >= verifier.agree_lo + verifier.agree_hi else REJECT
    counters[0] += 1
    counters[1] += 1
    if v == ACCEPT:
        _join(forest, ra, rb, a, b)
    return True


@kernel
def link_scan(buckets, verifier, forest, borderline, resumable):
    """Scan runs of equal keys, verify candidate pairs and union the accepted ones.

    Parameters
    ----------
    buckets : Buckets        the sorted band keys, their documents, window and ``new_start``
    verifier : Verifier      how a candidate pair is verified
    forest : Forest          union-find forest, stage flags and counters, updated in place
    borderline : Borderline  borderline pairs (DEFER) are appended here instead of being joined;
                             the scan starts at ``borderline.position``
    resumable : bool         when the buffer is full: True -> save the position in
                             ``borderline.position`` and return False (the caller decides the
                             buffered pairs, empties the buffer and calls again); False -> decide
                             by the midpoint estimate

    Returns True when the scan is complete.
    """
    perm = buckets.perm
    keys = buckets.keys
    docs = buckets.docs
    stride = buckets.stride
    window = buckets.window
    new_start = buckets.new_start
    position = borderline.position
    # The MinHash estimate's clear outcomes (a pair already joined, below the band, at or above it)
    # are decided in the loop below from arrays taken out of the records once; a borderline pair and
    # every other kind go to _link_pair. Read through the records at every pair, the arrays were
    # reference-counted each time (as in the cut into clusters: diversify._kernels.fold.fold_groups).
    fast = verifier.kind == KIND_MINHASH_ESTIMATE
    parent = forest.parent
    counters = forest.counters
    minhash = verifier.minhash
    sig_rows = verifier.sig_rows
    M = perm.size
    i = position[0]
    x0 = position[1]
    y0 = position[2]
    while i < M:
        j = i + 1
        while j < M and keys[j] == keys[i]:
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
                    if fast:
                        ra = find(parent, a)
                        rb = find(parent, b)
                        if ra == rb:
                            counters[0] += 1
                            continue
                        agree = agreement_inline(minhash, sig_rows, a, b)
                        if agree < verifier.agree_lo or agree >= verifier.agree_hi:  # REJECT, ACCEPT: as _link_pair
                            counters[0] += 1
                            counters[1] += 1
                            if agree >= verifier.agree_hi:
                                _join(forest, ra, rb, a, b)
                            continue
                    if not _link_pair(a, b, verifier, forest, borderline, resumable):
                        position[0] = i
                        position[1] = x
                        position[2] = y
                        return False
        x0 = -1
        y0 = -1
        i = j
    position[0] = M
    return True


@kernel
def mark_apart(buckets, lo, hi, parent, mark, gain):
    """Mark the documents a :func:`link_scan` of the buckets between key positions ``lo`` and
    ``hi`` (bucket bounds) would compare now: both ends of every pair it examines (the same window and
    ``new_start`` rule) whose documents lie in different components of ``parent``. The scan can
    compare no others, while the forest only joins: what a spilled build reads back of its
    signatures before scanning (:func:`diversify.linking.spilled.spilled_bands`).

    mark : bool (n,)      in/out; documents already marked are not counted again
    gain : int64 (M,)     out: at each bucket's first position, the documents it newly marked
    Returns the number of documents newly marked.
    """
    bk = buckets
    k = 0
    i = lo
    while i < hi:
        j = i + 1
        while j < hi and bk.keys[j] == bk.keys[i]:
            j += 1
        m = j - i
        before = k
        if m >= 2:
            for x in range(i, j):
                ub = j if m <= bk.window else min(j, x + bk.window)
                a = bk.docs[bk.perm[x] // bk.stride]
                for y in range(x + 1, ub):
                    b = bk.docs[bk.perm[y] // bk.stride]
                    if a == b or (a < bk.new_start and b < bk.new_start):
                        continue
                    if find(parent, a) == find(parent, b):
                        continue
                    if not mark[a]:
                        mark[a] = True
                        k += 1
                    if not mark[b]:
                        mark[b] = True
                        k += 1
        gain[i] = k - before
        i = j
    return k


@kernel
def link_sorted(buckets, verifier, forest, borderline):
    """One-shot :func:`link_scan` from ``borderline.position``: a full buffer decides further
    borderline pairs by the midpoint."""
    link_scan(buckets, verifier, forest, borderline, False)


@kernel
def link_pairs_exact(pairs, rows, shingles, jaccard_threshold, forest, known, jaccard):
    """Decide deferred pairs by exact Jaccard of their sorted unique shingles and join the accepted.

    pairs : int64 (m, 2) documents; rows : int64 (m, 2) their rows in ``shingles`` (ShingleRows)
    known : float64 (m,) a pair's exact Jaccard where an earlier check computed it (>= 0: taken
            as it is, its rows not read), else -1.0
    forest.counters : += [0, exact verifications, merges]
    jaccard : float64 (m,) out: each pair's exact Jaccard, -1.0 for a pair already in one component
    """
    for t in range(pairs.shape[0]):
        a = pairs[t, 0]
        b = pairs[t, 1]
        jaccard[t] = -1.0
        ra = find(forest.parent, a)
        rb = find(forest.parent, b)
        if ra == rb:
            continue
        forest.counters[1] += 1
        if known[t] >= 0.0:
            jaccard[t] = known[t]
        else:
            jaccard[t] = _jaccard_rows(shingles, rows[t, 0], rows[t, 1])
        if jaccard[t] >= jaccard_threshold:
            _join(forest, ra, rb, a, b)


@kernel
def link_pairs_accept(pairs, forest):
    """Join already-accepted pairs; flags and counts only the pairs that merge two components."""
    for t in range(pairs.shape[0]):
        a = pairs[t, 0]
        b = pairs[t, 1]
        ra = find(forest.parent, a)
        rb = find(forest.parent, b)
        if ra == rb:
            continue
        _join(forest, ra, rb, a, b)
