"""Every store adapter against the real library (no mocks), through the shared contract.

Vendor tests skip (with the reason) only when the vendor package is not importable. Backend
calls of the refill test are printed (run with ``-s``) and asserted to be >= 2.
"""

from __future__ import annotations

import itertools
import subprocess
import sys

import numpy as np
import pytest
from contract import StoreContract, make_corpus, oracle_select
from needs import need_module

from diversify.errors import ConfigError, DuplicateIdError, InputError, InputTypeError
from diversify.online import Diversifier
from diversify.stores import NumpyStore

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
    qc = need_module("qdrant_client", "qdrant")
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


def _uuid_of(i) -> str:
    import uuid

    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"doc/{i}"))


@pytest.mark.integration
class TestQdrantStorePayloadIds(StoreContract):
    """Point ids are UUIDs; the ids the artifact knows live in the payload (``id_field``)."""

    def make_store(self, corpus):
        qc = need_module("qdrant_client", "qdrant")
        from qdrant_client import models

        from diversify.stores import QdrantStore

        client = qc.QdrantClient(":memory:")
        name = f"c{next(_names)}"
        client.create_collection(name, vectors_config=models.VectorParams(
            size=corpus.vectors.shape[1], distance=models.Distance.COSINE))
        client.upsert(name, points=[models.PointStruct(id=_uuid_of(i), vector=v.tolist(), payload={**p, "doc_id": i})
                                    for i, v, p in zip(corpus.ids, corpus.vectors, corpus.payloads)])
        return QdrantStore(client, name, id_field="doc_id")


@pytest.mark.integration
def test_qdrant_point_ids_are_matched_in_their_canonical_form():
    """Qdrant answers every UUID in its canonical form; the adapter sends exclusions and
    write-backs in that form whatever spelling the caller (or the artifact) used."""
    import uuid

    corpus = make_corpus(seed=5)
    qc = need_module("qdrant_client", "qdrant")
    from qdrant_client import models

    from diversify.stores import QdrantStore

    client = qc.QdrantClient(":memory:")
    client.create_collection("u", vectors_config=models.VectorParams(size=corpus.vectors.shape[1],
                                                                     distance=models.Distance.COSINE))
    client.upsert("u", points=[models.PointStruct(id=_uuid_of(i), vector=v.tolist())
                               for i, v in zip(corpus.ids, corpus.vectors)])
    store = QdrantStore(client, "u")
    top = [h.id for h in store.search(corpus.query, 12)]
    assert all(t == str(uuid.UUID(t)) for t in top)  # canonical, as Qdrant returns them
    spellings = [lambda u: u.upper(), lambda u: u.replace("-", ""), lambda u: "urn:uuid:" + u,
                 lambda u: "{" + u + "}", lambda u: uuid.UUID(u)]
    for mode in ("auto", "exclude", "grow"):
        store = QdrantStore(client, "u", **({} if mode == "auto" else {"refill": mode}))
        for spell in spellings:
            excluded = [spell(t) for t in top[:6]]
            got = [h.id for h in store.search(corpus.query, 6, exclude_ids=excluded + ["not-a-point-id", -3, True])]
            assert got == top[6:12], (mode, spell(top[0]), got)
    # write-back keyed by upper-case spellings reaches the canonical points
    cm = {_uuid_of(i).upper(): c for i, c in corpus.cluster_of.items()}
    assert store.write_clusters(cm, ids=list(cm)) == len(cm)
    for h in store.search(corpus.query, len(corpus.ids)):
        assert ("cluster_id" in (h.payload or {})) == (h.id.upper() in cm), h


def test_canonical_point_id_spells_ids_as_qdrant_does():
    import uuid

    from diversify.stores.qdrant import canonical_point_id

    u = uuid.uuid4()
    forms = [str(u), str(u).upper(), u.hex, f"urn:uuid:{u}", "{" + str(u) + "}", u]
    assert {canonical_point_id(x) for x in forms} == {str(u)}
    assert [canonical_point_id(x) for x in (7, np.int64(7), -1, True, "doc-1", 1.5, None)] == \
        [7, 7, None, None, None, None, None]


@pytest.mark.integration
def test_qdrant_auto_refill_is_grow_in_local_mode_and_the_switch_is_validated():
    corpus = make_corpus(seed=5)
    store, client, name = _qdrant_store(corpus)
    assert store.local and store.refill == "grow" and store.supports_exclude is False
    from diversify.stores import QdrantStore

    assert QdrantStore(client, name, refill="exclude").supports_exclude is True
    for bad in ("fast", None, 3):
        with pytest.raises(ConfigError, match="`refill` must be one of"):
            QdrantStore(client, name, refill=bad)
    for bad in (-1, 2.5, True, "10"):
        with pytest.raises(ConfigError, match="`max_exclude` must be an int >= 0"):
            QdrantStore(client, name, max_exclude=bad)


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
        chromadb = need_module("chromadb", "chroma")
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
        faiss = need_module("faiss", "faiss")
        from diversify.stores import FaissStore

        index = faiss.IndexFlatIP(corpus.vectors.shape[1])
        index.add(np.ascontiguousarray(corpus.vectors))
        return FaissStore(index, ids=corpus.ids, payloads=corpus.payloads)


@pytest.mark.integration
class TestFaissStoreL2IdMap(StoreContract):
    def make_store(self, corpus):
        faiss = need_module("faiss", "faiss")
        from diversify.stores import FaissStore

        index = faiss.IndexIDMap(faiss.IndexFlatL2(corpus.vectors.shape[1]))
        index.add_with_ids(np.ascontiguousarray(corpus.vectors), np.asarray(corpus.ids, dtype=np.int64))
        store = FaissStore(index)  # labels are the ids; no payloads until write_clusters
        assert store.scores_are == "distance"
        return store


def _faiss_index(corpus, spec: str):
    faiss = need_module("faiss", "faiss")
    x = np.ascontiguousarray(corpus.vectors)
    index = faiss.index_factory(x.shape[1], spec, faiss.METRIC_INNER_PRODUCT)
    index.train(x)
    return faiss, index, x


@pytest.mark.integration
class TestFaissStoreIVF(StoreContract):
    """IVF crashed at the first refill (selectors need SearchParametersIVF); with nprobe=1 of 4
    lists it is approximate, and short answers are widened until the index has no more."""

    exact = False

    def make_store(self, corpus):
        from diversify.stores import FaissStore

        faiss, index, x = _faiss_index(corpus, "IVF4,Flat")
        index.add(x)
        faiss.extract_index_ivf(index).nprobe = 1
        return FaissStore(index, ids=corpus.ids, payloads=corpus.payloads)


@pytest.mark.integration
class TestFaissStoreHNSW(StoreContract):
    exact = False

    def make_store(self, corpus):
        from diversify.stores import FaissStore

        _, index, x = _faiss_index(corpus, "HNSW8")
        index.hnsw.efSearch = 4  # small on purpose: short answers must be widened, not reported exhausted
        index.add(x)
        return FaissStore(index, ids=corpus.ids, payloads=corpus.payloads)


@pytest.mark.integration
class TestFaissStoreIDMapIVF(StoreContract):
    """An IndexIDMap around IVF: the selector sees external ids, the IVF parameters reach the IVF."""

    exact = False

    def make_store(self, corpus):
        from diversify.stores import FaissStore

        faiss, index, x = _faiss_index(corpus, "IVF4,Flat")
        index.nprobe = 2
        idmap = faiss.IndexIDMap(index)
        idmap.add_with_ids(x, np.asarray(corpus.ids, dtype=np.int64))
        return FaissStore(idmap, payloads=dict(zip(corpus.ids, corpus.payloads)))


@pytest.mark.integration
def test_faiss_index_without_selectors_falls_back_to_a_larger_k(caplog):
    """IndexLSH rejects search parameters: exclusion is given up (one WARNING) for a larger k, and
    the answers stay right; a user filter there is refused with the reason."""
    faiss = need_module("faiss", "faiss")
    from diversify.errors import StoreError
    from diversify.stores import FaissStore

    corpus = make_corpus(seed=5)
    index = faiss.IndexLSH(corpus.vectors.shape[1], 64)
    index.add(np.ascontiguousarray(corpus.vectors))
    store = FaissStore(index, ids=corpus.ids, refill="exclude")
    assert store.supports_exclude
    top = [h.id for h in store.search(corpus.query, 12)]
    with caplog.at_level("WARNING", logger="diversify"):
        got = [h.id for h in store.search(corpus.query, 6, exclude_ids=top[:6])]
        again = [h.id for h in store.search(corpus.query, 6, exclude_ids=top[:6])]
    assert got == again == top[6:12]
    assert store.refill == "grow" and not store.supports_exclude
    assert sum("rejected an exclusion filter" in r.getMessage() for r in caplog.records) == 1
    filtered = FaissStore(index, ids=corpus.ids, payloads=corpus.payloads, where=lambda p: True)
    with pytest.raises(StoreError, match="IndexLSH"):
        filtered.search(corpus.query, 3)


def test_where_filters_need_a_callable_and_faiss_payloads():
    from diversify.stores import FaissStore

    with pytest.raises(ConfigError, match="`where` must be a callable"):
        NumpyStore(np.eye(3), [1, 2, 3], where={"tenant": "a"})
    with pytest.raises(ConfigError, match="`where` filters on payloads"):
        FaissStore(object(), where=lambda p: True)


# ---------------------------------------------------------------------- lancedb


@pytest.mark.integration
class TestLanceDBStore(StoreContract):
    @pytest.fixture(autouse=True)
    def _tmp(self, tmp_path):
        self.tmp = tmp_path

    def make_store(self, corpus):
        lancedb = need_module("lancedb", "lancedb")
        from diversify.stores import LanceDBStore

        db = lancedb.connect(str(self.tmp / "lance"))
        table = db.create_table("docs", data=[{"id": i, "vector": v.tolist(), "title": p["title"]}
                                              for i, v, p in zip(corpus.ids, corpus.vectors, corpus.payloads)])
        return LanceDBStore(table, distance_type="cosine")


@pytest.mark.integration
def test_lancedb_string_ids_are_quoted(tmp_path):
    lancedb = need_module("lancedb", "lancedb")
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
