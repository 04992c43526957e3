"""Candidate pairs formed apart from their verification, and verified where their signatures meet:
the Dask engine's bucket scan (:mod:`diversify.engines.dask.scan`) forms the pairs of
:func:`diversify._kernels.linking.link_scan`'s rule without the signatures, and its signature
join (:mod:`diversify.engines.dask.pairs`) counts their agreements with the signatures held in
two tables.
"""

from __future__ import annotations

import numba
import numpy as np

from ._common import kernel

__all__ = ["window_pairs", "pair_agreements"]


@kernel
def _window_walk(keys, docs, window, n_docs, out, fill):
    """:func:`window_pairs`' loop: counts the pairs, and writes them to ``out`` when ``fill``."""
    M = keys.size
    t = 0
    i = 0
    while i < M:
        j = i + 1
        while j < M and keys[j] == keys[i]:
            j += 1
        m = j - i
        if m >= 2:
            for x in range(i, j):
                ub = j if m <= window else min(j, x + window)
                a = docs[x]
                for y in range(x + 1, ub):
                    b = docs[y]
                    if a != b:
                        if fill:
                            out[t] = a * n_docs + b
                        t += 1
        i = j
    return t


@kernel
def window_pairs(keys, docs, window, n_docs):
    """The candidate pairs :func:`link_scan` forms, not verified: in each run of equal ``keys``
    (sorted) of m rows, every pair of rows when m <= ``window``, else each row with the next
    ``window - 1``; ``docs`` (int64, < ``n_docs``) is each row's document. A pair (a, b) of rows
    in that order with a != b is packed as ``a * n_docs + b`` (int64 (p,), in scan order); a pair
    of one document with itself is left out, as :func:`link_scan` does."""
    total = _window_walk(keys, docs, window, n_docs, np.empty(0, dtype=np.int64), False)
    out = np.empty(total, dtype=np.int64)
    _window_walk(keys, docs, window, n_docs, out, True)
    return out


@kernel(parallel=True)
def pair_agreements(sigs_a, rows_a, sigs_b, rows_b, out):
    """out[t] = slots where MinHash signatures ``sigs_a[rows_a[t]]`` and ``sigs_b[rows_b[t]]`` agree
    (the count :func:`sig_agreement` makes, for signatures held in two tables)."""
    for t in numba.prange(rows_a.size):
        a = rows_a[t]
        b = rows_b[t]
        agree = 0
        for j in range(sigs_a.shape[1]):
            agree += sigs_a[a, j] == sigs_b[b, j]
        out[t] = agree
