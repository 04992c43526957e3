"""Bulk ``write_clusters`` rate per store adapter, now and (``--baseline REV``) at an earlier commit.

``python -m benchmarks.write_rate [--n 15000] [--disk-points 1000] [--baseline REV] [--stores a,b] [--out f.json]``

Each store is built fresh from the same ``--n`` unit vectors (planted near-duplicate groups of
1-8, the artifact's clusters) with a chunk-like payload (tenant, document id, ~1 KB of text), then
timed: the first ``write_clusters`` over every document (points/s), and a rerun with the same
artifact. With ``--baseline`` the adapter module of that commit (read with ``git show`` and
loaded next to the current one, in this process) is timed on a store built the same way,
alternating with the current code, so both see the same machine load: compare the two, not the
absolute rates, on a shared machine. Qdrant's local mode on disk commits every point to SQLite
(~20 ms each): it is timed on the first ``--disk-points`` points.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

from .refill_cost import cluster_map, corpus, timed_write

ROOT = Path(__file__).resolve().parents[1]
TEXT = "lorem ipsum dolor sit amet " * 40  # ~1 KB, like a chunk's text in its payload
#: store -> (adapter module, class)
ADAPTERS = {"numpy": ("numpy_store", "NumpyStore"), "faiss": ("faiss", "FaissStore"),
            "lancedb": ("lancedb", "LanceDBStore"), "qdrant-memory": ("qdrant", "QdrantStore"),
            "qdrant-disk": ("qdrant", "QdrantStore"), "chroma": ("chroma", "ChromaStore"),
            "milvus": ("milvus", "MilvusStore")}


def adapter_at(rev: str, module: str, name: str):
    """The adapter class as commit ``rev`` wrote it (None when its module is unchanged since)."""
    path = f"diversify/stores/{module}.py"
    old = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:{path}"], capture_output=True, text=True,
                         check=True).stdout
    if old == (ROOT / path).read_text():
        return None
    mod = types.ModuleType(f"diversify.stores._at_{module}")
    mod.__package__ = "diversify.stores"
    sys.modules[mod.__name__] = mod  # dataclasses look their module up
    exec(compile(old, f"{rev}:{path}", "exec"), mod.__dict__)
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=15_000)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--disk-points", type=int, default=1000, help="points for Qdrant's local mode on disk")
    ap.add_argument("--baseline", help="also time the adapters of this commit (same process, alternating)")
    ap.add_argument("--stores", default="", help=f"comma-separated subset of {','.join(ADAPTERS)}")
    ap.add_argument("--out", help="write the numbers as JSON here")
    args = ap.parse_args(argv)
    import diversify.stores as current

    x, ids, tenants, cluster_of = corpus(args.n, args.dim)
    cm = cluster_map(cluster_of)
    results: dict = {"n": args.n, "baseline": args.baseline, "loadavg_before": os.getloadavg(), "stores": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for store in [s for s in args.stores.split(",") if s] or list(ADAPTERS):
            module, name = ADAPTERS[store]
            k = args.disk_points if store == "qdrant-disk" else args.n
            sub = (x[:k], ids[:k], tenants[:k])
            row: dict = {"points": k}
            old = adapter_at(args.baseline, module, name) if args.baseline else None
            new_store = _build(store, *sub, tmp, getattr(current, name))
            if old is not None:
                row["baseline"] = timed_write(_build(store, *sub, tmp, old), cm)
            row["now"] = timed_write(new_store, cm)
            row["now_rerun"] = timed_write(new_store, cm)
            if args.baseline and old is None:
                row["baseline"] = "adapter unchanged"
            results["stores"][store] = row
            print(store, json.dumps(row), flush=True)
    results["loadavg_after"] = os.getloadavg()
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
