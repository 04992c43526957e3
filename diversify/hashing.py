"""The hash scheme: its name, its constants, and every seed salt derived from the user's seed.

Everything that turns ``BuildConfig.seed`` into a hash seed lives here, so the local and Dask
engines (and any future one) cannot disagree: change a salt and every engine changes with it,
and the golden-bytes test says so. The scheme is part of the artifact format
(docs/artifact-format.md, "Hash scheme"); ``HASH_SCHEME`` is recorded in every file and in the
config fingerprint.

Pure Python and numpy: no numba at import. The kernels' jitted ``fmix64`` and ``splitmix64``
(``diversify/_kernels/_common.py``) are built from the constants defined here and are checked
against these functions on plain Python integers in tests/unit/test_minhash.py.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "HASH_SCHEME",
    "MASK64",
    "GOLDEN",
    "MIX_M1",
    "MIX_M2",
    "FNV_OFFSET",
    "FNV_PRIME",
    "SHINGLE_BASE",
    "fmix64",
    "fmix64_array",
    "splitmix64_stream",
    "seed_hash",
    "minhash_seed",
    "lsh_seed",
    "SALT_MINHASH",
    "SALT_LSH",
    "SALT_LSH_TEXT_SIMHASH",
    "SALT_LSH_SIMHASH",
    "SALT_CLASSIC_PERMUTATIONS",
    "SALT_HYPERPLANES",
]

#: name of the hash scheme (recorded in artifacts and in the config fingerprint)
HASH_SCHEME = "diversify-fnv1a-splitmix64-v1"

MASK64 = (1 << 64) - 1
#: splitmix64's increment (2**64 / golden ratio)
GOLDEN = 0x9E3779B97F4A7C15
#: the two multipliers of the splitmix64 finalizer (``fmix64``)
MIX_M1 = 0xBF58476D1CE4E5B9
MIX_M2 = 0x94D049BB133111EB
#: FNV-1a-64 offset basis and prime (unit and exact hashes hash UTF-8 bytes with FNV-1a)
FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
#: base B of the shingle hash: a shingle of units u_1..u_m hashes sum_j u_j * B**(m-j) mod 2**64
SHINGLE_BASE = 2 * FNV_PRIME + 1

# Seed salts: XOR-ed into the user's seed so that each use draws an independent stream.
#: one-permutation MinHash bin hash ("minh")
SALT_MINHASH = 0x6D696E68
#: LSH band keys ("lsh"); the band kinds below are XOR-ed into the mixed LSH seed
SALT_LSH = 0x6C7368
#: band keys of the text SimHash stage ("TSH")
SALT_LSH_TEXT_SIMHASH = 0x545348
#: band keys of the vector SimHash stage ("SIM")
SALT_LSH_SIMHASH = 0x53494D
#: classic MinHash permutation parameters (a, b)
SALT_CLASSIC_PERMUTATIONS = 0xA5A5A5A5
#: SimHash random hyperplanes
SALT_HYPERPLANES = 0x5F3759DF


def fmix64(x: int) -> int:
    """splitmix64 finalizer on a Python int: a bijection on uint64 with full avalanche."""
    z = int(x) & MASK64
    z = ((z ^ (z >> 30)) * MIX_M1) & MASK64
    z = ((z ^ (z >> 27)) * MIX_M2) & MASK64
    return z ^ (z >> 31)


def fmix64_array(x: np.ndarray) -> np.ndarray:
    """:func:`fmix64` of every element of a uint64 array (numpy arithmetic wraps modulo 2**64)."""
    m1, m2 = np.uint64(MIX_M1), np.uint64(MIX_M2)
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * m1
        x = (x ^ (x >> np.uint64(27))) * m2
        return x ^ (x >> np.uint64(31))


def splitmix64_stream(seed: int, count: int) -> np.ndarray:
    """The first ``count`` outputs of the splitmix64 stream that starts at ``seed``, uint64 (count,)."""
    with np.errstate(over="ignore"):
        z = np.uint64(int(seed) & MASK64) + (np.arange(1, count + 1, dtype=np.uint64) * np.uint64(GOLDEN))
        z = (z ^ (z >> np.uint64(30))) * np.uint64(MIX_M1)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(MIX_M2)
        return z ^ (z >> np.uint64(31))


def seed_hash(seed: int) -> np.uint64:
    """The shingle-hash seed of ``seed`` (added to every shingle's rolling hash)."""
    return np.uint64(fmix64(seed))


def minhash_seed(seed: int) -> np.uint64:
    """The one-permutation MinHash seed of ``seed``."""
    return np.uint64(fmix64(int(seed) ^ SALT_MINHASH))


def lsh_seed(seed: int) -> np.uint64:
    """The seed of every LSH band key of a build with ``seed`` (both engines use this one)."""
    return minhash_seed(int(seed) ^ SALT_LSH)
