"""No request costs more than its size, and one id rule, on the artifact and the live index alike
(hostile inputs: work that grows faster than the request, and ids no store should send).

Work is counted, never timed: every id handed to a lookup (the artifact's ``lookup``; the live
index's ``docs_by_id`` reads) and every row the live lookup iterates over. The live index runs on
SQLite, PostgreSQL and Redis (the session's servers, tests/index/servers*.py); the property test
on the artifact and SQLite.

* A store that answers far more hits than it was asked for costs what the request costs: the
  surplus is cut before any lookup (``wrap``, ``awrap``, the plugins' exclusion helper, the
  store adapters).
* A forged cursor carries at most :func:`~diversify.online.cursor.cursor_id_limit` ids for the
  request's k; the largest token under the size limit is refused before any lookup.
* Looking ids up in the live index is linear: each row read is visited once.
* Ids no store should send (lone surrogates, another id kind, bools, floats, ints outside int64)
  are unknown on the live index exactly as on the artifact.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from unittest import mock

import msgpack
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import diversify
from diversify.artifact.clustermap import ClusterMap
from diversify.errors import InputError
from diversify.ids import id_kind_of
from diversify.index.live import LiveLookup
from diversify.online.cursor import MAX_CURSOR_CHARS, MAX_CURSOR_IDS, cursor_id_limit, encode_cursor
from diversify.stores.exclusion import Exclusion
from index.servers import postgres_server  # noqa: F401  (session fixture)
from index.servers_redis import redis_server  # noqa: F401  (session fixture)

GROUPS, COPIES = 40, 3  # 40 clusters of 3 near-copies: 120 documents
N = GROUPS * COPIES


def _vectors() -> np.ndarray:
    rng = np.random.default_rng(38)
    base = rng.normal(size=(GROUPS, 32))
    return np.repeat(base, COPIES, axis=0) + 1e-4 * rng.normal(size=(N, 32))


def _ids(kind: str) -> list:
    return list(range(N)) if kind == "int" else [f"d{j}" for j in range(N)]


def _url(backend: str, request, tmp_path, n: int) -> str:
    if backend == "sqlite":
        return f"sqlite:///{tmp_path}/index-{n}.db"
    if backend == "postgresql":
        return request.getfixturevalue("postgres_server").new_index()
    return request.getfixturevalue("redis_server").fresh_url()


class Work:
    """What one request cost: ids handed to a lookup, storage reads, rows iterated over."""

    def __init__(self) -> None:
        self.asked = self.reads = self.rows = 0


class _Rows(list):
    """The rows of a read, counting every visit (a lookup that scans them per id shows here)."""

    def __init__(self, rows, work: Work) -> None:
        super().__init__(rows)
        self.work = work

    def __iter__(self):
        for r in list.__iter__(self):
            self.work.rows += 1
            yield r


class _View:
    def __init__(self, view, work: Work) -> None:
        self._view, self._work = view, work

    def __getattr__(self, name):
        return getattr(self._view, name)

    def docs_by_id(self, ids, *, payload=True):
        ids = list(ids)
        self._work.asked += len(ids)
        self._work.reads += 1
        return _Rows(self._view.docs_by_id(ids, payload=payload), self._work)


class _Storage:
    def __init__(self, storage, work: Work) -> None:
        self._storage, self._work = storage, work

    def __getattr__(self, name):
        return getattr(self._storage, name)

    @contextlib.contextmanager
    def read(self):
        with self._storage.read() as view:
            yield _View(view, self._work)


@contextlib.contextmanager
def counted(d: diversify.Diversifier):
    """Count the lookup work of ``d`` (artifact or live index) inside the block."""
    work = Work()
    cm = d.cluster_map
    if isinstance(cm, LiveLookup):
        real = cm.storage
        cm.storage = _Storage(real, work)
        try:
            yield work
        finally:
            cm.storage = real
        return
    real_lookup = ClusterMap.lookup

    def lookup(self, ids):
        work.asked += len(ids)
        return real_lookup(self, ids)

    with mock.patch.object(ClusterMap, "lookup", lookup):
        yield work


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Per id kind: an artifact exported from a SQLite index of the corpus."""
    out = {}
    for kind in ("str", "int"):
        root = tmp_path_factory.mktemp(f"built-{kind}")
        with diversify.Index(f"sqlite:///{root}/index.db") as idx:
            idx.add(vectors=_vectors(), ids=_ids(kind))
            idx.export(root / "a.dvf")
        out[kind] = diversify.load(root / "a.dvf")
    return out


@pytest.fixture
def served(request, built, tmp_path):
    """``served(where, kind)``: what ``Diversifier`` is given to serve the corpus (an artifact, or
    a live index on a backend), the index closed at the end."""
    opened: list = []

    def make(where: str, kind: str = "str"):
        if where == "artifact":
            return built[kind]
        idx = diversify.Index(_url(where, request, tmp_path, len(opened)))
        opened.append(idx)
        idx.add(vectors=_vectors(), ids=_ids(kind))
        return idx

    yield make
    for idx in opened:
        idx.close()


WHERE = ["artifact", "sqlite", "postgresql", "redis"]


def _forged(ids) -> str:
    wire = [i.encode("utf-8", "surrogatepass") if isinstance(i, str) else i for i in ids]  # str travel as bytes
    raw = msgpack.packb({"v": 2, "o": 0, "a": wire, "p": []})
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _carried(token) -> int:
    """Ids a token carries, counted without the decoder's limits."""
    if not token:
        return 0
    obj = msgpack.unpackb(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    return len(obj["a"]) + len(obj["p"])


def _shape(cids: list) -> list:
    """Cluster ids up to renaming: each hit's first hit of the same cluster (None: unknown)."""
    first: dict = {}
    return [None if c is None else first.setdefault(c, j) for j, c in enumerate(cids)]


def _largest_forged() -> tuple[str, int]:
    """The token under MAX_CURSOR_CHARS with the most distinct int ids (all of them small)."""
    lo, hi = 1, 60_000
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(_forged(range(mid))) <= MAX_CURSOR_CHARS:
            lo = mid
        else:
            hi = mid - 1
    return _forged(range(lo)), lo


def _ranking(kind: str, extra: int) -> list:
    """The corpus best first, then ``extra`` hits no artifact knows (their own clusters)."""
    known = [(i, 1.0 - j / (N + extra + 1)) for j, i in enumerate(_ids(kind))]
    other = [((N + j) if kind == "int" else f"x{j}", 1.0 - (N + j) / (N + extra + 1)) for j in range(extra)]
    return known + other


def _flooding(ranking: list, factor: int, asks: list):
    """A store that answers ``factor`` times the hits it is asked for (exclusion honoured)."""

    def search(query, k, exclude_ids=None):
        asks.append(k)
        ex = set(exclude_ids or ())
        return [h for h in ranking if h[0] not in ex][: k * factor]

    return search


# --------------------------------------------------------------------------- the property


@pytest.mark.parametrize("where", ["artifact", "sqlite"])
def test_an_online_query_costs_at_most_its_request(where, served):
    """Property: ids looked up <= ids the cursor carries + hits asked for (sum of the k's the
    store was asked for), storage rows visited <= ids asked, store calls <= max_rounds + 1, over
    honest pages, floods of hits, exclusion and not, and forged cursors (refused before any
    lookup when they carry more than cursor_id_limit(k))."""
    source = {kind: served(where, kind) for kind in ("str", "int")}

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(kind=st.sampled_from(["str", "int"]), k=st.integers(1, 12), n=st.integers(1, 3),
           rounds=st.integers(0, 3), flood=st.integers(1, 60), exclude=st.booleans(), pages=st.integers(1, 4),
           forged=st.none() | st.integers(0, 3 * MAX_CURSOR_IDS))
    def check(kind, k, n, rounds, flood, exclude, pages, forged):
        d = diversify.Diversifier(source[kind], k=k, max_per_cluster=n, max_rounds=rounds)
        try:
            run(d, kind, k, rounds, flood, exclude, pages, forged)
        finally:
            if isinstance(d.cluster_map, LiveLookup):
                d.cluster_map.close()

    def run(d, kind, k, rounds, flood, exclude, pages, forged):
        asks: list = []
        search = d.wrap(_flooding(_ranking(kind, 400), flood, asks), supports_exclude=exclude)
        cursor = None
        for page in range(pages + (forged is not None)):
            if page == pages:  # a forged token of `forged` ids the index knows
                cursor = _forged(range(forged) if kind == "int" else (f"d{j}" for j in range(forged)))
            carried = _carried(cursor)
            asks.clear()
            with counted(d) as work:
                if carried > cursor_id_limit(k):
                    with pytest.raises(InputError, match="more than any cursor|too long"):
                        search("q", cursor=cursor)
                    assert work.asked == 0 and asks == []
                    return
                res = search("q", cursor=cursor)
            assert work.asked <= carried + sum(asks), (work.asked, carried, asks)
            assert work.rows <= work.asked
            assert res.backend_calls == len(asks) <= rounds + 1
            if res.cursor is None:
                return
            cursor = res.cursor

    check()


# --------------------------------------------------------------------------- work that grows faster than the request


@pytest.mark.parametrize("where", WHERE)
def test_a_store_answering_far_more_than_asked_costs_the_request(where, served):
    """20,000 hits to a request for 25: the surplus is cut before the lookup, sync and async,
    with and without exclusion; the page is the one an honest store gives."""
    d = diversify.Diversifier(served(where, "int"), k=10, max_rounds=0)
    ranking = _ranking("int", 20_000 - N)
    for exclude in (False, True):
        asks: list = []
        honest = d.wrap(_flooding(ranking, 1, []), supports_exclude=exclude)("q")
        flooded = d.wrap(_flooding(ranking, 10_000, asks), supports_exclude=exclude)
        with counted(d) as work:
            res = flooded("q")
        assert asks == [d.fetch_k] and work.asked <= d.fetch_k and work.rows <= d.fetch_k
        assert res.ids == honest.ids and res.exhausted == honest.exhausted and res.cursor == honest.cursor

        flood = _flooding(ranking, 10_000, asks)

        async def asearch(query, k, exclude_ids=None, _s=flood):
            return _s(query, k, exclude_ids)

        asks.clear()
        with counted(d) as work:
            res = asyncio.run(d.awrap(asearch, supports_exclude=exclude)("q"))
        assert asks == [d.fetch_k] and work.asked <= d.fetch_k
        assert res.ids == honest.ids


def test_the_exclusion_helper_reads_no_more_than_it_asked_for():
    """The plugins' and adapters' refetch helper: a call answered with 20,000 hits yields the k
    asked for, in every branch (no exclusion, pushed down, grown k)."""

    class Flood(list):
        read = 0

        def __iter__(self):
            for h in list.__iter__(self):
                Flood.read += 1
                yield h

    def call(n, pushed):
        return Flood(diversify.Hit(j, 1.0 - j / 20_000) for j in range(20_000))

    for exclude_ids, mode in ((None, "exclude"), ([1, 2, 3], "exclude"), ([1, 2, 3], "grow")):
        Flood.read = 0
        got = Exclusion(mode, 256, name="flood").search(call, 7, exclude_ids)
        assert len(got) == 7 and Flood.read <= 7 + 3, (exclude_ids, mode, len(got), Flood.read)
        assert [h.id for h in got] == [j for j in range(20_000) if j not in (exclude_ids or ())][:7]


def test_store_adapters_keep_only_the_k_asked_for():
    """Qdrant, Chroma and LanceDB answers longer than the limit sent are cut while they
    are parsed (no vendor SDK: the parsers see what the clients return)."""
    from types import SimpleNamespace

    from diversify.stores.chroma import ChromaStore
    from diversify.stores.lancedb import LanceDBStore
    from diversify.stores.qdrant import QdrantStore

    many = 5_000
    q = object.__new__(QdrantStore)
    q.id_field, q.using = None, None
    points = [SimpleNamespace(id=j, score=1.0, payload={}, vector=None) for j in range(many)]
    assert len(q._hits(SimpleNamespace(points=points), 5)) == 5
    c = object.__new__(ChromaStore)
    c.id_field = "doc_id"
    res = {"ids": [[str(j) for j in range(many)]], "metadatas": [[{"doc_id": j} for j in range(many)]],
           "distances": [[0.0] * many], "embeddings": None}
    assert [h.id for h in c._hits(res, 5)] == [0, 1, 2, 3, 4]
    lance = object.__new__(LanceDBStore)
    lance.vector_column, lance.with_vectors, lance.id_column = "vector", False, "id"
    assert len(lance._hits([{"id": j, "_distance": 0.0} for j in range(many)], 5)) == 5


@pytest.mark.parametrize("where", WHERE)
def test_a_maximal_forged_cursor_is_refused_before_any_lookup(where, served):
    """The largest token under MAX_CURSOR_CHARS (16,507 distinct ids of the index) used to be
    looked up whole on page 2 (seconds on the live index); now it is refused, naming the limit,
    with nothing looked up and no store call. The largest accepted one costs at most its ids."""
    d = diversify.Diversifier(served(where, "int"), k=10, max_rounds=0)
    asks: list = []
    search = d.wrap(_flooding(_ranking("int", 0), 1, asks))
    token, n = _largest_forged()
    assert n > 16_000
    with counted(d) as work, pytest.raises(InputError, match=r"carries 16\d{3} ids.*at most 4000"):
        search("q", cursor=token)
    assert work.asked == 0 and asks == []
    limit = cursor_id_limit(10)
    with counted(d) as work:
        search("q", cursor=_forged(range(limit)))
    assert work.asked <= limit + sum(asks)
    with pytest.raises(InputError, match="more than any cursor"):
        search("q", cursor=_forged(range(limit + 1)))


@pytest.mark.parametrize("where", ["sqlite", "postgresql", "redis"])
def test_live_lookup_visits_each_row_once(where, served):
    """Looking up m ids the index holds visits the m rows read once each (it rebuilt a set of the
    rows per id: m * m visits)."""
    d = diversify.Diversifier(served(where, "str"), k=10)
    live = d.cluster_map
    ids = _ids("str")
    with counted(d) as work:
        out = live.lookup(ids + ids[:10])
    assert (out >= 0).all() and work.asked == N and work.reads == 1
    assert work.rows <= 2 * N, work.rows


# --------------------------------------------------------------------------- ids no store should send

#: (label, id) a store or a cursor can hand over that no corpus of `kind` ids holds
NOT_IDS = [
    ("lone high surrogate", "\ud800"),
    ("lone low surrogate", "d1\udfff"),
    ("surrogateescape byte", "d\udc80"),
    ("the int of a str id", 1),
    ("the str of an int id", "1"),
    ("bool", True),
    ("numpy bool", np.bool_(True)),
    ("float", 1.0),
    ("int over int64", 2**63),
    ("int under int64", -(2**63) - 1),
    ("int over uint64", 2**64 + 1),
    ("bytes", b"d1"),
]


@pytest.mark.parametrize("where", ["sqlite", "postgresql", "redis"])
def test_one_id_rule_on_the_artifact_and_the_live_index(where, served, built):
    """Each id no store should send, through cluster_ids, a wrapped page and a cursor carrying it,
    is treated the same on the live index as on the artifact: unknown (its own cluster), never
    an error; ``1`` never matches ``"1"``; numpy ints match ints."""
    for kind in ("str", "int"):
        idx = served(where, kind)
        live = diversify.Diversifier(idx, k=5)
        art = diversify.Diversifier(built[kind], k=5)
        ids = _ids(kind)
        for label, bad in NOT_IDS + [("numpy int", np.int64(4)), ("a known id", ids[4])]:
            hits = [diversify.Hit(ids[0], 0.9), diversify.Hit(ids[1], 0.8), diversify.Hit(bad, 0.7),
                    diversify.Hit(ids[3], 0.6)]
            assert _shape(live.cluster_ids(hits)) == _shape(art.cluster_ids(hits)), (kind, label)
            cursor = encode_cursor([bad], (), 0)  # a cursor carrying it (when it can carry it at all)
            pages = []
            for d in (art, live):
                search = d.wrap(lambda q, k, *, _h=hits: _h[:k])
                pages.append((search("q").ids, search("q", cursor=cursor).ids))
            assert pages[0] == pages[1] and pages[0][0][0] == ids[0], (kind, label, pages)
        # the data API (Index.cluster_of, ClusterMap.cluster_of) refuses a value of no id type alike
        # and answers None for an id of the other kind or one no corpus can hold
        not_a_type = [bad for _, bad in NOT_IDS if id_kind_of(bad) is None]
        assert not_a_type, "NOT_IDS holds values of no id type"
        for bad in not_a_type:
            with pytest.raises(diversify.InputTypeError):
                idx.cluster_of([bad])
            with pytest.raises(diversify.InputTypeError):
                built[kind].cluster_of(bad)
        values = [bad for _, bad in NOT_IDS if id_kind_of(bad) is not None] + [np.int64(2), ids[2]]
        known = [c is not None for c in art.cluster_ids([diversify.Hit(v, 0.0) for v in values])]
        assert [c is not None for c in idx.cluster_of(values)] == known, kind
        assert known[-1] and known[-2] == (kind == "int")


@pytest.mark.parametrize("where", ["artifact", "sqlite"])
def test_a_forged_offset_goes_no_deeper_than_the_pages_a_cursor_stands_for(where, served):
    """A 30-character token claiming offset 100,000 made a store without exclusion filters answer
    100,025 hits, all looked up; the offset (a hint) now goes no deeper than MAX_CURSOR_PAGES
    pages of max_fetch_k each, and without exclusion filters the hits above it are not looked at."""
    from diversify.online.cursor import MAX_CURSOR_PAGES

    d = diversify.Diversifier(served(where, "int"), k=10, max_rounds=0)
    ranking = _ranking("int", 0) * 1_000  # the corpus again and again: hits of shown clusters
    raw = msgpack.packb({"v": 2, "o": 100_000, "a": [], "p": []})
    token = base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")
    deepest = MAX_CURSOR_PAGES * d.max_fetch_k + d.max_fetch_k
    for exclude in (False, True):
        asks: list = []
        search = d.wrap(_flooding(ranking, 1, asks), supports_exclude=exclude)
        with counted(d) as work:
            res = search("q", cursor=token)
        assert asks and max(asks) <= deepest < 100_000, exclude
        # without exclusion filters the top of the ranking earlier pages used up is not looked at
        assert work.asked <= (deepest if exclude else d.fetch_k), exclude
        assert len(res.ids) >= 9  # a full page of the 25 hits it asked for past the offset
