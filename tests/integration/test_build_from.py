"""``diversify.build_from(store)`` on real embedded stores (no mocks): Qdrant local path, Chroma
persistent and a Chroma server the session starts, LanceDB directory, Milvus Lite, FAISS, NumPy.

The oracle: the artifact of ``build_from`` is byte for byte ``diversify.build`` of the same ids,
vectors and texts in id order (the stores are filled in a shuffled order and read in small pages,
so the paging and the ordering are exercised). After ``write_clusters`` the store's own grouping
(Qdrant ``query_points_groups``, Milvus ``group_by_field``) returns one hit per cluster. Hostile
stores (no vectors, mixed dimensions, NaN / zero vectors, a missing text, an unknown collection,
a path of no store) give one error naming the parameter.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
from pathlib import Path

import numpy as np
import pytest
from conftest import CREATED_AT
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from needs import need_module

import diversify
from diversify.errors import ConfigError, InputError, InputTypeError, StoreError
from diversify.stores import FaissStore, NumpyStore

N, DIM, PAGE = 180, 16, 37




class Corpus:
    """60 groups of near-duplicate vectors and texts (1-5 members), in a shuffled store order."""

    def __init__(self, seed: int = 11):
        rng = np.random.default_rng(seed)
        vecs, texts = [], []
        words = [f"w{j}" for j in range(400)]
        while len(vecs) < N:
            center = rng.normal(size=DIM)
            base = " ".join(rng.choice(words, size=30))
            for k in range(min(int(rng.integers(1, 6)), N - len(vecs))):
                vecs.append(center + 0.003 * rng.normal(size=DIM))
                texts.append(base if k % 2 == 0 else base + " again")
        self.ids = list(range(1000, 1000 + N))               # id order = row order
        self.vectors = np.asarray(vecs, dtype=np.float32)
        self.texts = texts
        self.order = rng.permutation(N).tolist()             # the order the stores are filled in

    def rows(self):
        for j in self.order:
            yield self.ids[j], self.vectors[j], self.texts[j]

    def expected(self, tmp_path: Path, **kw) -> bytes:
        res = diversify.build(self.texts, ids=self.ids, vectors=self.vectors, created_at=CREATED_AT, **kw)
        return _bytes(res, tmp_path / "expected.dvf")


def _bytes(res, path: Path) -> bytes:
    res.save(path, overwrite=True)
    return path.read_bytes()


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return Corpus()


# ---------------------------------------------------------------------- the stores, filled


def _qdrant(corpus, tmp_path, *, name="docs"):
    qc = need_module("qdrant_client", "qdrant")
    from qdrant_client import models

    from diversify.stores import QdrantStore

    client = qc.QdrantClient(path=str(tmp_path / "qdrant"))
    client.create_collection(name, vectors_config=models.VectorParams(size=DIM, distance=models.Distance.DOT))
    client.upsert(name, points=[models.PointStruct(id=i, vector=v.tolist(), payload={"text": t})
                                for i, v, t in corpus.rows()], wait=True)
    return QdrantStore(client, name), client.close


def _chroma_collection(client, corpus, name="docs-from"):
    col = client.create_collection(name, embedding_function=None)
    rows = list(corpus.rows())
    col.add(ids=[f"r{i}" for i, _, _ in rows], embeddings=np.stack([v for _, v, _ in rows]),
            metadatas=[{"doc_id": i} for i, _, _ in rows], documents=[t for _, _, t in rows])
    return col


def _chroma(corpus, tmp_path):
    chromadb = need_module("chromadb", "chroma")
    from diversify.stores import ChromaStore

    client = chromadb.PersistentClient(path=str(tmp_path / "chroma"))
    return ChromaStore(_chroma_collection(client, corpus)), lambda: None


def _lancedb(corpus, tmp_path, *, name="docs"):
    lancedb = need_module("lancedb", "lancedb")
    from diversify.stores import LanceDBStore

    db = lancedb.connect(str(tmp_path / "lance"))
    table = db.create_table(name, data=[{"id": i, "vector": v.tolist(), "text": t} for i, v, t in corpus.rows()])
    return LanceDBStore(table), lambda: None


def _milvus_collection(client, name, dim=DIM):
    pymilvus = need_module("pymilvus", "milvus")
    dt = pymilvus.DataType
    schema = pymilvus.MilvusClient.create_schema(auto_id=False, enable_dynamic_field=True)
    schema.add_field("id", dt.INT64, is_primary=True)
    schema.add_field("vector", dt.FLOAT_VECTOR, dim=dim)
    schema.add_field("cluster_id", dt.INT64, default_value=-1)
    schema.add_field("is_representative", dt.BOOL, default_value=False)
    index = client.prepare_index_params()
    index.add_index("vector", index_type="FLAT", metric_type="COSINE")
    client.create_collection(name, schema=schema, index_params=index)


def _milvus(corpus, tmp_path):
    pymilvus = need_module("pymilvus", "milvus")
    need_module("milvus_lite", "milvus")
    from diversify.stores import MilvusStore

    client = pymilvus.MilvusClient(str(tmp_path / "milvus.db"))
    _milvus_collection(client, "docs")
    client.insert("docs", [{"id": i, "vector": v.tolist(), "text": t} for i, v, t in corpus.rows()])
    return MilvusStore(client, "docs"), client.close


def _faiss(corpus, tmp_path):
    faiss = need_module("faiss", "faiss")
    rows = list(corpus.rows())
    index = faiss.IndexIDMap2(faiss.IndexFlatIP(DIM))
    index.add_with_ids(np.stack([v for _, v, _ in rows]), np.asarray([i for i, _, _ in rows], dtype=np.int64))
    return FaissStore(index, payloads={i: {"text": t} for i, _, t in rows}), lambda: None


def _numpy(corpus, tmp_path):
    rows = list(corpus.rows())
    return NumpyStore(np.stack([v for _, v, _ in rows]), [i for i, _, _ in rows],
                      payloads=[{"text": t} for _, _, t in rows], metric="dot"), lambda: None


STORES = {"qdrant": _qdrant, "chroma": _chroma, "lancedb": _lancedb, "milvus": _milvus, "faiss": _faiss,
          "numpy": _numpy}
TEXT_FIELD = {"chroma": "#document"}


@pytest.mark.parametrize("kind", sorted(STORES))
def test_build_from_equals_build_of_the_same_documents(kind, corpus, tmp_path):
    store, close = STORES[kind](corpus, tmp_path)
    try:
        text_field = TEXT_FIELD.get(kind, "text")
        assert store._scan_size() == N  # the reader's buffer is sized from the store's own count
        res = diversify.build_from(store, text_field=text_field, batch_size=PAGE, created_at=CREATED_AT)
        assert _bytes(res, tmp_path / "from.dvf") == corpus.expected(tmp_path)
        assert res.n_clusters < N  # the planted copies were folded
        vectors_only = diversify.build_from(store, batch_size=PAGE, created_at=CREATED_AT)
        want = diversify.build(ids=corpus.ids, vectors=corpus.vectors, created_at=CREATED_AT)
        assert _bytes(vectors_only, tmp_path / "v.dvf") == _bytes(want, tmp_path / "v-want.dvf")
        # write back, then every document the store holds carries its artifact cluster
        assert store.write_clusters(res.cluster_map) == N
        again = diversify.build_from(store, text_field=text_field, batch_size=PAGE * 3, created_at=CREATED_AT)
        assert _bytes(again, tmp_path / "again.dvf") == corpus.expected(tmp_path)  # the write-back moved nothing
    finally:
        close()


def test_build_from_a_chroma_server(chroma_server, corpus, tmp_path):
    chromadb = need_module("chromadb", "chroma")
    from diversify.stores import ChromaStore

    client = chromadb.HttpClient(host=chroma_server.host, port=chroma_server.port)
    store = ChromaStore(_chroma_collection(client, corpus, name=f"from-{tmp_path.name}"[:60]))
    res = diversify.build_from(store, text_field="#document", batch_size=PAGE, created_at=CREATED_AT)
    assert _bytes(res, tmp_path / "from.dvf") == corpus.expected(tmp_path)
    assert store.write_clusters(res.cluster_map) == N
    got = store.collection.get(include=["metadatas"])
    cmap = res.cluster_map
    for meta in got["metadatas"]:
        assert meta["cluster_id"] == int(cmap.lookup([meta["doc_id"]])[0])


def test_qdrant_groups_return_one_hit_per_cluster(corpus, tmp_path):
    store, close = _qdrant(corpus, tmp_path)
    try:
        res = diversify.build_from(store, text_field="text", created_at=CREATED_AT)
        store.write_clusters(res.cluster_map)
        cmap = res.cluster_map
        for q in corpus.vectors[::40]:
            groups = store.client.query_points_groups("docs", query=q.tolist(), group_by="cluster_id", limit=12,
                                                      group_size=3, with_payload=True).groups
            assert len(groups) == 12
            for g in groups:
                assert len(g.hits) == 1 or all(h.payload["cluster_id"] == g.id for h in g.hits)
                assert {int(cmap.lookup([h.id])[0]) for h in g.hits} == {g.id}
            assert len({g.id for g in groups}) == len(groups)
            top = [g.hits[0] for g in groups]
            assert sum(bool(h.payload["is_representative"]) for h in top) >= 1
    finally:
        close()


def test_milvus_group_by_returns_one_hit_per_cluster(corpus, tmp_path):
    store, close = _milvus(corpus, tmp_path)
    try:
        res = diversify.build_from(store, text_field="text", created_at=CREATED_AT)
        assert store.write_clusters(res.cluster_map) == N
        cmap = res.cluster_map
        for q in corpus.vectors[::40]:
            hits = store.client.search("docs", [q.tolist()], limit=12, group_by_field="cluster_id",
                                       output_fields=["cluster_id"])[0]
            clusters = [h["entity"]["cluster_id"] for h in hits]
            assert len(clusters) == 12 and len(set(clusters)) == 12
            assert clusters == cmap.lookup([h["id"] for h in hits]).tolist()
    finally:
        close()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 60), page=st.integers(1, 70), str_ids=st.booleans(), seed=st.integers(0, 2**16),
       with_text=st.booleans())
def test_any_paging_and_store_order_gives_the_bytes_of_build(tmp_path, n, page, str_ids, seed, with_text):
    """Whatever the page size and the order a store holds its documents in, the artifact is
    diversify.build's of the same documents sorted by id."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 6)).astype(np.float32)
    dup = rng.random(n) < 0.4
    x[dup] = x[0] + 1e-4  # some near-copies of the first
    ids = [f"k{j:03d}" for j in range(n)] if str_ids else [int(j) * 7 for j in range(n)]
    texts = [f"text number {j % 5} with a few more words in it" for j in range(n)]
    order = rng.permutation(n)
    store = NumpyStore(x[order], [ids[j] for j in order], payloads=[{"t": texts[j]} for j in order], metric="dot")
    res = diversify.build_from(store, batch_size=page, text_field="t" if with_text else None, created_at=CREATED_AT)
    want = diversify.build(texts if with_text else None, ids=ids, vectors=x, created_at=CREATED_AT)
    assert _bytes(res, tmp_path / "a.dvf") == _bytes(want, tmp_path / "b.dvf")


@pytest.mark.parametrize("kind", ["qdrant", "chroma", "milvus"])
def test_the_store_is_read_in_pages_of_batch_size(kind, corpus, tmp_path):
    """Every read the scan makes asks for at most ``batch_size`` documents, and gets them."""
    store, close = STORES[kind](corpus, tmp_path)
    try:
        if kind == "milvus":
            owner, name, size = store.client, "query_iterator", lambda kw: kw["batch_size"]
        elif kind == "qdrant":
            owner, name, size = store.client, "scroll", lambda kw: kw["limit"]
        else:
            owner, name, size = store.collection, "get", lambda kw: kw["limit"]
        real, asked = getattr(owner, name), []

        def counted(*args, **kwargs):
            asked.append(size(kwargs))
            return real(*args, **kwargs)

        object.__setattr__(owner, name, counted)
        pages = [len(b.ids) for b in store.scan(batch_size=PAGE, text_field=TEXT_FIELD.get(kind, "text"))]
        assert set(asked) == {PAGE} and sum(pages) == N and max(pages) <= PAGE
        assert len(pages) == -(-N // PAGE)
    finally:
        close()


def test_reading_holds_one_page_beyond_what_it_keeps():
    """The memory of reading a store grows with the page, not with the collection: what the read
    allocates beyond what it keeps (ids, the float32 matrix, texts) is about one page's worth."""
    import tracemalloc

    qc = need_module("qdrant_client", "qdrant")
    from qdrant_client import models

    from diversify.stores import QdrantStore
    from diversify.stores.building import _read

    def overhead(n: int, page: int) -> float:
        x = np.random.default_rng(n).normal(size=(n, 64)).astype(np.float32)
        client = qc.QdrantClient(":memory:")
        client.create_collection("c", vectors_config=models.VectorParams(size=64, distance=models.Distance.DOT))
        for s in range(0, n, 2000):
            client.upsert("c", points=[models.PointStruct(id=i, vector=x[i].tolist(), payload={"text": "t" * 50})
                                       for i in range(s, min(n, s + 2000))])
        tracemalloc.start()
        try:
            kept = _read(QdrantStore(client, "c"), batch_size=page, vectors=True, text_field="text", progress=False)
            now, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert kept[1].shape == (n, 64)
        return peak - now

    small, large, whole = overhead(3000, 256), overhead(9000, 256), overhead(9000, 9000)
    assert large < 2 * small + 500_000, (small, large)    # 3x the collection: not 3x the read's overhead
    assert whole > 4 * large, (large, whole)               # one page of everything costs what paging saves


# ---------------------------------------------------------------------- hostile stores


def test_a_collection_without_vectors(tmp_path):
    qc = need_module("qdrant_client", "qdrant")
    from qdrant_client import models

    from diversify.stores import QdrantStore

    client = qc.QdrantClient(path=str(tmp_path / "q"))
    try:
        client.create_collection("bare", vectors_config={})
        client.upsert("bare", points=[models.PointStruct(id=i, vector={}, payload={"text": f"text {i}"})
                                      for i in range(5)])
        with pytest.raises(InputError, match=r"`store`: Qdrant collection 'bare' holds no vector for document 0"):
            diversify.build_from(QdrantStore(client, "bare"))
        res = diversify.build_from(QdrantStore(client, "bare"), text_field="text", vectors=False)
        assert res.n_docs == 5  # its texts alone build
        client.create_collection("named", vectors_config={"a": models.VectorParams(size=2, distance="Cosine"),
                                                          "b": models.VectorParams(size=3, distance="Cosine")})
        client.upsert("named", points=[models.PointStruct(id=1, vector={"a": [1, 0], "b": [0, 0, 1]})])
        with pytest.raises(ConfigError, match=r"`using`: .* named vectors \['a', 'b'\]"):
            diversify.build_from(QdrantStore(client, "named"))
        assert diversify.build_from(QdrantStore(client, "named", using="b")).n_docs == 1
        with pytest.raises(StoreError, match=r"`collection`: Qdrant has no collection 'nope'"):
            diversify.build_from(QdrantStore(client, "nope"))
    finally:
        client.close()
    lancedb = need_module("lancedb", "lancedb")
    from diversify.stores import LanceDBStore

    table = lancedb.connect(str(tmp_path / "l")).create_table("t", data=[{"id": 1, "text": "a b c"}])
    with pytest.raises(ConfigError, match=r"`vector_column`: LanceDB table 't' has no column 'vector'"):
        diversify.build_from(LanceDBStore(table))


def _ragged_table(tmp_path, rows):
    lancedb = need_module("lancedb", "lancedb")
    pa = importlib.import_module("pyarrow")
    from diversify.stores import LanceDBStore

    # a variable-length list column under another name than "vector" (LanceDB checks only that one's rows)
    schema = pa.schema([("id", pa.int64()), ("emb", pa.list_(pa.float32())), ("text", pa.string())])
    data = pa.table({"id": [r[0] for r in rows], "emb": [r[1] for r in rows], "text": [r[2] for r in rows]},
                    schema=schema)
    table = lancedb.connect(str(tmp_path / "ragged")).create_table("t", data=data, mode="overwrite")
    return LanceDBStore(table, vector_column="emb")


@pytest.mark.parametrize("page", [100, 2])  # mixed inside one page, and across pages
def test_mixed_dimensions(tmp_path, page):
    rows = [(i, [1.0, float(i), 0.5, 0.25], f"t {i}") for i in range(4)] + [(9, [1.0, 2.0], "t 9")]
    store = _ragged_table(tmp_path, rows)
    with pytest.raises(InputError, match=r"mixed dimensions: .*document 9 has 2"):
        diversify.build_from(store, batch_size=page)


def test_nan_and_zero_vectors(tmp_path):
    store = _ragged_table(tmp_path, [(1, [1.0, 0.0], "a"), (2, [float("nan"), 1.0], "b")])
    with pytest.raises(InputError, match=r"`store`: the vector of document 2 holds NaN"):
        diversify.build_from(store)
    store = _ragged_table(tmp_path, [(1, [1.0, 0.0], "a"), (2, [0.0, 0.0], "b")])
    with pytest.raises(InputError, match=r"`store`: the vector of document 2 is all zeros"):
        diversify.build_from(store)
    qc = need_module("qdrant_client", "qdrant")
    from qdrant_client import models

    from diversify.stores import QdrantStore

    client = qc.QdrantClient(path=str(tmp_path / "q"))
    try:
        client.create_collection("z", vectors_config=models.VectorParams(size=2, distance=models.Distance.DOT))
        client.upsert("z", points=[models.PointStruct(id=1, vector=[1.0, 0.0]), models.PointStruct(id=7, vector=[0, 0])])
        with pytest.raises(InputError, match=r"document 7 is all zeros"):
            diversify.build_from(QdrantStore(client, "z"))
    finally:
        client.close()


def test_a_text_field_missing_on_some_points(corpus, tmp_path):
    store, close = _qdrant(corpus, tmp_path)
    try:
        store.client.delete_payload("docs", keys=["text"], points=[1077], wait=True)
        with pytest.raises(InputError, match=r"`text_field`: document 1077 of Qdrant collection 'docs' has no 'text'"):
            diversify.build_from(store, text_field="text")
        store.client.set_payload("docs", payload={"text": 5}, points=[1078], wait=True)
        store.client.set_payload("docs", payload={"text": "back"}, points=[1077], wait=True)
        with pytest.raises(InputError, match=r"`text_field`: document 1078 .* holds int 5 in its 'text'"):
            diversify.build_from(store, text_field="text")
    finally:
        close()
    chromadb = need_module("chromadb", "chroma")
    from diversify.stores import ChromaStore

    col = chromadb.PersistentClient(path=str(tmp_path / "c")).create_collection("ccc", embedding_function=None)
    col.add(ids=["a", "b"], embeddings=[[1.0, 0.0], [0.0, 1.0]], documents=["one", None])
    with pytest.raises(InputError, match=r"`text_field`: document 'b' .* has no '#document'"):
        diversify.build_from(ChromaStore(col), text_field="#document")


def test_unknown_collections_and_locations(tmp_path):
    from diversify.stores.location import open_store

    with pytest.raises(ConfigError, match=r"`location` must name a vector store: .* \(no such path\)"):
        open_store(str(tmp_path / "nothing"), "docs")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match=r"`location` must name a vector store: .*directory of no known store"):
        open_store(str(tmp_path / "empty"), "docs")
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(ConfigError, match=r"a file of no known store"):
        open_store(str(tmp_path / "notes.txt"), "docs")
    lancedb = need_module("lancedb", "lancedb")
    lancedb.connect(str(tmp_path / "lance")).create_table("t", data=[{"id": 1, "vector": [1.0, 0.0]}])
    with pytest.raises(StoreError, match=r"`collection`: the LanceDB store .* has no collection 'docs'; it has 't'"):
        open_store(str(tmp_path / "lance"), "docs")
    chromadb = need_module("chromadb", "chroma")
    chromadb.PersistentClient(path=str(tmp_path / "chroma")).create_collection("ccc")
    with pytest.raises(StoreError, match=r"`collection`: the Chroma store .* has no collection 'docs'; it has 'ccc'"):
        open_store(str(tmp_path / "chroma"), "docs")
    pymilvus = need_module("pymilvus", "milvus")
    need_module("milvus_lite", "milvus")
    from diversify.stores import MilvusStore

    client = pymilvus.MilvusClient(str(tmp_path / "m.db"))
    try:
        with pytest.raises(StoreError, match=r"`collection`: Milvus has no collection 'docs'"):
            diversify.build_from(MilvusStore(client, "docs"))
    finally:
        client.close()
    with pytest.raises(StoreError, match=r"`collection`: the Milvus store .* has no collection 'docs'"):
        open_store(str(tmp_path / "m.db"), "docs").close()


def test_bad_arguments_fail_before_reading():
    store = NumpyStore(np.eye(3, dtype=np.float32), [1, 2, 3], payloads=[{"t": "a"}, {"t": "b"}, {}])
    with pytest.raises(InputTypeError, match=r"`store` must be a store adapter"):
        diversify.build_from(object())
    with pytest.raises(ConfigError, match=r"`batch_size` must be an int >= 1"):
        diversify.build_from(store, batch_size=0)
    with pytest.raises(ConfigError, match=r"`text_field` must be a non-empty string"):
        diversify.build_from(store, text_field="")
    with pytest.raises(ConfigError, match=r"with_vectors=False and text_field=None"):
        diversify.build_from(store, vectors=False)
    with pytest.raises(ConfigError, match=r"`config`: simhash=None"):
        diversify.build_from(store, config={"simhash": None})
    with pytest.raises(InputError, match=r"`text_field`: document 3 of the NumpyStore has no 't'"):
        diversify.build_from(store, text_field="t")


def test_an_empty_store_and_duplicate_ids(tmp_path):
    faiss = need_module("faiss", "faiss")
    with pytest.raises(InputError, match=r"`store`: the collection holds no documents"):
        diversify.build_from(FaissStore(faiss.IndexFlatIP(4)))
    with pytest.raises(InputError, match=r"`store`.*'a'"):
        diversify.build_from(_DupStore())


class _DupStore:
    """A store of one's own (any object with ``scan``) that names one document twice."""

    def scan(self, *, batch_size, with_vectors, text_field):
        from diversify.stores.scan import Batch

        yield Batch(["a", "b"], np.eye(2, dtype=np.float32), None)
        yield Batch(["a"], np.ones((1, 2), np.float32), None)


def test_an_ivf_index_gives_its_vectors_back_by_label():
    faiss = need_module("faiss", "faiss")
    rng = np.random.default_rng(3)
    x = rng.normal(size=(200, 8)).astype(np.float32)
    x[100:] = x[:100] + 0.001 * rng.normal(size=(100, 8)).astype(np.float32)
    ivf = faiss.IndexIVFFlat(faiss.IndexFlatL2(8), 8, 4)
    ivf.train(x)
    ivf.add(x)
    res = diversify.build_from(FaissStore(ivf), batch_size=64, created_at=CREATED_AT)
    assert res.n_clusters == 100
    want = diversify.build(vectors=x, created_at=CREATED_AT)
    assert res.cluster_map.lookup(list(range(200))).tolist() == want.cluster_map.lookup(list(range(200))).tolist()


def test_the_recipe_runs():
    """docs/recipes/from-a-store.md: its python blocks run as written (in a temporary directory)."""
    need_module("qdrant_client", "qdrant")
    doc = Path(__file__).resolve().parents[2] / "docs" / "recipes" / "from-a-store.md"
    blocks = re.findall(r"```python\n(.*?)```", doc.read_text(encoding="utf-8"), flags=re.S)
    assert blocks
    cwd = os.getcwd()
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        os.chdir(d)
        try:
            ns: dict = {"__name__": "recipe"}
            for j, code in enumerate(blocks):
                exec(compile(code, f"{doc.name}[block {j}]", "exec"), ns)
        finally:
            os.chdir(cwd)
