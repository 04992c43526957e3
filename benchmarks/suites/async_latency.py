"""async_latency: per-query latency of the sync and async store adapters under concurrent queries.

A corpus of ``--n`` unit vectors in near-duplicate groups of 1-8 (the group is the cluster), the
queries next to a group each so that a diversified top-10 needs refills. Each store is loaded once
(Qdrant's local mode twice, the sync and the async client cannot share one; a Chroma server,
started here with ``chroma run`` unless ``--chroma HOST:PORT`` names one, is read by both
clients). Then, per store: ``wrap(sync adapter)`` one query at a time; ``wrap(sync adapter)``
from ``--concurrency`` threads; ``awrap(async adapter)`` with ``--concurrency`` queries in flight
on one event loop. The three modes run in turn, ``--repeats`` times (so a burst of load from
other jobs hits all of them). Reported per mode: per-query wall time from the query's start to
its answer (median and p90 over every query of every repeat) and queries per second (the median
repeat). Indicative only on a shared machine.

``python -m benchmarks run --suite async_latency [--n 10000] [--dim 64] [--queries 160] [--concurrency 16]
[--repeats 3] [--stores qdrant,chroma]``
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from ..markdown import command, table
from . import Suite

SUITE = Suite(
    name="async_latency",
    summary="sync vs async store adapters (Qdrant local, Chroma server) under concurrent queries: per-query "
            "p50/p90 ms and queries/s, one at a time, from threads, and in flight on one event loop",
    results=("async_latency.json",), render="benchmarks.suites.async_latency:render",
    peers=("qdrant-client", "chromadb"),
    quick={"n": 1000, "queries": 16, "concurrency": 4, "repeats": 1, "stores": "qdrant"}, takes="~5 min")
K = 10


def add_arguments(p) -> None:
    p.add_argument("--n", type=int, default=10000)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--queries", type=int, default=160)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--stores", default="qdrant,chroma")
    p.add_argument("--chroma", default=None, help="HOST:PORT of a running Chroma server (else one is started)")


def corpus(n: int, dim: int, queries: int, seed: int = 0):
    from ._stores import clustered_vectors

    rng = np.random.default_rng(seed)
    x, groups, centers = clustered_vectors(rng, n, dim)
    q = np.asarray([centers[int(i)] + 0.3 * rng.normal(size=dim)
                    for i in rng.integers(0, len(centers), size=queries)], dtype=np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    ids = list(range(n))
    return x, ids, {i: grp for i, grp in zip(ids, groups)}, q


def _stats(runs: list[tuple[list[float], float]]) -> dict[str, Any]:
    lat_ms = sorted(v * 1e3 for lat, _ in runs for v in lat)
    return {"p50_ms": round(statistics.median(lat_ms), 2), "p90_ms": round(lat_ms[int(0.9 * (len(lat_ms) - 1))], 2),
            "qps": round(statistics.median(len(lat) / wall for lat, wall in runs), 1), "queries": len(lat_ms)}


def _modes(sync_search, async_search, aloop, queries, concurrency: int, repeats: int) -> dict[str, Any]:
    """Each mode in turn, ``repeats`` times; ``async_search`` runs on ``aloop``."""
    names = ("sync, one at a time", f"sync, {concurrency} threads", f"async, {concurrency} in flight")
    runs: dict[str, list] = {n: [] for n in names}
    for _ in range(repeats):
        runs[names[0]].append(run_sync(sync_search, queries, 1))
        runs[names[1]].append(run_sync(sync_search, queries, concurrency))
        runs[names[2]].append(aloop.run_until_complete(run_async(async_search, queries, concurrency)))
    return {n: _stats(r) for n, r in runs.items()}


def run_sync(search, queries, workers: int) -> tuple[list[float], float]:
    def one(q):
        t = time.perf_counter()
        search(q)
        return time.perf_counter() - t

    search(queries[0])  # warm-up
    t0 = time.perf_counter()
    if workers == 1:
        lat = [one(q) for q in queries]
    else:
        with ThreadPoolExecutor(workers) as pool:
            lat = list(pool.map(one, queries))
    return lat, time.perf_counter() - t0


async def run_async(search, queries, concurrency: int) -> tuple[list[float], float]:
    sem = asyncio.Semaphore(concurrency)

    async def one(q):
        async with sem:
            t = time.perf_counter()
            await search(q)
            return time.perf_counter() - t

    await search(queries[0])
    t0 = time.perf_counter()
    lat = await asyncio.gather(*(one(q) for q in queries))
    return list(lat), time.perf_counter() - t0


def bench_qdrant(x, ids, clusters, queries, concurrency, repeats) -> dict[str, Any]:
    from qdrant_client import AsyncQdrantClient, QdrantClient, models

    from diversify.online import Diversifier
    from diversify.stores import AsyncQdrantStore, QdrantStore

    params = models.VectorParams(size=x.shape[1], distance=models.Distance.COSINE)
    points = [models.PointStruct(id=i, vector=v.tolist()) for i, v in zip(ids, x)]
    client = QdrantClient(":memory:")
    client.create_collection("docs", vectors_config=params)
    client.upload_points("docs", points, batch_size=2048)

    async def load():
        aclient = AsyncQdrantClient(":memory:")
        await aclient.create_collection("docs", vectors_config=params)
        for s in range(0, len(points), 2048):
            await aclient.upsert("docs", points=points[s:s + 2048])
        return aclient

    d = Diversifier(clusters, k=K)
    aloop = asyncio.new_event_loop()
    try:
        aclient = aloop.run_until_complete(load())
        return _modes(d.wrap(QdrantStore(client, "docs")),
                      d.awrap(AsyncQdrantStore(aclient, "docs", scores_are="similarity")), aloop, queries,
                      concurrency, repeats)
    finally:
        aloop.close()


def bench_chroma(x, ids, clusters, queries, concurrency, repeats, server) -> dict[str, Any]:
    import chromadb

    from diversify.online import Diversifier
    from diversify.stores import AsyncChromaStore, ChromaStore

    host, port = server
    client = chromadb.HttpClient(host=host, port=port)
    name = f"bench{int(time.time())}"
    col = client.create_collection(name, embedding_function=None, metadata={"hnsw:space": "cosine"})
    step = client.get_max_batch_size()
    for s in range(0, len(ids), step):
        col.add(ids=[str(i) for i in ids[s:s + step]], embeddings=x[s:s + step].tolist(),
                metadatas=[{"doc_id": i} for i in ids[s:s + step]])

    async def open_async():
        aclient = await chromadb.AsyncHttpClient(host=host, port=port)
        return await aclient.get_collection(name, embedding_function=None)

    d = Diversifier(clusters, k=K)
    aloop = asyncio.new_event_loop()
    try:
        acol = aloop.run_until_complete(open_async())
        return _modes(d.wrap(ChromaStore(col)), d.awrap(AsyncChromaStore(acol)), aloop, queries, concurrency,
                      repeats)
    finally:
        aloop.close()
        client.delete_collection(name)


def _chroma(a, data) -> dict[str, Any]:
    from ..servers import start_chroma

    server = None
    if a.chroma:
        host, _, port = a.chroma.rpartition(":")
        where = (host, int(port))
    else:  # `chroma run` on a free loopback port
        server = start_chroma(Path(tempfile.mkdtemp()) / "chroma")
        where = (server.host, server.port)
    try:
        return bench_chroma(*data, a.concurrency, a.repeats, where)
    finally:
        if server is not None:
            server.stop()


def run(a, ctx) -> list:
    from ..env import environment
    from ..paths import log, now, shown, write_json

    data = corpus(a.n, a.dim, a.queries)
    results: dict[str, Any] = {"suite": "async_latency", "command": ctx.command, "created": now(),
                               "env": environment(), "n": a.n, "dim": a.dim, "queries": a.queries,
                               "concurrency": a.concurrency, "k": K, "repeats": a.repeats, "stores": {}}
    stores = a.stores.split(",")
    if "qdrant" in stores:
        results["stores"]["qdrant local (in memory)"] = bench_qdrant(*data, a.concurrency, a.repeats)
    if "chroma" in stores:
        results["stores"]["chroma server (HTTP, loopback)"] = _chroma(a, data)
    path = write_json(ctx.results / "async_latency.json", results)
    log(f"wrote {shown(path)}")
    return [path]


# --- RESULTS.md section

def render(d: dict) -> list[str]:
    rows = [[store, mode, f"{r['p50_ms']:.2f}", f"{r['p90_ms']:.2f}", f"{r['qps']:.1f}", r["queries"]]
            for store, modes in d["stores"].items() for mode, r in modes.items()]
    L = [f"## Sync vs async adapters under {d['concurrency']} concurrent queries ({d['n']:,} vectors, dim {d['dim']})",
         "", f"k={d['k']}, {d['queries']} queries × {d['repeats']} repeats. Command: "
         f"`{command(d.get('command'), 'python -m benchmarks run --suite async_latency')}`, {d.get('created')}.", ""]
    return L + table(["store", "mode", "p50 ms", "p90 ms", "queries/s", "queries"], "llrrrr", rows) + [""]
