"""Each document's distinct shingle hashes, sorted: the sets the exact Jaccard checks compare."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..config import TextConfig
from .buffers import subset
from .encode import encode_batch
from .shingle import Shingles, auto_split, shingle_room, text_rule

__all__ = ["sorted_unique_shingles", "sorted_unique_of_buffer", "unique_shingles", "shingle_sets32", "exact_jaccard"]


def sorted_unique_shingles(texts: Sequence[str], config: TextConfig, seed: int,
                           room: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each document's distinct shingle hashes, sorted, in one pass: (starts, counts, hashes).

    Document i's set is ``hashes[starts[i]:starts[i] + counts[i]]``. ``room`` as
    :func:`sorted_unique_of_buffer` takes it.
    """
    buf, offsets = encode_batch(texts)
    return sorted_unique_of_buffer(buf, offsets, config, seed, room)


def sorted_unique_of_buffer(buf: np.ndarray, offsets: np.ndarray, config: TextConfig, seed: int,
                            room: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`sorted_unique_shingles` of an already encoded batch (see :func:`encode_batch`).

    ``room`` (one count per document, optional): each document's shingle count as the sketching
    pass found it (:attr:`diversify.sketches.source.TextSource.shingle_counts`), to size the output to
    the shingles themselves instead of the most a document of its length could have: less fresh
    memory to fault in, the cost that dominated these calls (see :func:`_sorted_unique_one`).
    """
    parts = auto_split(buf, offsets, config)
    if parts is not None and len(parts) == 1:
        return _sorted_unique_one(parts[0][1], parts[0][2], parts[0][3], seed, room)
    if parts is not None:
        n = offsets.size - 1
        starts, counts = np.zeros(n, np.int64), np.zeros(n, np.int64)
        chunks, base = [], 0
        for idx, b, o, c in parts:
            s_, c_, h_ = _sorted_unique_one(b, o, c, seed, None if room is None else room[idx])
            starts[idx], counts[idx] = s_ + base, c_
            chunks.append(h_)
            base += h_.size
        return starts, counts, np.concatenate(chunks)
    return _sorted_unique_one(buf, offsets, config, seed, room)


def _sorted_unique_one(buf: np.ndarray, offsets: np.ndarray, config: TextConfig, seed: int,
                       room: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One rule's batch. Output room: ``room`` where given (at least 1 a document), else the most
    shingles a document of its length can have (4 bytes of room a byte of word-shingled text,
    several times what it uses): a batch of exact checks at 1M documents was mostly page faults on
    that fresh memory (docs/building.md, "Exact checks at scale"). A document that does not fit a given room (a count that is not this
    rule's) takes the bound instead, so the result never depends on ``room``."""
    from .._kernels import text as kt

    n = offsets.size - 1
    rule = text_rule(config, seed)
    if room is None:
        starts = shingle_room(offsets, rule)
    else:
        starts = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.maximum(room, 1), out=starts[1:])
    hashes = np.empty(int(starts[-1]), dtype=np.uint64)
    counts = np.empty(n, dtype=np.int64)
    kt.fill_sorted_unique(buf, offsets, rule, starts, hashes, counts)
    short = np.flatnonzero(counts < 0)
    if short.size:  # not this rule's counts: those documents again, each with room for any text of its length
        b, o = subset(buf, offsets, short)
        s_, c_, h_ = _sorted_unique_one(b, o, config, seed)
        starts[short], counts[short] = s_ + hashes.size, c_
        hashes = np.concatenate([hashes, h_])
    return starts[:-1], counts, hashes


def unique_shingles(shingles: Shingles) -> tuple[np.ndarray, np.ndarray]:
    """Each document's distinct shingle hashes, sorted, as CSR: (indptr int64 (n+1,), hashes uint64)."""
    from .._kernels.minhash import gather_segments, sort_unique_segments

    hashes = shingles.hashes.copy()
    counts = np.empty(len(shingles), dtype=np.int64)
    sort_unique_segments(hashes, shingles.indptr, counts)
    indptr = np.zeros(len(shingles) + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    out = np.empty(int(indptr[-1]), dtype=np.uint64)
    gather_segments(hashes, shingles.indptr, counts, indptr, out)
    return indptr, out


def shingle_sets32(texts: Sequence[str], config: TextConfig, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Each document's distinct shingle hashes cut to their high 32 bits, sorted and distinct, as
    CSR ``(indptr int64 (n+1,), values uint32)``: what the live index stores for exact checks.

    The high bits of sorted 64-bit hashes are already sorted, so only equal neighbours (two
    shingles whose hashes share their high 32 bits, about one pair in 10^4 documents) are merged.
    Jaccard of these sets differs from Jaccard of the 64-bit sets only by such merges.
    """
    from .._kernels._common import high_halves

    starts, counts, hashes = sorted_unique_shingles(texts, config, seed)
    indptr = np.empty(counts.size + 1, dtype=np.int64)
    values = np.empty(int(counts.sum()), dtype=np.uint32)
    high_halves(starts, counts, hashes, indptr, values)
    return indptr, values[: int(indptr[-1])]


def exact_jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """Exact Jaccard similarity of two shingle sets given as sorted, duplicate-free uint64 arrays.

    Two empty sets count as identical (1.0), as in the builder's exact check. Pass the rows of
    :func:`sorted_unique_shingles` (or ``np.unique`` of a :class:`Shingles` row).
    """
    inter = np.intersect1d(a, b, assume_unique=True).size
    union = a.size + b.size - inter
    return inter / union if union else 1.0
