"""Shared decorator preset and the jitted 64-bit hash primitives.

The constants come from :mod:`diversify.hashing` (the one home of the hash scheme), typed as
``uint64`` here so that kernel arithmetic never leaves ``uint64`` (``uint64 + int64`` would become
``float64`` in Numba). ``fmix64`` and ``splitmix64`` below are the only jitted copies of the mixer;
tests/test_minhash.py checks them against :func:`diversify.hashing.fmix64` and
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

    Written here rather than ``np.sort``: Numba's generic sort takes seconds to compile into every
    kernel that uses it, which a fresh install waits for on its first build. (Only the exact checks
    of borderline pairs sort with it: a few documents per build.)
    """
    n = hi - lo
    for root in range(n // 2 - 1, -1, -1):
        _sift_down(a, lo, root, n)
    for end in range(n - 1, 0, -1):
        t = a[lo]
        a[lo] = a[lo + end]
        a[lo + end] = t
        _sift_down(a, lo, _ZERO, end)


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
