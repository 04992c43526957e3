"""The MinHash bands of a spilled build (``build(spill_dir=...)``): band keys written to disk band
by band, and the signatures read back for the scan a group of bands at a time."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Optional

import numpy as np

from ..config import BuildConfig
from .keys import Part, minhash_band_rows, minhash_params, sort_keys

if TYPE_CHECKING:  # the kernels' records; imported lazily at run time (they load numba)
    from .._kernels.linking import Buckets, Verifier
    from .._spill import Spill

__all__ = ["spilled_bands"]

#: documents whose band keys a spilled build makes at a time (their signatures: 32 MB)
_SPILL_BLOCK = 65536


def spilled_bands(minhash: np.ndarray, docs: np.ndarray, config: BuildConfig, new_start: int, spill: Spill,
                  parent: np.ndarray, verifier: Verifier) -> Iterator[Part]:
    """:func:`band_by_band` for signatures kept on disk (``build(spill_dir=...)``): the buckets,
    band by band, each part with a verifier holding the signatures its pairs need.

    The keys go to one file per band, made from the signatures a block of documents at a time.
    Each band is then sorted on its own, and only its buckets of two or more keys (those that can
    make a pair) are written back, as (key, document) in scan order (a small share of the keys:
    docs/building.md). Held at once: one band's keys and their sort (24 bytes a document), never the
    signatures of every document. The scan's pairs and their order are those of
    :func:`band_by_band`: a bucket of one key makes no pair.

    The signatures are then read back for the scan a group of bands at a time (:func:`_held_groups`):
    at most :data:`diversify._spill.HELD_BYTES` of them, only those of documents a pair still
    compares. ``parent`` is the forest the scan joins (read, to leave out documents already joined
    to every partner); ``verifier`` the scan's, given each group's rows.
    """
    from .._kernels.linking import Buckets
    from .._spill import row_blocks

    bands = minhash_params(config).bands
    key_files = [spill.new_file() for _ in range(bands)]
    at = 0  # docs are sorted: each block of signatures holds the next run of them
    for lo, sigs in row_blocks(minhash, _SPILL_BLOCK):
        end = int(np.searchsorted(docs, lo + sigs.shape[0], side="left"))
        if end > at:
            block = minhash_band_rows(sigs, docs[at:end] - lo, config)
            for band, f in enumerate(key_files):
                spill.append(f, block[band])
            at = end
    shared_files = []
    # the documents the scan may compare (in a shared bucket), and those already joined to another
    # (the exact stage's): the cut's members are among them unless a later stage joins more
    keep = parent != np.arange(parent.size, dtype=parent.dtype)
    keep[parent[keep]] = True
    for f in key_files:
        perm, ordered = sort_keys(spill.read(f, np.uint64))
        assert ordered is not None
        same = ordered[1:] == ordered[:-1]
        shared = np.zeros(ordered.size, dtype=bool)
        shared[1:] |= same
        shared[:-1] |= same
        g = spill.new_file()
        held = docs[perm[shared]]
        spill.append(g, ordered[shared])
        spill.append(g, held.view(np.uint64))
        shared_files.append(g)
        keep[held] = True
        del perm, ordered, same, shared, held

    def buckets_of(b: int) -> Buckets:
        both = spill.read(shared_files[b], np.uint64)
        k = both.size // 2
        return Buckets(np.arange(k, dtype=np.int64), both[:k], both[k:].view(np.int64), 1,
                       int(config.bucket_window), int(new_start))

    return _held_groups(minhash, buckets_of, len(shared_files), parent, verifier, spill, np.flatnonzero(keep))


def _held_groups(minhash: np.ndarray, buckets_of: Callable[[int], Buckets], bands: int, parent: np.ndarray,
                 verifier: Verifier, spill: Optional[Spill] = None, keep: Optional[np.ndarray] = None
                 ) -> Iterator[Part]:
    """The parts of :func:`spilled_bands`: bands taken in order into a group while the documents
    their pairs compare fit :data:`diversify._spill.HELD_BYTES` of signatures (a band that alone
    does not is cut between buckets; a bucket that alone does not is a group of its own), those
    signatures read in one pass, the group's parts scanned, the next group formed.

    Which documents a group needs is decided before it is scanned, from the forest as it stands
    (:func:`diversify._kernels.linking.mark_apart`): the scan only ever joins, so it cannot compare
    a pair whose documents were already one component then. The later bands mostly meet pairs
    the earlier ones joined, so a group of many later bands holds about as many documents as
    the first band alone (docs/building.md, "Scale and memory", has the counts).
    """
    from .. import _spill
    from .._kernels.linking import Buckets, mark_apart

    held = _spill.HeldRows(minhash, spill)
    budget = held.budget
    mark = np.zeros(minhash.shape[0], dtype=bool)
    # (band, its buckets once read, the first key not yet scanned)
    pending: list[tuple[int, Optional[Buckets], int]] = [(b, None, 0) for b in range(bands)]
    while pending:
        group: list[tuple[Buckets, int, int]] = []
        total = 0
        while pending:
            b, bk, lo = pending[0]
            if bk is None:
                bk = buckets_of(b)
            size = bk.keys.size
            before = mark.copy()
            gain = np.zeros(size, dtype=np.int64)
            k = int(mark_apart(bk, lo, size, parent, mark, gain))
            if total + k <= budget:
                group.append((bk, lo, size))
                total += k
                pending.pop(0)
                continue
            mark[:] = before
            if group:  # left for the next group, decided again from the forest as it will be then
                pending[0] = (b, bk, lo)
                break
            # alone it needs more than the budget: its buckets up to the budget (at least one)
            starts = lo + np.flatnonzero(np.r_[True, bk.keys[lo + 1: size] != bk.keys[lo: size - 1]])
            upto = np.cumsum(gain[starts])  # documents needed through each bucket
            ends = np.r_[starts[1:], size]
            e = int(ends[max(0, int(np.searchsorted(upto, budget, side="right")) - 1)])
            total = int(mark_apart(bk, lo, e, parent, mark, gain))
            group.append((bk, lo, e))
            pending[0] = (b, bk, e)
            break
        rows = np.flatnonzero(mark)
        # the first pass keeps the rows of every document a group may compare in a file of their own
        v = verifier._replace(minhash=held.hold(rows, keep), sig_rows=held.sig_rows)
        keep = None
        for bk, lo, hi in group:
            yield Part(Buckets(bk.perm[lo:hi], bk.keys[lo:hi], bk.docs, bk.stride, bk.window, bk.new_start), v,
                       hi == bk.keys.size)
        mark[rows] = False
        del group
    held.release()

