"""Stage 4, connected components of a distributed edge table, labelled by their smallest node.

Alternating large-star and small-star rounds (Kiveris et al., "Connected Components in MapReduce
and Beyond", 2014) over the edge table, each a shuffle by node; O(log n) rounds. A component's
label is its smallest member: the local build's cluster id.

The edge table is small next to the band rows (at most one edge per clustered document), so its
shuffles are plain task shuffles of numpy arrays: each map task splits its edges by a hash of
the node into q pieces, each reduce task concatenates its piece of every map output.
"""

from __future__ import annotations

import math
import time
from typing import Optional

import numpy as np

from ...hashing import GOLDEN
from .run import TARGET_EDGE_PARTITION_BYTES, Edges, Run, split_columns, split_task

__all__ = ["connected_components", "components_stage"]


def _split_edges(res: dict, q: int, mode: str):
    """q pieces (s, d) of the directed edges to group by s. ``mode``: "both" emits (u, v) and
    (v, u) (large-star); "orient" emits (max, min) (small-star)."""
    u = np.asarray(res["u"], np.int64)
    v = np.asarray(res["v"], np.int64)
    if mode == "both":
        s, d = np.concatenate([u, v]), np.concatenate([v, u])
    else:
        s, d = np.maximum(u, v), np.minimum(u, v)
    h = (s.astype(np.uint64) * np.uint64(GOLDEN)) >> np.uint64(33)
    return split_columns(h % np.uint64(q), q, s, d)


def _concat_pieces(pieces) -> tuple[np.ndarray, np.ndarray]:
    if not pieces:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate([p[0] for p in pieces]), np.concatenate([p[1] for p in pieces])


def _unique_pairs(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if a.size == 0:
        return a, b
    o = np.lexsort((b, a))
    a, b = a[o], b[o]
    k = np.ones(a.size, dtype=bool)
    k[1:] = (a[1:] != a[:-1]) | (b[1:] != b[:-1])
    return a[k], b[k]


def _large_star(*pieces) -> dict:
    """Large-star: every neighbour larger than u hangs under the smallest of u's closed neighbourhood.

    Also counts the nodes that are neither a star centre (all neighbours larger) nor a leaf (one
    neighbour, smaller): when there is none, the edges are stars rooted at component minima.
    """
    s, d = _unique_pairs(*_concat_pieces(pieces))
    if s.size == 0:
        return {"u": s, "v": d, "bad": 0}
    start = np.ones(s.size, dtype=bool)
    start[1:] = s[1:] != s[:-1]
    starts = np.flatnonzero(start)
    gid = np.cumsum(start) - 1
    cnt = np.diff(np.append(starts, s.size))
    s_g = s[starts]
    dmin = d[starts]  # neighbours are sorted within a group
    m_g = np.minimum(s_g, dmin)
    bad = int((~((dmin > s_g) | ((cnt == 1) & (dmin < s_g)))).sum())
    out = d > s
    u, v = _unique_pairs(d[out], m_g[gid][out])
    return {"u": u, "v": v, "bad": bad}


def _small_star(*pieces) -> dict:
    """Small-star: u and its smaller neighbours all hang under the smallest of them."""
    hi, lo = _unique_pairs(*_concat_pieces(pieces))
    if hi.size == 0:
        return {"u": hi, "v": lo, "bad": 0}
    start = np.ones(hi.size, dtype=bool)
    start[1:] = hi[1:] != hi[:-1]
    starts = np.flatnonzero(start)
    gid = np.cumsum(start) - 1
    m = lo[starts][gid]
    keep = lo != m
    u = np.concatenate([hi[starts], lo[keep]])
    v = np.concatenate([lo[starts], m[keep]])
    u, v = _unique_pairs(u, v)
    return {"u": u, "v": v, "bad": 0}


def _bad_of(res: dict) -> int:
    return int(res["bad"])


def _star_round(client, parts: list, q: int, mode: str, reducer, retries: int) -> list:
    from dask import delayed

    pieces = [split_task(_split_edges, q, p, q, mode) for p in parts]
    outs = [delayed(reducer, pure=True)(*[pc[j] for pc in pieces]) for j in range(q)]
    return client.compute(outs, retries=retries)


def connected_components(client, edge_parts: list, *, npartitions: int, shuffle_method: Optional[str] = None,
                         retries: int = 2, max_rounds: int = 200) -> tuple[list, int]:
    """Connected components of a distributed edge table, labelled by their smallest node.

    Alternating large-star / small-star rounds (Kiveris et al., "Connected Components in
    MapReduce and Beyond", 2014), each a shuffle of the edge table by node, until every node is
    either a star centre or a leaf whose one neighbour is smaller: then each star is a component
    and its centre the component's smallest node.

    Parameters
    ----------
    client : distributed.Client
    edge_parts : list of Futures or Delayed, each a dict with int64 arrays ``u`` and ``v``
    npartitions : int
        Reduce partitions per round.
    shuffle_method : ignored (kept for symmetry with the band shuffles; these are task shuffles)

    Returns
    -------
    (futures, rounds): each future is a dict of ``u`` (a node) and ``v`` (its label, ``v < u``)
    for every node that is not its own label; the number of large-star rounds run.
    """
    parts = list(edge_parts)
    for rounds in range(1, max_rounds + 1):
        futs = _star_round(client, parts, npartitions, "both", _large_star, retries)
        bad = sum(client.gather(client.map(_bad_of, futs, pure=False)))
        if bad == 0:
            return futs, rounds
        parts = _star_round(client, futs, npartitions, "orient", _small_star, retries)
    raise RuntimeError(f"connected components did not converge in {max_rounds} rounds")  # pragma: no cover


def _moved(lab: dict) -> int:
    return int(np.asarray(lab["u"]).size)


def components_stage(run: Run, edges: Edges) -> tuple[list, int]:
    """(futures of the label tables, documents that are not their component's label): each table
    maps documents to their component's smallest member; the tables stay on the workers."""
    t0 = time.perf_counter()
    n_edges = edges.forest_edges + edges.exact_merged
    run.info["rounds"] = 0
    label_futs: list = []
    moved = 0
    if n_edges:
        q = max(1, min(max(len(run.sources), run.n_workers), math.ceil(n_edges * 32 / TARGET_EDGE_PARTITION_BYTES)))
        label_futs, rounds = connected_components(run.client, edges.parts, npartitions=q,
                                                  shuffle_method=run.shuffle_method, retries=run.retries)
        run.info["rounds"] = rounds
        run.info["cc_partitions"] = q
        moved = int(sum(run.gather(_moved, label_futs)))
    run.timings["dask_components"] = time.perf_counter() - t0
    run.report.stage(f"components in {run.info['rounds']} rounds")
    return label_futs, moved
