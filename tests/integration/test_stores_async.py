"""The async store adapters against the real clients (no mocks).

- The shared :class:`StoreContract` holds for each of them, driven through a blocking facade
  (each coroutine run to completion on the adapter's own event loop).
- ``Diversifier.awrap`` over an async adapter gives what ``wrap`` over its sync twin gives, on the
  same store (a Chroma server and a LanceDB directory both clients open; Qdrant's local mode
  cannot be shared, so two stores are loaded with the same points).
- The event loop is free while a store call is in flight (a heartbeat task ticks during the
  calls; a sync adapter under ``awrap`` lets it tick zero times), and a call held in flight by a
  frozen Chroma server does not stop the heartbeat.
- Cancellation (``asyncio.timeout`` while a refill call is in flight) leaves no task and no
  thread behind, and the adapter answers correctly afterwards.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time

import pytest
from contract import StoreContract, make_corpus, oracle_select
from contract.heartbeat import Heartbeat
from needs import need_module

from diversify.errors import ConfigError, InputTypeError
from diversify.online import Diversifier

pytestmark = pytest.mark.integration

_names = itertools.count()




class Blocking:
    """An async adapter behind the sync surface the StoreContract calls (search, write_clusters;
    everything else read from the adapter). Not a stand-in: every call is the adapter's own."""

    is_async = False

    def __init__(self, store, loop: asyncio.AbstractEventLoop):
        self.store, self.loop = store, loop

    def search(self, query, k, exclude_ids=None):
        return self.loop.run_until_complete(self.store.search(query, k, exclude_ids))

    def write_clusters(self, cluster_map, **kw):
        return self.loop.run_until_complete(self.store.write_clusters(cluster_map, **kw))

    def __getattr__(self, name):
        return getattr(self.store, name)


class AsyncContract(StoreContract):
    """StoreContract over an async adapter; ``make_async(corpus)`` is a coroutine returning it."""

    async def make_async(self, corpus):  # pragma: no cover - provided by the subclass
        raise NotImplementedError

    @pytest.fixture(autouse=True)
    def _loop(self):
        self.loop = asyncio.new_event_loop()
        yield
        self.loop.close()

    def make_store(self, corpus):
        return Blocking(self.loop.run_until_complete(self.make_async(corpus)), self.loop)


# ---------------------------------------------------------------------- builders


async def qdrant_async(corpus, *, payload_ids: bool = False, distance: str = "Cosine", **kw):
    qc = need_module("qdrant_client", "qdrant")
    from qdrant_client import models

    from diversify.stores import AsyncQdrantStore

    client = qc.AsyncQdrantClient(":memory:")
    name = f"c{next(_names)}"
    await client.create_collection(name, vectors_config=models.VectorParams(
        size=corpus.vectors.shape[1], distance=getattr(models.Distance, distance.upper())))
    points = [models.PointStruct(id=_uuid_of(i) if payload_ids else i, vector=v.tolist(),
                                 payload={**p, "doc_id": i} if payload_ids else p)
              for i, v, p in zip(corpus.ids, corpus.vectors, corpus.payloads)]
    await client.upsert(name, points=points)
    store = AsyncQdrantStore(client, name, id_field="doc_id" if payload_ids else None, **kw)
    await store.ascores_are()
    return store


def qdrant_sync(corpus, **kw):
    qc = need_module("qdrant_client", "qdrant")
    from qdrant_client import models

    from diversify.stores import QdrantStore

    client = qc.QdrantClient(":memory:")
    name = f"c{next(_names)}"
    client.create_collection(name, vectors_config=models.VectorParams(size=corpus.vectors.shape[1],
                                                                      distance=models.Distance.COSINE))
    client.upsert(name, points=[models.PointStruct(id=i, vector=v.tolist(), payload=p)
                                for i, v, p in zip(corpus.ids, corpus.vectors, corpus.payloads)])
    return QdrantStore(client, name, **kw)


def _uuid_of(i) -> str:
    import uuid

    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"doc/{i}"))


def _chroma_rows(corpus):
    return dict(ids=[str(i) for i in corpus.ids], embeddings=corpus.vectors.tolist(),
                metadatas=[{"doc_id": i, "title": p["title"]} for i, p in zip(corpus.ids, corpus.payloads)])


async def chroma_async(corpus, server, *, name=None, fill=True, **kw):
    chromadb = need_module("chromadb", "chroma")
    from diversify.stores import AsyncChromaStore

    client = await chromadb.AsyncHttpClient(host=server.host, port=server.port)
    name = name or f"contract-{next(_names)}"
    if fill:
        col = await client.create_collection(name, embedding_function=None, metadata={"hnsw:space": "cosine"})
        await col.add(**_chroma_rows(corpus))
    else:
        col = await client.get_collection(name, embedding_function=None)
    return AsyncChromaStore(col, id_field="doc_id", **kw)


def chroma_sync(server, name, **kw):
    chromadb = need_module("chromadb", "chroma")
    from diversify.stores import ChromaStore

    col = chromadb.HttpClient(host=server.host, port=server.port).get_collection(name, embedding_function=None)
    return ChromaStore(col, id_field="doc_id", **kw)


def _lance_rows(corpus):
    return [{"id": i, "vector": v.tolist(), "title": p["title"]} for i, v, p in zip(corpus.ids, corpus.vectors,
                                                                                   corpus.payloads)]


async def lancedb_async(corpus, path, *, fill=True, **kw):
    lancedb = need_module("lancedb", "lancedb")
    from diversify.stores import AsyncLanceDBStore

    db = await lancedb.connect_async(str(path))
    table = await (db.create_table("docs", data=_lance_rows(corpus)) if fill else db.open_table("docs"))
    return AsyncLanceDBStore(table, distance_type="cosine", **kw)


def lancedb_sync(path, **kw):
    lancedb = need_module("lancedb", "lancedb")
    from diversify.stores import LanceDBStore

    return LanceDBStore(lancedb.connect(str(path)).open_table("docs"), distance_type="cosine", **kw)


# ---------------------------------------------------------------------- the shared contract


class TestAsyncQdrantStore(AsyncContract):
    async def make_async(self, corpus):
        return await qdrant_async(corpus)


class TestAsyncQdrantStoreEuclid(AsyncContract):
    async def make_async(self, corpus):
        store = await qdrant_async(corpus, distance="Euclid")
        assert store.scores_are == "distance"
        return store


class TestAsyncQdrantStorePayloadIds(AsyncContract):
    """Point ids are UUIDs; the ids the artifact knows live in the payload (``id_field``)."""

    async def make_async(self, corpus):
        return await qdrant_async(corpus, payload_ids=True)


class TestAsyncChromaStore(AsyncContract):
    exact = False  # HNSW (approximate) even for tiny collections; invariants only

    @pytest.fixture(autouse=True)
    def _server(self, chroma_server):
        self.server = chroma_server

    async def make_async(self, corpus):
        return await chroma_async(corpus, self.server)


class TestAsyncLanceDBStore(AsyncContract):
    @pytest.fixture(autouse=True)
    def _tmp(self, tmp_path):
        self.tmp = tmp_path

    async def make_async(self, corpus):
        return await lancedb_async(corpus, self.tmp / "lance")


# ---------------------------------------------------------------------- awrap == wrap


def _queries(corpus, n=6):
    return [corpus.query] + [corpus.vectors[j] for j in range(0, len(corpus.ids), max(1, len(corpus.ids) // (n - 1)))][
        :n - 1]


def _compare(corpus, sync_store, async_store, loop=None):
    """awrap(async) == wrap(sync) on every query, page 1 and page 2, for each refill mode."""
    checked = 0
    for refill in ("exclude", "grow"):
        sync_store._setup_refill(refill, None)
        async_store._setup_refill(refill, None)
        d = Diversifier(corpus.cluster_map, k=6, fetch_k=6, max_rounds=6)
        wrapped, awrapped = d.wrap(sync_store), d.awrap(async_store)

        async def pages(q):
            p1 = await awrapped(q)
            return p1, await awrapped(q, cursor=p1.cursor)

        for q in _queries(corpus):
            s1 = wrapped(q)
            s2 = wrapped(q, cursor=s1.cursor)
            a1, a2 = (loop.run_until_complete if loop else asyncio.run)(pages(q))
            assert (a1.ids, a2.ids) == (s1.ids, s2.ids), (refill, a1.ids, s1.ids, a2.ids, s2.ids)
            assert (a1.backend_calls, a2.backend_calls) == (s1.backend_calls, s2.backend_calls), refill
            assert [h.score for h in a1.hits] == pytest.approx([h.score for h in s1.hits], abs=1e-6)
            checked += 1
    return checked


def test_awrap_equals_wrap_qdrant_local():
    corpus = make_corpus(seed=7)
    loop = asyncio.new_event_loop()
    try:
        astore = loop.run_until_complete(qdrant_async(corpus))
        assert astore.local and astore.refill == "grow"  # auto, as the sync adapter's local mode
        assert _compare(corpus, qdrant_sync(corpus), astore, loop) == 12
    finally:
        loop.close()


def test_awrap_equals_wrap_chroma_server(chroma_server):
    corpus = make_corpus(seed=7)
    name = f"same-{next(_names)}"
    loop = asyncio.new_event_loop()
    try:
        astore = loop.run_until_complete(chroma_async(corpus, chroma_server, name=name))
        assert astore.refill == "grow"
        assert _compare(corpus, chroma_sync(chroma_server, name), astore, loop) == 12
    finally:
        loop.close()


def test_awrap_equals_wrap_lancedb(tmp_path):
    corpus = make_corpus(seed=7)
    loop = asyncio.new_event_loop()
    try:
        astore = loop.run_until_complete(lancedb_async(corpus, tmp_path))
        assert _compare(corpus, lancedb_sync(tmp_path), astore, loop) == 12
    finally:
        loop.close()


def test_write_clusters_async_equals_sync(tmp_path, chroma_server):
    """The same payloads after the async write-back as after the sync one (Chroma server, LanceDB)."""
    corpus = make_corpus(seed=7)

    async def written_async():
        c = await chroma_async(corpus, chroma_server, name="write-async")
        lance = await lancedb_async(corpus, tmp_path / "a")
        n = (await c.write_clusters(corpus.cluster_map), await lance.write_clusters(corpus.cluster_map))
        got = await c.collection.get(include=["metadatas"])
        rows = await lance.table.query().select(["id", "cluster_id", "is_representative"]).to_list()
        return n, {m["doc_id"]: (m.get("cluster_id"), m.get("is_representative")) for m in got["metadatas"]}, \
            {r["id"]: (r["cluster_id"], r["is_representative"]) for r in rows}

    n, chroma_meta, lance_rows = asyncio.run(written_async())
    assert n == (len(corpus.known_ids), len(corpus.known_ids))
    # the sync adapters on copies of the same data
    asyncio.run(chroma_async(corpus, chroma_server, name="write-sync"))
    sync_c = chroma_sync(chroma_server, "write-sync")
    assert sync_c.write_clusters(corpus.cluster_map) == len(corpus.known_ids)
    got = sync_c.collection.get(include=["metadatas"])
    assert {m["doc_id"]: (m.get("cluster_id"), m.get("is_representative")) for m in got["metadatas"]} == chroma_meta
    asyncio.run(lancedb_async(corpus, tmp_path / "s"))
    sync_l = lancedb_sync(tmp_path / "s")
    assert sync_l.write_clusters(corpus.cluster_map) == len(corpus.known_ids)
    rows = sync_l.table.to_arrow().select(["id", "cluster_id", "is_representative"]).to_pylist()
    assert {r["id"]: (r["cluster_id"], r["is_representative"]) for r in rows} == lance_rows
    for i, c in corpus.cluster_of.items():
        assert chroma_meta[i][0] == c and lance_rows[i][0] == c


# ---------------------------------------------------------------------- misuse


def test_wrap_refuses_an_async_adapter_and_awrap_takes_it():
    corpus = make_corpus(seed=7)

    async def go():
        store = await qdrant_async(corpus)
        with pytest.raises(InputTypeError, match=r"AsyncQdrantStore.*awrap"):
            Diversifier(corpus.cluster_map, k=4).wrap(store)

        async def search(query, k):
            return await store.search(query, k)

        with pytest.raises(InputTypeError, match=r"coroutine.*awrap"):
            Diversifier(corpus.cluster_map, k=4).wrap(search)
        return await Diversifier(corpus.cluster_map, k=4).awrap(store)(corpus.query)

    res = asyncio.run(go())
    assert res.ids == oracle_select(corpus.ranked_ids, corpus.cluster_of, k=4)


def test_async_qdrant_scores_are_needs_an_await_or_a_setting():
    corpus = make_corpus(seed=7)
    qc = need_module("qdrant_client", "qdrant")
    from diversify.stores import AsyncQdrantStore

    store = AsyncQdrantStore(qc.AsyncQdrantClient(":memory:"), "docs")
    with pytest.raises(ConfigError, match=r"await store.ascores_are\(\)"):
        store.scores_are  # noqa: B018
    assert AsyncQdrantStore(store.client, "docs", scores_are="distance").scores_are == "distance"
    assert asyncio.run(qdrant_async(corpus, distance="Dot")).scores_are == "similarity"


# ---------------------------------------------------------------------- the event loop stays free


async def _ticks_during_calls(store, corpus, *, supports_exclude):
    hb = Heartbeat()
    task = asyncio.create_task(hb.beat())
    await asyncio.sleep(0)
    counted, per_call = hb.counting(store.search)
    search = Diversifier(corpus.cluster_map, k=6, fetch_k=6, max_rounds=6).awrap(
        counted, supports_exclude=supports_exclude)
    try:
        for q in _queries(corpus):
            await search(q)
    finally:
        task.cancel()
    return per_call


@pytest.mark.parametrize("which", ["chroma", "lancedb"])
def test_the_loop_runs_while_an_async_store_call_is_in_flight(which, chroma_server, tmp_path):
    """Every awaited store call lets the heartbeat tick; the sync twin under awrap lets it tick
    in none of its calls (so the check can fail)."""
    corpus = make_corpus(seed=7)
    name = f"hb-{next(_names)}"

    async def go():
        if which == "chroma":
            store = await chroma_async(corpus, chroma_server, name=name)
        else:
            store = await lancedb_async(corpus, tmp_path)
        per_call = await _ticks_during_calls(store, corpus, supports_exclude=store.supports_exclude)
        sync = chroma_sync(chroma_server, name) if which == "chroma" else lancedb_sync(tmp_path)
        sync_per_call = await _ticks_during_calls(sync, corpus, supports_exclude=sync.supports_exclude)
        return per_call, sync_per_call

    per_call, sync_per_call = asyncio.run(go())
    assert len(per_call) >= 12 and all(t > 0 for t in per_call), per_call
    assert len(sync_per_call) == len(per_call) and all(t == 0 for t in sync_per_call), sync_per_call


def test_a_stalled_chroma_server_does_not_stall_the_loop(chroma_server):
    """The server frozen for 0.6 s while a refill call is in flight: the heartbeat (every 10 ms)
    keeps ticking; the sync adapter under awrap stops it for the whole stall."""
    corpus = make_corpus(seed=7)
    name = f"stall-{next(_names)}"
    stall = 0.6

    async def run(store):
        hb = Heartbeat()
        calls = 0

        async def search(query, k, exclude_ids=None):
            nonlocal calls
            calls += 1
            if calls == 2:  # a refill: freeze the server while it is asked
                with chroma_server.paused(stall):
                    out = store.search(query, k, exclude_ids)
                    out = await out if asyncio.iscoroutine(out) else out
                    await asyncio.sleep(stall)  # the timer resumes the server; wait for it here
                return out
            out = store.search(query, k, exclude_ids)
            return await out if asyncio.iscoroutine(out) else out

        task = asyncio.create_task(hb.beat(0.01))
        await asyncio.sleep(0.02)
        res = await Diversifier(corpus.cluster_map, k=6, fetch_k=6, max_rounds=6).awrap(
            search, supports_exclude=store.supports_exclude)(corpus.query)
        task.cancel()
        return res, max(hb.gaps), calls

    async def go():
        astore = await chroma_async(corpus, chroma_server, name=name)
        return await run(astore), await run(chroma_sync(chroma_server, name))

    (res, gap, calls), (sres, sgap, _) = asyncio.run(go())
    assert calls >= 2 and res.ids == sres.ids and len(res.ids) == 6
    assert gap < stall / 2, f"the loop stalled {gap:.3f} s with the async adapter"
    assert sgap >= stall * 0.9, f"the sync adapter blocked the loop only {sgap:.3f} s (the check must fail)"


# ---------------------------------------------------------------------- cancellation


def test_a_timeout_mid_refill_leaves_no_work_behind(chroma_server):
    """asyncio.timeout fires while the refill call waits on a frozen server: the query raises
    TimeoutError, no task or thread is left, and the same adapter then answers as before."""
    corpus = make_corpus(seed=7)
    name = f"cancel-{next(_names)}"

    async def go():
        store = await chroma_async(corpus, chroma_server, name=name)
        d = Diversifier(corpus.cluster_map, k=6, fetch_k=6, max_rounds=6)
        expected = await d.awrap(store)(corpus.query)
        assert expected.backend_calls >= 2
        calls, frozen = 0, []

        async def search(query, k, exclude_ids=None):
            nonlocal calls
            calls += 1
            if calls == 2 and not frozen:
                frozen.append(chroma_server.paused(1.5))
                frozen[0].__enter__()
            return await store.search(query, k, exclude_ids)

        threads = threading.active_count()
        t0 = time.perf_counter()
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.4):
                await d.awrap(search, supports_exclude=store.supports_exclude)(corpus.query)
        waited = time.perf_counter() - t0
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        frozen[0].__exit__(None, None, None)  # the server runs again
        after = await d.awrap(store)(corpus.query)
        return waited, others, threads, threading.active_count(), expected, after, calls

    waited, others, threads_before, threads_after, expected, after, calls = asyncio.run(go())
    assert calls == 2, calls  # cancelled in the refill, not before
    assert waited < 1.0, f"the timeout took {waited:.2f} s to cancel a call to a frozen server"
    assert others == [], others
    assert threads_after <= threads_before, (threads_before, threads_after)
    assert after.ids == expected.ids and after.backend_calls == expected.backend_calls
