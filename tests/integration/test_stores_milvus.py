"""MilvusStore against a real Milvus Lite database in a temporary directory (no mocks).

One ``MilvusClient`` per module (Milvus Lite starts an embedded server on first use) and one
collection per test class or fixture. Skips, with the reason, only when pymilvus is not installed.
"""

from __future__ import annotations

import importlib
import importlib.util

import numpy as np
import pytest
from contract import StoreContract, make_cluster_map, make_corpus, oracle_select

from diversify.errors import ConfigError, InputError, InputTypeError, StoreError
from diversify.online import Diversifier

pytestmark = pytest.mark.integration

if importlib.util.find_spec("pymilvus") is None or importlib.util.find_spec("milvus_lite") is None:
    pytest.skip("pymilvus / milvus-lite are not installed (pip install 'diversify-retrieval[milvus]')",
                allow_module_level=True)

pymilvus = importlib.import_module("pymilvus")
DataType = pymilvus.DataType

from diversify.stores import MilvusStore  # noqa: E402
from diversify.stores.milvus import check_filter, compose_filter, exclusion_expr  # noqa: E402


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    c = pymilvus.MilvusClient(str(tmp_path_factory.mktemp("milvus") / "test.db"))
    yield c
    c.close()


def _collection(client, name, *, dim, pk="id", pk_type="int", metric="COSINE", fields=(), dynamic=True,
                cluster_fields=True, vector="vector"):
    """A collection with a FLAT index (exact ranking); ``fields``: extra ``(name, DataType, kwargs)``."""
    schema = pymilvus.MilvusClient.create_schema(auto_id=False, enable_dynamic_field=dynamic)
    if pk_type == "int":
        schema.add_field(pk, DataType.INT64, is_primary=True)
    else:
        schema.add_field(pk, DataType.VARCHAR, is_primary=True, max_length=256)
    schema.add_field(vector, DataType.FLOAT_VECTOR, dim=dim)
    for fname, ftype, kw in fields:
        schema.add_field(fname, ftype, **kw)
    if cluster_fields:
        schema.add_field("cluster_id", DataType.INT64, default_value=-1)
        schema.add_field("is_representative", DataType.BOOL, default_value=False)
    index = client.prepare_index_params()
    index.add_index(vector, index_type="FLAT", metric_type=metric)
    if client.has_collection(name):
        client.drop_collection(name)
    client.create_collection(name, schema=schema, index_params=index)


# ---------------------------------------------------------------------- the shared contract


class _MilvusContract(StoreContract):
    """One collection per class, built on first use and shared by the class's tests (writes are
    idempotent, so the contract's write-back test can share it)."""

    made: dict = {}

    @pytest.fixture(autouse=True)
    def _client(self, client):
        self.client = client

    def build(self, corpus, name):  # pragma: no cover - provided by the subclass
        raise NotImplementedError

    def make_store(self, corpus):
        name = type(self).__name__.lower()
        if name not in self.made:
            self.made[name] = self.build(corpus, name)
        return self.made[name]


class TestMilvusStore(_MilvusContract):
    """Int primary key = document id, COSINE, cluster fields declared (default -1)."""

    def build(self, corpus, name):
        _collection(self.client, name, dim=corpus.vectors.shape[1],
                    fields=[("title", DataType.VARCHAR, {"max_length": 64})])
        self.client.insert(name, [{"id": i, "vector": v.tolist(), "title": p["title"]}
                                  for i, v, p in zip(corpus.ids, corpus.vectors, corpus.payloads)])
        store = MilvusStore(self.client, name)
        assert store.scores_are == "similarity"
        return store


class TestMilvusStorePayloadIdL2(_MilvusContract):
    """Document id in a payload field (VARCHAR row keys), L2 metric, cluster fields dynamic."""

    def build(self, corpus, name):
        _collection(self.client, name, dim=corpus.vectors.shape[1], pk="row", pk_type="str", metric="L2",
                    fields=[("doc_id", DataType.INT64, {})], cluster_fields=False)
        self.client.insert(name, [{"row": f"row-{j}", "vector": v.tolist(), "doc_id": i, "title": p["title"]}
                                  for j, (i, v, p) in enumerate(zip(corpus.ids, corpus.vectors, corpus.payloads))])
        store = MilvusStore(self.client, name, id_field="doc_id")
        assert store.scores_are == "distance"
        return store


# ---------------------------------------------------------------------- filters are kept


def _tenant_corpus():
    """The contract corpus, every document in tenant "a" or "b" (alternating by rank, so every
    cluster straddles both tenants and refills are needed within one tenant)."""
    corpus = make_corpus(seed=11)
    rank = {i: r for r, i in enumerate(corpus.ranked_ids)}
    tenant = {i: "ab"[rank[i] % 2] for i in corpus.ids}
    return corpus, tenant


@pytest.fixture(scope="module")
def tenants(client):
    corpus, tenant = _tenant_corpus()
    name = "tenants"
    _collection(client, name, dim=corpus.vectors.shape[1],
                fields=[("tenant", DataType.VARCHAR, {"max_length": 8})])
    client.insert(name, [{"id": i, "vector": v.tolist(), "tenant": tenant[i]}
                         for i, v in zip(corpus.ids, corpus.vectors)])
    return corpus, tenant, name


def _queries(corpus, n, seed=3):
    rng = np.random.default_rng(seed)
    near = corpus.vectors[rng.integers(0, len(corpus.ids), size=n)]
    q = near + 0.05 * rng.normal(size=near.shape)
    return (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32)


@pytest.mark.parametrize("user_filter, allowed", [
    ('tenant == "a"', {"a"}),
    ("tenant in ['b']", {"b"}),
    ('tenant == "a" or tenant == "b" and tenant != "b"', {"a"}),  # `or` at the top: AND must bind outside it
])
def test_refills_keep_the_user_filter(client, tenants, user_filter, allowed):
    corpus, tenant, name = tenants
    store = MilvusStore(client, name, filter=user_filter)
    d = Diversifier(corpus.cluster_map, k=6, fetch_k=6, max_rounds=6)
    search = d.wrap(store)
    violations, refilled, returned = 0, 0, 0
    for q in _queries(corpus, 24):
        res = search(q)
        returned += len(res.ids)
        refilled += res.backend_calls >= 2
        violations += sum(tenant[i] not in allowed for i in res.ids)
        clusters = [corpus.cluster_of.get(i, ("own", i)) for i in res.ids]
        assert len(set(clusters)) == len(clusters), res.ids
        # exact: the diversified top-k over the tenant's own ranking
        ranked = [i for i in corpus.rank(q) if tenant[i] in allowed]
        assert res.ids == oracle_select(ranked, corpus.cluster_of, k=6), (res.ids, ranked[:12])
    assert violations == 0
    assert refilled >= 12, f"only {refilled} of 24 queries needed a refill: the test would not exercise it"
    assert returned == 24 * 6


def test_exclusion_binds_outside_an_or_filter(client, tenants):
    """A filter with a top-level `or`: the exclusion must apply to both of its branches."""
    corpus, tenant, name = tenants
    store = MilvusStore(client, name, filter='tenant == "a" or tenant == "b"')
    excluded = corpus.ranked_ids[:10]
    hits = store.search(corpus.query, 10, exclude_ids=excluded)
    assert [h.id for h in hits] == corpus.ranked_ids[10:20]


def test_filter_and_exclusion_with_string_keys(client):
    """VARCHAR keys with quotes, backslashes, newlines and expression syntax are excluded exactly;
    ids of the other kind (ints) cannot match a VARCHAR key and are ignored."""
    ids = ['a"b', "c\\d", "e\nf", "g'h", "ü\x00z", 'x" or id != "', "tab\there", "r\rs", "(", "plain"]
    name = "strkeys"
    _collection(client, name, dim=3, pk_type="str", fields=[("tenant", DataType.INT64, {})], cluster_fields=False)
    rows = [{"id": i, "vector": [1.0, 0.01 * j, 0.0], "tenant": j % 2} for j, i in enumerate(ids)]
    client.insert(name, rows)
    store = MilvusStore(client, name)
    q = [1.0, 0.0, 0.0]
    assert [h.id for h in store.search(q, 20)] == ids
    for excl in (ids[:5], ids[5:], [ids[0], ids[5], 17, ids[8]]):
        got = [h.id for h in store.search(q, 20, exclude_ids=excl)]
        assert got == [i for i in ids if i not in excl], (excl, got)
    filtered = MilvusStore(client, name, filter="tenant == 1")
    got = [h.id for h in filtered.search(q, 20, exclude_ids=[ids[1], ids[5]])]
    assert got == [i for j, i in enumerate(ids) if j % 2 == 1 and i not in (ids[1], ids[5])]


@pytest.mark.parametrize("bad", [
    'tenant == "a") or (tenant != "a"',
    "tenant in ['a'",
    'tenant == "a',
    "tenant == 'a\\'",
    ")(",
])
def test_unbalanced_filters_are_refused(bad):
    with pytest.raises(ConfigError, match="`filter`"):
        MilvusStore(object(), "c", filter=bad)


def test_invalid_filter_is_named_at_the_first_search(client, tenants):
    corpus, _, name = tenants
    for bad in ('tenant === "a"', "no_such_field > 3 and", "tenant == "):
        store = MilvusStore(client, name, filter=bad)
        with pytest.raises(StoreError, match="fix `filter`"):
            store.search(corpus.query, 3)


def test_balanced_filters_are_kept_verbatim():
    ok = 'title == "x)\\"(" and tags in ["]", "["] and (n > 1 or n < -1)'
    assert check_filter(ok) == ok
    assert compose_filter(ok, "id not in [1]") == f"({ok}) and id not in [1]"
    assert compose_filter(ok, "") == f"({ok})"
    assert compose_filter(None, "") == ""
    with pytest.raises(ConfigError, match="`filter`"):
        MilvusStore(object(), "c", filter={"tenant": "a"})


def test_exclusion_expression_by_kind():
    assert exclusion_expr("id", [1, 2], "int") == "id not in [1, 2]"
    assert exclusion_expr("id", [1, "a"], "int") == "id not in [1]"
    assert exclusion_expr("id", [1, "a"], "str") == 'id not in ["a"]'
    assert exclusion_expr("doc", [1, "a"], None) == 'doc not in [1] and doc not in ["a"]'
    assert exclusion_expr("id", [2**63, "\ud800"], None) == ""  # can never be stored
    for bad in (1.5, None, True, b"a"):
        with pytest.raises(InputTypeError, match="`exclude_ids`"):
            exclusion_expr("id", [1, bad], "int")


# ---------------------------------------------------------------------- hostile inputs


@pytest.fixture(scope="module")
def small(client):
    corpus = make_corpus(seed=5)
    name = "small"
    _collection(client, name, dim=corpus.vectors.shape[1])
    client.insert(name, [{"id": i, "vector": v.tolist()} for i, v in zip(corpus.ids, corpus.vectors)])
    return corpus, name


@pytest.mark.parametrize("k", [0, -1, True, 1.5, "3", None, 16385])
def test_bad_k_is_refused(client, small, k):
    corpus, name = small
    with pytest.raises(ConfigError, match="`k`"):
        MilvusStore(client, name).search(corpus.query, k)


def test_bad_queries_are_refused(client, small):
    corpus, name = small
    store = MilvusStore(client, name)
    with pytest.raises(InputError, match=r"`query` must have the store's dimension 16; got 8"):
        store.search(corpus.query[:8], 3)
    with pytest.raises(InputError, match="`query` must be finite"):
        store.search(np.full(16, np.nan), 3)
    with pytest.raises(InputTypeError, match="`query`"):
        store.search("how do I reset my password", 3)
    with pytest.raises(InputTypeError, match="`exclude_ids`"):
        store.search(corpus.query, 3, exclude_ids=[corpus.ids[0], 2.5])


def test_missing_collection_and_fields_are_named(client, small):
    corpus, name = small
    with pytest.raises(StoreError, match="`collection`: Milvus has no collection 'nope'"):
        MilvusStore(client, "nope").search(corpus.query, 3)
    with pytest.raises(StoreError, match="`collection`"):
        MilvusStore(client, "nope").write_clusters(corpus.cluster_map)
    with pytest.raises(ConfigError, match="`anns_field`.*no vector field 'emb'"):
        MilvusStore(client, name, anns_field="emb").search(corpus.query, 3)
    for bad in ("", None, 5):
        with pytest.raises(ConfigError, match="`collection`"):
            MilvusStore(client, bad)
    for bad in ("doc id", "a;b", 3):
        with pytest.raises(ConfigError, match="`id_field`"):
            MilvusStore(client, name, id_field=bad)
    with pytest.raises(ConfigError, match="`scores_are`"):
        MilvusStore(client, name, scores_are="higher")


def test_id_field_must_exist_and_be_carried(client):
    name = "idfield"
    _collection(client, name, dim=2, dynamic=False, fields=[("doc", DataType.VARCHAR,
                                                             {"max_length": 16, "nullable": True})])
    client.insert(name, [{"id": 1, "vector": [1.0, 0.0], "doc": "d1"}, {"id": 2, "vector": [0.9, 0.1], "doc": None}])
    with pytest.raises(ConfigError, match="`id_field`: collection 'idfield' has no field 'missing'"):
        MilvusStore(client, name, id_field="missing").search([1.0, 0.0], 2)
    store = MilvusStore(client, name, id_field="doc")
    assert [h.id for h in store.search([1.0, 0.0], 1)] == ["d1"]
    with pytest.raises(StoreError, match="`id_field`: Milvus row with id=2 .* has no 'doc' value"):
        store.search([1.0, 0.0], 2)


def test_write_clusters_refuses_fields_it_cannot_write(client):
    name = "nowrite"
    _collection(client, name, dim=2, dynamic=False, cluster_fields=False,
                fields=[("label", DataType.VARCHAR, {"max_length": 8, "default_value": ""}),
                        ("small", DataType.INT8, {"default_value": -1}),
                        ("flag", DataType.INT64, {"default_value": 0})])
    ids = list(range(1, 201))
    client.insert(name, [{"id": i, "vector": [1.0, i / 200]} for i in ids])
    cm = make_cluster_map(ids, [i % 150 for i in ids])  # cluster ids up to 149 > INT8
    store = MilvusStore(client, name)
    with pytest.raises(ConfigError, match="`cluster_field`: collection 'nowrite' has no field 'cluster_id'"):
        store.write_clusters(cm)
    with pytest.raises(ConfigError, match="`cluster_field`: field 'label' of 'nowrite' is VARCHAR"):
        store.write_clusters(cm, cluster_field="label", representative_field=None)
    with pytest.raises(ConfigError, match="`representative_field`: field 'flag' of 'nowrite' is INT64"):
        store.write_clusters(cm, cluster_field="small", representative_field="flag")
    with pytest.raises(ConfigError, match="`cluster_field`: field 'small' is INT8, too small"):
        store.write_clusters(cm, cluster_field="small", representative_field=None, batch_size=16)
    assert {r["small"] for r in client.query(name, filter="id > 0", output_fields=["small"])} == {-1}  # nothing
    for bad in ("id", "vector", "a b", ""):
        with pytest.raises(ConfigError, match="`cluster_field`"):
            store.write_clusters(cm, cluster_field=bad)
    for bad in (0, 16385, True, 2.0):
        with pytest.raises(ConfigError, match="`batch_size`"):
            store.write_clusters(cm, cluster_field="small", batch_size=bad)


# ---------------------------------------------------------------------- write-back


def test_write_clusters_subset_rerun_and_other_fields_kept(client):
    corpus = make_corpus(seed=9)
    name = "writeback"
    _collection(client, name, dim=corpus.vectors.shape[1],
                fields=[("title", DataType.VARCHAR, {"max_length": 64})])
    client.insert(name, [{"id": i, "vector": v.tolist(), "title": p["title"], "extra": j}
                         for j, (i, v, p) in enumerate(zip(corpus.ids, corpus.vectors, corpus.payloads))])
    store = MilvusStore(client, name)
    some = corpus.known_ids[:7] + [99999999]  # one id the store does not hold
    assert store.write_clusters(corpus.cluster_map, ids=some, batch_size=3) == 7
    rows = {r["id"]: r for r in client.query(name, filter="id > 0", output_fields=["*"])}
    for j, i in enumerate(corpus.ids):
        r = rows[i]
        assert r["title"] == corpus.payloads[j]["title"] and r["extra"] == j
        assert np.allclose(r["vector"], corpus.vectors[j], atol=1e-6)
        want = corpus.cluster_of[i] if i in some else -1
        assert r["cluster_id"] == want, (i, r)
    assert store.write_clusters(corpus.cluster_map, batch_size=5) == len(corpus.known_ids)
    assert store.write_clusters(corpus.cluster_map) == len(corpus.known_ids)  # nothing left to change
    rows = {r["id"]: r for r in client.query(name, filter="id > 0", output_fields=["cluster_id", "is_representative"])}
    assert {i: r["cluster_id"] for i, r in rows.items() if r["cluster_id"] >= 0} == corpus.cluster_of
    assert {i: r["is_representative"] for i, r in rows.items() if i in corpus.cluster_of} == corpus.is_representative


# ---------------------------------------------------------------------- Milvus's own group_by


def _planted(seed=21, dim=24):
    """40 clusters of near-duplicates, 1-30 members; the 4 largest surround the query."""
    rng = np.random.default_rng(seed)
    q = rng.normal(size=dim)
    q /= np.linalg.norm(q)
    vecs, groups = [], []
    for c in range(40):
        size = 30 if c < 4 else int(rng.integers(1, 6))
        center = q + (0.25 if c < 4 else 0.6 + 0.02 * c) * rng.normal(size=dim) / np.sqrt(dim) * 3
        for _ in range(size):
            vecs.append(center + 0.01 * rng.normal(size=dim))
            groups.append(c)
    v = np.asarray(vecs, dtype=np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    perm = rng.permutation(len(v))
    ids = [5000 + int(p) for p in perm]
    return ids, v, groups, q.astype(np.float32)


def test_diversify_against_milvus_group_by(client):
    ids, vecs, groups, q = _planted()
    cm = make_cluster_map(ids, groups)
    name = "groupby"
    _collection(client, name, dim=vecs.shape[1])
    client.insert(name, [{"id": i, "vector": v.tolist()} for i, v in zip(ids, vecs)])
    store = MilvusStore(client, name)
    assert store.write_clusters(cm) == len(ids)
    cluster = dict(zip(ids, cm.lookup(ids).tolist()))
    k = 10
    rng = np.random.default_rng(4)
    report = []
    for _ in range(8):
        qq = q + 0.05 * rng.normal(size=q.shape).astype(np.float32)
        plain = [h.id for h in store.search(qq, k)]
        ours = Diversifier(cm, k=k, fetch_k=k).wrap(store)(qq)
        by_field = Diversifier(cluster_field="cluster_id", k=k, fetch_k=k).wrap(store)(qq)
        native = client.search(name, [qq.tolist()], limit=k, group_by_field="cluster_id",
                               output_fields=["cluster_id"])[0]
        native_ids = [h["id"] for h in native]
        native_clusters = [h["entity"]["cluster_id"] for h in native]
        assert native_clusters == [cluster[i] for i in native_ids]  # it grouped on what we wrote
        assert len(set(native_clusters)) == len(native_clusters)
        assert by_field.ids == ours.ids
        assert len({cluster[i] for i in ours.ids}) == k
        # Milvus's groups are the best-ranked member of each cluster, in rank order: ours, as far as they go
        assert native_ids == ours.ids[:len(native_ids)]
        report.append((len({cluster[i] for i in plain}), len(set(native_clusters)), len(set(ours.ids)),
                       ours.backend_calls))
    print("distinct clusters in top-10 (plain, group_by, diversify, store calls):", report)
    assert all(p < k for p, *_ in report)  # the planted duplicates really crowd a plain top-10
