"""Stage 3c, the borderline pairs (``verify="auto"``) decided by exact Jaccard through a shuffle
join: no pair passes through the client, and the task graph grows with partitions, not pairs.

A pair ``(a, b)`` (``a < b``) of a bucket partition is decided where ``b``'s text is:

1. each bucket partition splits its borderline pairs by the input partition holding ``a``;
2. the ``a`` side, one task per input partition: shingles its documents that are the ``a`` of a
   pair (their texts kept on the workers since the read, :mod:`.texts`) (:func:`~diversify.linking.exact.shingle_rows`, the local build's) and sends each pair,
   with ``a``'s shingle set, to the input partition holding ``b``;
3. the ``b`` side, one task per input partition: shingles its ``b`` documents and decides the
   pairs it received with the local build's check (:func:`~diversify.linking.exact.link_exact`,
   in :func:`~.scan.decide_block`); a spanning forest of the accepted pairs leaves it.

Tasks: one split per bucket partition and two per input partition; edges: (bucket partitions +
input partitions) x input partitions. A pair found in several bands is checked once per band, as
before (``exact_checks["minhash"]`` unchanged).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...config import BuildConfig
from ...linking.exact import compact_rows, shingle_rows
from .run import Run, owner_split
from .scan import decide_block
from .texts import KeptTexts

__all__ = ["decide_borderline", "split_pairs", "a_side", "b_side"]


def split_pairs(res: dict, offsets: np.ndarray) -> Any:
    """A bucket partition's borderline pairs (sorted within each pair) by the owner of their first document."""
    pairs = np.sort(np.asarray(res["deferred"], np.int64).reshape(-1, 2), axis=1)
    pieces = owner_split(pairs[:, 0], offsets, pairs[:, 1])
    if offsets.size == 2:
        return np.stack(pieces, axis=1) if pieces[0].size else np.zeros((0, 2), np.int64)
    return tuple(np.stack(p, axis=1) if p[0].size else np.zeros((0, 2), np.int64) for p in pieces)


def _table(part: KeptTexts, local: np.ndarray, offset: int, cfg: BuildConfig) -> dict:
    """Sorted unique shingles (compact rows) of some documents of an input partition."""
    rows = compact_rows(shingle_rows(part.take(local), cfg))
    return {"docs": local.astype(np.int64) + np.int64(offset), "shingles": rows}


def _take(table: dict, docs: np.ndarray) -> dict:
    """The rows of ``docs`` (all in ``table``) as a table of their own."""
    from ..._kernels.linking import ShingleRows

    at = np.searchsorted(table["docs"], docs)
    sh = table["shingles"]
    return {"docs": docs, "shingles": compact_rows(ShingleRows(sh.starts[at], sh.counts[at], sh.hashes))}


def a_side(part: KeptTexts, offset: int, cfg_json: dict, offsets: np.ndarray, *pieces) -> Any:
    """Shingle this partition's first documents of pairs; each pair and that set go to the owner of
    its second document."""
    pairs = np.concatenate(pieces) if pieces else np.zeros((0, 2), np.int64)
    a_docs = np.unique(pairs[:, 0])
    table = _table(part, a_docs - np.int64(offset), offset, BuildConfig(**cfg_json))
    split = owner_split(pairs[:, 1], offsets, pairs[:, 0])
    out = []
    for b, a in ([split] if offsets.size == 2 else split):
        out.append({"pairs": np.stack([a, b], axis=1), "a": _take(table, np.unique(a))})
    return out[0] if offsets.size == 2 else tuple(out)


def b_side(part: KeptTexts, offset: int, cfg_json: dict, *pieces) -> dict:
    """Shingle this partition's second documents of pairs and decide the pairs received."""
    from ..._kernels.linking import ShingleRows

    pairs = np.concatenate([p["pairs"] for p in pieces]) if pieces else np.zeros((0, 2), np.int64)
    if pairs.size == 0:
        return {"u": np.zeros(0, np.int64), "v": np.zeros(0, np.int64), "flagged": np.zeros(0, np.int64), "checked": 0}
    cfg = BuildConfig(**cfg_json)
    b = _table(part, np.unique(pairs[:, 1]) - np.int64(offset), offset, cfg)
    tables = [p["a"] for p in pieces if p["a"]["docs"].size]
    shift = np.cumsum([0] + [t["shingles"].hashes.size for t in tables])
    a = {"docs": np.concatenate([t["docs"] for t in tables]),
         "shingles": ShingleRows(np.concatenate([t["shingles"].starts + s for t, s in zip(tables, shift)]),
                                 np.concatenate([t["shingles"].counts for t in tables]),
                                 np.concatenate([t["shingles"].hashes for t in tables]))}
    return decide_block(pairs, a, b, cfg_json)


def _checked_of(res: dict) -> int:
    return int(res["checked"])


def _owners_of(res: dict, offsets: np.ndarray) -> tuple:
    """(pairs, input partitions holding a first document, ... a second document) of a bucket partition."""
    pairs = np.sort(np.asarray(res["deferred"], np.int64).reshape(-1, 2), axis=1)
    owner = np.searchsorted(offsets, pairs, side="right") - 1
    return int(pairs.shape[0]), np.unique(owner[:, 0]), np.unique(owner[:, 1])


def decide_borderline(run: Run, scanned: list) -> tuple[list, int]:
    """Futures of the ``b`` sides' forests and the number of pairs checked (see the module docstring).
    Only input partitions that hold a document of a pair are read again."""
    from dask import delayed

    offsets = run.offsets
    owners = run.client.gather([run.client.submit(_owners_of, f, offsets, pure=False) for f in scanned])
    n_pairs = int(sum(o[0] for o in owners))
    if n_pairs == 0:
        return [], 0
    a_parts = np.unique(np.concatenate([o[1] for o in owners])).tolist()
    b_parts = np.unique(np.concatenate([o[2] for o in owners])).tolist()
    p = len(run.sources)
    if p == 1:
        by_a = [[delayed(split_pairs, pure=True)(f, offsets)] for f in scanned]
    else:
        by_a = [list(delayed(split_pairs, nout=p, pure=True)(f, offsets)) for f in scanned]
    a_out = []
    for i in a_parts:
        args = (run.texts[i], int(offsets[i]), run.cfg_json, offsets, *[s[i] for s in by_a])
        a_out.append([delayed(a_side, pure=True)(*args)] if p == 1 else list(delayed(a_side, nout=p, pure=True)(*args)))
    tasks = [delayed(b_side, pure=True)(run.texts[j], int(offsets[j]), run.cfg_json,
                                        *[a[0 if p == 1 else j] for a in a_out]) for j in b_parts]
    run.report.stage(f"borderline pairs: {n_pairs:,} checked exactly, joined on {len(b_parts)} input partitions")
    return run.compute(tasks, "borderline"), n_pairs
