"""write_rate: the bulk ``write_clusters`` rate per store adapter, now and (``--baseline REV``) at
an earlier commit.

Each store is built fresh from the same ``--n`` unit vectors (planted near-duplicate groups of
1-8, the artifact's clusters) with a chunk-like payload (tenant, document id, ~1 KB of text), then
timed: the first ``write_clusters`` over every document (points/s), and a rerun with the same
artifact. With ``--baseline`` the adapter module of that commit (from the harness's export of the
commit, :mod:`benchmarks.snapshot`, loaded next to the measured one in this process) is timed on a
store built the same way, before the measured code, so both see the same machine load: compare the
two, not the absolute rates, on a shared machine. Qdrant's local mode on disk commits every point
to SQLite: it is timed on the first ``--disk-points`` points.

``python -m benchmarks run --suite write_rate [--n 15000] [--disk-points 1000] [--baseline REV] [--stores a,b]``
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import types
from pathlib import Path

from ..markdown import command, table
from . import Suite

SUITE = Suite(
    name="write_rate",
    summary="bulk write_clusters points/s per store adapter (first write and rerun), optionally next to the "
            "adapters of another commit in the same process",
    results=("write_rate.json",), render="benchmarks.suites.write_rate:render",
    peers=("faiss-cpu", "qdrant-client", "chromadb", "lancedb", "pymilvus"),
    quick={"n": 2000, "disk_points": 50, "stores": "numpy,faiss,qdrant-memory"}, takes="~5 min")
TEXT = "lorem ipsum dolor sit amet " * 40  # ~1 KB, like a chunk's text in its payload
#: store -> (adapter module, class)
ADAPTERS = {"numpy": ("numpy_store", "NumpyStore"), "faiss": ("faiss", "FaissStore"),
            "lancedb": ("lancedb", "LanceDBStore"), "qdrant-memory": ("qdrant", "QdrantStore"),
            "qdrant-disk": ("qdrant", "QdrantStore"), "chroma": ("chroma", "ChromaStore"),
            "milvus": ("milvus", "MilvusStore")}


def add_arguments(p) -> None:
    p.add_argument("--n", type=int, default=15_000)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--disk-points", type=int, default=1000, help="points for Qdrant's local mode on disk")
    p.add_argument("--baseline", help="also time the adapters of this commit (same process, before the measured code)")
    p.add_argument("--stores", default="", help=f"comma-separated subset of {','.join(ADAPTERS)}")


def adapter_at(rev: str, module: str, name: str):
    """The adapter class as commit ``rev`` wrote it (None when the module is the measured one's)."""
    import diversify.stores

    from ..snapshot import export

    _, snap = export(rev)
    old = (snap / "diversify" / "stores" / f"{module}.py").read_text()
    if old == (Path(diversify.stores.__file__).parent / f"{module}.py").read_text():
        return None
    mod = types.ModuleType(f"diversify.stores._at_{module}")
    mod.__package__ = "diversify.stores"
    sys.modules[mod.__name__] = mod  # dataclasses look their module up
    exec(compile(old, f"{rev}:diversify/stores/{module}.py", "exec"), mod.__dict__)
    return getattr(mod, name)


def _build(store: str, x, ids, tenants, tmp: str, cls):
    """A fresh store of ``store``'s kind holding every point, wrapped by adapter class ``cls``."""
    metas = [{"tenant": t, "doc_id": i, "text": TEXT} for i, t in zip(ids, tenants)]
    n, d = x.shape
    if store == "numpy":
        return cls(x, ids, payloads=metas)
    if store == "faiss":
        import faiss

        index = faiss.IndexFlatIP(d)
        index.add(x)
        return cls(index, payloads=metas)
    if store == "lancedb":
        import lancedb
        import pyarrow as pa

        db = lancedb.connect(tempfile.mkdtemp(dir=tmp))
        data = pa.table({"id": pa.array(ids, pa.int64()), "tenant": tenants, "text": [TEXT] * n,
                         "vector": pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), d)})
        return cls(db.create_table("docs", data=data), distance_type="cosine")
    if store.startswith("qdrant"):
        from qdrant_client import QdrantClient, models

        client = QdrantClient(":memory:") if store == "qdrant-memory" else QdrantClient(path=tempfile.mkdtemp(dir=tmp))
        client.create_collection("c", vectors_config=models.VectorParams(size=d, distance=models.Distance.COSINE))
        for s in range(0, n, 2000):
            client.upsert("c", points=[models.PointStruct(id=i, vector=x[i].tolist(), payload=metas[i])
                                       for i in range(s, min(n, s + 2000))], wait=True)
        return cls(client, "c")
    if store == "chroma":
        import chromadb

        col = chromadb.EphemeralClient().create_collection(f"rate{time.perf_counter_ns()}", embedding_function=None)
        for s in range(0, n, 5000):
            col.add(ids=[str(i) for i in ids[s:s + 5000]], embeddings=x[s:s + 5000], metadatas=metas[s:s + 5000])
        return cls(col)
    if store == "milvus":
        from pymilvus import DataType, MilvusClient

        client = MilvusClient(os.path.join(tempfile.mkdtemp(dir=tmp), "m.db"))
        schema = client.create_schema(auto_id=False)
        schema.add_field("id", DataType.INT64, is_primary=True)
        schema.add_field("vector", DataType.FLOAT_VECTOR, dim=d)
        schema.add_field("tenant", DataType.VARCHAR, max_length=16)
        schema.add_field("text", DataType.VARCHAR, max_length=4096)
        schema.add_field("cluster_id", DataType.INT64, nullable=True)
        schema.add_field("is_representative", DataType.BOOL, nullable=True)
        params = client.prepare_index_params()
        params.add_index("vector", index_type="FLAT", metric_type="COSINE")
        client.create_collection("c", schema=schema, index_params=params)
        for s in range(0, n, 2000):
            client.insert("c", [{"id": i, "vector": x[i].tolist(), "tenant": tenants[i], "text": TEXT}
                                for i in range(s, min(n, s + 2000))])
        client.flush("c")
        return cls(client, "c")
    raise ValueError(store)


def _store_row(store: str, data, cm, tmp: str, baseline: str | None) -> dict:
    import diversify.stores as current

    from ._stores import timed_write

    module, name = ADAPTERS[store]
    row: dict = {"points": len(data[1])}
    old = adapter_at(baseline, module, name) if baseline else None
    new_store = _build(store, *data, tmp, getattr(current, name))
    if old is not None:
        row["baseline"] = timed_write(_build(store, *data, tmp, old), cm)
    row["now"] = timed_write(new_store, cm)
    row["now_rerun"] = timed_write(new_store, cm)
    if baseline and old is None:
        row["baseline"] = "adapter unchanged"
    return row


def run(args, ctx) -> list:
    from ..env import environment
    from ..paths import log, now, shown, write_json
    from ._stores import cluster_map, corpus

    x, ids, tenants, cluster_of = corpus(args.n, args.dim)
    cm = cluster_map(cluster_of)
    results: dict = {"suite": "write_rate", "command": ctx.command, "created": now(), "env": environment(),
                     "n": args.n, "baseline": args.baseline, "loadavg_before": os.getloadavg(), "stores": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for store in [s for s in args.stores.split(",") if s] or list(ADAPTERS):
            k = args.disk_points if store == "qdrant-disk" else args.n
            results["stores"][store] = row = _store_row(store, (x[:k], ids[:k], tenants[:k]), cm, tmp, args.baseline)
            log(f"{store} {json.dumps(row)}")
    results["loadavg_after"] = os.getloadavg()
    path = write_json(ctx.results / "write_rate.json", results)
    log(f"wrote {shown(path)}")
    return [path]


# --- RESULTS.md section

def _rate(r) -> str:
    return r if isinstance(r, str) else f"{r['points_per_s']:,}" if r and r.get("points_per_s") else "—"


def render(d: dict) -> list[str]:
    rows = [[store, f"{r['points']:,}", _rate(r.get("now")), _rate(r.get("now_rerun")), _rate(r.get("baseline"))]
            for store, r in d["stores"].items()]
    base = f"at {d['baseline']}" if d.get("baseline") else "(no --baseline)"
    L = [f"## Bulk write_clusters per store ({d['n']:,} points)", "",
         f"Points per second of one `write_clusters` over every point, then again with the same artifact. Command: "
         f"`{command(d.get('command'), 'python -m benchmarks run --suite write_rate')}`, {d.get('created')}.", ""]
    return L + table(["store", "points", "points/s", "rerun points/s", f"points/s {base}"], "lrrrr", rows) + [""]
