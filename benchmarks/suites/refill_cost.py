"""refill_cost: what a refetch costs per store, the exclusion pushed down vs a larger k, and the
bulk ``write_clusters`` rate.

A refetch must return ``k`` hits none of which were seen. It can push the seen ids down as the
store's filter (``refill="exclude"``) or ask for ``k + len(seen)`` and drop them
(``refill="grow"``). For each store adapter this times one store call each way, on a corpus of
``--n`` random unit vectors in ``--dim`` dimensions (planted near-duplicate groups of 1-8), the
excluded ids being the query's own top-L hits (what a refetch excludes), for several L, with and
without a tenant filter (a third of the corpus). Medians and 90th percentiles over ``--queries``
queries, in ms, after one warm-up call. Then the rate of ``write_clusters`` over the whole
corpus. The ``auto`` choice of each adapter (docs/online.md) comes from these numbers.

``python -m benchmarks run --suite refill_cost [--n 15000] [--dim 128] [--queries 20] [--stores a,b]``
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ..markdown import command, table
from . import Suite

SUITE = Suite(
    name="refill_cost",
    summary="per store adapter: a refetch with the seen ids pushed down as a filter vs a larger k, with and "
            "without a tenant filter (median/p90 ms); bulk write_clusters points/s",
    results=("refill_cost.json",), render="benchmarks.suites.refill_cost:render",
    peers=("faiss-cpu", "qdrant-client", "chromadb", "lancedb"),
    quick={"n": 2000, "queries": 3, "stores": "numpy,faiss-flat,qdrant-disk", "disk_points": 50},
    takes="~5 min")
K = 25
LENGTHS = (25, 100, 250, 470)


def add_arguments(p) -> None:
    p.add_argument("--n", type=int, default=15_000)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--queries", type=int, default=20)
    p.add_argument("--stores", default="", help="comma-separated subset of the stores")
    p.add_argument("--disk-points", type=int, default=1000, help="points for the on-disk Qdrant write rate")
    p.add_argument("--no-writes", action="store_true", help="skip the write_clusters rates")


def _builders(x, ids, tenants, tmp: str) -> dict[str, Callable[[bool], Any]]:
    """name -> build(filtered) -> adapter."""
    metas = [{"tenant": t, "doc_id": i} for i, t in zip(ids, tenants)]

    def numpy_store(filtered):
        from diversify.stores import NumpyStore

        return NumpyStore(x, ids, payloads=metas, where=(lambda p: p["tenant"] == "a") if filtered else None)

    def faiss_store(kind):
        def build(filtered):
            import faiss

            from diversify.stores import FaissStore

            d = x.shape[1]
            if kind == "flat":
                index = faiss.IndexFlatIP(d)
            elif kind == "hnsw":
                index = faiss.IndexHNSWFlat(d, 32, faiss.METRIC_INNER_PRODUCT)
            else:
                index = faiss.IndexIVFFlat(faiss.IndexFlatIP(d), d, 128, faiss.METRIC_INNER_PRODUCT)
                index.train(x)
                index.nprobe = 8
            index.add(x)
            return FaissStore(index, payloads=metas, where=(lambda p: p["tenant"] == "a") if filtered else None)
        return build

    cache: dict = {}

    def qdrant_store(where):
        def build(filtered):
            from qdrant_client import QdrantClient, models

            from diversify.stores import QdrantStore

            if where not in cache:
                client = QdrantClient(":memory:") if where == "memory" else QdrantClient(path=os.path.join(tmp, "q"))
                client.create_collection("c", vectors_config=models.VectorParams(size=x.shape[1],
                                                                                 distance=models.Distance.COSINE))
                for s in range(0, len(ids), 2000):
                    client.upsert("c", points=[models.PointStruct(id=i, vector=x[i].tolist(), payload=metas[i])
                                               for i in range(s, min(len(ids), s + 2000))], wait=True)
                cache[where] = client
            flt = models.Filter(must=[models.FieldCondition(key="tenant", match=models.MatchValue(value="a"))])
            return QdrantStore(cache[where], "c", query_filter=flt if filtered else None)
        return build

    def chroma_store(filtered):
        import chromadb

        from diversify.stores import ChromaStore

        if "chroma" not in cache:
            col = chromadb.EphemeralClient().create_collection("refillcost", embedding_function=None,
                                                               metadata={"hnsw:space": "cosine"})
            for s in range(0, len(ids), 5000):
                col.add(ids=[str(i) for i in ids[s:s + 5000]], embeddings=x[s:s + 5000],
                        metadatas=metas[s:s + 5000])
            cache["chroma"] = col
        return ChromaStore(cache["chroma"], where={"tenant": "a"} if filtered else None)

    def lancedb_store(filtered):
        import lancedb

        from diversify.stores import LanceDBStore

        if "lance" not in cache:
            import pyarrow as pa

            db = lancedb.connect(os.path.join(tmp, "lance"))
            data = pa.table({"id": pa.array(ids, pa.int64()), "tenant": tenants,
                             "vector": pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), x.shape[1])})
            cache["lance"] = db.create_table("docs", data=data)
        return LanceDBStore(cache["lance"], distance_type="cosine", where="tenant = 'a'" if filtered else None)

    return {"numpy": numpy_store, "faiss-flat": faiss_store("flat"), "faiss-hnsw": faiss_store("hnsw"),
            "faiss-ivf": faiss_store("ivf"), "qdrant-memory": qdrant_store("memory"),
            "chroma": chroma_store, "lancedb": lancedb_store}


def _ms(fn) -> float:
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1e3


def measure_store(store, queries) -> dict:
    out: dict = {}
    plain = [store._search(store._query(q), K, None) for q in queries]  # warm-up and the top hits
    base = [_ms(lambda q=q: store._search(store._query(q), K, None)) for q in queries]
    out["plain"] = _summary(base)
    for length in LENGTHS:
        tops = [[h.id for h in store._search(store._query(q), length, None)] for q in queries]
        ex = [_ms(lambda q=q, t=t: store._search(store._query(q), K, t)) for q, t in zip(queries, tops)]
        grow = [_ms(lambda q=q: store._search(store._query(q), K + length, None)) for q in queries]
        out[f"exclude_{length}"] = _summary(ex)
        out[f"grow_{length}"] = _summary(grow)
    del plain
    return out


def _summary(ms: list) -> dict:
    s = sorted(ms)
    return {"median_ms": round(statistics.median(s), 3), "p90_ms": round(s[int(0.9 * (len(s) - 1))], 3)}


def qdrant_disk_writes(x, ids, cm, tmp: str, n: int) -> dict:
    """Qdrant's local mode on disk commits each point to its SQLite file: timed on the first ``n``."""
    from qdrant_client import QdrantClient, models

    from diversify.stores import QdrantStore

    client = QdrantClient(path=os.path.join(tmp, "qdisk"))
    client.create_collection("c", vectors_config=models.VectorParams(size=x.shape[1], distance=models.Distance.COSINE))
    t = time.perf_counter()
    client.upsert("c", points=[models.PointStruct(id=i, vector=x[i].tolist()) for i in ids[:n]], wait=True)
    upsert = time.perf_counter() - t
    t = time.perf_counter()
    written = QdrantStore(client, "c").write_clusters(cm)
    s = time.perf_counter() - t
    client.close()
    return {"points": written, "seconds": round(s, 3), "points_per_s": round(written / s),
            "upsert_points_per_s": round(n / upsert)}


def _store_row(name: str, builders: dict, x, ids, cm, tmp: str, queries, args) -> dict:
    from ._stores import timed_write

    row: dict = {}
    if name == "qdrant-disk":  # search as in memory (the local mode searches in RAM); writes differ
        if not args.no_writes:
            row["write_clusters"] = qdrant_disk_writes(x, ids, cm, tmp, args.disk_points)
        return row
    for filtered in (False, True):
        row["tenant" if filtered else "no_filter"] = measure_store(builders[name](filtered), queries)
    if not args.no_writes:
        row["write_clusters"] = timed_write(builders[name](False), cm)
    return row


def run(args, ctx) -> list:
    from ..env import environment
    from ..paths import log, now, shown, write_json
    from ._stores import cluster_map, corpus

    x, ids, tenants, cluster_of = corpus(args.n, args.dim)
    rng = np.random.default_rng(1)
    queries = [x[int(i)] + 0.05 * rng.normal(size=x.shape[1]).astype(np.float32)
               for i in rng.integers(0, len(ids), args.queries)]
    results: dict = {"suite": "refill_cost", "command": ctx.command, "created": now(), "env": environment(),
                     "n": args.n, "dim": args.dim, "k": K, "queries": args.queries,
                     "loadavg_before": os.getloadavg(), "stores": {}}
    cm = None if args.no_writes else cluster_map(cluster_of)
    with tempfile.TemporaryDirectory() as tmp:
        builders = _builders(x, ids, tenants, tmp)
        for name in [s for s in args.stores.split(",") if s] or list(builders) + ["qdrant-disk"]:
            results["stores"][name] = row = _store_row(name, builders, x, ids, cm, tmp, queries, args)
            log(f"{name} {json.dumps(row)}")
    results["loadavg_after"] = os.getloadavg()
    path = write_json(ctx.results / "refill_cost.json", results)
    log(f"wrote {shown(path)}")
    return [path]


# --- RESULTS.md section

def _cell(s: dict | None) -> str:
    return "—" if not s else f"{s['median_ms']:.2f} / {s['p90_ms']:.2f}"


def render(d: dict) -> list[str]:
    first = next((r["no_filter"] for r in d["stores"].values() if r.get("no_filter")), {})
    lengths = [int(k.split("_")[1]) for k in first if k.startswith("exclude_")]
    rows = []
    for name, r in d["stores"].items():
        for mode in ("no_filter", "tenant"):
            m = r.get(mode)
            if m:
                rows.append([name, mode.replace("_", " "), _cell(m["plain"]),
                             *(f"{_cell(m[f'exclude_{n}'])} · {_cell(m[f'grow_{n}'])}" for n in lengths)])
    writes = [[name, r["write_clusters"]["points"], r["write_clusters"]["points_per_s"]]
              for name, r in d["stores"].items() if isinstance(r.get("write_clusters"), dict)]
    L = [f"## Refetch cost per store: exclusion pushed down vs a larger k ({d['n']:,} vectors, dim {d['dim']})", "",
         f"One store call for k={d['k']} after excluding the query's own top-L hits (*exclude*) vs asking for "
         f"k + L and dropping them (*grow*), median / p90 ms over {d['queries']} queries. Command: "
         f"`{command(d.get('command'), 'python -m benchmarks run --suite refill_cost')}`, {d.get('created')}.", ""]
    L += table(["store", "filter", "plain k", *(f"L={n}: exclude · grow" for n in lengths)],
               "lll" + "l" * len(lengths), rows)
    if writes:
        L += ["", *table(["store", "write_clusters points", "points/s"], "lrr", writes)]
    return L + [""]
