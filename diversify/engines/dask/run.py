"""What every stage of a Dask build shares: the client, the config, the sketched partitions, the
edge tables found so far, the statistics, and the progress report."""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from ...config import BuildConfig
from ...linking.link import LinkStats

__all__ = ["Report", "Run", "Edges", "rows_of", "TARGET_EDGE_PARTITION_BYTES", "split_positions", "split_columns",
           "owner_split", "split_task", "PIECE_PRIORITY", "whole_rounds", "spread", "worker_addresses"]

#: target size of one partition of an edge table (bytes)
TARGET_EDGE_PARTITION_BYTES = 64 * 2**20
#: the scheduling priority of the tasks that take the pieces out of a split (:func:`split_task`);
#: every other task of a build has priority 0
PIECE_PRIORITY = 100


class Report:
    """Stage lines and per-partition progress bars on stderr when ``progress=True``."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.t0 = time.perf_counter()

    def stage(self, msg: str) -> None:
        if self.enabled:
            print(f"[diversify dask {time.perf_counter() - self.t0:7.1f}s] {msg}", file=sys.stderr, flush=True)

    def wait(self, futures: list, desc: str) -> None:
        if not self.enabled or not futures:
            return
        from distributed import as_completed

        try:
            from tqdm.auto import tqdm
        except ImportError:  # pragma: no cover
            return
        with tqdm(total=len(futures), desc=desc, unit="part", file=sys.stderr, leave=False) as bar:
            for _ in as_completed(futures):
                bar.update(1)


def rows_of(res: dict) -> int:
    """Edges in an edge table."""
    return int(np.asarray(res["u"]).size)


@dataclass
class Edges:
    """Futures of edge tables (dicts of int64 ``u``, ``v``, ``flagged``) found by the stages."""

    parts: list = field(default_factory=list)  # every edge table, for the components
    exact: list = field(default_factory=list)  # tables whose flagged documents get the exact bit
    minhash: list = field(default_factory=list)  # ... the MinHash bit
    exact_merged: int = 0  # exact copies (one edge each)
    forest_edges: int = 0  # MinHash forest edges, verified in buckets or decided exactly

    def clear(self) -> None:
        self.parts.clear()
        self.exact.clear()
        self.minhash.clear()


@dataclass
class Run:
    """One build: its client and config, and the sketched input partitions once stage 1 ran."""

    client: Any
    cfg: BuildConfig
    retries: int
    shuffle_method: Optional[str]
    report: Report
    workers: list = field(default_factory=list)  # the workers' addresses (:func:`worker_addresses`)
    sources: list = field(default_factory=list)  # input partitions (Delayed/Futures of Part)
    sketches: list = field(default_factory=list)  # Futures of sketch_part, one per source
    texts: list = field(default_factory=list)  # Futures of the texts kept for later stages (.texts), one per source
    offsets: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int64))  # global index of each part
    n_empty: int = 0
    stats: LinkStats = field(default_factory=LinkStats)
    info: dict = field(default_factory=dict)  # stats["dask"]
    timings: dict = field(default_factory=dict)
    cut_stats: Optional[dict] = None  # the counters of the cut into clusters (clique, star)
    cfg_json: dict = field(init=False)  # the config as it travels to the workers

    def __post_init__(self) -> None:
        self.cfg_json = self.cfg.model_dump(mode="json")

    @property
    def n_workers(self) -> int:
        return max(1, len(self.workers))

    @property
    def counts(self) -> np.ndarray:
        return np.diff(self.offsets)

    @property
    def n(self) -> int:
        return int(self.offsets[-1])

    @property
    def n_text(self) -> int:
        return self.n - self.n_empty

    def compute(self, tasks: list, desc: str) -> list:
        """Futures of ``tasks`` (Delayed), retried on failure; waits for them when reporting."""
        futs = self.client.compute(tasks, retries=self.retries)
        self.report.wait(futs, desc)
        return futs

    def gather(self, func, futures: list) -> list:
        """``func`` of every future's result, computed on the workers (only the results travel)."""
        return self.client.gather(self.client.map(func, futures, pure=False))


def worker_addresses(client) -> list:
    """The addresses of the cluster's workers when the build starts, sorted."""
    return sorted(client.scheduler_info().get("workers", {}))


def spread(workers: list, func: Callable, arg_lists: Sequence) -> list:
    """``func(*arg_lists[j])`` for each j as Delayed tasks, the receiving side of a shuffle: the j-th
    meant for worker ``j mod w`` (``allow_other_workers``: a worker that leaves, or one that has
    finished its share, may still take it). Each such task reads a piece from every sending task,
    so the bytes it needs are spread over all workers alike; Dask's placement, which favours the
    worker holding the most of them, ran every cut partition of a 5M build on one worker while
    the other waited (docs/dask.md, "Disk spill")."""
    from contextlib import nullcontext

    from dask import annotate, delayed

    out = []
    for j, args in enumerate(arg_lists):
        where = annotate(workers=[workers[j % len(workers)]], allow_other_workers=True) if workers else nullcontext()
        with where:
            out.append(delayed(func, pure=True)(*args))
    return out


def whole_rounds(q: int, n_workers: int) -> int:
    """``q`` rounded up to a multiple of the workers: partitions of about equal size then finish
    together (3 on 2 workers would leave one worker idle for a third of the stage)."""
    return max(1, n_workers) * max(1, math.ceil(q / max(1, n_workers)))


def split_positions(dest: np.ndarray, q: int) -> list:
    """The positions of the rows bound for each of ``q`` destinations (``dest`` in ``[0, q)``), each
    in row order: every shuffle of this engine splits its arrays this way on the sending worker. A
    stable sort of the destinations (numpy's radix sort below 2**16 destinations)."""
    d = np.asarray(dest).astype(np.uint16 if q < 1 << 16 else np.int64)
    order = np.argsort(d, kind="stable")
    bounds = np.searchsorted(d[order], np.arange(q + 1, dtype=np.int64))
    return [order[bounds[j]:bounds[j + 1]] for j in range(q)]


def split_columns(dest: np.ndarray, q: int, *cols: np.ndarray) -> Any:
    """Columns split by destination: per destination, the tuple of each column's rows bound there
    (row order kept); a single destination's tuple when ``q == 1`` (Dask's ``nout`` convention)."""
    pieces = tuple(tuple(c[sel] for c in cols) for sel in split_positions(dest, q))
    return pieces if q > 1 else pieces[0]


def owner_split(docs: np.ndarray, offsets: np.ndarray, *cols: np.ndarray) -> Any:
    """``docs`` (global indices) and columns aligned with it, split by the input partition that holds
    each document (``offsets``: the first global index of each partition, then the total)."""
    owner = np.searchsorted(offsets, docs, side="right") - 1
    return split_columns(owner, offsets.size - 1, docs, *cols)


def split_task(func, q: int, *args) -> list:
    """The ``q`` pieces of ``func(*args)`` as Delayed values, for the tasks of a shuffle to read:
    ``func`` returns a tuple of ``q`` pieces, or the one piece when ``q == 1`` (Dask's ``nout``
    convention). Each piece is taken out of the tuple by a ``getitem`` task, and those run ahead of
    every other ready task (:data:`PIECE_PRIORITY`): a split leaves its worker's memory as soon as
    its pieces are taken, and from then on each piece is held, spilled to disk and read back on its
    own. In Dask's default order a split stayed held, and spilled, until its last piece was taken,
    and a cut under memory pressure ran about ten times slower (docs/dask.md, "Disk spill")."""
    from dask import annotate, delayed

    made = delayed(func, nout=q if q > 1 else None, pure=True)(*args)
    if q == 1:
        return [made]
    with annotate(priority=PIECE_PRIORITY):
        return list(made)
