"""Merged cluster ids: ``extras["aliases"]``, rows ``[merged_id, surviving_id]``, resolved transitively.

An incremental add can merge clusters; the merged id keeps working (a UI may hold it) because
the artifact records where it went. :func:`resolve_aliases` checks the rows and follows chains
(``a -> b -> c`` resolves ``a`` to ``c``); a cycle or a merged id with two targets is refused.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from diversify.errors import InputError, InputTypeError

__all__ = ["resolve_aliases", "alias_map"]


def _alias_rows(aliases: Any, n: int) -> np.ndarray:
    a = np.asarray(aliases)
    if a.dtype.kind not in "iu" or a.ndim != 2 or a.shape[1] != 2:
        raise InputTypeError(
            f"`extras['aliases']` must be an integer array of shape (m, 2) [merged_id, surviving_id]; "
            f"got dtype {a.dtype}, shape {a.shape}. Pass np.asarray(pairs, dtype=np.int64).reshape(-1, 2)."
        )
    if a.size and (int(a.min()) < 0 or int(a.max()) >= n):
        bad = int(np.flatnonzero(((a < 0) | (a >= n)).any(axis=1))[0])
        raise InputError(
            f"`extras['aliases']` ids must be cluster ids in [0, {n}); got row {bad} = {a[bad].tolist()}. "
            "Aliases map a merged cluster id to the surviving cluster id, both document indices."
        )
    return a


def _one_target_each(rows: np.ndarray) -> dict[int, int]:
    mapping: dict[int, int] = {}
    for i, (src, dst) in enumerate(rows.tolist()):
        if src == dst:  # "merged into itself": a no-op
            continue
        if src in mapping and mapping[src] != dst:
            raise InputError(
                f"`extras['aliases']` maps cluster {src} twice (to {mapping[src]} and, at row {i}, to {dst}). "
                "Each merged id must have one surviving id."
            )
        mapping[src] = dst
    return mapping


def _follow_chains(mapping: dict[int, int]) -> dict[int, int]:
    final: dict[int, int] = {}
    for src in mapping:
        chain = [src]
        on_chain = {src}
        cur = src
        while cur in mapping and cur not in final:
            cur = mapping[cur]
            if cur in on_chain:
                raise InputError(
                    f"`extras['aliases']` contains a cycle: {' -> '.join(map(str, chain + [cur]))}. "
                    "Aliases must point towards a surviving cluster id."
                )
            chain.append(cur)
            on_chain.add(cur)
        end = final.get(cur, cur)
        for c in chain:
            final[c] = end
    return final


def resolve_aliases(aliases: Any, n: int) -> np.ndarray | None:
    """Return ``res`` (n,) int64 mapping every cluster id to its surviving id, or None without aliases.

    Raises
    ------
    InputTypeError, InputError
        The rows are not an (m, 2) integer array of ids in ``[0, n)``, map an id twice, or form a cycle.
    """
    if aliases is None:
        return None
    rows = _alias_rows(aliases, n)
    if rows.size == 0:
        return None
    res = np.arange(n, dtype=np.int64)
    for src, end in _follow_chains(_one_target_each(rows)).items():
        res[src] = end
    return res


def alias_map(raw: np.ndarray | None, n: int, cluster_ids: np.ndarray | None = None) -> dict[int, int]:
    """``{merged_id: surviving_id}`` of a loaded artifact's aliases; empty when absent or invalid.

    Invalid rows only disable the alias look-up (a merged id is then "not a cluster", never a wrong
    one): the cluster ids stored in the artifact were resolved when it was written and are checked
    on their own. With ``cluster_ids`` (each document's resolved cluster) the table must also keep
    the rules of :func:`diversify.artifact.state.alias_violation`: no live cluster as merged id, and
    each merged id leads to the cluster its own document is in.
    """
    if raw is None or not raw.shape or not raw.shape[0]:
        return {}
    try:
        res = resolve_aliases(raw, n)
    except (InputError, InputTypeError):
        return {}
    if cluster_ids is not None and cluster_ids.shape == (n,):
        from diversify.artifact.state import alias_violation

        if alias_violation(raw, np.asarray(cluster_ids, dtype=np.int64)) is not None:
            return {}
    return {} if res is None else {int(s): int(res[s]) for s in raw[:, 0].tolist()}
