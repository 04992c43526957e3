"""Array helpers that numpy's own functions make slow on our inputs."""

from __future__ import annotations

import numpy as np

__all__ = ["unique_sorted"]


def unique_sorted(a) -> np.ndarray:
    """``np.unique(a)`` for integer or boolean arrays (the sorted distinct values of ``a``, flattened).

    numpy 2.3 moved ``np.unique`` without ``return_*`` options to a hash table, which on arrays of
    mostly distinct integers (cluster ids, band keys, document numbers) runs many times slower than
    the sort it replaced. This is that sort. Other dtypes (floats with NaN, objects) go to ``np.unique`` itself.
    """
    a = np.asarray(a)
    if a.dtype.kind not in "iub":
        return np.unique(a)
    s = np.sort(a, axis=None)
    return s if s.size < 2 else distinct_ascending(s)


def distinct_ascending(a: np.ndarray) -> np.ndarray:
    """The distinct values of ``a``, which is sorted already (non-decreasing): no sort, one pass."""
    a = np.asarray(a)
    if a.size < 2:
        return a.copy()
    keep = np.empty(a.size, dtype=bool)
    keep[0] = True
    np.not_equal(a[1:], a[:-1], out=keep[1:])
    return a[keep]
