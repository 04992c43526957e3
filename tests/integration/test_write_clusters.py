"""``write_clusters`` on Qdrant (local mode, in memory and on disk) and Chroma writes only what
changed, in bulk (Qdrant's local mode on disk commits each point written to SQLite, and Chroma's
``update`` is slow per record: docs/online.md).

Against the real clients. Crafted from the write-back rules (docs/online.md, "Writing cluster ids
into the store"): a rerun with the same artifact writes nothing; a rebuilt artifact rewrites
exactly the documents whose cluster or representative changed; a stored value that compares equal
but is of another type (``True`` for cluster 1, ``1.0``, ``"1"``, ``1`` for a flag) is rewritten;
other payload keys are kept; the count returned is the documents carrying the artifact's values.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from contract import make_cluster_map

N = 60
IDS = list(range(N))
# cluster id = its first member's index, the representative: 0 | 1 2 | 3 4 5 | 6 7 8 ...
GROUPS = [0, 1, 1] + [2 + (j - 3) // 3 for j in range(3, N)]
REGROUPED = [j // 4 for j in range(N)]     # a rebuild: most documents change cluster or flag


def _vectors():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(N, 8)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


class Written:
    """The documents each write call sent (the vendor method, wrapped on the instance)."""

    def __init__(self, obj, name, count):
        self.n = 0
        real = getattr(obj, name)

        @functools.wraps(real)
        def wrapped(*args, **kwargs):
            self.n += count(*args, **kwargs)
            return real(*args, **kwargs)

        object.__setattr__(obj, name, wrapped)

    def take(self) -> int:
        n, self.n = self.n, 0
        return n


def _qdrant(where, tmp_path):
    qc = pytest.importorskip("qdrant_client")
    from qdrant_client import models

    from diversify.stores import QdrantStore

    client = qc.QdrantClient(":memory:") if where == "memory" else qc.QdrantClient(path=str(tmp_path / "q"))
    client.create_collection("c", vectors_config=models.VectorParams(size=8, distance=models.Distance.COSINE))
    client.upsert("c", points=[models.PointStruct(id=i, vector=v.tolist(), payload={"tenant": "t", "text": f"doc {i}"})
                               for i, v in zip(IDS, _vectors())], wait=True)
    written = Written(client, "batch_update_points",
                      lambda name, ops, **kw: sum(len(op.set_payload.points) for op in ops))

    def payload(i):
        return client.retrieve("c", [i], with_payload=True)[0].payload

    def set_raw(i, values):
        client.set_payload("c", payload=values, points=[i], wait=True)

    return QdrantStore(client, "c"), written, payload, set_raw


def _chroma(where, tmp_path):
    chromadb = pytest.importorskip("chromadb")
    from diversify.stores import ChromaStore

    col = chromadb.EphemeralClient().create_collection(f"write-{tmp_path.name}"[:60], embedding_function=None)
    col.add(ids=[str(i) for i in IDS], embeddings=_vectors(),
            metadatas=[{"doc_id": i, "tenant": "t", "text": f"doc {i}"} for i in IDS])
    written = Written(col, "update", lambda ids, metadatas, **kw: len(ids))

    def payload(i):
        return col.get(ids=[str(i)], include=["metadatas"])["metadatas"][0]

    def set_raw(i, values):
        col.update(ids=[str(i)], metadatas=[values])

    return ChromaStore(col), written, payload, set_raw


CASES = {"qdrant-memory": (_qdrant, "memory"), "qdrant-disk": (_qdrant, "disk"), "chroma": (_chroma, None)}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_rerun_writes_nothing_and_a_rebuild_writes_what_changed(case, tmp_path):
    build, where = CASES[case]
    store, written, payload, _ = build(where, tmp_path)
    first = make_cluster_map(IDS, GROUPS)
    assert store.write_clusters(first) == N and written.take() == N
    assert store.write_clusters(first) == N and written.take() == 0  # nothing changed
    second = make_cluster_map(IDS, REGROUPED, fingerprint="rebuilt")
    old = dict(zip(IDS, zip(first.lookup(IDS).tolist(), first.is_representative.tolist())))
    new = dict(zip(IDS, zip(second.lookup(IDS).tolist(), second.is_representative.tolist())))
    changed = sum(old[i] != new[i] for i in IDS)
    assert 0 < changed < N
    assert store.write_clusters(second) == N and written.take() == changed
    for i in (0, 7, N - 1):
        p = payload(i)
        assert (p["cluster_id"], p["is_representative"]) == new[i] and p["tenant"] == "t" and p["text"] == f"doc {i}"


# (label, document, stored value): equal to the artifact's under == but of another type; document
# 1 is cluster 1's representative, document 2 its other member
LOOKALIKES = [("True for cluster 1", 2, {"cluster_id": True}), ("1.0 for cluster 1", 2, {"cluster_id": 1.0}),
              ("'1' for cluster 1", 2, {"cluster_id": "1"}), ("1 for the flag True", 1, {"is_representative": 1}),
              ("0 for the flag False", 2, {"is_representative": 0})]


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("label,doc,stored", LOOKALIKES, ids=[x[0] for x in LOOKALIKES])
def test_a_lookalike_value_is_rewritten(case, label, doc, stored, tmp_path):
    build, where = CASES[case]
    store, written, payload, set_raw = build(where, tmp_path)
    cm = make_cluster_map(IDS, GROUPS)
    assert cm.lookup([1, 2]).tolist() == [1, 1] and cm.is_representative[:3].tolist() == [True, True, False]
    store.write_clusters(cm)
    set_raw(doc, stored)
    written.take()
    assert store.write_clusters(cm) == N
    assert written.take() == 1, label
    p = payload(doc)
    assert (p["cluster_id"], p["is_representative"]) == (1, doc == 1)
    assert type(p["cluster_id"]) is int and type(p["is_representative"]) is bool
