"""The id -> cluster lookup table of an artifact: sorted slot keys, parallel cluster ids, a bucket directory.

Documents are sorted by slot key = id_key * SLOT_MULTIPLIER (mod 2**64), a bijection that spreads
sequential int ids over the top bits, plus a directory of bucket starts indexed by the top
``bucket_bits`` bits. A lookup reads one directory entry and a window of ``window`` keys (a few
cache lines, fetched in parallel) instead of ~log2(n) dependent probes. Specified in
``docs/artifact-format.md`` section 3.

The file chooses ``window``; a lookup never scans more than :data:`MAX_WINDOW` keys per id
(wider windows, which only skewed or hostile keys produce, fall back to binary search) and works
on at most :data:`LOOKUP_CHUNK` ids at a time, so its cost is O(min(window, 64) or log n) per id
and its scratch memory a constant, whatever the file says. :func:`check_binding` checks at load
that the table belongs to the stored ids (section 5 of the spec).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = [
    "SLOT_MULTIPLIER",
    "BUCKET_MIN_DOCS",
    "MAX_BUCKET_BITS",
    "MAX_WINDOW",
    "LOOKUP_CHUNK",
    "BINDING_SAMPLE",
    "FULL_BINDING_DOCS",
    "slot_keys",
    "binding_sample",
    "check_binding",
    "bucket_directory",
    "lookup_header",
    "LookupTable",
]

SLOT_MULTIPLIER = 0x9E3779B97F4A7C15
_MULT = np.uint64(SLOT_MULTIPLIER)
# Below this many documents plain binary search is as fast (fewer numpy calls, arrays in cache;
# docs/artifact-format.md section 3 has the measured crossover).
BUCKET_MIN_DOCS = 1 << 19
MAX_BUCKET_BITS = 40
#: widest window scanned per id; honest keys fill 2-4 per bucket, the largest bucket of 2**40
#: documents stays under ~30. Wider: binary search.
MAX_WINDOW = 64
#: ids looked up per step: scratch memory at most LOOKUP_CHUNK * MAX_WINDOW * 9 bytes (~2.4 MB)
LOOKUP_CHUNK = 4096
#: documents (and as many lookup positions) re-hashed at load to check the table belongs to the ids
BINDING_SAMPLE = 2048
#: str-id artifacts up to this many documents have every id re-hashed at load (one BLAKE2b and a lookup each)
FULL_BINDING_DOCS = 1 << 16


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
        self.use_buckets = keys.shape[0] >= BUCKET_MIN_DOCS and bucket_bits > 0 and 0 < window <= MAX_WINDOW
        self._arange = np.arange(min(window, MAX_WINDOW), dtype=np.int64)

    def find(self, keys: np.ndarray) -> np.ndarray:
        """Position (int64) of each id key in ``lookup/key``, -1 when not in the table."""
        if self.keys.shape[0] == 0:
            return np.full(keys.shape[0], -1, dtype=np.int64)
        pos, miss = self._positions_all(keys * _MULT)
        pos[miss] = -1
        return pos

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
        pos, miss = self._positions_all(keys * _MULT)
        if valid is not None:
            miss |= ~valid
        out = values.take(pos)
        out[miss] = -1
        return out

    def _positions_all(self, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        m = slots.shape[0]
        if not self.use_buckets or m <= LOOKUP_CHUNK:
            return self._positions(slots)
        pos = np.empty(m, dtype=np.int64)
        miss = np.empty(m, dtype=bool)
        for lo in range(0, m, LOOKUP_CHUNK):
            hi = min(m, lo + LOOKUP_CHUNK)
            pos[lo:hi], miss[lo:hi] = self._positions(slots[lo:hi])
        return pos, miss

    def _positions(self, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(position, not found)`` of each slot key (table not empty); scratch ``len(slots) * window * 9`` bytes."""
        n = self.keys.shape[0]
        if self.use_buckets and self.shift is not None and 0 < self.window <= MAX_WINDOW:
            lo = self.starts.take((slots >> self.shift).view(np.int64))
            # Shift windows that would run past the end left: [lo, hi) stays inside (and a directory
            # that verify=False did not check cannot index outside the keys).
            np.clip(lo, 0, n - self.window, out=lo)
            match = self.keys.take(lo[:, None] + self._arange) == slots[:, None]
            return lo + match.argmax(axis=1), ~match.any(axis=1)
        pos = self.keys.searchsorted(slots)
        np.minimum(pos, n - 1, out=pos)
        return pos, self.keys.take(pos) != slots


# --------------------------------------------------------------------------- binding to the ids


def binding_sample(n: int, size: int = BINDING_SAMPLE) -> np.ndarray:
    """``size`` evenly spaced indices of ``[0, n)``, both ends included (all of them when ``n <= size``).

    int64, ascending, unique. Consecutive ones are at most ``ceil((n - 1) / (size - 1))`` apart, so
    every run of that many consecutive indices holds one.
    """
    if n <= size:
        return np.arange(n, dtype=np.int64)
    return (np.arange(size, dtype=np.int64) * (n - 1)) // (size - 1)


def check_binding(
    table: LookupTable,
    lookup_doc: np.ndarray,
    doc_cluster: np.ndarray,
    keys_of: Callable[[np.ndarray], np.ndarray],
    id_at: Callable[[int], Any],
    *,
    full: bool,
) -> str | None:
    """How the lookup table fails to belong to the stored ids, or None when the checked part does.

    Documents ``docs`` (all of them when ``full``, else :func:`binding_sample`) have their id keys
    recomputed from the stored ids (``keys_of(docs)``) and looked up through ``table``, the
    online path itself: each must be found at a position whose ``lookup/doc`` is the document and
    whose ``lookup/cluster`` is its ``doc/cluster_id``. Without ``full``, the documents named at
    :func:`binding_sample` lookup positions must also be found exactly there. A writer that
    derived keys another way (another BLAKE2b variant, a salted hash) fails on every document; a
    table permuted against the ids fails wherever the permutation moved an entry.
    """
    n = lookup_doc.shape[0]
    if n == 0:
        return None
    docs = np.arange(n, dtype=np.int64) if full else binding_sample(n)
    problem = _unbound(table, lookup_doc, doc_cluster, docs, keys_of(docs), None, id_at)
    if problem is not None or full:
        return problem
    where = binding_sample(n)
    named = lookup_doc.take(where)
    if int(named.min()) < 0 or int(named.max()) >= n:
        return f"`lookup/doc` names document {int(named[(named < 0) | (named >= n)][0])}, outside [0, {n})."
    return _unbound(table, lookup_doc, doc_cluster, named, keys_of(named), where, id_at)


def _unbound(table: LookupTable, lookup_doc: np.ndarray, doc_cluster: np.ndarray, docs: np.ndarray, keys: np.ndarray,
             expected_pos: np.ndarray | None, id_at: Callable[[int], Any]) -> str | None:
    pos = table.find(keys)
    found = pos >= 0
    safe = np.where(found, pos, 0)
    wrong = ~found | (lookup_doc.take(safe) != docs) | (table.clusters.take(safe) != doc_cluster.take(docs))
    if expected_pos is not None:
        wrong |= pos != expected_pos
    bad = np.flatnonzero(wrong)
    if not bad.size:
        return None
    i = int(bad[0])
    d = int(docs[i])
    what = f"{bad.size} of the {docs.size} ids checked are not where the table says"
    if not found[i]:
        if not found.any():
            return (f"{what}: none of their keys is in `lookup/key` (first: document {d}, id {id_at(d)!r:.80}). "
                    "The keys were not derived as the spec says (diversify.idkey.v1: BLAKE2b with an 8-byte digest "
                    "length, not a truncated BLAKE2b-512)")
        return f"{what}: the key of document {d} (id {id_at(d)!r:.80}) is not in `lookup/key`"
    p = int(pos[i])
    if expected_pos is not None and p != int(expected_pos[i]):
        return f"{what}: `lookup/doc` names document {d} at position {int(expected_pos[i])} but its key is at {p}"
    if int(lookup_doc[p]) != d:
        return (f"{what}: the key of document {d} (id {id_at(d)!r:.80}) is at position {p}, where `lookup/doc` "
                f"names document {int(lookup_doc[p])} (the table is permuted against the ids)")
    return (f"{what}: document {d} (id {id_at(d)!r:.80}) is in cluster {int(doc_cluster[d])} but `lookup/cluster` "
            f"says {int(table.clusters[p])}")
