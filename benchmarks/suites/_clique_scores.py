"""The clique suite's measurements: references on the exact truth graph, and every pair inside a cluster.

References (computed here on the truth graph, never by the library):

- ``clique-ref``: greedy clique cover with centers by degree. Degree = number of truth neighbours
  (J >= t) in the whole graph. Repeat: the center is the unassigned document of largest degree
  (ties by the representative rule "longest", then position); its unassigned neighbours are taken
  in order of degree (largest first, same ties), each added if it is a truth neighbour of every
  member taken so far. Every two members of a cluster are then >= t.
- ``star-ref``: star around the longest (today's guarantee on exact truth): the longest unassigned
  document takes all its unassigned truth neighbours.
- ``star-degree-ref``: the same star with centers by degree (as ``clique-ref`` orders them).
- ``components-ref``: connected components of the truth graph.

Scores of any clustering (:func:`score_all`): pairwise purity (share of same-cluster pairs with
exact J >= t), the minimum exact J over every same-cluster pair (exact Jaccard of the pairs the
truth does not list, from the documents' shingle sets; sampled when there are more than
``MAX_EXACT_PAIRS``), true-pair recall, clusters, documents folded, and ``_real_scores.score``'s
fold fidelity.
"""

from __future__ import annotations

import numpy as np

from .. import truth as truthmod
from ._real_scores import _longest_rep, score

MAX_EXACT_PAIRS = 5_000_000
#: truth pairs are split by the size of their truth component: (smallest, largest) members
SIZE_BUCKETS = ((2, 16), (17, 256), (257, None))


def _adjacency(truth: truthmod.Truth) -> tuple[np.ndarray, np.ndarray]:
    """CSR (indptr, neighbours) of the undirected truth graph, neighbours sorted per row."""
    n = truth.n
    a = np.concatenate([truth.pi, truth.pj])
    b = np.concatenate([truth.pj, truth.pi])
    order = np.lexsort((b, a))
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(a, minlength=n), out=indptr[1:])
    return indptr, b[order]


def priority(lengths: np.ndarray) -> np.ndarray:
    """rank[i] of the representative rule "longest" (longest first, ties by position)."""
    idx = np.arange(lengths.size)
    rank = np.empty(lengths.size, dtype=np.int64)
    rank[np.lexsort((idx, -lengths.astype(np.int64)))] = idx
    return rank


def clique_cover(indptr: np.ndarray, nbr: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """Greedy clique cover, centers by degree (module docstring); label = the center's position.

    ``hits[v]`` counts the members taken so far that ``v`` is a truth neighbour of: ``v`` may join
    when it equals the number of members (one pass over each member's neighbours, no set lookups)."""
    n = rank.size
    deg = np.diff(indptr)
    labels = np.arange(n, dtype=np.int64)
    done = deg == 0  # isolated documents are their own clusters
    hits = np.zeros(n, dtype=np.int64)
    for c in np.lexsort((rank, -deg)).tolist():
        if done[c]:
            continue
        done[c] = True
        cand = nbr[indptr[c] : indptr[c + 1]]
        cand = cand[~done[cand]]
        cand = cand[np.lexsort((rank[cand], -deg[cand]))]
        hits[cand] += 1
        members = [c]
        for v in cand.tolist():
            if hits[v] == len(members):
                members.append(v)
                hits[nbr[indptr[v] : indptr[v + 1]]] += 1
        for m in members:
            hits[nbr[indptr[m] : indptr[m + 1]]] = 0
        m = np.array(members)
        labels[m] = c
        done[m] = True
    return labels


def star(indptr: np.ndarray, nbr: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Stars: each unassigned document, in ``order``, takes all its unassigned neighbours."""
    labels = np.arange(order.size, dtype=np.int64)
    done = np.zeros(order.size, dtype=bool)
    for c in order.tolist():
        if done[c]:
            continue
        done[c] = True
        cand = nbr[indptr[c] : indptr[c + 1]]
        cand = cand[~done[cand]]
        labels[cand] = c
        done[cand] = True
    return labels


def references(truth: truthmod.Truth, lengths: np.ndarray) -> dict[str, np.ndarray]:
    """Labels of the four references (module docstring)."""
    indptr, nbr = _adjacency(truth)
    rank = priority(lengths)
    deg = np.diff(indptr)
    return {
        "clique-ref": clique_cover(indptr, nbr, rank),
        "star-ref": star(indptr, nbr, np.argsort(rank)),
        "star-degree-ref": star(indptr, nbr, np.lexsort((rank, -deg))),
        "components-ref": truthmod.components(truth.n, np.stack([truth.pi, truth.pj], axis=1)),
    }


def is_clique_cover(labels: np.ndarray, truth: truthmod.Truth) -> bool:
    """Every two members of every cluster are a truth pair (the reference's own check)."""
    _, counts = np.unique(labels, return_counts=True)
    inside = int((counts * (counts - 1) // 2).sum())
    return inside == int((labels[truth.pi] == labels[truth.pj]).sum())


# ----------------------------------------------------------------------------- every pair inside


class ExactJaccard:
    """Exact Jaccard of any document pairs of one truth (its shingle sets as a sparse matrix)."""

    def __init__(self, truth: truthmod.Truth):
        self.ip = truth.indptr
        self.sizes = truth.sizes
        uniq, self.tok = np.unique(truth.tokens, return_inverse=True)
        self.n_tok = int(uniq.size)

    def __call__(self, ci: np.ndarray, cj: np.ndarray) -> np.ndarray:
        inter = truthmod.intersections(self.ip, self.tok.astype(np.int64), self.n_tok, ci, cj)
        union = self.sizes[ci] + self.sizes[cj] - inter
        return np.where(union > 0, inter / np.maximum(union, 1), np.nan)


def same_cluster_pairs(labels: np.ndarray, cap: int = MAX_EXACT_PAIRS, seed: int = 0):
    """(i, j, sampled): every pair i < j sharing a cluster, or ``cap`` pairs drawn uniformly over them."""
    order = np.argsort(labels, kind="stable")
    lab = labels[order]
    starts = np.flatnonzero(np.r_[True, lab[1:] != lab[:-1]])
    sizes = np.diff(np.r_[starts, lab.size])
    multi = sizes > 1
    starts, sizes = starts[multi], sizes[multi]
    weights = sizes * (sizes - 1) // 2
    if int(weights.sum()) <= cap:
        ii, jj = [], []
        for s, m in zip(starts.tolist(), sizes.tolist()):
            a, b = np.triu_indices(m, 1)
            ii.append(order[s + a])
            jj.append(order[s + b])
        if not ii:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), False
        i, j = np.concatenate(ii), np.concatenate(jj)
        return np.minimum(i, j), np.maximum(i, j), False
    rng = np.random.default_rng(seed)
    which = rng.choice(weights.size, size=cap, p=weights / weights.sum())
    m = sizes[which]
    a = (rng.random(cap) * m).astype(np.int64)
    b = (rng.random(cap) * (m - 1)).astype(np.int64)
    b = b + (b >= a)
    i, j = order[starts[which] + a], order[starts[which] + b]
    return np.minimum(i, j), np.maximum(i, j), True


def min_pair_jaccard(labels: np.ndarray, truth: truthmod.Truth, exact: ExactJaccard) -> dict:
    """The smallest exact J over the pairs sharing a cluster (pairs not in the truth computed here)."""
    i, j, sampled = same_cluster_pairs(labels)
    if i.size == 0:
        return {"min_pair_jaccard": None, "pairs_inside": 0, "min_sampled": False}
    n = truth.n
    listed = np.isin(i * n + j, truth.pi * n + truth.pj)
    js = exact(i[~listed], j[~listed])
    same = labels[truth.pi] == labels[truth.pj]
    truth_j = truth.inter[same] / truth.union[same]
    both = np.concatenate([js[~np.isnan(js)], truth_j])
    return {"min_pair_jaccard": float(both.min()) if both.size else None, "pairs_inside": int(i.size),
            "pairs_inside_below_t_measured": int((~listed).sum()), "min_sampled": bool(sampled)}


def score_all(labels: np.ndarray, rep: np.ndarray | None, truth: truthmod.Truth, comps: np.ndarray,
              lengths: np.ndarray, exact: ExactJaccard) -> dict:
    """Purity, min J inside a cluster, recall and the fold figures of one clustering."""
    rep = _longest_rep(labels, lengths) if rep is None else rep
    s = score(labels, rep, truth, comps)
    s.pop("_below_pairs", None)
    s.pop("worst_folds", None)
    s["purity"] = s["pair_precision"]
    s.update(min_pair_jaccard(labels, truth, exact))
    s["recall_by_component_size"] = recall_by_component_size(labels, truth, comps)
    return s


def recall_by_component_size(labels: np.ndarray, truth: truthmod.Truth, comps: np.ndarray) -> list[dict]:
    """True-pair recall of the pairs whose truth component has a size in each of ``SIZE_BUCKETS``."""
    _, inverse, counts = np.unique(comps, return_inverse=True, return_counts=True)
    size = counts[inverse][truth.pi]
    same = labels[truth.pi] == labels[truth.pj]
    out = []
    for lo, hi in SIZE_BUCKETS:
        sel = (size >= lo) & (size <= (hi or size.max(initial=0)))
        k = int(sel.sum())
        out.append({"sizes": f"{lo}-{hi}" if hi else f">{lo - 1}", "pairs": k,
                    "recall": float(same[sel].mean()) if k else None})
    return out
