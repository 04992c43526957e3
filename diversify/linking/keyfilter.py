"""The one Bloom filter of the library: over 64-bit band keys, which keys certainly were never added.

Two users, one scheme:

- the SQLite backend of the live index keeps one for its main band table (``band_filter``, see
  :mod:`diversify.index.sqlite`): most band keys of a new document match nothing, and each lookup
  that finds nothing still costs a B-tree descent; the filter answers those from memory and only
  keys it cannot rule out go to the table. Its bytes are stored in the index, so the probe
  positions below are part of that file format and must not change.
- the Dask engine builds one of the band keys held by two or more rows (pass 1 of
  :mod:`diversify.engines.dask.bands`) and sends it to every worker; pass 2 emits only the rows
  whose key it may contain. A key it lets through wrongly is held by one row and makes no
  candidate pair, so the filter decides how many rows are shuffled, never the artifact's bytes.

Band keys are already uniform 64-bit hashes, so the probe positions come from one mixing step
(splitmix64's finalizer) and double hashing: ``(h1 + i * h2) mod m`` for ``i < PROBES``, with ``m``
a power of two. A filter never gives a false negative for a key added to it; its false-positive
rate at ``b`` bits per key is about ``(1 - exp(-PROBES / b)) ** PROBES`` (2.4% at 8 bits, 0.24% at
16, 0.02% at 32). Keys are int64 (the index) or uint64 (the engines); only their 64 bits count.
"""

from __future__ import annotations

import numpy as np

from .. import hashing

__all__ = ["PROBES", "KeyFilter", "bits_for", "filter_of"]

#: probes per key
PROBES = 4
#: bits per key a new filter is sized for; it is rebuilt larger when it falls below MIN_BITS_PER_KEY
BITS_PER_KEY = 16
MIN_BITS_PER_KEY = 8
#: smallest filter (bits): 1 MiB
MIN_BITS = 1 << 23

#: keys from which a lookup runs in the kernel: fewer are answered in numpy, which a query of the
#: live index can use before any kernel is compiled
BULK_KEYS = 1 << 16

_GOLDEN = np.uint64(hashing.GOLDEN)


def bits_for(n_keys: int, *, bits_per_key: int = BITS_PER_KEY, min_bits: int = MIN_BITS) -> int:
    """Bits of a new filter for ``n_keys`` keys: a power of two, at least ``bits_per_key`` per key
    and at least ``min_bits``."""
    need = max(min_bits, bits_per_key * max(1, int(n_keys)))
    return 1 << (need - 1).bit_length()


def _words(keys: np.ndarray) -> np.ndarray:
    """``keys`` (int64 or uint64, any layout) as contiguous uint64: the same 64 bits."""
    keys = np.asarray(keys)
    if keys.dtype != np.uint64:
        keys = np.asarray(keys, dtype=np.int64)
    return np.ascontiguousarray(keys).view(np.uint64)


def _positions(keys: np.ndarray, mask: np.uint64) -> np.ndarray:
    """(PROBES, n) bit positions of ``keys``."""
    with np.errstate(over="ignore"):
        h1 = hashing.fmix64_array(_words(keys))
        h2 = hashing.fmix64_array(h1 + _GOLDEN) | np.uint64(1)
        return np.stack([(h1 + np.uint64(i) * h2) & mask for i in range(PROBES)])


class KeyFilter:
    """``n_bits`` bits (a power of two, at least 64) as bytes, and the number of keys added."""

    def __init__(self, bits: np.ndarray, keys: int):
        n_bits = bits.size * 8
        if bits.dtype != np.uint8 or n_bits < 64 or n_bits & (n_bits - 1):
            raise ValueError(f"a key filter is a power-of-two number of bytes (at least 8); got {bits.size} {bits.dtype}")
        self.bits = bits
        self.keys = int(keys)
        self._mask = np.uint64(n_bits - 1)

    @classmethod
    def empty(cls, n_bits: int) -> KeyFilter:
        return cls(np.zeros(max(8, n_bits // 8), dtype=np.uint8), 0)

    @classmethod
    def from_bytes(cls, blob: bytes, keys: int) -> KeyFilter:
        """A filter over ``blob`` itself (read-only; :meth:`add` copies it first)."""
        return cls(np.frombuffer(blob, dtype=np.uint8), keys)

    def to_bytes(self) -> bytes:
        return self.bits.tobytes()

    @property
    def n_bits(self) -> int:
        return self.bits.size * 8

    def full(self, extra: int = 0) -> bool:
        """True when ``extra`` more keys would leave fewer than MIN_BITS_PER_KEY bits per key."""
        return (self.keys + extra) * MIN_BITS_PER_KEY > self.n_bits

    def add(self, keys: np.ndarray) -> None:
        words = _words(keys)
        if not words.size:
            return
        from .._kernels.keyfilter import filter_set

        if not self.bits.flags.writeable:
            self.bits = self.bits.copy()
        filter_set(self.bits, words, self._mask, PROBES)
        self.keys += int(words.size)

    def union(self, other: KeyFilter) -> KeyFilter:
        """A new filter of the keys of both (same size): what may be in either may be in it."""
        if other.n_bits != self.n_bits:
            raise ValueError(f"filters of different sizes cannot be joined: {self.n_bits} and {other.n_bits} bits")
        return KeyFilter(self.bits | other.bits, self.keys + other.keys)

    def may_contain(self, keys: np.ndarray) -> np.ndarray:
        """Boolean mask: False where the key was certainly never added."""
        keys = _words(keys)
        if not keys.size:
            return np.zeros(0, dtype=bool)
        if keys.size >= BULK_KEYS:
            from .._kernels.keyfilter import filter_test

            out = np.empty(keys.size, dtype=bool)
            filter_test(self.bits, keys, self._mask, PROBES, out)
            return out
        pos = _positions(keys, self._mask)
        hit = (self.bits[(pos >> np.uint64(3)).astype(np.intp)] >> (pos & np.uint64(7)).astype(np.uint8)) & np.uint8(1)
        return np.all(hit.astype(bool), axis=0)


def filter_of(keys: np.ndarray, n_bits: int) -> KeyFilter:
    """A new filter of ``n_bits`` bits (a power of two) holding ``keys``."""
    f = KeyFilter.empty(n_bits)
    f.add(keys)
    return f
