"""A Bloom filter of band keys: no false negatives, ~1% false positives at 10 bits a key.

Band keys are already mixed 64-bit hashes, so the k probe positions come from double hashing on
their two 32-bit halves.
"""

from __future__ import annotations

import numpy as np

__all__ = ["BLOOM_K", "bloom_bits", "bloom", "bloom_or", "bloom_has"]

#: probes per key
BLOOM_K = 7


def bloom_bits(n_keys: int) -> int:
    """Filter size in bits for ``n_keys`` keys: 10 bits a key (~1% false positives at k=7), >= 64 Ki."""
    return max(1 << 16, 64 * -(-10 * n_keys // 64))


def _slots(keys: np.ndarray, m_bits: int) -> np.ndarray:
    """k bit positions per key (double hashing on the two halves of an already mixed 64-bit key)."""
    h1 = (keys & np.uint64(0xFFFFFFFF)).astype(np.uint64)
    h2 = (keys >> np.uint64(32)) | np.uint64(1)
    i = np.arange(BLOOM_K, dtype=np.uint64)
    return ((h1[:, None] + i[None, :] * h2[:, None]) % np.uint64(m_bits)).astype(np.int64)


def bloom(keys: np.ndarray, m_bits: int) -> np.ndarray:
    """The filter (uint8 (m_bits // 8,)) of ``keys`` (uint64)."""
    bits = np.zeros(m_bits // 8, dtype=np.uint8)
    slots = _slots(keys, m_bits).reshape(-1)
    np.bitwise_or.at(bits, slots >> 3, (np.uint8(1) << (slots & 7).astype(np.uint8)))
    return bits


def bloom_or(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The filter of the union of two key sets."""
    return a | b


def bloom_has(bits: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """bool per key: True for every key in the filter, and for ~1% of the others."""
    m_bits = bits.size * 8
    slots = _slots(keys, m_bits)
    hit = (bits[slots >> 3] >> (slots & 7).astype(np.uint8)) & np.uint8(1)
    return hit.all(axis=1)
