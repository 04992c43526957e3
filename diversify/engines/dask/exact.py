"""Stage 2, exact copies: rows ``(exact hash, doc)`` split by hash on the workers that hold the
sketches (a tasks shuffle of plain arrays, as the band passes); each document points at the
smallest document with its hash."""

from __future__ import annotations

import math
import time

import numpy as np

from ..._arrays import unique_sorted
from .run import TARGET_EDGE_PARTITION_BYTES, Edges, Run, rows_of, split_columns, split_task, spread

__all__ = ["exact_split", "exact_edges", "exact_stage"]


def exact_split(skp: dict, offset: int, q: int):
    """``q`` pieces ``(h, d)`` (by ``h % q``) of the exact hash and global index of every non-empty
    document of a sketched partition."""
    local = np.flatnonzero(~skp["empty"])
    h = skp["exact"][local]
    d = local.astype(np.int64) + np.int64(offset)
    return split_columns(h % np.uint64(q), q, h, d)


def exact_edges(*pieces) -> dict:
    """Each document whose exact hash an earlier document has points at the first such document."""
    h = np.concatenate([p[0] for p in pieces]) if pieces else np.zeros(0, np.uint64)
    d = np.concatenate([p[1] for p in pieces]) if pieces else np.zeros(0, np.int64)
    order = np.lexsort((d, h))
    h, d = h[order], d[order]
    start = np.ones(h.size, dtype=bool)
    start[1:] = h[1:] != h[:-1]
    first = d[np.flatnonzero(start)][np.cumsum(start) - 1]
    dup = ~start
    u, v = d[dup], first[dup]
    return {"u": u, "v": v, "flagged": unique_sorted(np.concatenate([u, v]))}


def exact_stage(run: Run, edges: Edges) -> None:
    """Shuffle the exact hashes and add the copies' edges to ``edges``."""

    t0 = time.perf_counter()
    q = max(1, min(len(run.sources), math.ceil(run.n_text * 16 / TARGET_EDGE_PARTITION_BYTES)))
    split = [split_task(exact_split, q, f, int(run.offsets[i]), q) for i, f in enumerate(run.sketches)]
    futs = run.compute(spread(run.workers, exact_edges, [[s[j] for s in split] for j in range(q)]), "exact")
    merged = int(sum(run.gather(rows_of, futs)))
    edges.exact_merged = merged
    edges.parts += futs
    edges.exact = futs
    stats = run.stats
    stats.candidates["exact"] = stats.verified["exact"] = stats.merged["exact"] = merged
    run.info["exact_partitions"] = q
    run.timings["dask_exact"] = time.perf_counter() - t0
    run.report.stage(f"exact stage: {merged:,} copies")
