"""Rows of the core library: ``Diversifier.wrap`` over the ``diversify.stores`` adapters, next to
each store's plain top-k and, where the store has one, its own grouping (Qdrant
``query_points_groups``, Milvus ``group_by_field``) on cluster ids written into the payload.

The tenant filter is the adapter's own filter argument (``query_filter``, ``where``,
``filter``); ``NumpyStore`` and ``FaissStore`` take none, so their rows run open only.
Milvus goes through ``diversify.stores.MilvusStore`` when the measured commit has it, else
through a search callable written here (``id not in [...]`` AND-ed to the tenant expression).
Store calls are counted on the vendor client (``query_points``, ``collection.query``,
``table.search``, ``index.search``, ``client.search``), not on the adapter, so a second round
trip inside one adapter call is counted too.
"""

from __future__ import annotations

import os
from typing import Optional

import numpy as np

from .systems import FETCH_K, K, Outcome, Setup, Skip, System, ids_of

COLLECTION = "chunks"


def _payloads(s: Setup) -> list[dict]:
    cids = s.cluster_map.lookup(s.corpus.ids).tolist()
    return [{"chunk_id": c.id, "tenant": c.tenant, "cluster_id": int(cid)} for c, cid in zip(s.corpus.chunks, cids)]


def _diversified(s: Setup, adapters: dict, store: str, filt: Optional[str], note: str = "") -> System:
    """``Diversifier(cluster_map, k=10).wrap(adapter)``, as a user writes it (the probe counts the
    store's own client calls, so the adapter's refill strategy is the one measured)."""
    import diversify

    wrapped = {t: diversify.Diversifier(s.cluster_map, k=K).wrap(a) for t, a in adapters.items()}

    def call(q, tenant):
        res = wrapped[tenant](s.embedder.query(q.text))
        return Outcome([int(h.id) for h in res], res.backend_calls, res.exhausted)

    return System("diversify", store, "Diversifier.wrap(adapter)", "diversify", call, filt, note)


def _plain(s: Setup, adapters: dict, store: str, filt: Optional[str]) -> System:
    def call(q, tenant):
        return Outcome([int(h.id) for h in adapters[tenant].search(s.embedder.query(q.text), K)])

    return System("diversify", store, "adapter.search top-10 (no diversify)", "baseline", call, filt)


def numpy_rows(s: Setup) -> list[System]:
    from diversify.stores import NumpyStore

    store = NumpyStore(s.vectors, s.corpus.ids, payloads=_payloads(s))
    s.probe.patch(store, "search")  # the adapter is the store
    return [_plain(s, {None: store}, "numpy", None), _diversified(s, {None: store}, "numpy", None)]


def faiss_rows(s: Setup) -> list[System]:
    try:
        import faiss
    except ImportError as e:
        raise Skip(f"faiss not importable: {e}") from None
    from diversify.stores import FaissStore

    index = faiss.IndexFlatIP(s.vectors.shape[1])
    index.add(np.ascontiguousarray(s.vectors))
    s.probe.patch(index, "search")
    store = {None: FaissStore(index)}  # labels are the chunk ids (added in id order)
    return [_plain(s, store, "FAISS IndexFlatIP", None), _diversified(s, store, "FAISS IndexFlatIP", None)]


def qdrant_client(s: Setup):
    """One local-mode Qdrant collection shared by the core and LangChain rows (payload: the
    LangChain layout ``page_content`` / ``metadata`` plus top-level ``chunk_id``, ``tenant``,
    ``cluster_id``)."""
    if "qdrant" in s.stores:
        return s.stores["qdrant"]
    from qdrant_client import QdrantClient, models

    client = QdrantClient(":memory:")
    client.create_collection(COLLECTION, vectors_config=models.VectorParams(size=s.vectors.shape[1],
                                                                           distance=models.Distance.COSINE))
    pays = _payloads(s)
    for a in range(0, len(s.corpus), 1000):
        points = [models.PointStruct(id=c.id, vector=s.vectors[c.id].tolist(),
                                     payload={**p, "page_content": c.text,
                                              "metadata": {"chunk_id": c.id, "tenant": c.tenant}})
                  for c, p in zip(s.corpus.chunks[a:a + 1000], pays[a:a + 1000])]
        client.upsert(COLLECTION, points=points, wait=True)
    for method in ("query_points", "query_points_groups"):
        s.probe.patch(client, method)
    s.stores["qdrant"] = client
    return client


def qdrant_tenant(tenant: Optional[str], key: str = "tenant"):
    from qdrant_client import models

    if tenant is None:
        return None
    return models.Filter(must=[models.FieldCondition(key=key, match=models.MatchValue(value=tenant))])


def qdrant_rows(s: Setup) -> list[System]:
    from diversify.stores import QdrantStore

    client = qdrant_client(s)
    adapters = s.per_tenant(lambda t: QdrantStore(client, COLLECTION, query_filter=qdrant_tenant(t)))

    def grouped(q, tenant):
        resp = client.query_points_groups(COLLECTION, query=s.embedder.query(q.text), group_by="cluster_id", limit=K, group_size=1,
                      query_filter=qdrant_tenant(tenant), with_payload=False)
        return Outcome([int(g.hits[0].id) for g in resp.groups])

    name = "Qdrant local (:memory:)"
    return [_plain(s, adapters, name, "QdrantStore(query_filter=...)"),
            _diversified(s, adapters, name, "QdrantStore(query_filter=...)"),
            System("Qdrant", name, "query_points_groups(group_by=cluster_id, group_size=1)", "peer", grouped,
                   "query_filter", "cluster ids written into the payload at upsert")]


def chroma_collection(s: Setup):
    """One Chroma collection (in-memory client, cosine space) shared by the core and LangChain rows."""
    if "chroma" in s.stores:
        return s.stores["chroma"]
    import chromadb

    client = chromadb.EphemeralClient()
    col = client.get_or_create_collection(f"chunks-{os.getpid()}-{len(s.corpus)}", metadata={"hnsw:space": "cosine"})
    pays = _payloads(s)
    for a in range(0, len(s.corpus), 2000):
        chunk = s.corpus.chunks[a:a + 2000]
        col.add(ids=[str(c.id) for c in chunk], embeddings=s.vectors[a:a + len(chunk)],
                documents=[c.text for c in chunk], metadatas=pays[a:a + len(chunk)])
    s.probe.patch(col, "query")
    s.stores["chroma"] = (client, col)
    return client, col


def chroma_rows(s: Setup) -> list[System]:
    from diversify.stores import ChromaStore

    _, col = chroma_collection(s)
    adapters = s.per_tenant(lambda t: ChromaStore(col, id_field="chunk_id", where=None if t is None else {"tenant": t}))
    name, how = "Chroma (in-memory, HNSW)", "ChromaStore(where=...)"
    return [_plain(s, adapters, name, how), _diversified(s, adapters, name, how)]


def _count_lancedb(s: Setup, table) -> None:
    """LanceDB runs a query when its builder is executed (``to_list``...), not in ``table.search``:
    count and time the execution (the builder's chained setters return the builder itself)."""
    make = table.search

    def search(*args, **kwargs):
        builder = make(*args, **kwargs)
        for name in ("to_list", "to_arrow", "to_pandas"):
            if callable(getattr(builder, name, None)):
                s.probe.patch(builder, name)
        return builder

    object.__setattr__(table, "search", search)


def lancedb_rows(s: Setup) -> list[System]:
    import lancedb
    import pyarrow as pa

    from diversify.stores import LanceDBStore

    db = lancedb.connect(os.path.join(s.workdir, "lancedb"))
    dim = s.vectors.shape[1]
    data = pa.table({"id": pa.array(s.corpus.ids, pa.int64()),
                     "vector": pa.FixedSizeListArray.from_arrays(pa.array(s.vectors.reshape(-1), pa.float32()), dim),
                     "tenant": pa.array([c.tenant for c in s.corpus.chunks])})
    table = db.create_table("chunks", data=data)
    _count_lancedb(s, table)
    adapters = s.per_tenant(lambda t: LanceDBStore(table, distance_type="cosine",
                                                   where=None if t is None else f"tenant = '{t}'"))
    name, how = "LanceDB (local, no ANN index)", "LanceDBStore(where=...)"
    return [_plain(s, adapters, name, how), _diversified(s, adapters, name, how)]


def _milvus_client(s: Setup):
    from pymilvus import DataType, MilvusClient

    client = MilvusClient(os.path.join(s.workdir, "milvus.db"))
    schema = client.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=s.vectors.shape[1])
    schema.add_field("tenant", DataType.VARCHAR, max_length=16)
    schema.add_field("cluster_id", DataType.INT64)
    params = client.prepare_index_params()
    params.add_index("vector", index_type="FLAT", metric_type="COSINE")
    client.create_collection(COLLECTION, schema=schema, index_params=params)
    pays = _payloads(s)
    for a in range(0, len(s.corpus), 2000):
        client.insert(COLLECTION, [{"id": p["chunk_id"], "vector": s.vectors[p["chunk_id"]].tolist(), "tenant": p["tenant"],
                                    "cluster_id": p["cluster_id"]} for p in pays[a:a + 2000]])
    client.flush(COLLECTION)  # seal the growing segments: searches are ~10x faster than on unflushed data
    client.load_collection(COLLECTION)
    s.probe.patch(client, "search")
    s.stores["milvus"] = client
    return client


class _MilvusSearch:
    """The fallback where the measured commit has no ``MilvusStore``: ``search(query, k, exclude_ids)``
    with ``id not in [...]`` AND-ed to the tenant expression."""

    supports_exclude = True

    def __init__(self, client, expr: Optional[str]):
        self.client, self.expr = client, expr

    def search(self, query, k, exclude_ids=None):
        from diversify.online import Hit

        parts = [p for p in (self.expr, f"id not in [{', '.join(str(int(i)) for i in exclude_ids)}]"
                             if exclude_ids else None) if p]
        res = self.client.search(COLLECTION, [list(map(float, query))], limit=k, filter=" and ".join(parts),
                                 output_fields=["tenant"])
        return [Hit(int(r["id"]), float(r["distance"]), r.get("entity")) for r in res[0]]


def milvus_rows(s: Setup) -> list[System]:
    try:
        import pymilvus  # noqa: F401
    except ImportError as e:
        raise Skip(f"pymilvus not importable: {e}") from None
    client = _milvus_client(s)
    expr = {t: None if t is None else f'tenant == "{t}"' for t in (None, *s.tenants)}
    try:
        from ..lib import milvus_store

        adapters = {t: milvus_store(client, COLLECTION, e) for t, e in expr.items()}
        how, note = "MilvusStore(filter=...)", ""
    except ImportError:
        adapters = {t: _MilvusSearch(client, e) for t, e in expr.items()}
        how, note = "search callable (filter + id not in)", "no MilvusStore at this commit: a search callable written here"

    def grouped(q, tenant):
        res = client.search(COLLECTION, [s.embedder.query(q.text)], limit=K, group_by_field="cluster_id",
                            filter=expr[tenant] or "", output_fields=["cluster_id"])
        return Outcome(ids_of(res[0], lambda r: r["id"]))

    name = "Milvus Lite"
    return [_plain(s, adapters, name, how), _diversified(s, adapters, name, how, note),
            System("Milvus", name, "search(group_by_field=cluster_id)", "peer", grouped, "filter",
                   "cluster ids written at insert")]


ROWS = (("numpy", numpy_rows), ("faiss", faiss_rows), ("qdrant", qdrant_rows), ("chroma", chroma_rows),
        ("lancedb", lancedb_rows), ("milvus", milvus_rows))
__all__ = ["ROWS", "FETCH_K", "qdrant_client", "qdrant_tenant", "chroma_collection"]
