"""A Bloom filter over int64 band keys: which keys certainly have no row in a band table.

The SQLite backend keeps one for its main band table (see :mod:`diversify.index.sqlite`): most band
keys of a new document match nothing, and each lookup that finds nothing still costs a B-tree
descent (~1.1 us at 1M documents; 80,000 of them per 5,000-document batch). The filter answers
those from memory; only keys it cannot rule out go to the table.

Band keys are already uniform 64-bit hashes, so the probe positions come from one mixing step
(splitmix64's finalizer) and double hashing: ``(h1 + i * h2) mod m`` for ``i < PROBES``, with ``m``
a power of two. A filter never gives a false negative for a key added to it; its false-positive
rate at ``b`` bits per key is about ``(1 - exp(-PROBES / b)) ** PROBES`` (2.4% at 8 bits, 0.24% at
16, 0.02% at 32).
"""

from __future__ import annotations

import numpy as np

from .. import hashing

__all__ = ["PROBES", "KeyFilter", "bits_for"]

#: probes per key
PROBES = 4
#: bits per key a new filter is sized for; it is rebuilt larger when it falls below MIN_BITS_PER_KEY
BITS_PER_KEY = 16
MIN_BITS_PER_KEY = 8
#: smallest filter (bits): 1 MiB
MIN_BITS = 1 << 23

_GOLDEN = np.uint64(hashing.GOLDEN)


def bits_for(n_keys: int) -> int:
    """Bits of a new filter for ``n_keys`` keys: a power of two, at least BITS_PER_KEY per key."""
    need = max(MIN_BITS, BITS_PER_KEY * max(1, int(n_keys)))
    return 1 << (need - 1).bit_length()


def _positions(keys: np.ndarray, mask: np.uint64) -> np.ndarray:
    """(PROBES, n) bit positions of ``keys``."""
    with np.errstate(over="ignore"):
        h1 = hashing.fmix64_array(np.ascontiguousarray(keys, dtype=np.int64).view(np.uint64))
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
        keys = np.asarray(keys, dtype=np.int64)
        if not keys.size:
            return
        from .._kernels.keyfilter import filter_set

        if not self.bits.flags.writeable:
            self.bits = self.bits.copy()
        filter_set(self.bits, np.ascontiguousarray(keys).view(np.uint64), self._mask, PROBES)
        self.keys += int(keys.size)

    def may_contain(self, keys: np.ndarray) -> np.ndarray:
        """Boolean mask: False where the key was certainly never added."""
        keys = np.asarray(keys, dtype=np.int64)
        if not keys.size:
            return np.zeros(0, dtype=bool)
        pos = _positions(keys, self._mask)
        hit = (self.bits[(pos >> np.uint64(3)).astype(np.intp)] >> (pos & np.uint64(7)).astype(np.uint8)) & np.uint8(1)
        return np.all(hit.astype(bool), axis=0)
