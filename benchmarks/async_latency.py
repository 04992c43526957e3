"""Per-query latency of the sync and async store adapters under 16 concurrent queries.

``python -m benchmarks.async_latency [--n 10000] [--dim 64] [--queries 160] [--concurrency 16]
[--stores qdrant,chroma] [--out file.json]``

A corpus of ``--n`` unit vectors in near-duplicate groups of 1-8 (the group is the cluster), the
queries next to a group each so that a diversified top-10 needs refills. Each store is loaded once
(Qdrant's local mode twice, the sync and the async client cannot share one; a Chroma server,
started here with ``chroma run`` unless ``--chroma HOST:PORT`` names one, is read by both
clients). Then, per store: ``wrap(sync adapter)`` one query at a time; ``wrap(sync adapter)``
from ``--concurrency`` threads; ``awrap(async adapter)`` with ``--concurrency`` queries in flight
on one event loop. Reported: per-query wall time (median, p90) and queries per second. Indicative
only on a shared machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from diversify.online import Diversifier

K = 10


def corpus(n: int, dim: int, queries: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    rows, groups, centers = [], [], []
    g = 0
    while len(rows) < n:
        center = rng.normal(size=dim)
        centers.append(center)
        for _ in range(int(rng.integers(1, 9))):
            rows.append(center + 0.05 * rng.normal(size=dim))
            groups.append(g)
        g += 1
    x = np.asarray(rows[:n], dtype=np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    q = np.asarray([centers[int(i)] + 0.3 * rng.normal(size=dim) for i in rng.integers(0, g, size=queries)],
                   dtype=np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    ids = list(range(n))
    return x, ids, {i: grp for i, grp in zip(ids, groups[:n])}, q


def _stats(lat: list[float], wall: float) -> dict[str, Any]:
    lat_ms = sorted(v * 1e3 for v in lat)
    return {"p50_ms": round(statistics.median(lat_ms), 2), "p90_ms": round(lat_ms[int(0.9 * (len(lat_ms) - 1))], 2),
            "qps": round(len(lat) / wall, 1), "queries": len(lat)}


def run_sync(search, queries, workers: int) -> dict[str, Any]:
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
    return _stats(lat, time.perf_counter() - t0)


async def run_async(search, queries, concurrency: int) -> dict[str, Any]:
    sem = asyncio.Semaphore(concurrency)

    async def one(q):
        async with sem:
            t = time.perf_counter()
            await search(q)
            return time.perf_counter() - t

    await search(queries[0])
    t0 = time.perf_counter()
    lat = await asyncio.gather(*(one(q) for q in queries))
    return _stats(list(lat), time.perf_counter() - t0)


def bench_qdrant(x, ids, clusters, queries, concurrency) -> dict[str, Any]:
    from qdrant_client import AsyncQdrantClient, QdrantClient, models

    from diversify.stores import AsyncQdrantStore, QdrantStore

    params = models.VectorParams(size=x.shape[1], distance=models.Distance.COSINE)
    points = [models.PointStruct(id=i, vector=v.tolist()) for i, v in zip(ids, x)]
    client = QdrantClient(":memory:")
    client.create_collection("docs", vectors_config=params)
    client.upload_points("docs", points, batch_size=2048)
    d = Diversifier(clusters, k=K)
    out = {"sync, one at a time": run_sync(d.wrap(QdrantStore(client, "docs")), queries, 1),
           f"sync, {concurrency} threads": run_sync(d.wrap(QdrantStore(client, "docs")), queries, concurrency)}

    async def go():
        aclient = AsyncQdrantClient(":memory:")
        await aclient.create_collection("docs", vectors_config=params)
        for s in range(0, len(points), 2048):
            await aclient.upsert("docs", points=points[s:s + 2048])
        return await run_async(d.awrap(AsyncQdrantStore(aclient, "docs", scores_are="similarity")), queries,
                               concurrency)

    out[f"async, {concurrency} in flight"] = asyncio.run(go())
    return out


def bench_chroma(x, ids, clusters, queries, concurrency, server) -> dict[str, Any]:
    import chromadb

    from diversify.stores import AsyncChromaStore, ChromaStore

    host, port = server
    client = chromadb.HttpClient(host=host, port=port)
    name = f"bench{int(time.time())}"
    col = client.create_collection(name, embedding_function=None, metadata={"hnsw:space": "cosine"})
    step = client.get_max_batch_size()
    for s in range(0, len(ids), step):
        col.add(ids=[str(i) for i in ids[s:s + step]], embeddings=x[s:s + step].tolist(),
                metadatas=[{"doc_id": i} for i in ids[s:s + step]])
    d = Diversifier(clusters, k=K)
    out = {"sync, one at a time": run_sync(d.wrap(ChromaStore(col)), queries, 1),
           f"sync, {concurrency} threads": run_sync(d.wrap(ChromaStore(col)), queries, concurrency)}

    async def go():
        aclient = await chromadb.AsyncHttpClient(host=host, port=port)
        acol = await aclient.get_collection(name, embedding_function=None)
        return await run_async(d.awrap(AsyncChromaStore(acol)), queries, concurrency)

    out[f"async, {concurrency} in flight"] = asyncio.run(go())
    client.delete_collection(name)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=10000)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--queries", type=int, default=160)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--stores", default="qdrant,chroma")
    p.add_argument("--chroma", default=None, help="HOST:PORT of a running Chroma server (else one is started)")
    p.add_argument("--out", default=None)
    a = p.parse_args(argv)
    x, ids, clusters, queries = corpus(a.n, a.dim, a.queries)
    results: dict[str, Any] = {"n": a.n, "dim": a.dim, "queries": a.queries, "concurrency": a.concurrency, "k": K}
    stores = a.stores.split(",")
    if "qdrant" in stores:
        results["qdrant local (in memory)"] = bench_qdrant(x, ids, clusters, queries, a.concurrency)
    if "chroma" in stores:
        server = None
        if a.chroma:
            host, _, port = a.chroma.rpartition(":")
            where = (host, int(port))
        else:  # the test suite's launcher: `chroma run` on a free loopback port
            sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
            from contract.chroma_server import start

            server = start(Path(tempfile.mkdtemp()) / "chroma")
            where = (server.host, server.port)
        try:
            results["chroma server (HTTP, loopback)"] = bench_chroma(x, ids, clusters, queries, a.concurrency, where)
        finally:
            if server is not None:
                server.stop()
    text = json.dumps(results, indent=2)
    print(text)
    if a.out:
        Path(a.out).write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
