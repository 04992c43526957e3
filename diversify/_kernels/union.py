"""Union-find over document indices: path halving, smaller index wins.

Union always hangs the larger root under the smaller one: a component's root is its smallest
document index, which is the canonical cluster label whatever the pair order or thread count.
"""

from __future__ import annotations

from ._common import kernel

__all__ = ["find", "union_roots", "union_pairs", "roots"]


@kernel
def find(parent, i):
    while parent[i] != i:
        parent[i] = parent[parent[i]]
        i = parent[i]
    return i


@kernel
def union_roots(parent, ra, rb):
    """Join two distinct roots; the smaller index becomes the root. Returns the new root."""
    if ra < rb:
        parent[rb] = ra
        return ra
    parent[ra] = rb
    return rb


@kernel
def union_pairs(parent, pairs):
    """Union every (a, b) row of ``pairs`` (int64 (m, 2))."""
    for t in range(pairs.shape[0]):
        ra = find(parent, pairs[t, 0])
        rb = find(parent, pairs[t, 1])
        if ra != rb:
            union_roots(parent, ra, rb)


@kernel
def roots(parent, out):
    """out[i] = root of i (the smallest index of its component)."""
    for i in range(parent.size):
        out[i] = find(parent, i)
