"""SimHash of vectors by random hyperplanes, bit-packed into uint64 words."""

from __future__ import annotations

import numba
import numpy as np

from ._common import kernel


@kernel(parallel=True)
def fill_simhash(vectors, planes, out):
    """out[i] = packed sign bits of planes @ vectors[i] (bit j of word j // 64 is plane j).

    Parameters
    ----------
    vectors : float64 (n, d)
    planes : float64 (nbits, d)
    out : uint64 (n, nbits // 64)

    Dot products are summed in a fixed order (no BLAS), so bits do not depend on thread count.
    A dot product of exactly 0 gives bit 0.
    """
    n = vectors.shape[0]
    nbits = planes.shape[0]
    d = planes.shape[1]
    for i in numba.prange(n):
        for w in range(out.shape[1]):
            out[i, w] = np.uint64(0)
        for j in range(nbits):
            s = 0.0
            for t in range(d):
                s += vectors[i, t] * planes[j, t]
            if s > 0.0:
                out[i, j // 64] |= np.uint64(1) << np.uint64(j % 64)


@kernel(inline="always")
def _dot_in_order(vectors, i, planes, j):
    """planes[j] . vectors[i] in float64, summed over t = 0, 1, ... (the order :func:`fill_simhash` uses)."""
    s = 0.0
    for t in range(planes.shape[1]):
        s += vectors[i, t] * planes[j, t]
    return s


@kernel(parallel=True)
def fill_simhash_signs(products, margin, vectors, planes, out):
    """out[i] = packed sign bits of ``products[i]`` (a float32 product of the same rows and
    planes, summed in any order); an entry within ``margin[i]`` of zero is recomputed by
    :func:`_dot_in_order`, so every bit equals the one :func:`fill_simhash` gives.

    Parameters
    ----------
    products : float32 (n, nbits)  vectors @ planes.T, from float32 copies (any BLAS, any threads)
    margin : float64 (n,)          per row, at least twice the largest error the float32 product can have
    vectors : float64 (n, d)
    planes : float64 (nbits, d)
    out : uint64 (n, nbits // 64)
    """
    n = products.shape[0]
    nbits = products.shape[1]
    for i in numba.prange(n):
        m = margin[i]
        for w in range(out.shape[1]):
            word = np.uint64(0)
            for k in range(64):
                j = w * 64 + k
                if j >= nbits:
                    break
                p = np.float64(products[i, j])
                if not (p > m or p < -m):  # near zero (or not a number): the float64 sum decides
                    p = _dot_in_order(vectors, i, planes, j)
                if p > 0.0:
                    word |= np.uint64(1) << np.uint64(k)
            out[i, w] = word


@kernel
def popcount64(x):
    x = np.uint64(x)
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return (x * np.uint64(0x0101010101010101)) >> np.uint64(56)


@kernel
def hamming_rows(a, b):
    """Hamming distance between two packed rows (uint64 words)."""
    h = 0
    for w in range(a.shape[0]):
        h += popcount64(a[w] ^ b[w])
    return h
