"""`Diversifier`: refetch, exhaustion, cursor, hot reload, async, select_items, stats."""

from __future__ import annotations

import asyncio
import copy
import subprocess
import sys
import threading

import numpy as np
import pytest
from contract import make_cluster_map, make_corpus, oracle_select

from diversify import Diversifier, Hit, load
from diversify.errors import ArtifactError, ConfigError, InputError, InputTypeError, StoreError
from diversify.stores import NumpyStore


class CountingSearch:
    """A plain search callable over a fixed ranking; records every call."""

    def __init__(self, ranked, *, exclusion=True):
        self.ranked = list(ranked)
        self.calls = []
        self.exclusion = exclusion

    def __call__(self, query, k, exclude_ids=None):
        self.calls.append((k, None if exclude_ids is None else list(exclude_ids)))
        ex = set(exclude_ids or ())
        return [(i, 1.0 - j / 1000, {"pos": j}) for j, i in enumerate(self.ranked) if i not in ex][:k]


@pytest.fixture
def corpus():
    return make_corpus(seed=3)


# ---------------------------------------------------------------------- refetch


def test_refill_with_exclusion_reports_backend_calls(corpus):
    search = CountingSearch(corpus.ranked_ids)
    d = Diversifier(corpus.cluster_map, k=8, fetch_k=8, max_rounds=5, max_exclude_members=0)
    res = d.wrap(search)("q")
    assert res.ids == oracle_select(corpus.ranked_ids, corpus.cluster_of, k=8)
    assert res.backend_calls == len(search.calls) >= 2 and res.rounds == res.backend_calls - 1
    assert not res.short and not res.exhausted
    # every refetch excludes everything seen before, and asks for more each round
    seen = []
    for (k, excl), nxt in zip(search.calls, search.calls[1:]):
        seen += [i for i in corpus.ranked_ids if i not in set(seen)][:k]
        assert set(nxt[1]) == set(seen)
    asks = [k for k, _ in search.calls]
    assert asks == sorted(asks) and asks[0] == 8


def test_refill_without_exclusion_asks_for_a_larger_k(corpus):
    ranked = corpus.ranked_ids
    calls = []

    def search(query, k):  # two parameters: no exclusion support
        calls.append(k)
        return [Hit(i, 1.0 - j / 1000) for j, i in enumerate(ranked)][:k]

    res = Diversifier(corpus.cluster_map, k=8, fetch_k=8, max_rounds=5).wrap(search)("q")
    assert res.ids == oracle_select(ranked, corpus.cluster_of, k=8)
    assert calls == [8 * 2 ** r for r in range(len(calls))] and len(calls) >= 2
    assert res.backend_calls == len(calls)


def test_first_fetch_enough_means_one_call(corpus):
    search = CountingSearch(corpus.ranked_ids)
    res = Diversifier(corpus.cluster_map, k=2).wrap(search)("q")
    assert res.backend_calls == 1 and res.rounds == 0 and len(res.hits) == 2


def test_exhausted_store_returns_fewer_and_says_so(corpus):
    search = CountingSearch(corpus.ranked_ids)
    res = Diversifier(corpus.cluster_map, k=100, max_rounds=10).wrap(search)("q")
    assert len(res.hits) == corpus.distinct_available(1) < 100
    assert res.short and res.exhausted


def test_round_budget_stops_early_without_claiming_exhaustion(corpus):
    search = CountingSearch(corpus.ranked_ids)
    res = Diversifier(corpus.cluster_map, k=20, fetch_k=20, max_rounds=0).wrap(search)("q")
    assert res.backend_calls == 1 and res.short and not res.exhausted
    assert res.ids == oracle_select(corpus.ranked_ids[:20], corpus.cluster_of, k=20)


def test_default_fetch_k_from_k_and_n():
    assert Diversifier(k=10, fold_threshold=0.9).fetch_k == 25
    assert Diversifier(k=10, max_per_cluster=2, fold_threshold=0.9).fetch_k == 20


def test_store_adapter_passed_directly_and_groups(corpus):
    store = NumpyStore(corpus.vectors, corpus.ids, payloads=corpus.payloads)
    res = Diversifier(corpus.cluster_map, k=3, max_per_cluster=2).wrap(store)(corpus.query, groups=True)
    assert len(res.groups) == 3 and all(1 <= len(g.hits) <= 2 for g in res.groups)
    flat = oracle_select(corpus.ranked_ids, corpus.cluster_of, k=100, n=2)
    assert [h.id for g in res.groups for h in g.hits] == res.ids
    assert set(res.ids) <= set(flat)


def test_per_call_overrides(corpus):
    w = Diversifier(corpus.cluster_map).wrap(CountingSearch(corpus.ranked_ids))
    assert w("q", k=4, max_per_cluster=2).ids == oracle_select(corpus.ranked_ids, corpus.cluster_of, k=4, n=2)
    with pytest.raises(ConfigError, match="`k`"):
        w("q", k=0)


def test_search_errors_become_store_errors():
    def broken(query, k):
        raise RuntimeError("connection reset")

    with pytest.raises(StoreError, match="connection reset"):
        Diversifier({"a": 1}).wrap(broken)("q")
    with pytest.raises(StoreError, match="sequence"):
        Diversifier({"a": 1}).wrap(lambda q, k: 42)("q")
    with pytest.raises(StoreError, match="id"):
        Diversifier({"a": 1}).wrap(lambda q, k: [{"score": 1.0}])("q")


def test_accepted_hit_shapes():
    class Point:
        def __init__(self, id, score, payload):
            self.id, self.score, self.payload = id, score, payload

    class Document:  # LangChain-like: (Document, score) pairs
        def __init__(self, id, metadata):
            self.id, self.metadata = id, metadata

    doc = Document("e", {"cid": 2})
    raw = [("a", 0.9), {"id": "b", "score": 0.8, "metadata": {"cid": 1}}, Point("c", 0.7, {"cid": 1}),
           Hit("d", 0.6), (doc, 0.5), ("f", 0.4, {"cid": 2})]
    res = Diversifier(cluster_field="cid", k=6).wrap(lambda q, k: raw)("q")
    assert res.ids == ["a", "b", "d", "e"] and res.hits[1].omitted == 1 and res.hits[3].omitted == 1
    assert res.hits[0].item is raw[0] and res.hits[1].folded[0].item is raw[2]
    assert res.hits[3].item is doc and res.hits[3].score == 0.5


# ---------------------------------------------------------------------- cursor


def test_cursor_pages_never_repeat_clusters(corpus):
    search = CountingSearch(corpus.ranked_ids)
    w = Diversifier(corpus.cluster_map, k=5).wrap(search)
    pages, cursor = [], None
    for _ in range(4):
        res = w("q", cursor=cursor)
        pages.append(res.ids)
        cursor = res.cursor
    flat = [i for p in pages for i in p]
    assert flat == oracle_select(corpus.ranked_ids, corpus.cluster_of, k=20)
    clusters = [corpus.cluster_of.get(i, ("own", i)) for i in flat]
    assert len(set(clusters)) == len(clusters)
    assert isinstance(cursor, str) and cursor.isascii()


def test_cursor_without_store_exclusion(corpus):
    ranked = corpus.ranked_ids

    def search(query, k):
        return [(i, 1.0 - j / 1000) for j, i in enumerate(ranked)][:k]

    w = Diversifier(corpus.cluster_map, k=5).wrap(search)
    p1 = w("q")
    p2 = w("q", cursor=p1.cursor)
    assert p1.ids + p2.ids == oracle_select(ranked, corpus.cluster_of, k=10)


@pytest.mark.parametrize("token", ["%%%", "AAAA", "x" * 10, 12, "gqF2AaFpkKFjkKFmoA"])
def test_hostile_cursor_is_an_input_error(token):
    d = Diversifier({"a": 1})
    with pytest.raises(InputError, match="cursor"):
        d.wrap(lambda q, k: [])("q", cursor=token)


def test_cursor_survives_a_reload_with_renumbered_clusters(corpus):
    search = CountingSearch(corpus.ranked_ids)
    d = Diversifier(corpus.cluster_map, k=5)
    w = d.wrap(search)
    p1 = w("q")
    # the same clustering with other cluster ids (and another fingerprint)
    known = corpus.known_ids[::-1]
    d.reload(make_cluster_map(known, [corpus.cluster_of[i] for i in known], fingerprint="other"))
    p2 = w("q", cursor=p1.cursor)
    assert p1.ids + p2.ids == oracle_select(corpus.ranked_ids, corpus.cluster_of, k=10)
    assert p2.generation == 1


# ---------------------------------------------------------------------- hot reload


def test_hot_reload_under_concurrent_queries_has_no_torn_read():
    ids = list(range(40))
    ranked = ids[:]
    # map A pairs (0,1),(2,3)...; map B pairs (1,2),(3,4)...: any mix of the two is detectable
    map_a = make_cluster_map(ids, [i // 2 for i in ids], fingerprint="A")
    map_b = make_cluster_map(ids, [(i + 1) // 2 for i in ids], fingerprint="B")
    expect = {
        "A": oracle_select(ranked, {i: i // 2 for i in ids}, k=10),
        "B": oracle_select(ranked, {i: (i + 1) // 2 for i in ids}, k=10),
    }
    assert expect["A"] != expect["B"]
    d = Diversifier(map_a, k=10, fetch_k=10, max_rounds=5)

    def search(query, k, exclude_ids):
        ex = set(exclude_ids)
        return [(i, 1.0 - i / 100) for i in ranked if i not in ex][:k]

    w = d.wrap(search)
    errors, stop = [], threading.Event()

    def reloader():  # generation g holds map A when g is even, map B when odd
        g = 0
        while not stop.is_set():
            g = d.reload(map_b if g % 2 == 0 else map_a)

    def worker():
        try:
            for _ in range(300):
                res = w("q")
                if res.backend_calls < 2:
                    errors.append("no refetch: the test would not detect a torn read")
                if res.ids != expect["AB"[res.generation % 2]]:
                    errors.append((res.generation, res.ids))
        except Exception as exc:  # surfaced by the assertion below
            errors.append(repr(exc))

    t = threading.Thread(target=reloader)
    workers = [threading.Thread(target=worker) for _ in range(4)]
    t.start()
    for x in workers:
        x.start()
    for x in workers:
        x.join()
    stop.set()
    t.join()
    assert not errors, errors[:5]
    assert d.stats()["reloads"] > 0 and d.stats()["queries"] == 1200


def test_load_and_reload_from_path(tmp_path, corpus):
    path = tmp_path / "clusters.dvf"
    corpus.cluster_map.save(path)
    d = Diversifier(str(path), k=6)
    search = CountingSearch(corpus.ranked_ids)
    assert d.wrap(search)("q").ids == oracle_select(corpus.ranked_ids, corpus.cluster_of, k=6)
    assert d.reload(path) == 1 and d.generation == 1
    assert load(path).n_docs == corpus.cluster_map.n_docs
    (tmp_path / "bad.dvf").write_bytes(b"not an artifact")
    with pytest.raises(ArtifactError, match="not a diversify artifact"):
        d.reload(tmp_path / "bad.dvf")
    assert d.generation == 1  # a failed reload keeps the old artifact


# ---------------------------------------------------------------------- async


def test_awrap_matches_wrap(corpus):
    sync = CountingSearch(corpus.ranked_ids)

    async def asearch(query, k, exclude_ids=None):
        await asyncio.sleep(0)
        return sync(query, k, exclude_ids)

    d = Diversifier(corpus.cluster_map, k=7, fetch_k=7)
    res = asyncio.run(d.awrap(asearch)("q"))
    assert res.ids == d.wrap(CountingSearch(corpus.ranked_ids))("q").ids
    assert res.backend_calls >= 2

    async def many():
        return await asyncio.gather(*(d.awrap(asearch)("q", k=3) for _ in range(20)))

    assert all(r.ids == res.ids[:3] for r in asyncio.run(many()))


# ---------------------------------------------------------------------- select_items


class Doc:
    def __init__(self, id, text, metadata):
        self.id, self.text, self.metadata = id, text, metadata


def test_select_items_on_caller_objects_without_mutation(corpus):
    docs = [Doc(i, f"text {i}", {"rank": j}) for j, i in enumerate(corpus.ranked_ids[:20])]
    before = copy.deepcopy([(d.id, d.text, d.metadata) for d in docs])
    d = Diversifier(corpus.cluster_map, k=5)
    res = d.select_items(docs)
    assert [kp.item for kp in res.hits] == [x for x in docs if x.id in set(res.ids)]
    assert res.ids == oracle_select(corpus.ranked_ids[:20], corpus.cluster_of, k=5)
    assert res.backend_calls == 0
    assert [(x.id, x.text, x.metadata) for x in docs] == before
    # ids from a callable, cluster ids from metadata
    plain = [{"key": f"k{j}", "meta": {"c": j // 3}} for j in range(9)]
    res = Diversifier(cluster_field="c", k=5).select_items(
        plain, ids=lambda x: x["key"], payloads=[x["meta"] for x in plain])
    assert res.ids == ["k0", "k3", "k6"] and res.exhausted and [h.omitted for h in res.hits] == [2, 2, 2]
    # page 2 of a fixed list
    res2 = d.select_items(docs, cursor=d.select_items(docs).cursor)
    assert not set(res2.ids) & set(d.select_items(docs).ids)


def test_select_items_validation():
    d = Diversifier({"a": 1})
    with pytest.raises(InputError, match="has no id"):
        d.select_items([object()])
    with pytest.raises(InputError, match="one entry per item"):
        d.select_items([Hit("a")], scores=[1.0, 2.0])
    with pytest.raises(InputTypeError, match="sequence"):
        d.select_items("abc")


def test_on_the_fly_through_the_diversifier():
    v = np.array([1.0, 0.0])
    items = [Hit("old", 0.9, vector=v), Hit("new", 0.8, vector=v * 2), Hit("other", 0.7, vector=np.array([0.0, 1.0]))]
    d = Diversifier({"old": 4}, k=3, fold_threshold=0.99)
    res = d.select_items(items)
    assert res.ids == ["old", "other"] and res.hits[0].folded[0].id == "new"


# ---------------------------------------------------------------------- config, stats, imports


@pytest.mark.parametrize("kwargs, match", [
    ({"k": -1}, "`k`"),
    ({"fetch_k": 3, "k": 10}, "`fetch_k` must be an int >= k"),
    ({"max_rounds": -1}, "max_rounds"),
    ({"cluster_field": ""}, "cluster_field"),
    ({"max_fetch_k": 5}, "max_fetch_k"),
    ({"max_exclude_members": -1}, "max_exclude_members"),
])
def test_config_errors(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        Diversifier({"a": 1}, **kwargs)


def test_bad_cluster_map_type():
    with pytest.raises(InputTypeError, match="cluster_map"):
        Diversifier(42)


def test_mapping_cluster_map_is_copied():
    m = {"a": 1, "b": 1}
    d = Diversifier(m, k=2)
    m["b"] = 2
    assert d.select_items([Hit("a", 1.0), Hit("b", 0.5)]).ids == ["a"]


def test_stats_counters(corpus):
    d = Diversifier(corpus.cluster_map, k=8, fetch_k=8)
    w = d.wrap(CountingSearch(corpus.ranked_ids))
    r1, r2 = w("q"), w("q", k=2)
    s = d.stats()
    assert s["queries"] == 2 and s["backend_calls"] == r1.backend_calls + r2.backend_calls
    assert s["returned"] == 10 and s["refetch_rounds"] == r1.rounds + r2.rounds
    assert s["omitted"] == r1.omitted + r2.omitted and s["generation"] == 0


def test_online_path_imports_neither_numba_nor_vendors():
    code = (
        "import sys\n"
        "import diversify\n"
        "from diversify import select, Diversifier, Hit, load, ClusterMap\n"
        "import diversify.online, diversify.stores\n"
        "Diversifier({'a': 1}).wrap(lambda q, k: [('a', 1.0)])('q')\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('numba', 'llvmlite', 'qdrant_client', 'chromadb', 'faiss', 'lancedb', 'pyarrow'))\n"
        "assert not bad, bad\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_cursor_keeps_numpy_integer_ids():
    ranked = [np.int64(i) for i in range(10)]
    d = Diversifier({i: i // 2 for i in range(10)}, k=2)
    w = d.wrap(lambda q, k: [(i, 1.0 - int(i) / 100) for i in ranked][:k])
    p1 = w("q")
    p2 = w("q", cursor=p1.cursor)
    assert [int(i) for i in p1.ids + p2.ids] == [0, 2, 4, 6]


def test_on_the_fly_text_through_the_diversifier():
    class Document:  # LangChain-like
        def __init__(self, id, page_content):
            self.id, self.page_content, self.metadata = id, page_content, {}

    docs = [Document("old", "shipping policy: orders ship within two business days"),
            Document("new", "Shipping policy - orders ship within two business days."),
            Document("other", "returns are accepted for thirty days")]
    d = Diversifier({"old": 4}, k=3, fold_text_threshold=0.8)
    res = d.select_items(docs)
    assert res.ids == ["old", "other"] and res.hits[0].folded[0].item is docs[1]
    w = d.wrap(lambda q, k: [{"id": x.id, "score": 1.0 - j / 10, "text": x.page_content}
                             for j, x in enumerate(docs)][:k])
    assert w("q").ids == ["old", "other"]


def test_refetch_excludes_unseen_members_of_full_clusters(corpus):
    """With the artifact's members, a refetch skips the rest of full clusters: fewer calls."""
    k = 6
    plain = CountingSearch(corpus.ranked_ids)
    smart = CountingSearch(corpus.ranked_ids)
    r0 = Diversifier(corpus.cluster_map, k=k, fetch_k=k, max_rounds=8, max_exclude_members=0).wrap(plain)("q")
    r1 = Diversifier(corpus.cluster_map, k=k, fetch_k=k, max_rounds=8).wrap(smart)("q")
    assert r0.ids == r1.ids == oracle_select(corpus.ranked_ids, corpus.cluster_of, k=k)
    assert r1.backend_calls < r0.backend_calls, (r1.backend_calls, r0.backend_calls)
    # the second call excluded members of the first call's clusters that it had not seen
    first_ids = corpus.ranked_ids[:k]
    full = {corpus.cluster_of[i] for i in first_ids if i in corpus.cluster_of}
    members = {i for i, c in corpus.cluster_of.items() if c in full}
    assert members - set(first_ids) <= set(smart.calls[1][1])
    # bounded
    small = CountingSearch(corpus.ranked_ids)
    Diversifier(corpus.cluster_map, k=k, fetch_k=k, max_exclude_members=3).wrap(small)("q")
    assert len(small.calls[1][1]) <= k + 3
    # page 2 excludes page 1's clusters in the store
    d = Diversifier(corpus.cluster_map, k=3)
    p1 = d.wrap(CountingSearch(corpus.ranked_ids))("q")
    s2 = CountingSearch(corpus.ranked_ids)
    p2 = d.wrap(s2)("q", cursor=p1.cursor)
    shown = {corpus.cluster_of[i] for i in p1.ids if i in corpus.cluster_of}
    assert {i for i, c in corpus.cluster_of.items() if c in shown} <= set(s2.calls[0][1])
    assert p1.ids + p2.ids == oracle_select(corpus.ranked_ids, corpus.cluster_of, k=6)


def test_mapping_cluster_map_needs_int_cluster_ids():
    with pytest.raises(InputTypeError, match="int cluster ids"):
        Diversifier({"a": "x"})
    with pytest.raises(InputTypeError, match="int cluster ids"):
        Diversifier({"a": 1.5})


def test_cursor_after_reload_between_artifacts_with_the_same_fingerprint():
    ids = list(range(12))
    search = CountingSearch(ids)
    a = make_cluster_map(ids, [i // 2 for i in ids], fingerprint="same")   # pairs (0,1), (2,3)...
    b = make_cluster_map(ids[::-1], [i // 3 for i in ids[::-1]], fingerprint="same")  # other ids
    d = Diversifier(a, k=3)
    p1 = d.wrap(search)("q")
    d.reload(b)
    p2 = d.wrap(search)("q", cursor=p1.cursor)
    shown = {i // 3 for i in p1.ids}
    assert not {i // 3 for i in p2.ids} & shown, (p1.ids, p2.ids)


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=200), st.binary(max_size=200).map(
    lambda b: __import__("base64").urlsafe_b64encode(b).decode().rstrip("="))))
def test_fuzz_cursor_never_crashes(token):
    from diversify.online.cursor import decode_cursor

    try:
        state = decode_cursor(token)
    except InputError:
        return
    assert all(isinstance(i, (int, str)) for i in state.ids)


def test_cursor_round_trip_of_mixed_and_exotic_values():
    from diversify.online.cursor import decode_cursor, encode_cursor

    token = encode_cursor(["a", 3, np.int64(4), 2.5, True, ("t",), "\ud800", 2**64], [1, "x", np.int32(2), 1.0], 7)
    state = decode_cursor(token)
    assert state.ids == frozenset({"a", 3, 4, "\ud800"}) and state.clusters == frozenset({1, "x", 2})
    assert state.anchors == ("a", 3, 4, "\ud800") and state.offset == 7


def test_awrap_accepts_a_sync_adapter(corpus):
    store = NumpyStore(corpus.vectors, corpus.ids)
    d = Diversifier(corpus.cluster_map, k=5, fetch_k=5)
    res = asyncio.run(d.awrap(store)(corpus.query))
    assert res.ids == oracle_select(corpus.ranked_ids, corpus.cluster_of, k=5)


def test_expand_lists_every_member_of_a_kept_cluster(corpus):
    d = Diversifier(corpus.cluster_map, k=3)
    res = d.wrap(CountingSearch(corpus.ranked_ids))("q")
    top = res.hits[0]
    expected = sorted(i for i, c in corpus.cluster_of.items() if c == top.cluster_id)
    assert sorted(d.expand(top)) == expected and top.id in expected
    assert {f.id for f in top.folded} <= set(expected)
    assert sorted(d.expand(top.cluster_id)) == expected
    unknown = Diversifier(corpus.cluster_map, k=50).select_items([Hit("new", 1.0)]).hits[0]
    assert d.expand(unknown) == ["new"]
    with pytest.raises(ConfigError, match="expand"):
        Diversifier(cluster_field="c").expand(3)


def test_wrap_takes_supports_exclude_explicitly(corpus):
    detected = CountingSearch(corpus.ranked_ids)
    Diversifier(corpus.cluster_map, k=6, fetch_k=6).wrap(detected)("q")
    assert detected.calls[-1][1], "detected from the signature: refetches exclude the seen ids"
    forced = CountingSearch(corpus.ranked_ids)
    res = Diversifier(corpus.cluster_map, k=6, fetch_k=6).wrap(forced, supports_exclude=False)("q")
    assert res.backend_calls >= 2 and all(ex is None for _, ex in forced.calls), forced.calls
    assert [k for k, _ in forced.calls] == sorted(k for k, _ in forced.calls), "a larger k instead"
    assert res.ids == oracle_select(corpus.ranked_ids, corpus.cluster_of, k=6)

    def by_kwargs(query, *args, **kwargs):
        return CountingSearch(corpus.ranked_ids)(query, *args, **kwargs)

    res = asyncio.run(Diversifier(corpus.cluster_map, k=6).awrap(by_kwargs, supports_exclude=True)("q"))
    assert res.ids == oracle_select(corpus.ranked_ids, corpus.cluster_of, k=6)
    with pytest.raises(InputTypeError, match="supports_exclude"):
        Diversifier().wrap(detected, supports_exclude="yes")


def test_settings_are_read_only_attributes():
    d = Diversifier({"a": 0}, k=10, max_per_cluster=2)
    assert (d.k, d.max_per_cluster, d.fetch_k, d.max_rounds, d.on_error) == (10, 2, 20, 3, "raise")
    assert d.options.fetch_k == d.fetch_k and d.options.cluster_field is None
    with pytest.raises(AttributeError):
        d.k = 3


# ---------------------------------------------------------------------- what the plugins share


def test_lazy_diversifier_builds_once_on_first_use():
    from diversify.online import LazyDiversifier

    lazy = LazyDiversifier("node")
    assert not lazy.built and "built=False" in repr(lazy)
    got, barrier = [], threading.Barrier(16)

    def first_use():
        barrier.wait()
        got.append(lazy.get({"a": 0, "b": 0}, k=2))

    threads = [threading.Thread(target=first_use) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert lazy.built and len({id(d) for d in got}) == 1 and got[0].k == 2
    assert lazy.get(None) is got[0], "later calls return the same Diversifier"
    assert not copy.copy(lazy).built and not copy.deepcopy(lazy).built
    with pytest.raises(ConfigError, match="no node has a cluster"):
        LazyDiversifier("node").get(None)


def test_plugin_helpers():
    from diversify import build
    from diversify.online import annotation, check_cluster_source, diversifier_from, serializable_cluster_map

    check_cluster_source(None, "c")
    with pytest.raises(ConfigError, match="cluster_map"):
        check_cluster_source(None, None)
    assert diversifier_from(cluster_field="c", k=3, fetch_k=None).k == 3
    res = Diversifier({"a": 0, "b": 0}).select_items([Hit("a", 0.9), Hit("b", 0.8)])
    assert annotation(res[0]) == {"cluster_id": 0, "omitted": 1, "omitted_ids": ["b"]}
    assert annotation(res[0], with_score=True)["score"] == 0.9
    import pathlib

    assert serializable_cluster_map(None) is None and serializable_cluster_map("c.dvf") == "c.dvf"
    assert serializable_cluster_map(pathlib.Path("x") / "c.dvf") == str(pathlib.Path("x") / "c.dvf")
    assert serializable_cluster_map({"a": 0}) == {"a": 0} and serializable_cluster_map({1: 0}) == [[1, 0]]
    with pytest.raises(ConfigError, match="save"):
        serializable_cluster_map(build(texts=["one two three four five six"], ids=["x"]).cluster_map)
