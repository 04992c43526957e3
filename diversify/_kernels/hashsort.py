"""A stable argsort of 64-bit hash keys by two bucket passes (:func:`argsort_hashes`): the order
of band keys the candidate scan walks, as ``np.argsort(keys, kind="stable")`` gives it."""

from __future__ import annotations

import numpy as np

from ._common import kernel

__all__ = ["argsort_hashes"]


#: insertion-sort moves allowed per key before :func:`argsort_hashes` gives up (keys far from uniform)
_ARGSORT_MOVES = 8


def argsort_hashes(keys, perm, sorted_keys=None) -> bool:
    """Stable argsort of the uint64 hash values ``keys`` into ``perm`` (int64, same length): the
    permutation ``np.argsort(keys, kind="stable")`` gives, and ``keys[perm]`` into ``sorted_keys``
    when given (uint64, same length; a gather of n random reads spared). Returns False (``perm``
    and ``sorted_keys`` unspecified) when the keys are too far from uniform for this method; the
    caller then sorts them with numpy.

    Two bucket passes, each stable: the positions are scattered by the keys' top ``top`` bits into
    ~n/4,096 buckets (:func:`_scatter_top`), then each bucket, its keys gathered once into a small
    local copy, by its next bits into buckets of a key or two, insertion-sorted with a strict
    comparison so that equal keys keep their order (:func:`_sort_buckets`, the buckets shared out
    between threads). One pass into ~n buckets would spread its writes and its reads of the keys
    over the whole array and need an n-long table of bucket heads. Keys whose bits agree make
    buckets large and insertion quadratic: after ``_ARGSORT_MOVES`` moves per key the sort stops
    and says so. numpy's stable argsort of 64-bit keys is a merge sort, several times slower.
    """
    from . import _runtime

    n = keys.size
    out = np.empty(0, dtype=np.uint64) if sorted_keys is None else sorted_keys
    if n < 2:
        perm[:n] = np.arange(n, dtype=np.int64)
        out[:] = keys[: out.size]
        return True
    top = 1
    while (2 << top) <= n // _TOP_BUCKET and top < 16:
        top += 1
    heads = np.zeros((1 << top) + 1, dtype=np.int64)
    _scatter_top(keys, perm, heads, np.uint64(64 - top))
    ok = np.ones(1, dtype=np.bool_)
    # blocks small enough to share out: one band of 100k keys has 16 top buckets
    block = max(1, min(_SORT_BUCKETS_BLOCK, (heads.size - 1) // 8))
    _runtime.in_blocks(_sort_buckets, (keys, perm, out, heads, np.int64(top), ok), heads.size - 1, block)
    return bool(ok[0])


#: mean keys in a top bucket of :func:`argsort_hashes` (its local copy stays in the core's cache)
_TOP_BUCKET = 4096
#: top buckets a thread takes at a time
_SORT_BUCKETS_BLOCK = 64


@kernel
def _scatter_top(keys, perm, heads, shift):
    """Positions ``0 .. n`` into ``perm``, grouped by ``keys >> shift`` in key order, each group in
    position order; ``heads[b]`` ends as the start of group b (``heads[-1]`` = n)."""
    n = keys.size
    for i in range(n):
        heads[(keys[i] >> shift) + np.uint64(1)] += 1
    m = heads.size - 1
    for b in range(m):
        heads[b + 1] += heads[b]
    nxt = heads[:m].copy()
    for i in range(n):
        b = keys[i] >> shift
        perm[nxt[b]] = i
        nxt[b] += 1


@kernel
def _sort_buckets(keys, perm, out, heads, top, ok, lo, hi):
    """Sort the positions of top buckets ``lo .. hi`` (see :func:`argsort_hashes`) by key, stably,
    and write the keys in that order to ``out`` unless it is empty; ``ok[0] = False`` when a bucket
    takes more than its budget of insertion moves."""
    keep = out.size > 0
    most = 0
    for b in range(lo, hi):
        most = max(most, heads[b + 1] - heads[b])
    kk = np.empty(most, dtype=np.uint64)
    pp = np.empty(most, dtype=np.int64)
    k2 = np.empty(most, dtype=np.uint64)
    p2 = np.empty(most, dtype=np.int64)
    sub_heads = np.empty((1 << 16) + 1, dtype=np.int64)
    for b in range(lo, hi):
        s = heads[b]
        size = heads[b + 1] - s
        if size < 2:
            if size == 1 and keep:
                out[s] = keys[perm[s]]
            continue
        for t in range(size):
            p = perm[s + t]
            pp[t] = p
            kk[t] = keys[p]
        bits = 1
        while (2 << bits) <= size and bits < 16:
            bits += 1
        m = 1 << bits
        for t in range(m + 1):
            sub_heads[t] = 0
        drop = np.uint64(64 - bits)
        for t in range(size):
            sub_heads[((kk[t] << np.uint64(top)) >> drop) + np.uint64(1)] += 1
        for t in range(m):
            sub_heads[t + 1] += sub_heads[t]
        for t in range(size):  # stable: in position order into each sub-bucket
            c = (kk[t] << np.uint64(top)) >> drop
            d = sub_heads[c]
            k2[d] = kk[t]
            p2[d] = pp[t]
            sub_heads[c] = d + 1
        budget = _ARGSORT_MOVES * size
        start = 0
        for c in range(m):
            end = sub_heads[c]
            for t in range(start + 1, end):
                k = k2[t]
                p = p2[t]
                j = t - 1
                while j >= start and k2[j] > k:
                    k2[j + 1] = k2[j]
                    p2[j + 1] = p2[j]
                    j -= 1
                    budget -= 1
                k2[j + 1] = k
                p2[j + 1] = p
            if budget < 0:
                ok[0] = False
                return
            start = end
        for t in range(size):
            perm[s + t] = p2[t]
        if keep:
            for t in range(size):
                out[s + t] = k2[t]
