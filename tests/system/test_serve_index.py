"""`diversify serve sqlite:///...`: the live-index endpoints over HTTP, 4 writers and 4 readers at once
(no document lost), the bearer token on the write endpoints, and the answers as Index gives them."""

from __future__ import annotations

import random
import threading

import pytest
from index.servers import postgres_server  # noqa: F401  (session fixture)
from index.servers_redis import redis_server  # noqa: F401  (session fixture)
from serving import Server, need_serve

try:
    import httpx
except ImportError:  # the serve extra is absent: need_serve() skips (fails under DIVERSIFY_CI=1)
    httpx = None

TOKEN = "test-token-0123456789abcdef"
WORDS = [f"w{i}" for i in range(400)]


def _text(seed: int) -> str:
    rnd = random.Random(seed)
    return " ".join(rnd.choice(WORDS) for _ in range(40))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    need_serve()
    from diversify import Index

    url = f"sqlite:///{tmp_path_factory.mktemp('live') / 'live.db'}"
    Index(url).close()  # an empty index: the server opens an existing one
    srv = Server(url, env={"DIVERSIFY_SERVE_TOKEN": TOKEN})
    yield srv
    status, err = srv.stop()
    assert status == 0, err


def _auth() -> dict:
    return {"Authorization": f"Bearer {TOKEN}"}


def test_write_endpoints_need_the_token(server):
    body = {"documents": [{"id": "t0", "text": _text(1)}]}
    for headers in ({}, {"Authorization": "Bearer wrong-token-0123456789"}, {"Authorization": TOKEN},
                    {"Authorization": "Basic " + TOKEN}):
        r = httpx.post(server.url + "/v1/index/add", json=body, headers=headers)
        assert r.status_code == 401 and r.json()["error"]["field"] == "Authorization"
        assert r.headers["www-authenticate"] == "Bearer" and TOKEN not in r.text
    r = httpx.post(server.url + "/v1/index/delete", json={"ids": ["t0"]})
    assert r.status_code == 401
    r = httpx.post(server.url + "/v1/index/query", json={"documents": [{"text": _text(1)}]})  # a read: open
    assert r.status_code == 200


def test_four_writers_and_four_readers_lose_nothing(server):
    added: dict = {}
    errors: list = []
    done = threading.Event()

    def write(w: int) -> None:
        with httpx.Client(base_url=server.url, headers=_auth(), timeout=60) as c:
            for b in range(6):
                docs = [{"id": f"w{w}-{b}-{j}", "text": _text(1000 * w + 10 * b + j % 3)} for j in range(5)]
                r = c.post("/v1/index/add", json={"documents": docs})
                if r.status_code != 200:
                    errors.append(r.text)
                    continue
                for m in r.json()["matches"]:
                    added[m["id"]] = m["cluster"]

    def read(n: int) -> None:
        with httpx.Client(base_url=server.url, timeout=60) as c:
            while not done.is_set():
                r = c.post("/v1/index/query", json={"documents": [{"text": _text(1000 * (n % 4))}]})
                r2 = c.post("/v1/clusters", json={"ids": [f"w{n % 4}-0-0", "none"]})
                if r.status_code != 200 or r2.status_code != 200:
                    errors.append(r.text + r2.text)
                elif r2.json()["cluster_ids"][1] is not None:
                    errors.append(f"an unknown id has a cluster: {r2.text}")

    writers = [threading.Thread(target=write, args=(w,)) for w in range(4)]
    readers = [threading.Thread(target=read, args=(n,)) for n in range(4)]
    for t in writers + readers:
        t.start()
    for t in writers:
        t.join()
    done.set()
    for t in readers:
        t.join()
    assert not errors, errors[:3]
    assert len(added) == 4 * 6 * 5
    got = httpx.post(server.url + "/v1/clusters", json={"ids": sorted(added)}).json()["cluster_ids"]
    assert got == [added[i] for i in sorted(added)]  # every document is there, in the cluster add gave it
    assert None not in got
    # j = 0 and j = 3 of a batch are the same text: the second joined the first's cluster
    assert added["w2-1-0"] == added["w2-1-3"]
    view = httpx.get(server.url + f"/v1/clusters/{added['w2-1-0']}").json()
    assert view["size"] == 2 and {m["id"] for m in view["members"]} == {"w2-1-0", "w2-1-3"}
    assert view["members"][0]["is_representative"] and view["representative"] == view["members"][0]["id"]


def test_query_add_conflict_and_delete_as_the_index_says(server):
    with httpx.Client(base_url=server.url, headers=_auth(), timeout=60) as c:
        r = c.post("/v1/index/add", json={"documents": [{"id": "q0", "text": _text(77)}]})
        assert r.status_code == 200 and r.json()["matches"][0]["joined"] is False
        r = c.post("/v1/index/query", json={"documents": [{"id": "probe", "text": _text(77)}, {"text": "x y z"}]})
        assert r.status_code == 422 and r.json()["error"]["field"] == "documents[].id"  # ids: all or none
        r = c.post("/v1/index/query", json={"documents": [{"id": "probe", "text": _text(77)},
                                                          {"id": "p2", "text": "x y z"}]})
        m = r.json()["matches"]
        assert m[0]["id"] == "probe" and m[0]["representative"] == "q0" and m[0]["similarity"] == 1.0
        assert m[1]["cluster"] is None and m[1]["joined"] is False
        r = c.post("/v1/index/add", json={"documents": [{"id": "q0", "text": "again"}]})
        assert r.status_code == 409 and r.json()["error"]["field"] == "documents[].id"
        r = c.post("/v1/index/add", json={"documents": [{"text": "no id"}]})
        assert r.status_code == 422 and r.json()["error"]["field"] == "documents[0].id"
        r = c.post("/v1/index/add", json={"documents": []})
        assert r.status_code == 422 and r.json()["error"]["field"] == "documents"
        r = c.post("/v1/index/delete", json={"ids": ["q0", "never-added"]})
        assert r.json() == {"deleted": 1, "missing": ["never-added"], "reassigned": 0}
        assert c.post("/v1/clusters", json={"ids": ["q0"]}).json()["cluster_ids"] == [None]
        body = c.post("/v1/diversify", json={"hits": [{"id": "w0-0-0", "score": 2}, {"id": "w0-0-3", "score": 1}],
                                             "k": 2}).json()
        assert [h["id"] for h in body["hits"]] == ["w0-0-0"] and body["hits"][0]["omitted_ids"] == ["w0-0-3"]


def test_the_client_calls_the_live_index(server):
    from diversify.client import Client, RequestRejected

    with Client(server.url, token=TOKEN) as c:
        m = c.index_add([{"id": "c0", "text": _text(555)}, {"id": "c1", "text": _text(555)}])
        assert m[1]["joined"] and m[1]["representative"] == "c0"
        assert c.index_query([_text(555)])[0]["representative"] == "c0"
        assert c.clusters(["c1"]) == [m[1]["cluster"]]
        assert c.index_delete(["c1"])["deleted"] == 1
    with Client(server.url) as c, pytest.raises(RequestRejected) as exc:
        c.index_delete(["c0"])
    assert exc.value.status == 401


@pytest.mark.parametrize("kind", ["postgresql", "redis"])
def test_server_indexes_are_served_too(kind, request):
    """The same endpoints over a PostgreSQL and a Redis index, 2 writers at once; the password of the
    URL never reaches the output."""
    need_serve()
    from diversify import Index

    if kind == "postgresql":
        server = request.getfixturevalue("postgres_server")
        url, secret = server.new_database(), server.password
    else:
        server = request.getfixturevalue("redis_server")
        url, secret = server.fresh_url(), None
    Index(url).close()
    srv = Server(url, env={"DIVERSIFY_SERVE_TOKEN": TOKEN})
    added: dict = {}
    errors: list = []

    def write(w: int) -> None:
        with httpx.Client(base_url=srv.url, headers=_auth(), timeout=60) as c:
            for b in range(3):
                docs = [{"id": f"{w}-{b}-{j}", "text": _text(100 * w + 10 * b + j % 2)} for j in range(4)]
                r = c.post("/v1/index/add", json={"documents": docs})
                if r.status_code != 200:
                    errors.append(r.text)
                    continue
                added.update({m["id"]: m["cluster"] for m in r.json()["matches"]})

    try:
        threads = [threading.Thread(target=write, args=(w,)) for w in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors[:2]
        got = httpx.post(srv.url + "/v1/clusters", json={"ids": sorted(added)}).json()["cluster_ids"]
        assert got == [added[i] for i in sorted(added)] and len(added) == 24
        assert added["1-2-0"] == added["1-2-2"]  # the same text joined the first's cluster
        assert httpx.get(srv.url + "/healthz").json()["source"] == "index"
    finally:
        status, err = srv.stop()
    assert status == 0, err
    if secret:
        assert secret not in err
