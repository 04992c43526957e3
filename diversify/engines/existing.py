"""``add`` of documents whose ids are already in the artifact: refused (naming the first one) or
left out (``on_existing="skip"``), before anything is sketched.

Replacing a document in place is not offered here: taking a document's edges out re-decides its
whole cluster (a representative or a bridge that goes changes the other members' clusters), and
the cut of the old documents' components may need their texts, which an artifact does not keep. The live
index (:class:`diversify.Index`: ``delete`` then ``add``) does that, or a build of the new corpus.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

import numpy as np

from ..errors import ConfigError, ExistingIdError
from ..ids import check_ids

__all__ = ["ON_EXISTING", "leave_out_existing", "check_on_existing"]

#: what ``add`` does with a document whose id the artifact already has
ON_EXISTING = ("error", "skip")


def check_on_existing(on_existing: Any) -> str:
    if on_existing not in ON_EXISTING:
        hint = (" Replacing documents in place is not supported by `add`: use the live index (Index.delete then "
                "Index.add), or build the new corpus." if on_existing == "replace" else "")
        raise ConfigError(f"`on_existing` must be one of {ON_EXISTING}; got {on_existing!r}.{hint}")
    return on_existing


def leave_out_existing(cmap, texts, ids, vectors, keys, sources, on_existing: str):
    """``(texts, ids, vectors, keys, sources, skipped)`` without the documents whose id ``cmap``
    has (``skip``; ``skipped`` lists their ids), or unchanged with ``skipped=[]`` when there is none;
    :class:`ExistingIdError` for the first of them under ``error``."""
    if ids is None or cmap.n_docs == 0:
        return texts, ids, vectors, keys, sources, []
    if not isinstance(ids, np.ndarray):
        ids = list(ids)
    check_ids(ids)  # a repeat among the new ids themselves names their two positions
    found = np.asarray(cmap.doc_index(ids), dtype=np.int64)
    hit = np.flatnonzero(found >= 0)
    if hit.size == 0:
        return texts, ids, vectors, keys, sources, []
    if on_existing == "error":
        i = int(hit[0])
        x = ids[i]
        x = x.item() if isinstance(x, np.generic) else x
        raise ExistingIdError(
            f"`ids` must be new to the artifact: ids[{i}] {x!r:.60} is already in it (its document {int(found[i])}); "
            f"{hit.size:,} of the {len(ids):,} new ids are. Pass on_existing='skip' to leave those documents out, or "
            "give them new ids.",
            position=i, id=x, doc=int(found[i]))
    keep = found < 0
    skipped = [ids[int(i)] for i in hit]
    return (_kept_texts(texts, keep), _take(ids, keep), _take(vectors, keep, array=True),
            _take(keys, keep, array=True), _take(sources, keep), skipped)


def _take(values: Optional[Any], keep: np.ndarray, *, array: bool = False):
    """The kept rows of ``values``; a count other than the ids' is passed on unchanged for the
    build's own check to refuse with its message."""
    if values is None:
        return None
    if array or isinstance(values, np.ndarray):
        arr = np.asarray(values)
        return arr[keep] if arr.ndim and arr.shape[0] == keep.size else values
    values = list(values)
    return [v for v, k in zip(values, keep.tolist()) if k] if len(values) == keep.size else values


def _kept_texts(texts, keep: np.ndarray):
    """The texts of the kept documents: a list for a sequence (the texts stay at hand for the
    exact checks, as an add of that sequence has them), else streamed. Texts past the ids pass
    through, so a count that does not match the ids is still refused by the build's own check."""
    if texts is None:
        return None
    flags = keep.tolist()
    n = len(flags)
    kept = (t for i, t in enumerate(texts) if i >= n or flags[i])
    return list(kept) if isinstance(texts, Sequence) else kept
