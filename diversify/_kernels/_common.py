"""Shared decorator preset and the jitted 64-bit hash primitives.

The constants come from :mod:`diversify.hashing` (the one home of the hash scheme), typed as
``uint64`` here so that kernel arithmetic never leaves ``uint64`` (``uint64 + int64`` would become
``float64`` in Numba). ``fmix64`` and ``splitmix64`` below are the only jitted copies of the mixer;
tests/unit/test_minhash.py checks them against :func:`diversify.hashing.fmix64` and
:func:`diversify.hashing.splitmix64_stream` on plain Python integers.
"""

from __future__ import annotations

import functools
from typing import Any

import numba
import numpy as np

from .. import hashing
from . import _runtime


def _kernel(fn=None, /, **options):
    """``numba.njit(cache=True, nogil=True, **options)``, fit for any process (see :mod:`._runtime`).

    The on-disk cache goes where this user can write it (or the kernel runs uncached, with one
    warning), never a crash on a read-only install; a ``parallel=True`` kernel comes back as a
    Python launcher that picks a fork-safe threading layer and serializes launches the layer cannot
    take at once (so it is called from Python, not from other kernels). ``@kernel`` and
    ``@kernel(parallel=True)`` both work, as with ``numba.njit``.
    """
    if fn is None:
        return functools.partial(_kernel, **options)
    disp = numba.njit(nogil=True, **options)(fn)
    _runtime.enable_cache(disp)
    return _runtime.parallel_launcher(fn, disp) if options.get("parallel") else disp


#: The one decorator preset for every kernel. Typed ``Any`` for the type checker: a jitted function
#: is called with numpy arrays and scalars that numba's own stubs do not describe.
kernel: Any = _kernel

FNV_OFFSET = np.uint64(hashing.FNV_OFFSET)
FNV_PRIME = np.uint64(hashing.FNV_PRIME)
GOLDEN = np.uint64(hashing.GOLDEN)
M1 = np.uint64(hashing.MIX_M1)
M2 = np.uint64(hashing.MIX_M2)
S30 = np.uint64(30)
S27 = np.uint64(27)
S31 = np.uint64(31)
MASK32 = np.uint64(0xFFFFFFFF)
S32 = np.uint64(32)


@kernel
def fmix64(x):
    """splitmix64 finalizer: a bijection on uint64 with full avalanche."""
    z = np.uint64(x)
    z = (z ^ (z >> S30)) * M1
    z = (z ^ (z >> S27)) * M2
    return z ^ (z >> S31)


@kernel
def splitmix64(seed, i):
    """The i-th output (0-based) of the splitmix64 stream that starts at ``seed``."""
    return fmix64(np.uint64(seed) + (np.uint64(i) + np.uint64(1)) * GOLDEN)


_ZERO = np.int64(0)  # typed int64, not a literal 0 (which would compile a second _sift_down)


@kernel
def sort_run(a, lo, hi):
    """Sort ``a[lo:hi]`` in place, ascending (heapsort: n log n on every input, no allocation).

    Every kernel sorts with this or :func:`argsort_run`, never with ``np.sort``, ``np.argsort`` or
    ``ndarray.sort``. Numba builds those from closures (``make_quicksort_impl``) whose compiled
    names differ only by a counter private to the compiling process, and links them into each
    cached kernel as weak symbols: two cached kernels compiled by different processes can hold
    different sorts (a sort and an argsort) under one name, and a process that loads both runs
    whichever it loaded first for both. A clique cut read that way gave a different representative
    from run to run in one process (tests/unit/test_kernel_sorts.py). They also take seconds to
    compile into every kernel that uses them.
    """
    n = hi - lo
    for root in range(n // 2 - 1, -1, -1):
        _sift_down(a, lo, root, n)
    for end in range(n - 1, 0, -1):
        t = a[lo]
        a[lo] = a[lo + end]
        a[lo + end] = t
        _sift_down(a, lo, _ZERO, end)


#: runs that :func:`argsort_run` and :func:`merge_sort_run` order by insertion before merging them
_INSERTION_RUN = 16


@kernel
def merge_sort_run(a, lo, hi):
    """Sort ``a[lo:hi]`` in place, ascending: a natural merge sort. The range is cut into its
    ascending runs (a run shorter than :data:`_INSERTION_RUN` is lengthened to that by insertion),
    then neighbouring runs are merged pairwise through a scratch copy until one is left. Faster
    than :func:`sort_run` on large ranges, most of all on ranges made of sorted runs (a sample's
    shingle sets one after the other: a few passes), at the price of ``hi - lo`` values of scratch."""
    n = hi - lo
    if n < 2:
        return
    bounds = np.empty(n + 1, dtype=np.int64)
    nb = 0
    s = 0
    while s < n:
        e = s + 1
        while e < n and a[lo + e - 1] <= a[lo + e]:
            e += 1
        if e - s < _INSERTION_RUN and e < n:
            e = min(n, s + _INSERTION_RUN)
            for i in range(lo + s + 1, lo + e):
                v = a[i]
                j = i - 1
                while j >= lo + s and a[j] > v:
                    a[j + 1] = a[j]
                    j -= 1
                a[j + 1] = v
            while e < n and a[lo + e - 1] <= a[lo + e]:
                e += 1
        bounds[nb] = s
        nb += 1
        s = e
    bounds[nb] = n
    if nb == 1:
        return
    src = a[lo:hi].copy()
    dst = np.empty_like(src)
    while nb > 1:
        k = 0
        for r in range(0, nb, 2):
            s = bounds[r]
            e = bounds[min(r + 2, nb)]
            mid = bounds[r + 1] if r + 1 < nb else e
            i, j = s, mid
            for t in range(s, e):
                if i < mid and (j >= e or src[j] >= src[i]):
                    dst[t] = src[i]
                    i += 1
                else:
                    dst[t] = src[j]
                    j += 1
            bounds[k] = s
            k += 1
        bounds[k] = n
        nb = k
        src, dst = dst, src
    for t in range(n):
        a[lo + t] = src[t]


@kernel
def argsort_run(key, n):
    """The positions ``0 .. n - 1`` ordered by ``key[:n]`` ascending, equal keys in position order
    (what a stable argsort gives), int64. A bottom-up merge sort of the positions: runs of
    :data:`_INSERTION_RUN` by insertion, then merges that take from the left run on ties (see
    :func:`sort_run` for why kernels do not call ``np.argsort``)."""
    order = np.empty(n, dtype=np.int64)
    for i in range(n):
        order[i] = i
    for lo in range(0, n, _INSERTION_RUN):
        hi = min(n, lo + _INSERTION_RUN)
        for i in range(lo + 1, hi):
            v = order[i]
            j = i - 1
            while j >= lo and key[order[j]] > key[v]:
                order[j + 1] = order[j]
                j -= 1
            order[j + 1] = v
    other = np.empty(n, dtype=np.int64)
    width = _INSERTION_RUN
    while width < n:
        for lo in range(0, n, 2 * width):
            mid = min(n, lo + width)
            hi = min(n, lo + 2 * width)
            i, j = lo, mid
            for t in range(lo, hi):
                if i < mid and (j >= hi or key[order[j]] >= key[order[i]]):
                    other[t] = order[i]
                    i += 1
                else:
                    other[t] = order[j]
                    j += 1
        order, other = other, order
        width *= 2
    return order


@kernel
def _sift_down(a, lo, root, n):
    """Move ``a[lo + root]`` down the max-heap ``a[lo:lo + n]`` to its place."""
    v = a[lo + root]
    child = 2 * root + 1
    while child < n:
        if child + 1 < n and a[lo + child + 1] > a[lo + child]:
            child += 1
        if a[lo + child] <= v:
            break
        a[lo + root] = a[lo + child]
        root = child
        child = 2 * root + 1
    a[lo + root] = v


#: runs shorter than this are heap-sorted whole; buckets longer than this too (see sort_unique_run)
_SMALL_RUN = 48


@kernel
def sort_unique_run(a, lo, hi, scratch, heads):
    """Sort ``a[lo:hi]`` ascending and drop repeats: the distinct values end up in
    ``a[lo:lo + count]``; returns count. Values past that in the range are left unspecified.

    For hash values (uniform bits): a bucket pass on the top bits into ``scratch`` (at least
    ``hi - lo`` long, else the whole run is heap-sorted in place), then each bucket, a few values
    on average, by insertion; a bucket holding more than ``_SMALL_RUN`` values (inputs whose top
    bits agree) is heap-sorted, so no input costs more than n log n. ``heads`` (int64, at least 33
    long) holds the bucket heads; its length caps the bucket count. Faster than heap sorting a
    document's shingles.
    """
    n = hi - lo
    if n <= _SMALL_RUN or n > scratch.size:
        sort_run(a, lo, hi)
        return _drop_repeats(a, lo, hi)
    bits = 1
    while (2 << bits) <= n // 2 and (2 << bits) < heads.size:
        bits += 1
    m = 1 << bits  # about n/2 buckets: 2 values each on average
    shift = np.uint64(64 - bits)
    for b in range(m + 1):
        heads[b] = 0
    for t in range(lo, hi):
        heads[(a[t] >> shift) + np.uint64(1)] += 1
    for b in range(m):
        heads[b + 1] += heads[b]
    for t in range(lo, hi):  # heads[b]: start of bucket b, then (after its values) its end
        b = a[t] >> shift
        scratch[heads[b]] = a[t]
        heads[b] += 1
    w = lo
    s = lo - lo  # int64 (a literal 0 here would compile a second sort_run)
    for b in range(m):
        e = heads[b]
        if e - s > _SMALL_RUN:
            sort_run(scratch, s, e)
        else:
            for i in range(s + 1, e):
                v = scratch[i]
                j = i - 1
                while j >= s and scratch[j] > v:
                    scratch[j + 1] = scratch[j]
                    j -= 1
                scratch[j + 1] = v
        for t in range(s, e):  # equal values share a bucket: repeats are neighbours
            v = scratch[t]
            if w == lo or a[w - 1] != v:
                a[w] = v
                w += 1
        s = e
    return w - lo


@kernel
def _drop_repeats(a, lo, hi):
    """Compact the sorted run ``a[lo:hi]`` to its distinct values; returns their count."""
    if hi == lo:
        return 0
    w = lo + 1
    for t in range(lo + 1, hi):
        if a[t] != a[w - 1]:
            a[w] = a[t]
            w += 1
    return w - lo


@kernel
def high_halves(starts, counts, hashes, indptr, out):
    """Each document's sorted distinct shingle hashes (as :func:`fill_sorted_unique` leaves them)
    cut to their high 32 bits, equal neighbours merged, packed as CSR into ``indptr``/``out``.

    starts, counts : int64 (n,)   document i's hashes are ``hashes[starts[i]:starts[i] + counts[i]]``
    indptr : int64 (n+1,)         out: document i's values are ``out[indptr[i]:indptr[i+1]]``
    out : uint32 (>= sum(counts)) out
    """
    w = 0
    indptr[0] = 0
    for i in range(counts.size):
        first = starts[i]
        prev = np.uint32(0)
        for t in range(counts[i]):
            v = np.uint32(hashes[first + t] >> S32)
            if t == 0 or v != prev:
                out[w] = v
                w += 1
                prev = v
        indptr[i + 1] = w
