"""Validation of the online knobs, shared by :func:`select` and :class:`Diversifier`.

Every check raises :class:`~diversify.errors.ConfigError` naming the parameter, the rule, the
value received and the fix.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from ..errors import ConfigError

__all__ = ["Options", "check_options", "check_params", "check_text_threshold", "ON_ERROR", "UNKNOWN_POLICIES"]

#: Policies for an artifact that cannot be loaded or read (see :class:`Diversifier`).
ON_ERROR = ("raise", "last_good", "passthrough")
#: Policies for a hit whose cluster is unknown (see :func:`select`).
UNKNOWN_POLICIES = ("own", "drop")


def _check_int(name: str, value: Any, *, minimum: int, hint: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ConfigError(f"`{name}` must be an int >= {minimum}; got {value!r} "
                          f"({type(value).__name__}). {hint}")
    if value < minimum:
        raise ConfigError(f"`{name}` must be >= {minimum}; got {name}={value!r}. {hint}")
    return int(value)


def check_params(k: Any, max_per_cluster: Any, unknown: Any,
                 fold_threshold: Any) -> tuple[int, int, Optional[float]]:
    """Validate ``k``, ``max_per_cluster``, ``unknown`` and ``fold_threshold``; returns the first,
    second and fourth normalized (plain int, int, float or None)."""
    k = _check_int("k", k, minimum=1, hint="Ask for at least one result, e.g. k=10.")
    n = _check_int("max_per_cluster", max_per_cluster, minimum=1,
                   hint="Use 1 to keep one hit per cluster, more to allow that many near-duplicates.")
    if unknown not in UNKNOWN_POLICIES:
        raise ConfigError(f"`unknown` must be one of {UNKNOWN_POLICIES}; got unknown={unknown!r}. "
                          "Use 'own' (an unknown id is its own cluster) or 'drop' (leave it out).")
    if fold_threshold is not None:
        if isinstance(fold_threshold, bool) or not isinstance(fold_threshold, (int, float, np.floating)) \
                or not (-1.0 < float(fold_threshold) <= 1.0):
            raise ConfigError("`fold_threshold` must be a cosine similarity in (-1, 1] or None; "
                              f"got fold_threshold={fold_threshold!r}. Use e.g. 0.95 "
                              "(higher -> only closer copies are folded) or None to disable folding.")
        fold_threshold = float(fold_threshold)
    return k, n, fold_threshold


def check_text_threshold(value: Any) -> Optional[float]:
    """Validate ``fold_text_threshold`` (a Jaccard similarity in (0, 1], or None)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)) \
            or not (0.0 < float(value) <= 1.0):
        raise ConfigError("`fold_text_threshold` must be a Jaccard similarity in (0, 1] or None; "
                          f"got fold_text_threshold={value!r}. Use e.g. 0.7 (higher -> only closer "
                          "copies are folded) or None to disable text folding.")
    return float(value)


@dataclass(frozen=True, slots=True)
class Options:
    """The validated settings of a :class:`Diversifier` (see its docstring for each one)."""

    k: int
    max_per_cluster: int
    fetch_k: int
    max_fetch_k: int
    max_rounds: int
    max_exclude_members: int
    unknown: str
    fold_threshold: Optional[float]
    fold_text_threshold: Optional[float]
    cluster_field: Optional[str]
    on_error: str


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_options(*, k: Any, max_per_cluster: Any, fetch_k: Any, max_fetch_k: Any, max_rounds: Any,
                  max_exclude_members: Any, unknown: Any, fold_threshold: Any, fold_text_threshold: Any,
                  cluster_field: Any, on_error: Any) -> Options:
    """Validate the :class:`Diversifier` constructor's arguments and fill in the defaults."""
    if on_error not in ON_ERROR:
        raise ConfigError(f"`on_error` must be one of {list(ON_ERROR)}; got on_error={on_error!r}. Use "
                          "'last_good' to keep serving when an artifact cannot be loaded, 'raise' to fail fast.")
    k, n, fold_threshold = check_params(k, max_per_cluster, unknown, fold_threshold)
    fold_text_threshold = check_text_threshold(fold_text_threshold)
    if cluster_field is not None and (not isinstance(cluster_field, str) or not cluster_field):
        raise ConfigError(f"`cluster_field` must be a non-empty string naming a payload field; "
                          f"got cluster_field={cluster_field!r}. Use e.g. cluster_field='cluster_id'.")
    if not _is_int(max_rounds) or not 0 <= max_rounds <= 32:
        raise ConfigError(f"`max_rounds` must be an int in [0, 32]; got max_rounds={max_rounds!r}. "
                          "Use 0 to never refetch, 3 (default) for a bounded number of extra calls.")
    if fetch_k is None:
        fetch_k = k + math.ceil(k / n) + 5
    elif not _is_int(fetch_k) or fetch_k < k:
        raise ConfigError(f"`fetch_k` must be an int >= k ({k}); got fetch_k={fetch_k!r}. "
                          f"Use e.g. fetch_k={2 * k}, or leave it unset for the default.")
    if not _is_int(max_exclude_members) or max_exclude_members < 0:
        raise ConfigError(f"`max_exclude_members` must be an int >= 0; got {max_exclude_members!r}. "
                          "Use 0 to exclude only seen ids on refetch.")
    if max_fetch_k is None:
        max_fetch_k = max(fetch_k, min(fetch_k * 2 ** max_rounds, 10_000))
    elif not _is_int(max_fetch_k) or max_fetch_k < fetch_k:
        raise ConfigError(f"`max_fetch_k` must be an int >= fetch_k ({fetch_k}); got {max_fetch_k!r}.")
    return Options(k=k, max_per_cluster=n, fetch_k=fetch_k, max_fetch_k=max_fetch_k, max_rounds=max_rounds,
                   max_exclude_members=max_exclude_members, unknown=unknown, fold_threshold=fold_threshold,
                   fold_text_threshold=fold_text_threshold, cluster_field=cluster_field, on_error=on_error)
