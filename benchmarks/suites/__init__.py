"""The suites, one module each, all run by ``python -m benchmarks run --suite NAME``.

A suite module defines ``SUITE`` (a :class:`Suite`: what it measures, the data and peers it
needs, its result files and their renderer, its ``--quick`` settings), ``add_arguments(parser)``
for its own options, ``run(args, ctx)``, which writes its JSON into ``ctx.results``, and the
renderer of its RESULTS.md section (suites that share one keep it in their helper module,
``_minhash.py``). Every measurement of the project is a suite named here: no stand-alone
scripts. Suite modules import only the standard library, numpy and the harness's formatter at
import time, so listing is cheap.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path

# Report order: RESULTS.md sections follow this list.
NAMES = ("build", "boilerplate", "scaling", "quality", "quality_real", "clique", "vectors", "embeddings", "simhash_families", "simhash_text",
         "online", "request_cost", "refill_cost", "async_latency", "write_rate", "build_from", "integrations", "milvus",
         "retrieval", "plots", "dask", "cli", "index", "index_postgres", "index_redis", "index_clique", "chunks", "serve")


@dataclass(frozen=True)
class Suite:
    name: str
    summary: str  # one line: what it measures
    results: tuple[str, ...]  # glob patterns under the results folder, each rendered by ``render``
    render: str  # "module:function" turning one result file's dict into markdown lines
    peers: tuple[str, ...] = ()  # tools it measures next to diversify (same run, same data)
    data: tuple[str, ...] = ()  # folders of the shared data it reads (skipped with a note when absent)
    quick: dict = field(default_factory=dict)  # option values of ``--quick``
    takes: str = ""  # rough duration of a full run on the 2-core machine


@dataclass(frozen=True)
class Context:
    """Where a run writes and how: ``results`` and ``plots`` folders, ``quick`` mode, the command."""

    results: Path
    plots: Path
    quick: bool = False
    command: str = ""


def module(name: str):
    if name not in NAMES:
        raise KeyError(f"unknown suite {name!r}; `python -m benchmarks list` shows: {', '.join(NAMES)}")
    return importlib.import_module(f"{__name__}.{name}")


def suite(name: str) -> Suite:
    return module(name).SUITE


def all_suites() -> list[Suite]:
    return [suite(n) for n in NAMES]
