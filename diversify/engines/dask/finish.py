"""Stage 5, the artifact: the per-document columns are gathered partition by partition and handed
to the local build's own finish (:func:`diversify.engines.local.finish`: representatives, stage
flags, extras, the ClusterMap)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from ..._arrays import unique_sorted
from ...errors import ConfigError
from ...ids import check_ids, normalize_ids
from ...sketches.batch import Sketches
from ...stages import STAGE_EXACT, STAGE_MINHASH
from ...staging import check_keys
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


class _TextsAt(Sequence):
    """The texts of some documents, indexed by global document index (what the cut into clusters reads)."""

    def __init__(self, texts: dict):
        self._texts = texts

    def __getitem__(self, i):
        return self._texts[int(i)]

    def __len__(self) -> int:
        return len(self._texts)


def _take_texts(part, local: np.ndarray) -> list:
    return [part.texts[int(i)] for i in local]


def _texts_in_components(run: Run, components: np.ndarray) -> _TextsAt:
    """Texts of the documents in components of two or more: the only ones the cut into clusters compares
    (exactly, under verify="auto"), fetched from the input partitions that hold them."""
    from dask import delayed

    need = np.flatnonzero(np.bincount(components, minlength=run.n)[components] > 1)
    jobs = []
    for p in range(len(run.sources)):
        lo, hi = int(run.offsets[p]), int(run.offsets[p + 1])
        local = need[(need >= lo) & (need < hi)] - lo
        if local.size:
            jobs.append((lo, local, delayed(_take_texts, pure=True)(run.sources[p], local)))
    texts: dict = {}
    if jobs:
        futs = run.compute([j[2] for j in jobs], "texts for the cut into clusters")
        for (lo, local, _), got in zip(jobs, run.client.gather(futs)):
            texts.update(zip((local + lo).tolist(), got))
    return _TextsAt(texts)


def finish_build(run: Run, edges: Edges, cluster_ids: np.ndarray, *, metadata: Optional[Any],
                 created_at: Optional[str]):
    """The BuildResult of the local build's finish, with ``stats["dask"]``."""
    from ...linking.link import Linked
    from ...sketches.memo import ExactMemo
    from ...sketches.source import TextSource
    from ..finish import finish

    t0 = time.perf_counter()
    flags = _stage_flags(run, edges)
    edges.clear()  # the edge tables may leave the workers now
    guaranteed = run.cfg.clustering != "components"  # a cut verifies pairs
    with_minhash = (run.cfg.incremental or guaranteed) and run.cfg.minhash is not None
    cols = _gather_columns(run, with_minhash)
    run.sketches = []
    run.info["sketch_task_seconds"] = round(cols.seconds, 3)
    sk = _sketches_of(run, cols, with_minhash)
    del cols
    source: Optional[TextSource] = None
    if guaranteed and run.cfg.minhash is not None and run.cfg.minhash.verify in ("auto", "exact"):
        source = TextSource(_texts_in_components(run, cluster_ids), 0)
    if run.cfg.minhash is not None and run.n_text:
        run.stats.merged["minhash"] = int(run.n - unique_sorted(cluster_ids).size - edges.exact_merged)
    run.timings["dask_gather"] = time.perf_counter() - t0
    # the labels are a forest of depth one; no pair was checked from re-shingled texts here
    linked = Linked(cluster_ids, flags, run.stats, ExactMemo(sk.n))
    res = finish(sk, run.cfg, linked, run.timings, source=source, aliases=np.zeros((0, 2), np.int64),
                 raw_cluster=None, metadata=metadata, created_at=created_at)
    # BuildStats has no "dask" key: the engine's own counts are an addition of this engine
    res.stats["dask"] = run.info
    run.report.stage(f"done: {res.n_clusters:,} clusters")
    return res
