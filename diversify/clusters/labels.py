"""Clusters: from the union-find forest to labels, stable ids across ``add``, representatives.

Labels are canonical (a cluster's id is its smallest member's index), so the same input gives the
same labels whatever the thread count or the order edges were found in. After an incremental
``add`` every existing cluster keeps its id; a merge records an alias.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from ..errors import InputError

__all__ = ["component_roots", "union_pairs", "stable_labels", "follow_alias", "representatives"]


def component_roots(parent: np.ndarray) -> np.ndarray:
    """The root (smallest member) of every document's component, int64 (n,)."""
    from .._kernels.union import roots

    out = np.empty(parent.size, dtype=np.int64)
    roots(parent, out)
    return out


def union_pairs(parent: np.ndarray, pairs: np.ndarray) -> None:
    """Join the two documents of every row of ``pairs`` (int64 (m, 2)) in the forest ``parent``."""
    from .._kernels.union import union_pairs as _union

    _union(parent, pairs)


def stable_labels(root: np.ndarray, raw_old: np.ndarray, old_aliases: np.ndarray):
    """Labels after an incremental add that keep every existing cluster id.

    ``raw_old`` holds the stored (unresolved) cluster id of each old document; old documents are
    the first ``raw_old.size``. A component holding old clusters keeps the smallest old cluster id;
    the other old clusters in it become aliases of it. A component of only new documents is
    labelled by its smallest member. Returns (resolved ids, stored ids, alias table).
    """
    n_old = raw_old.size
    n = root.size
    alias_map = {int(a): int(b) for a, b in old_aliases}

    def resolve(c: int) -> int:
        seen = 0
        while c in alias_map and seen < len(alias_map) + 1:
            c = alias_map[c]
            seen += 1
        return c

    old_resolved = np.array([resolve(int(c)) for c in raw_old], dtype=np.int64) if n_old else np.zeros(0, np.int64)
    label_of_root: dict = {}
    new_aliases = dict(alias_map)
    for i in range(n_old):
        r = int(root[i])
        c = int(old_resolved[i])
        prev = label_of_root.get(r)
        if prev is None:
            label_of_root[r] = c
        elif prev != c:
            keep, drop = min(prev, c), max(prev, c)
            label_of_root[r] = keep
            new_aliases[drop] = keep
    resolved = np.empty(n, dtype=np.int64)
    resolved[:n_old] = [label_of_root[int(root[i])] for i in range(n_old)]
    for i in range(n_old, n):
        r = int(root[i])
        if r not in label_of_root:
            label_of_root[r] = i  # root is the smallest member; the first new member seen is it or an old doc
        resolved[i] = label_of_root[r]
    stored = resolved.copy()
    stored[:n_old] = raw_old
    # flatten alias chains so every alias points at a live id
    flat = {a: follow_alias(new_aliases, a) for a in new_aliases}
    alias_arr = np.array(sorted(flat.items()), dtype=np.int64).reshape(-1, 2)
    return resolved, stored, alias_arr


def follow_alias(m: dict, a: int) -> int:
    """Where alias ``a`` ends in the alias map ``m`` (a live cluster id); stops on a cycle."""
    seen = set()
    while a in m and a not in seen:
        seen.add(a)
        a = m[a]
    return a


def representatives(cluster_ids: np.ndarray, rule: str, lengths: np.ndarray, keys: Optional[np.ndarray]) -> np.ndarray:
    """Boolean mask: one representative per cluster, the first in representative order.

    - ``longest``: the longest normalized text; ties go to the first seen (lowest index)
    - ``first``: the first seen
    - ``key``: the largest user key (several key columns: compared in order), then the longest
      text, then the first seen
    """
    from .guarantee import priority_rank

    if rule == "key" and keys is None:
        raise InputError("`representative='key'` needs `keys` (one number per document; the largest wins).")
    n = cluster_ids.size
    order = np.lexsort((priority_rank(rule, lengths, keys), cluster_ids))
    c = cluster_ids[order]
    first = np.ones(n, dtype=bool)
    first[1:] = c[1:] != c[:-1]
    mask = np.zeros(n, dtype=bool)
    mask[order[first]] = True
    return mask


