"""Stage 2, exact copies: rows ``(exact hash, doc)`` shuffled by hash; each document points at the
smallest document with its hash."""

from __future__ import annotations

import math
import time

import numpy as np

from ..._arrays import unique_sorted
from .run import TARGET_EDGE_PARTITION_BYTES, Edges, Run, rows_of

__all__ = ["exact_frame", "exact_edges", "exact_stage"]

def exact_frame(skp: dict, offset: int):
    """``(h, d)``: exact hash and global index of every non-empty document of a sketched partition."""
    import pandas as pd

    local = np.flatnonzero(~skp["empty"])
    return pd.DataFrame({"h": skp["exact"][local], "d": local.astype(np.int64) + np.int64(offset)})


def exact_edges(df) -> dict:
    """Each document whose exact hash an earlier document has points at the first such document."""
    h = df["h"].to_numpy(np.uint64)
    d = df["d"].to_numpy(np.int64)
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
    import dask.dataframe as dd
    from dask import delayed

    t0 = time.perf_counter()
    q = max(1, min(len(run.sources), math.ceil(run.n_text * 16 / TARGET_EDGE_PARTITION_BYTES)))
    meta = exact_frame({"exact": np.zeros(0, np.uint64), "empty": np.zeros(0, bool)}, 0)
    frame = dd.from_delayed([delayed(exact_frame, pure=True)(f, int(run.offsets[i])) for i, f in enumerate(run.sketches)],
                            meta=meta, verify_meta=False)
    shuffled = frame.shuffle(on="h", npartitions=q, shuffle_method=run.shuffle_method)
    futs = run.compute([delayed(exact_edges, pure=True)(p) for p in shuffled.to_delayed()], "exact")
    merged = int(sum(run.gather(rows_of, futs)))
    edges.exact_merged = merged
    edges.parts += futs
    edges.exact = futs
    stats = run.stats
    stats.candidates["exact"] = stats.verified["exact"] = stats.merged["exact"] = merged
    run.info["exact_partitions"] = q
    run.timings["dask_exact"] = time.perf_counter() - t0
    run.report.stage(f"exact stage: {merged:,} copies")
