"""The clique cut in one kernel: components into clusters whose every two members are verified similar.

The rule is :mod:`diversify.clusters.clique`'s (read its docstring first). Per component, members
in representative order:

1. stored clusters (``add``) take, in order, each new member that is verified similar to every
   one of their members;
2. while more than ``dense_max`` members are left, a center is chosen (the member of an evenly
   spaced sample with the most neighbours inside the sample, then the member most similar to it if
   more members lie within half the threshold's distance of that one), every member left is checked
   against the center, and the center's neighbours join, nearest first, each checked against the
   members taken before it except where the metric bound certifies the pair (below);
3. the last ``dense_max`` or fewer members are checked pair by pair, and clusters are cut greedily:
   center = the member with the most neighbours left (ties: representative order), its neighbours
   in order of degree each join when adjacent to every member taken.

The metric bound: Jaccard distance, Hamming distance and angle obey the triangle inequality, so two
members each within half the threshold's distance of the same center are within the threshold of
each other. A pair is certified that way only when both distances are of the same kind (both exact
Jaccard, both MinHash estimates that the verification itself would take, both text SimHash, both
vector SimHash, both exact cosine); a member whose text equals the center's is certified with every
member. Checks per round are capped (``budget``): past the cap a member that would need a check is
left for a later round.

Every document's similarity to its representative (the first member in representative order) comes
out as the verification measured it; text SimHash and vector SimHash Hamming distances are written
as distances, which the caller turns into cosines with numpy.
"""

from __future__ import annotations

import numpy as np

from ._common import argsort_run, kernel, sort_run
from .clique_pairs import N_COUNTERS, CliqueState, VectorRule, finish_cluster, pair_all
from .clique_ring import ring_round

__all__ = ["VectorRule", "CliqueState", "clique_groups", "N_COUNTERS"]


@kernel
def _dense(rule, vrule, state, docs, u, taken, adj_bit, adj_val, adj_exact):
    """Check every pair of ``docs[:u]`` (into the adjacency tables) and cut them greedily by degree."""
    counters = state.counters
    for i in range(u):
        adj_bit[i, i] = 0
        for j in range(i + 1, u):
            bit, val, exact = pair_all(rule, vrule, counters, docs[i], docs[j])
            adj_bit[i, j] = bit
            adj_bit[j, i] = bit
            adj_val[i, j] = val
            adj_val[j, i] = val
            adj_exact[i, j] = exact
            adj_exact[j, i] = exact
    done = np.zeros(u, dtype=np.bool_)
    deg = np.zeros(u, dtype=np.int64)
    members = np.empty(u, dtype=np.int64)
    cand = np.empty(u, dtype=np.int64)
    n_clusters = 0
    left = u
    while left:
        for i in range(u):
            deg[i] = 0
            if done[i]:
                continue
            for j in range(u):
                if not done[j] and adj_bit[i, j] != 0:
                    deg[i] += 1
        center = -1
        for i in range(u):
            if not done[i] and (center < 0 or deg[i] > deg[center]):
                center = i
        n_cand = 0
        for j in range(u):
            if not done[j] and adj_bit[center, j] != 0:
                cand[n_cand] = j
                n_cand += 1
        # neighbours by degree (largest first), ties in representative order: a stable sort
        keys = np.empty(n_cand, dtype=np.int64)
        for k in range(n_cand):
            keys[k] = -deg[cand[k]] * (u + 1) + cand[k]
        order = argsort_run(keys, n_cand)
        n_m = 1
        members[0] = center
        for k in range(n_cand):
            x = cand[order[k]]
            ok = True
            for q in range(n_m):
                if adj_bit[x, members[q]] == 0:
                    ok = False
                    break
            if ok:
                members[n_m] = x
                n_m += 1
        ms = members[:n_m].copy()
        sort_run(ms, 0, n_m)  # representative order: the first member represents
        rep = ms[0]
        out = np.empty(n_m, dtype=np.int64)
        bits = np.zeros(n_m, dtype=np.uint8)
        vals = np.zeros(n_m)
        exs = np.zeros(n_m, dtype=np.bool_)
        for k in range(n_m):
            out[k] = docs[ms[k]]
            if k:
                bits[k] = adj_bit[rep, ms[k]]
                vals[k] = adj_val[rep, ms[k]]
                exs[k] = adj_exact[rep, ms[k]]
            done[ms[k]] = True
            taken[ms[k]] = True
        finish_cluster(rule, vrule, state, out, n_m, -1, bits, vals, exs)
        left -= n_m
        n_clusters += 1
    return n_clusters


@kernel
def _join_stored(rule, vrule, state, comp, n_old, todo, n_todo, taken):
    """``add``: each stored cluster of the component (representatives in order) takes each new
    member verified similar to every one of its members."""
    counters = state.counters
    m = comp.size
    cl = np.empty(m, dtype=np.int64)
    for i in range(m):
        r = comp[i]
        if r >= n_old or not state.reps[r]:
            continue
        label = state.labels[r]
        n_cl = 0
        for j in range(m):
            if comp[j] < n_old and state.labels[comp[j]] == label:
                cl[n_cl] = comp[j]
                n_cl += 1
        for k in range(n_todo):
            if taken[k]:
                continue
            x = todo[k]
            ok = True
            bit_r = np.uint8(0)
            val_r = 0.0
            ex_r = False
            for q in range(n_cl):
                bit, val, exact = pair_all(rule, vrule, counters, cl[q], x)
                if bit == 0:
                    ok = False
                    break
                if cl[q] == r:
                    bit_r, val_r, ex_r = bit, val, exact
            if not ok:
                continue
            taken[k] = True
            cl[n_cl] = x
            n_cl += 1
            docs = np.empty(1, dtype=np.int64)
            docs[0] = x
            finish_cluster(rule, vrule, state, docs, 1, label, np.array([bit_r]), np.array([val_r]),
                            np.array([ex_r]))
            state.flags[r] |= bit_r


@kernel
def clique_groups(order, bounds, n_old, rule, vrule, state, dense_max, sample, budget_per_member, tmax, hi_max):
    """Cut the components ``order[bounds[g]:bounds[g + 1]]`` (members in representative order).
    Documents below ``n_old`` are stored: their clusters take new members first and are never
    reassigned."""
    counters = state.counters
    width = 0
    for g in range(bounds.size - 1):
        width = max(width, bounds[g + 1] - bounds[g])
    d = min(width, dense_max)
    adj_bit = np.zeros((d, d), dtype=np.uint8)
    adj_val = np.zeros((d, d))
    adj_exact = np.zeros((d, d), dtype=np.bool_)
    todo = np.empty(width, dtype=np.int64)
    for g in range(bounds.size - 1):
        comp = order[bounds[g]: bounds[g + 1]]
        n_todo = 0
        for j in range(comp.size):
            if comp[j] >= n_old:
                todo[n_todo] = comp[j]
                n_todo += 1
        taken = np.zeros(n_todo, dtype=np.bool_)
        if n_old:
            _join_stored(rule, vrule, state, comp, n_old, todo, n_todo, taken)
        n_clusters = 0
        while True:
            u = 0
            for k in range(n_todo):
                if not taken[k]:
                    todo[u] = todo[k]
                    u += 1
            n_todo = u
            if u == 0:
                break
            taken = np.zeros(u, dtype=np.bool_)
            if u <= dense_max:
                n_clusters += _dense(rule, vrule, state, todo, u, taken, adj_bit, adj_val, adj_exact)
                break
            ring_round(rule, vrule, state, todo, u, taken, sample, max(dense_max * dense_max, budget_per_member * u),
                   tmax, hi_max)
            n_clusters += 1
        if n_old == 0 and n_clusters > 1:
            counters[2] += 1
