"""The shuffle join of document pairs with what the input partitions hold of each document (its
signature, its text): pairs are decided where their documents are, so no pair and no per-document
data passes through the client, and the graph grows with partitions, not with pairs.

A pair ``(a, b)`` (``a < b``) of a table of pairs (one per upstream partition):

1. each upstream partition splits its pairs by the input partition holding ``a``;
2. the ``a`` side, one task per input partition: gathers its pairs, attaches what it holds of each
   ``a`` (once per destination) and splits them by the input partition holding ``b``;
3. the ``b`` side, one task per input partition: decides the pairs it received with what it holds
   of each ``b``.

Tasks: one split per upstream partition and two per input partition; edges: (upstream partitions
+ input partitions) x input partitions. The stages that join this way: the signature check of the
bucket scan's pairs (:mod:`.pairs`) and the exact check of the borderline pairs (:mod:`.borderline`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Optional

import numpy as np

from ..._arrays import unique_sorted
from .run import Run, owner_split, split_task

__all__ = ["split_pairs", "by_owner_of_b", "pair_join"]


def split_pairs(res: dict, offsets: np.ndarray, field: str) -> Any:
    """An upstream partition's pairs (``res[field]``, sorted within each pair) by the owner of their
    first document; one array when there is one input partition (Dask's ``nout`` convention)."""
    pairs = np.sort(np.asarray(res[field], np.int64).reshape(-1, 2), axis=1)
    pieces = owner_split(pairs[:, 0], offsets, pairs[:, 1])
    if offsets.size == 2:
        return np.stack(pieces, axis=1) if pieces[0].size else np.zeros((0, 2), np.int64)
    return tuple(np.stack(p, axis=1) if p[0].size else np.zeros((0, 2), np.int64) for p in pieces)


def by_owner_of_b(pairs: np.ndarray, offsets: np.ndarray, attach: Callable[[np.ndarray], dict]) -> Any:
    """The ``a`` side's pairs split by the owner of their second document; each piece is
    ``{"pairs": (a, b) rows, **attach(its distinct a's)}``; one piece when there is one input partition."""
    split = owner_split(pairs[:, 1], offsets, pairs[:, 0])
    out = [{"pairs": np.stack([a, b], axis=1), **attach(unique_sorted(a))} for b, a in ([split] if offsets.size == 2 else split)]
    return out[0] if offsets.size == 2 else tuple(out)


def pair_join(run: Run, tables: list, field: str, a_side: Callable, b_side: Callable, held: Sequence, extra: Any,
              a_parts: Optional[Sequence[int]] = None, b_parts: Optional[Sequence[int]] = None) -> list:
    """The ``b`` sides (Delayed, one per input partition of ``b_parts``) of the join of the pairs
    ``table[field]`` of each future of ``tables``. ``a_side(held[i], offset_i, extra, offsets, *pieces)``
    returns its pieces by the owner of ``b`` (:func:`by_owner_of_b`);
    ``b_side(held[j], offset_j, extra, *pieces)`` decides. ``a_parts``/``b_parts``: the input
    partitions that may hold a first/second document (default: all)."""
    from dask import delayed

    offsets = run.offsets
    p = len(run.sources)
    a_parts = range(p) if a_parts is None else a_parts
    b_parts = range(p) if b_parts is None else b_parts
    by_a = [split_task(split_pairs, p, f, offsets, field) for f in tables]
    a_out = [split_task(a_side, p, held[i], int(offsets[i]), extra, offsets, *[s[i] for s in by_a]) for i in a_parts]
    return [delayed(b_side, pure=True)(held[j], int(offsets[j]), extra, *[a[j] for a in a_out]) for j in b_parts]
