"""The exact Jaccard check of borderline MinHash pairs: the documents' shingle sets (from the
kept sets, or re-shingled from the texts at hand) and the check that joins a pair whose Jaccard
reaches the threshold. What it computes goes into the build's :class:`ExactMemo` for the cut into clusters.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Optional

import numpy as np

from ..config import BuildConfig
from ..sketches.batch import Sketches
from ..sketches.memo import ExactMemo
from ..sketches.source import TextSource
from ..staging import agreement_band
from .keys import _minhash_config

if TYPE_CHECKING:  # the kernels' records; imported lazily at run time (they load numba)
    from .._kernels.linking import Forest, ShingleRows

__all__ = ["shingle_rows", "compact_rows", "link_exact", "decide_deferred"]

#: borderline pairs checked per batch of re-shingled documents (~4,000 documents: with the next batch
#: read ahead, two batches of texts, encodings and sets are held during the scan)
_EXACT_BATCH = 2048


def shingle_rows(texts: Sequence[str], cfg: BuildConfig) -> ShingleRows:
    """Sorted unique shingles of ``texts``, one row each (the input of the exact Jaccard check)."""
    from .._kernels.linking import ShingleRows
    from ..text import sorted_unique_shingles

    return ShingleRows(*sorted_unique_shingles(texts, cfg.text, cfg.seed))


def compact_rows(rows: ShingleRows) -> ShingleRows:
    """The same rows without gaps between them (CSR order), e.g. to send them elsewhere."""
    from .._kernels.linking import ShingleRows

    starts = np.zeros(rows.counts.size, dtype=np.int64)
    np.cumsum(rows.counts[:-1], out=starts[1:])
    src = np.repeat(rows.starts - starts, rows.counts) + np.arange(int(rows.counts.sum()), dtype=np.int64)
    return ShingleRows(starts, rows.counts.astype(np.int64), rows.hashes[src])


def link_exact(pairs: np.ndarray, rows: np.ndarray, shingles: ShingleRows, cfg: BuildConfig, forest: Forest,
               known: Optional[np.ndarray] = None) -> np.ndarray:
    """Join the document pairs ``pairs`` (int64 (m, 2)) whose exact Jaccard reaches the threshold.

    ``rows`` (int64 (m, 2)) are the rows of the two documents in ``shingles``. ``known`` (float64
    (m,), optional): a pair's exact Jaccard where it was computed before (>= 0; its rows are then
    not read), else -1.0. Pairs already in one component are skipped; ``forest.counters[1]``
    counts the checks made, known or computed. Returns each pair's exact Jaccard (float64 (m,)),
    -1.0 for a skipped pair.
    """
    from .._kernels.linking import link_pairs_exact

    jaccard = np.empty(pairs.shape[0], dtype=np.float64)
    if known is None:
        known = np.full(pairs.shape[0], -1.0)
    link_pairs_exact(np.ascontiguousarray(pairs), np.ascontiguousarray(rows, dtype=np.int64), shingles,
                     _minhash_config(cfg).threshold, forest, np.ascontiguousarray(known, dtype=np.float64), jaccard)
    return jaccard


def decide_deferred(pairs: np.ndarray, sk: Sketches, cfg: BuildConfig, forest: Forest, memo: ExactMemo,
                    source: Optional[TextSource]) -> int:
    """Exact Jaccard for borderline pairs whose texts are at hand (in ``source``, or the stored
    shingle sets ``sk.sets32``); the estimate decides the rest.

    ``forest`` is the MinHash stage's (its joins and counters); the Jaccard of every pair checked
    from re-shingled texts goes into ``memo``, and a pair ``memo`` knows already is not re-shingled.
    Returns the number of pairs checked exactly."""
    from .._kernels.linking import ShingleRows, link_pairs_accept
    from ..sketches.source import reshingled

    if pairs.size == 0:
        return 0
    # a borderline pair is deferred once per band it shares; check it once
    pairs = np.unique(np.sort(pairs, axis=1), axis=0)
    if sk.sets32 is not None:  # the live index: every document's (32-bit) shingle set is at hand
        from .._kernels.linking import ShingleRows

        assert sk.sets32_indptr is not None
        ptr = sk.sets32_indptr
        rows = ShingleRows(ptr[:-1].copy(), np.diff(ptr), sk.sets32.astype(np.uint64))
        link_exact(np.ascontiguousarray(pairs), np.ascontiguousarray(pairs), rows, cfg, forest)
        return int(pairs.shape[0])
    have = (pairs >= source.offset).all(axis=1) if source is not None else np.zeros(len(pairs), bool)
    exact_pairs = pairs[have]
    known = memo.lookup(exact_pairs)
    # in batches, so that only a bounded number of documents is re-shingled at a time (the next
    # batch's texts are read while this one is shingled and checked); a document is re-shingled
    # for the pairs whose Jaccard is not known yet
    batches = [(exact_pairs[lo : lo + _EXACT_BATCH], known[lo : lo + _EXACT_BATCH])
               for lo in range(0, exact_pairs.shape[0], _EXACT_BATCH)]
    split = [_batch_rows(batch, kn) for batch, kn in batches]
    shingled = reshingled(source, (docs.tolist() for docs, _ in split), cfg) if source is not None else iter(())
    for (batch, kn), (_, pair_rows), sets in zip(batches, split, shingled):
        jaccard = link_exact(batch, pair_rows, ShingleRows(*sets), cfg, forest, known=kn)
        new = kn < 0
        memo.remember(batch[new], jaccard[new])
    rest = pairs[~have]
    if rest.size:
        assert sk.minhash is not None, "borderline pairs come from the MinHash stage"
        lo, hi = agreement_band(cfg, auto=True)
        agree = (sk.minhash[rest[:, 0]] == sk.minhash[rest[:, 1]]).sum(axis=1)
        ok = rest[2 * agree >= lo + hi]
        if ok.size:
            link_pairs_accept(np.ascontiguousarray(ok), forest)
    return int(exact_pairs.shape[0])


def _batch_rows(batch: np.ndarray, known: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the documents to re-shingle for ``batch``: those of its pairs whose Jaccard is not
    ``known``, sorted; each pair's two rows among them, 0 for a known pair, whose rows the check
    does not read)."""
    need = known < 0
    docs, inv = np.unique(batch[need], return_inverse=True)
    rows = np.zeros(batch.shape, dtype=np.int64)
    rows[need] = inv.reshape(-1, 2)
    return docs, rows

