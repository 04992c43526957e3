"""Shared decorator preset and 64-bit hash primitives."""

from __future__ import annotations

import functools
from typing import Any

import numba
import numpy as np

#: The one decorator preset for every kernel. Typed ``Any`` for the type checker: a jitted function
#: is called with numpy arrays and scalars that numba's own stubs do not describe.
kernel: Any = functools.partial(numba.njit, cache=True, nogil=True)

U64 = np.uint64
FNV_OFFSET = np.uint64(0xCBF29CE484222325)
FNV_PRIME = np.uint64(0x100000001B3)
GOLDEN = np.uint64(0x9E3779B97F4A7C15)
M1 = np.uint64(0xBF58476D1CE4E5B9)
M2 = np.uint64(0x94D049BB133111EB)
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
    """The i-th output of the splitmix64 stream that starts at ``seed``."""
    return fmix64(np.uint64(seed) + (np.uint64(i) + np.uint64(1)) * GOLDEN)
