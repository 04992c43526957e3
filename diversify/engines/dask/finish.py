"""Stage 5, the artifact: the per-document columns are gathered partition by partition and handed
to the local build's own finish (:func:`diversify.engines.local.finish`: representatives, stage
flags, extras, the ClusterMap)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from ...clusters import check_keys
from ...errors import ConfigError
from ...ids import check_ids, normalize_ids
from ...sketches.batch import Sketches
from ...stages import STAGE_EXACT, STAGE_MINHASH
from .run import Edges, Run
from .scan import flagged_of
from .sketch import columns_of

__all__ = ["finish_build"]


@dataclass
class _Columns:
    ids: list = field(default_factory=list)
    lengths: list = field(default_factory=list)
    exact: list = field(default_factory=list)
    empty: list = field(default_factory=list)
    minhash: list = field(default_factory=list)
    keys: list = field(default_factory=list)
    seconds: float = 0.0


def _stage_flags(run: Run, edges: Edges) -> np.ndarray:
    flags = np.zeros(run.n, dtype=np.uint8)
    for futs, bit in ((edges.exact, STAGE_EXACT), (edges.minhash, STAGE_MINHASH)):
        for f in futs:
            flags[run.client.submit(flagged_of, f, pure=False).result()] |= bit
    return flags


def _gather_columns(run: Run, with_minhash: bool) -> _Columns:
    """Every partition's columns in order; a document without an id gets its global index."""
    cols = _Columns()
    for i, f in enumerate(run.sketches):
        c = run.client.submit(columns_of, f, with_minhash, pure=False).result()
        lo, hi = int(run.offsets[i]), int(run.offsets[i + 1])
        if c["ids"] is None:
            cols.ids.extend(range(lo, hi))
        else:
            cols.ids.extend(lo + j if x is None else x for j, x in enumerate(c["ids"]))
        cols.seconds += c["seconds"]
        cols.lengths.append(c["lengths"])
        cols.exact.append(c["exact"])
        cols.empty.append(c["empty"])
        if with_minhash:
            cols.minhash.append(c["minhash"])
        cols.keys.append(c["keys"])
    return cols


def _sketches_of(run: Run, cols: _Columns, with_minhash: bool) -> Sketches:
    check_ids(cols.ids)
    sk = Sketches(ids=normalize_ids(cols.ids), lengths=np.concatenate(cols.lengths), exact=np.concatenate(cols.exact),
                  empty=np.concatenate(cols.empty))
    if with_minhash:
        sk.minhash = np.concatenate(cols.minhash)
    have_keys = [k is not None for k in cols.keys]
    if run.cfg.representative == "key":
        if not all(have_keys):
            raise ConfigError("`representative='key'` needs a key for every document: pass `keys` (with texts) or "
                              "`key_field` (with files or frames) naming a numeric column.")
        sk.keys = check_keys(np.concatenate(cols.keys), run.n)
    elif any(have_keys) and all(have_keys):
        sk.keys = check_keys(np.concatenate(cols.keys), run.n)
    return sk


def finish_build(run: Run, edges: Edges, cluster_ids: np.ndarray, *, metadata: Optional[Any],
                 created_at: Optional[str]):
    """The BuildResult of the local build's finish, with ``stats["dask"]``."""
    from ..local import finish

    t0 = time.perf_counter()
    flags = _stage_flags(run, edges)
    edges.clear()  # the edge tables may leave the workers now
    with_minhash = run.cfg.incremental and run.cfg.minhash is not None
    cols = _gather_columns(run, with_minhash)
    run.sketches = []
    run.info["sketch_task_seconds"] = round(cols.seconds, 3)
    sk = _sketches_of(run, cols, with_minhash)
    del cols
    if run.cfg.minhash is not None and run.n_text:
        run.stats.merged["minhash"] = int(run.n - np.unique(cluster_ids).size - edges.exact_merged)
    run.timings["dask_gather"] = time.perf_counter() - t0
    res = finish(sk, run.cfg, cluster_ids, flags, run.stats, run.timings, aliases=np.zeros((0, 2), np.int64),
                 raw_cluster=None, metadata=metadata, created_at=created_at)
    # BuildStats has no "dask" key: the engine's own counts are an addition of this engine
    res.stats["dask"] = run.info
    run.report.stage(f"done: {res.n_clusters:,} clusters")
    return res
