"""What every stage of a Dask build shares: the client, the config, the sketched partitions, the
edge tables found so far, the statistics, and the progress report."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from ...config import BuildConfig
from ...linking.link import LinkStats

__all__ = ["Report", "Run", "Edges", "rows_of", "TARGET_EDGE_PARTITION_BYTES", "split_positions", "split_columns",
           "owner_split"]

#: target size of one partition of an edge table (bytes)
TARGET_EDGE_PARTITION_BYTES = 64 * 2**20


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
    n_workers: int
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
