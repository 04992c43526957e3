"""Setting the bits of the main band table's key filter (:mod:`diversify.index.keyfilter`).

The probe positions are those of the filter's numpy code (splitmix64's finalizer, double hashing):
``h1 = fmix64(key)``, ``h2 = fmix64(h1 + GOLDEN) | 1``, probe ``i`` at ``(h1 + i * h2) & mask``.
A query's few lookups stay in numpy (they must not wait for a compilation); a merge's adds and the
Dask engine's bulk lookups, millions of keys, run here.
"""

from __future__ import annotations

import numpy as np

from ._common import GOLDEN, fmix64, kernel

_ONE = np.uint64(1)
_THREE = np.uint64(3)
_SEVEN = np.uint64(7)


@kernel
def filter_set(bits, keys, mask, probes):
    """Set the ``probes`` bits of every key of ``keys`` (uint64) in ``bits`` (uint8; ``mask`` + 1
    bits, a power of two)."""
    for i in range(keys.size):
        h1 = fmix64(keys[i])
        h2 = fmix64(h1 + GOLDEN) | _ONE
        p = h1
        for _ in range(probes):
            q = p & mask
            bits[np.int64(q >> _THREE)] |= np.uint8(_ONE << (q & _SEVEN))
            p = p + h2


@kernel
def filter_test(bits, keys, mask, probes, out):
    """``out[i]`` = whether every one of the ``probes`` bits of ``keys[i]`` is set in ``bits``:
    False where the key was certainly never added (the numpy lookup's answer, key by key)."""
    for i in range(keys.size):
        h1 = fmix64(keys[i])
        h2 = fmix64(h1 + GOLDEN) | _ONE
        p = h1
        hit = True
        for _ in range(probes):
            q = p & mask
            if not (bits[np.int64(q >> _THREE)] >> np.uint8(q & _SEVEN)) & np.uint8(1):
                hit = False
                break
            p = p + h2
        out[i] = hit
