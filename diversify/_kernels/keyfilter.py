"""Setting the bits of the main band table's key filter (:mod:`diversify.index.keyfilter`).

The probe positions are those of the filter's numpy code (splitmix64's finalizer, double hashing):
``h1 = fmix64(key)``, ``h2 = fmix64(h1 + GOLDEN) | 1``, probe ``i`` at ``(h1 + i * h2) & mask``.
Lookups stay in numpy (a query's few keys must not wait for a compilation); only a merge's adds,
millions of keys, run here.
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
