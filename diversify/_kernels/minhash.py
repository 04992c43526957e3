"""MinHash signatures: one-permutation hashing with optimal densification, and classic k-perm."""

from __future__ import annotations

import numba
import numpy as np

from ._common import MASK32, S32, fmix64, kernel, merge_sort_run, splitmix64

MERSENNE61 = np.uint64((1 << 61) - 1)
_S29 = np.uint64(29)
_S61 = np.uint64(61)
_M29 = np.uint64((1 << 29) - 1)
_BLOCK = 256
EMPTY = np.uint32(0xFFFFFFFF)


@kernel
def mulmod61(a, x):
    """(a * x) mod (2**61 - 1) for a, x < 2**61, exact in uint64 arithmetic."""
    a = np.uint64(a)
    x = np.uint64(x)
    a0 = a & MASK32
    a1 = a >> S32
    x0 = x & MASK32
    x1 = x >> S32
    lo = a0 * x0  # < 2**64
    mid = a0 * x1 + a1 * x0  # < 2**62
    hi = a1 * x1  # < 2**58
    # 2**64 = 8 (mod p); mid*2**32 = (mid>>29)*2**61 + (mid & (2**29-1))*2**32
    s = (hi << np.uint64(3)) + (mid >> _S29) + ((mid & _M29) << S32) + (lo & MERSENNE61) + (lo >> _S61)
    s = (s & MERSENNE61) + (s >> _S61)
    s = (s & MERSENNE61) + (s >> _S61)
    if s >= MERSENNE61:
        s -= MERSENNE61
    return s


@kernel
def densify(sig, filled, seed_h):
    """Optimal densification (Shrivastava 2017): an empty bin j copies the first filled bin along
    its own fixed probe sequence h(j, 0), h(j, 1), ...; the sequence depends only on j and the seed,
    so equal sets get equal signatures and the collision probability stays the Jaccard similarity.
    At least one bin must be filled."""
    num_perm = sig.shape[0]
    p = np.uint64(num_perm)
    for j in range(num_perm):
        if filled[j]:
            continue
        attempt = 0
        while True:
            r = splitmix64(seed_h ^ np.uint64(j), attempt)
            src = ((r >> S32) * p) >> S32
            if filled[src]:
                sig[j] = sig[src]
                break
            attempt += 1


@kernel
def _oph_row(hashes, lo, hi, seed_h, num_perm, out, filled):
    p = np.uint64(num_perm)
    for j in range(num_perm):
        out[j] = EMPTY
        filled[j] = False
    for t in range(lo, hi):
        v = fmix64(hashes[t] ^ seed_h)
        b = ((v >> S32) * p) >> S32
        out[b] = min(np.uint32(v & MASK32), out[b])  # no branch: see diversify._kernels.text._emit
        filled[b] = True
    if hi > lo:
        densify(out, filled, seed_h)


@kernel(parallel=True)
def fill_minhash_oph(hashes, indptr, seed_h, out):
    """One-permutation MinHash with optimal densification.

    Parameters
    ----------
    hashes : uint64 (nnz,)   shingle hashes, CSR with ``indptr``
    indptr : int64 (n+1,)
    seed_h : uint64          mixed seed
    out : uint32 (n, num_perm)  signatures; a document with no shingles gets all 0xFFFFFFFF
    """
    n = indptr.size - 1
    num_perm = out.shape[1]
    nblocks = (n + _BLOCK - 1) // _BLOCK
    for blk in numba.prange(nblocks):
        filled = np.empty(num_perm, dtype=np.bool_)
        lo = blk * _BLOCK
        hi = min(n, lo + _BLOCK)
        for i in range(lo, hi):
            _oph_row(hashes, indptr[i], indptr[i + 1], seed_h, num_perm, out[i], filled)


@kernel(parallel=True)
def fill_minhash_classic(hashes, indptr, a, b, out):
    """Classic k-permutation MinHash: out[i, j] = min over shingles x of ((a_j * x' + b_j) mod p) & 0xFFFFFFFF,
    with p = 2**61 - 1 and x' = x mod p.

    Parameters
    ----------
    a, b : uint64 (num_perm,)  permutation parameters, 1 <= a < p, 0 <= b < p
    out : uint32 (n, num_perm)
    """
    n = indptr.size - 1
    num_perm = out.shape[1]
    nblocks = (n + _BLOCK - 1) // _BLOCK
    for blk in numba.prange(nblocks):
        best = np.empty(num_perm, dtype=np.uint64)
        lo = blk * _BLOCK
        hi = min(n, lo + _BLOCK)
        for i in range(lo, hi):
            for j in range(num_perm):
                best[j] = MERSENNE61
            for t in range(indptr[i], indptr[i + 1]):
                x = hashes[t] % MERSENNE61
                for j in range(num_perm):
                    v = mulmod61(a[j], x) + b[j]
                    if v >= MERSENNE61:
                        v -= MERSENNE61
                    if v < best[j]:
                        best[j] = v
            if indptr[i + 1] == indptr[i]:
                for j in range(num_perm):
                    out[i, j] = EMPTY
            else:
                for j in range(num_perm):
                    out[i, j] = np.uint32(best[j] & MASK32)


@kernel(parallel=True)
def sort_unique_segments(hashes, indptr, counts):
    """Sort each document's shingle run in place and move its unique values to the front.

    counts : int64 (n,)  out: number of unique shingles of each document
    """
    n = indptr.size - 1
    for i in numba.prange(n):
        lo = indptr[i]
        hi = indptr[i + 1]
        if hi == lo:
            counts[i] = 0
            continue
        merge_sort_run(hashes, lo, hi)
        w = lo + 1
        for t in range(lo + 1, hi):
            if hashes[t] != hashes[w - 1]:
                hashes[w] = hashes[t]
                w += 1
        counts[i] = w - lo


@kernel(parallel=True)
def gather_segments(hashes, indptr, counts, new_indptr, out):
    n = indptr.size - 1
    for i in numba.prange(n):
        for t in range(counts[i]):
            out[new_indptr[i] + t] = hashes[indptr[i] + t]
