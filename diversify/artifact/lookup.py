"""The id -> cluster lookup table of an artifact: sorted slot keys, parallel cluster ids, a bucket directory.

Documents are sorted by slot key = id_key * SLOT_MULTIPLIER (mod 2**64), a bijection that spreads
sequential int ids over the top bits, plus a directory of bucket starts indexed by the top
``bucket_bits`` bits. A lookup reads one directory entry and a window of ``window`` keys (a few
cache lines, fetched in parallel) instead of ~log2(n) dependent probes. Specified in
``docs/artifact-format.md`` section 3.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "SLOT_MULTIPLIER",
    "BUCKET_MIN_DOCS",
    "MAX_BUCKET_BITS",
    "slot_keys",
    "bucket_directory",
    "lookup_header",
    "LookupTable",
]

SLOT_MULTIPLIER = 0x9E3779B97F4A7C15
_MULT = np.uint64(SLOT_MULTIPLIER)
# Below this many documents plain binary search is as fast (fewer numpy calls, arrays in cache);
# measured crossover ~0.5-2M documents, earlier when other processes contend for the caches.
BUCKET_MIN_DOCS = 1 << 19
MAX_BUCKET_BITS = 40


def slot_keys(keys: np.ndarray) -> np.ndarray:
    """Slot keys of id keys: ``uint64 (n,)``, ``keys * SLOT_MULTIPLIER mod 2**64``."""
    return keys * _MULT


def bucket_directory(sorted_slots: np.ndarray) -> tuple[int, int, np.ndarray]:
    """``(bucket_bits, window, bucket_start)`` for slot keys sorted ascending.

    ``2**bucket_bits`` is in ``(n/4, n/2]`` (2-4 documents per bucket; 0 bits when n < 2);
    ``bucket_start`` is ``int64 (2**bucket_bits + 1,)``; ``window`` is the largest bucket.
    """
    n = int(sorted_slots.shape[0])
    bits = max(0, (n // 2).bit_length() - 1)
    if bits:
        bucket_of = (sorted_slots >> np.uint64(64 - bits)).view(np.int64)
        per_bucket = np.bincount(bucket_of, minlength=1 << bits)
    else:
        per_bucket = np.array([n], dtype=np.int64)
    bucket_start = np.zeros((1 << bits) + 1, dtype=np.int64)
    np.cumsum(per_bucket, out=bucket_start[1:])
    window = int(per_bucket.max()) if n else 0
    return bits, window, bucket_start


def lookup_header(bucket_bits: int, window: int) -> dict[str, int]:
    """The header's ``lookup`` map."""
    return {"slot_multiplier": SLOT_MULTIPLIER, "bucket_bits": bucket_bits, "window": window}


class LookupTable:
    """Find id keys in an artifact's ``lookup/key`` array and read the parallel arrays there.

    Immutable after construction (``use_buckets`` may be switched to compare the strategies);
    thread-safe. The arrays are the artifact's own read-only views.
    """

    __slots__ = ("keys", "clusters", "starts", "shift", "window", "use_buckets", "_arange")

    def __init__(self, keys: np.ndarray, clusters: np.ndarray, starts: np.ndarray, *, bucket_bits: int, window: int):
        self.keys = keys
        self.clusters = clusters
        self.starts = starts
        self.shift = np.uint64(64 - bucket_bits) if bucket_bits else None
        self.window = window
        self.use_buckets = keys.shape[0] >= BUCKET_MIN_DOCS and bucket_bits > 0
        self._arange = np.arange(window, dtype=np.int64)

    def clusters_of(self, keys: np.ndarray, valid: np.ndarray | None) -> np.ndarray:
        """Cluster id (int64) of each id key, -1 when not in the table. See :meth:`take`."""
        return self.take(self.clusters, keys, valid)

    def take(self, values: np.ndarray, keys: np.ndarray, valid: np.ndarray | None) -> np.ndarray:
        """``values`` (int64, parallel to ``lookup/key``) at each id key's position, -1 when not in the table.

        ``keys`` are id keys (uint64, shape (m,)); ``valid`` (bool (m,), optional) marks those that
        may match at all, the others are -1.
        """
        m = keys.shape[0]
        n = self.keys.shape[0]
        if n == 0 or m == 0:
            return np.full(m, -1, dtype=np.int64)
        slots = keys * _MULT
        if self.use_buckets and self.shift is not None:
            lo = self.starts.take((slots >> self.shift).view(np.int64))
            # Shift windows that would run past the end left: [lo, hi) stays inside.
            np.minimum(lo, n - self.window, out=lo)
            match = self.keys.take(lo[:, None] + self._arange) == slots[:, None]
            pos = lo + match.argmax(axis=1)
            miss = ~match.any(axis=1)
        else:
            pos = self.keys.searchsorted(slots)
            np.minimum(pos, n - 1, out=pos)
            miss = self.keys.take(pos) != slots
        if valid is not None:
            miss |= ~valid
        out = values.take(pos)
        out[miss] = -1
        return out
