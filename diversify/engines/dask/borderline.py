"""Stage 3d, the borderline pairs (``verify="auto"``: the pairs whose signatures agree inside the
agreement band, :mod:`.pairs`) decided by exact Jaccard through the shuffle join of :mod:`.join`:

- the ``a`` side shingles its documents that are the ``a`` of a pair (their texts kept on the
  workers since the read, :mod:`.texts`; :func:`~diversify.linking.exact.shingle_rows`, the local
  build's) and sends each pair, with ``a``'s shingle set, to the input partition holding ``b``;
- the ``b`` side shingles its ``b`` documents and decides the pairs it received with the local
  build's check (:func:`~diversify.linking.exact.link_exact`, in :func:`~.scan.decide_block`); a
  spanning forest of the accepted pairs leaves it.

The pairs come distinct from :mod:`.pairs`: each is checked once, and only input partitions that
hold a document of one take part.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...config import BuildConfig
from ...linking.exact import compact_rows, shingle_rows
from .join import by_owner_of_b, pair_join
from .run import Run
from .scan import decide_block
from .texts import KeptTexts

__all__ = ["decide_borderline", "borderline_owners", "a_side", "b_side"]


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
    table = _table(part, np.unique(pairs[:, 0]) - np.int64(offset), offset, BuildConfig(**cfg_json))
    return by_owner_of_b(pairs, offsets, lambda a: {"a": _take(table, a)})


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


def borderline_owners(res: dict, offsets: np.ndarray) -> tuple:
    """(borderline pairs, input partitions holding a first document, ... a second document) of a table of pairs."""
    pairs = np.sort(np.asarray(res["deferred"], np.int64).reshape(-1, 2), axis=1)
    owner = np.searchsorted(offsets, pairs, side="right") - 1
    return int(pairs.shape[0]), np.unique(owner[:, 0]), np.unique(owner[:, 1])


def decide_borderline(run: Run, tables: list, owners: list) -> tuple[list, int]:
    """Futures of the ``b`` sides' forests and the number of pairs checked (see the module docstring),
    for the borderline pairs of ``tables`` (futures), whose :func:`borderline_owners` are ``owners``.
    Only input partitions that hold a document of a pair take part."""
    n_pairs = int(sum(o[0] for o in owners))
    if n_pairs == 0:
        return [], 0
    a_parts = np.unique(np.concatenate([o[1] for o in owners])).tolist()
    b_parts = np.unique(np.concatenate([o[2] for o in owners])).tolist()
    tasks = pair_join(run, tables, "deferred", a_side, b_side, run.texts, run.cfg_json, a_parts, b_parts)
    run.report.stage(f"borderline pairs: {n_pairs:,} checked exactly, joined on {len(b_parts)} input partitions")
    return run.compute(tasks, "borderline"), n_pairs
