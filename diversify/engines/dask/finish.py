"""Stage 6, the single artifact: the clusters cut on the workers (:mod:`.cut`) and the per-document
columns are gathered partition by partition and handed to the local build's own finish
(:func:`diversify.engines.finish.finish`: extras, report, the ClusterMap)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from ...errors import ConfigError
from ...ids import check_ids, normalize_ids
from ...sketches.batch import Sketches
from ...staging import check_keys
from .cut import cut_columns
from .output import write_sharded
from .purity import distributed_purity
from .run import Run
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


def _cut_arrays(run: Run, cut_futs: list) -> tuple:
    """Every document's label, representative bit, stage bits and fold similarity, from the cut
    partitions (documents in no component of two or more are their own clusters)."""
    n = run.n
    labels = np.arange(n, dtype=np.int64)
    reps = np.ones(n, dtype=bool)
    flags = np.zeros(n, dtype=np.uint8)
    sim = np.ones(n, dtype=np.float32) if run.cfg.clustering != "components" else None
    for f in cut_futs:
        c = run.client.submit(cut_columns, f, pure=False).result()
        d = c["docs"]
        labels[d], reps[d], flags[d] = c["labels"], c["reps"], c["flags"]
        if sim is not None:
            sim[d] = c["similarity"]
    return labels, reps, flags, sim


def finish_build(run: Run, cut_futs: list, *, metadata: Optional[Any], created_at: Optional[str],
                 output_dir: Optional[str] = None):
    """The BuildResult of the local build's finish, from the clusters cut on the workers, with
    ``stats["dask"]``; with ``output_dir``, the sharded result the workers write (:mod:`.output`)."""
    from ...linking.link import Linked
    from ...sketches.memo import ExactMemo
    from ..finish import build_stats, finish, make_build_info

    t0 = time.perf_counter()
    purity = distributed_purity(run, cut_futs)
    if output_dir is not None:
        info = make_build_info(run.n, 0, run.n_empty, run.stats, run.cut_stats or {}, purity)
        sharded = write_sharded(run, cut_futs, output_dir, build_info=info, metadata=metadata, created_at=created_at)
        sharded.stats = {**build_stats(run.stats), "dask": run.info}
        run.report.stage(f"done: {sharded.n_clusters:,} clusters")
        return sharded
    labels, reps, flags, sim = _cut_arrays(run, cut_futs)
    del cut_futs[:]  # the cut partitions may leave the workers now
    with_minhash = run.cfg.incremental and run.cfg.minhash is not None
    cols = _gather_columns(run, with_minhash)
    run.sketches = []
    run.info["sketch_task_seconds"] = round(cols.seconds, 3)
    sk = _sketches_of(run, cols, with_minhash)
    del cols
    run.timings["dask_gather"] = time.perf_counter() - t0
    linked = Linked(labels, flags, run.stats, ExactMemo(sk.n))
    res = finish(sk, run.cfg, linked, run.timings, aliases=np.zeros((0, 2), np.int64), raw_cluster=None,
                 metadata=metadata, created_at=created_at, cut=(labels, reps, flags, run.cut_stats or {}, sim),
                 purity=purity)
    # BuildStats has no "dask" key: the engine's own counts are an addition of this engine
    res.stats["dask"] = run.info
    run.report.stage(f"done: {res.n_clusters:,} clusters")
    return res
