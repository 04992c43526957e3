"""Validation of build inputs (ids, texts, vectors, keys)."""

from __future__ import annotations

import itertools
from typing import Iterable, Iterator, Sequence

import numpy as np

from ..errors import DuplicateIdError, InputError, InputTypeError


def check_ids(ids: Sequence, *, offset: int = 0) -> None:
    """All str or all int (not bool), unique. Raises naming the first offender."""
    kind = None
    for pos, x in enumerate(ids):
        if isinstance(x, bool) or not isinstance(x, (str, int, np.integer)):
            raise InputTypeError(
                f"`ids` must be str or int; item {offset + pos} is {type(x).__name__} ({x!r:.60}). "
                "Convert ids with str(x) (or int(x)) before building."
            )
        k = str if isinstance(x, str) else int
        if kind is None:
            kind = k
        elif k is not kind:
            raise InputTypeError(
                f"`ids` must be all str or all int; item {offset + pos} is {k.__name__} ({x!r:.60}) but earlier ids are "
                f"{kind.__name__}. Convert every id with str(x)."
            )
        if k is int and not (-(2**63) <= int(x) < 2**63):
            raise InputError(f"`ids` ints must fit in int64; item {offset + pos} is {x}. Use str ids for larger values.")
    if len(set(ids)) != len(ids):
        seen: dict = {}
        for pos, x in enumerate(ids):
            if x in seen:
                raise DuplicateIdError(
                    f"`ids` must be unique; id {x!r} occurs at positions {seen[x] + offset} and {pos + offset}. "
                    "Deduplicate the ids (or build with ids=None to number documents 0..n-1)."
                )
            seen[x] = pos


def normalize_ids(ids: list) -> list:
    return [int(x) for x in ids] if ids and isinstance(ids[0], (int, np.integer)) else list(ids)


def chunks(iterable: Iterable, size: int) -> Iterator[list]:
    it = iter(iterable)
    while True:
        block = list(itertools.islice(it, size))
        if not block:
            return
        yield block


def check_keys(keys, n: int) -> np.ndarray:
    try:
        arr = np.asarray(keys, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError("`keys` must be numbers (e.g. timestamps or authority scores), one per document.") from None
    if arr.shape != (n,):
        raise InputError(f"`keys` must have one number per document (shape ({n},)); got shape {arr.shape}.")
    if not np.isfinite(arr).all():
        raise InputError(f"`keys` must be finite; got NaN/inf at positions {np.flatnonzero(~np.isfinite(arr))[:5].tolist()}.")
    return arr
