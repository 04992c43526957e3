"""Every store adapter against the real library (no mocks), through the shared contract.

Vendor tests skip (with the reason) only when the vendor package is not importable. Backend
calls of the refill test are printed (run with ``-s``) and asserted to be >= 2.
"""

from __future__ import annotations

import importlib.util
import itertools
import subprocess
import sys

import numpy as np
import pytest
from contract import StoreContract, make_corpus, oracle_select

from diversify.errors import ConfigError, DuplicateIdError, InputError, InputTypeError
from diversify.online import Diversifier
from diversify.stores import NumpyStore


def _need(module: str, extra: str):
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (pip install 'diversify-retrieval[{extra}]')")
    return importlib.import_module(module)


import importlib  # noqa: E402  (used by _need)

_names = itertools.count()


# ---------------------------------------------------------------------- numpy


class TestNumpyStore(StoreContract):
    def make_store(self, corpus):
        return NumpyStore(corpus.vectors, corpus.ids, payloads=corpus.payloads)


class TestNumpyStoreL2(StoreContract):
    def make_store(self, corpus):
        return NumpyStore(corpus.vectors, corpus.ids, payloads=corpus.payloads, metric="l2")


def test_numpy_store_rejects_bad_input():
    v = np.eye(3, dtype=np.float32)
    with pytest.raises(DuplicateIdError, match="unique"):
        NumpyStore(v, [1, 1, 2])
    with pytest.raises(InputError, match="finite"):
        NumpyStore(np.array([[np.nan, 1.0]]), [1])
    with pytest.raises(InputError, match="zero"):
        NumpyStore(np.zeros((2, 3)), [1, 2])
    with pytest.raises(ConfigError, match="metric"):
        NumpyStore(v, [1, 2, 3], metric="hamming")
    s = NumpyStore(v, [1, 2, 3])
    with pytest.raises(InputError, match="dimension 3"):
        s.search([1.0, 0.0], 1)
    with pytest.raises(InputError, match="finite"):
        s.search([np.nan, 0.0, 0.0], 1)
    with pytest.raises(ConfigError, match="k"):
        s.search([1.0, 0.0, 0.0], 0)
    with pytest.raises(InputTypeError, match="vector"):
        s.search("some text", 1)


def test_numpy_store_hits_are_read_only():
    s = NumpyStore(np.eye(3), ["a", "b", "c"], payloads=[{"x": 1}, {"x": 2}, {"x": 3}])
    h = s.search([1.0, 0.0, 0.0], 1)[0]
    with pytest.raises(TypeError):
        h.payload["x"] = 5
    with pytest.raises(ValueError):
        h.vector[0] = 5.0


# ---------------------------------------------------------------------- qdrant


def _qdrant_store(corpus, *, distance="Cosine"):
    qc = _need("qdrant_client", "qdrant")
    from qdrant_client import models

    from diversify.stores import QdrantStore

    client = qc.QdrantClient(":memory:")
    name = f"c{next(_names)}"
    client.create_collection(name, vectors_config=models.VectorParams(
        size=corpus.vectors.shape[1], distance=getattr(models.Distance, distance.upper())))
    client.upsert(name, points=[models.PointStruct(id=i, vector=v.tolist(), payload=p)
                                for i, v, p in zip(corpus.ids, corpus.vectors, corpus.payloads)])
    return QdrantStore(client, name), client, name


@pytest.mark.integration
class TestQdrantStore(StoreContract):
    def make_store(self, corpus):
        return _qdrant_store(corpus)[0]


@pytest.mark.integration
class TestQdrantStoreEuclid(StoreContract):
    def make_store(self, corpus):
        store = _qdrant_store(corpus, distance="Euclid")[0]
        assert store.scores_are == "distance"
        return store


@pytest.mark.integration
@pytest.mark.parametrize("n", [1, 2, 3])
def test_qdrant_native_grouping_is_the_oracle(n):
    """Our diversified top-k equals Qdrant's own exact `query_points_groups` over the payload."""
    corpus = make_corpus(seed=5)
    store, client, name = _qdrant_store(corpus)
    store.write_clusters(corpus.cluster_map)
    # Qdrant groups need a value in the group_by field: unknown docs get their own id as group.

    unknown = [i for i in corpus.ids if i not in corpus.cluster_of]
    for i in unknown:
        client.set_payload(name, payload={"group": f"own-{i}"}, points=[i])
    for i in corpus.known_ids:
        client.set_payload(name, payload={"group": f"c-{corpus.cluster_of[i]}"}, points=[i])
    k = 8
    groups = client.query_points_groups(name, group_by="group", query=corpus.query.tolist(),
                                        limit=k, group_size=n).groups
    native = [[p.id for p in g.hits] for g in groups]

    ours = Diversifier(corpus.cluster_map, k=k, max_per_cluster=n).wrap(store)(corpus.query, groups=True)
    assert [[h.id for h in g.hits] for g in ours.groups] == native
    assert len(native) == k and (n == 1 or sum(len(g) for g in native) > k)  # groups hold several members
    flat = Diversifier(corpus.cluster_map, k=k * n, max_per_cluster=n).wrap(store)(corpus.query)
    assert flat.ids == oracle_select(corpus.ranked_ids, corpus.cluster_of, k=k * n, n=n)


# ---------------------------------------------------------------------- chroma


@pytest.mark.integration
class TestChromaStore(StoreContract):
    exact = False  # HNSW (approximate) even for tiny collections; invariants only

    def make_store(self, corpus):
        chromadb = _need("chromadb", "chroma")
        from diversify.stores import ChromaStore

        client = chromadb.EphemeralClient()
        col = client.create_collection(f"contract-{next(_names)}", embedding_function=None,
                                       metadata={"hnsw:space": "cosine"})
        col.add(ids=[str(i) for i in corpus.ids], embeddings=corpus.vectors.tolist(),
                metadatas=[{"doc_id": i, "title": p["title"]} for i, p in zip(corpus.ids, corpus.payloads)])
        return ChromaStore(col, id_field="doc_id")


# ---------------------------------------------------------------------- faiss


@pytest.mark.integration
class TestFaissStore(StoreContract):
    def make_store(self, corpus):
        faiss = _need("faiss", "faiss")
        from diversify.stores import FaissStore

        index = faiss.IndexFlatIP(corpus.vectors.shape[1])
        index.add(np.ascontiguousarray(corpus.vectors))
        return FaissStore(index, ids=corpus.ids, payloads=corpus.payloads)


@pytest.mark.integration
class TestFaissStoreL2IdMap(StoreContract):
    def make_store(self, corpus):
        faiss = _need("faiss", "faiss")
        from diversify.stores import FaissStore

        index = faiss.IndexIDMap(faiss.IndexFlatL2(corpus.vectors.shape[1]))
        index.add_with_ids(np.ascontiguousarray(corpus.vectors), np.asarray(corpus.ids, dtype=np.int64))
        store = FaissStore(index)  # labels are the ids; no payloads until write_clusters
        assert store.scores_are == "distance"
        return store


# ---------------------------------------------------------------------- lancedb


@pytest.mark.integration
class TestLanceDBStore(StoreContract):
    @pytest.fixture(autouse=True)
    def _tmp(self, tmp_path):
        self.tmp = tmp_path

    def make_store(self, corpus):
        lancedb = _need("lancedb", "lancedb")
        from diversify.stores import LanceDBStore

        db = lancedb.connect(str(self.tmp / "lance"))
        table = db.create_table("docs", data=[{"id": i, "vector": v.tolist(), "title": p["title"]}
                                              for i, v, p in zip(corpus.ids, corpus.vectors, corpus.payloads)])
        return LanceDBStore(table, distance_type="cosine")


@pytest.mark.integration
def test_lancedb_string_ids_are_quoted(tmp_path):
    lancedb = _need("lancedb", "lancedb")
    from diversify.stores import LanceDBStore

    db = lancedb.connect(str(tmp_path))
    ids = ["a'b", "c", "d) OR (1=1", "e"]
    table = db.create_table("t", data=[{"id": i, "vector": [float(j), 1.0]} for j, i in enumerate(ids)])
    store = LanceDBStore(table)
    got = [h.id for h in store.search([0.0, 1.0], 4, exclude_ids=["a'b", "d) OR (1=1"])]
    assert sorted(got) == ["c", "e"]
    with pytest.raises(ConfigError):
        LanceDBStore(table, id_column="id; DROP")


# ---------------------------------------------------------------------- import budget


def test_vendor_sdks_load_only_on_use():
    code = (
        "import sys, diversify, diversify.online, diversify.stores\n"
        "from diversify.stores import NumpyStore, QdrantStore, ChromaStore, FaissStore, LanceDBStore, MilvusStore\n"
        "from diversify import select, Diversifier, Hit\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('numba', 'qdrant_client', 'chromadb', 'faiss', 'lancedb', 'pyarrow', 'llvmlite', 'pymilvus', "
        "'milvus_lite', 'grpc'))\n"
        "assert not bad, bad\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_missing_vendor_gives_pip_hint():
    code = (
        "import sys\n"
        "sys.modules['qdrant_client'] = None\n"  # simulate 'not installed'
        "from diversify.stores import QdrantStore\n"
        "from diversify.errors import MissingDependencyError\n"
        "try:\n"
        "    QdrantStore(object(), 'c').search([1.0], 1)\n"
        "except MissingDependencyError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "pip install 'diversify-retrieval[qdrant]'" in out.stdout, (out.stdout, out.stderr)


def test_missing_milvus_gives_pip_hint():
    code = (
        "import sys\n"
        "sys.modules['pymilvus'] = None\n"  # simulate 'not installed'
        "from diversify.stores import MilvusStore\n"
        "from diversify.errors import MissingDependencyError\n"
        "for call in (lambda s: s.search([1.0], 1), lambda s: s.write_clusters({})):\n"
        "    try:\n"
        "        call(MilvusStore(object(), 'c'))\n"
        "    except MissingDependencyError as e:\n"
        "        print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.count("pip install 'diversify-retrieval[milvus]'") == 2, (out.stdout, out.stderr)
