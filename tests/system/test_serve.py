"""`diversify serve ARTIFACT` run as users run it (a subprocess on a free loopback port), called with a
real HTTP client: the answers equal the in-process ones, the schema lists every route, the metrics
count, bad requests get one JSON error naming the field, and the command's rules hold."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from serving import ROOT, Server, grouped_map, need_serve

from diversify.artifact.views import cluster_view
from diversify.online import Hit, select

IDS = [f"d{i}" for i in range(60)]
GROUPS = [i // 3 for i in range(60)]  # clusters of three


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    path = tmp_path_factory.mktemp("serve") / "a.dvf"
    grouped_map(IDS, GROUPS).save(path)
    return path


@pytest.fixture(scope="module")
def server(artifact):
    need_serve()
    srv = Server(str(artifact), "--client-timeout", "1")
    yield srv
    status, err = srv.stop()
    assert status == 0 and "stopped" in err and "Traceback" not in err


@pytest.fixture(scope="module")
def http(server):
    import httpx

    with httpx.Client(base_url=server.url, timeout=10) as c:
        yield c


def expected(cm, hits: list, **kw) -> dict:
    """What the server must answer: diversify.select in-process, written as the API writes it."""
    cids = [None if c < 0 else c for c in cm.lookup([h["id"] for h in hits]).tolist()]
    res = select([Hit(h["id"], h.get("score")) for h in hits], cids, **kw)
    return {"hits": [{"id": kp.id, "score": kp.score, "cluster_id": kp.cluster_id, "omitted": kp.omitted,
                      "omitted_ids": [f.id for f in kp.folded]} for kp in res.hits],
            "short": res.short, "omitted": res.omitted, "dropped": res.dropped, "considered": res.considered}


_hit = st.fixed_dictionaries({"id": st.sampled_from(IDS + ["x1", "x2", "zz"]),
                              "score": st.sampled_from([0.9, 0.8, 0.8, 0.5, 0.1, -1.0])})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(hits=st.lists(_hit, max_size=40, unique_by=lambda h: h["id"]), k=st.integers(1, 12),
       n=st.integers(1, 3), unknown=st.sampled_from(["own", "drop"]))
def test_diversify_answers_as_select_in_process(http, artifact, hits, k, n, unknown):
    from diversify import load

    cm = load(artifact)
    r = http.post("/v1/diversify", json={"hits": hits, "k": k, "max_per_cluster": n, "unknown": unknown})
    assert r.status_code == 200, r.text
    got = r.json()
    assert got.pop("generation") == 1
    assert got == expected(cm, hits, k=k, max_per_cluster=n, unknown=unknown)


def test_on_the_fly_folding_by_text_answers_as_select(http):
    text = "the river flooded the old town last night and the bridge closed"
    hits = [{"id": "x1", "score": 0.9, "text": text}, {"id": "x2", "score": 0.8, "text": text + " again"},
            {"id": "x3", "score": 0.7, "text": "a different story altogether about the weather"}]
    r = http.post("/v1/diversify", json={"hits": hits, "k": 3, "fold_text_threshold": 0.5})
    assert r.status_code == 200, r.text
    res = select([Hit(h["id"], h["score"], text=h["text"]) for h in hits], None, k=3, fold_text_threshold=0.5)
    assert [h["id"] for h in r.json()["hits"]] == [kp.id for kp in res.hits] == ["x1", "x3"]
    assert r.json()["hits"][0]["omitted_ids"] == ["x2"]


def test_clusters_and_one_cluster_as_the_artifact_says(http, artifact):
    from diversify import load

    cm = load(artifact)
    ids = ["d0", "d4", "nope", "d59", 7]
    r = http.post("/v1/clusters", json={"ids": ids})
    assert r.status_code == 200
    assert r.json()["cluster_ids"] == [None if c < 0 else c for c in cm.lookup(ids).tolist()] == [0, 3, None, 57,
                                                                                                   None]
    r = http.get("/v1/clusters/3", params={"limit": 2})
    assert r.status_code == 200
    view = r.json()
    assert view.pop("generation") == 1
    assert view == cluster_view(cm, cluster_id=3, limit=2)
    assert view["members"][0] == {"id": "d3", "is_representative": True, "similarity": None, "stages": []}
    assert view["members"][1]["stages"] == ["minhash"] and view["more"] == 1


def test_the_schema_lists_every_route_and_every_listed_route_answers(http, artifact):
    schema = http.get("/openapi.json").json()
    assert schema["openapi"].startswith("3.")
    from diversify.serve.app import create_app

    app = create_app(str(artifact))
    served = {r.path for r in app.routes if r.path.startswith(("/v1", "/healthz", "/metrics"))}
    assert set(schema["paths"]) == served
    for path, ops in schema["paths"].items():
        for method in ops:
            url = path.replace("{cluster_id}", "0")
            r = http.request(method.upper(), url, json={} if method == "post" else None)
            assert r.status_code not in (405, 500), (method, path, r.text)
            if r.status_code == 404:  # only the live-index routes, on an artifact server
                assert path.startswith("/v1/index/") and "live index" in r.json()["error"]["message"]
    for name, ref in (("DiversifyRequest", "/v1/diversify"), ("ClustersRequest", "/v1/clusters")):
        body = schema["paths"][ref]["post"]["requestBody"]["content"]["application/json"]["schema"]
        assert body["$ref"].endswith(name) and name in schema["components"]["schemas"]


def test_metrics_count_requests_latency_and_folds(http):
    before = _metric(http.get("/metrics").text, "diversify_folded_total")
    r = http.post("/v1/diversify", json={"hits": [{"id": "d0", "score": 1}, {"id": "d1", "score": 0.5},
                                                  {"id": "d2", "score": 0.2}], "k": 5})
    assert r.json()["omitted"] == 2
    http.post("/v1/diversify", json={"hits": "nope"})
    text = http.get("/metrics").text
    assert _metric(text, "diversify_folded_total") == before + 2
    assert _metric(text, 'diversify_requests_total{route="/v1/diversify",method="POST",status="422"}') >= 1
    assert _metric(text, 'diversify_request_duration_seconds_count{route="/v1/diversify"}') >= 2
    assert _metric(text, 'diversify_errors_total{kind="client"}') >= 1
    assert _metric(text, "diversify_reloads_total") == 0 and _metric(text, "diversify_generation") == 1
    for line in text.splitlines():  # the text format: comments, or NAME{labels} VALUE
        assert line.startswith("# ") or len(line.rsplit(" ", 1)) == 2 and float(line.rsplit(" ", 1)[1]) >= 0


def _metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.rsplit(" ", 1)[0] == name:
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not in the metrics")


HOSTILE = [
    # (body bytes or JSON value, status, field)
    (b"{" * 100_000, 400, None),  # deep JSON
    ({"hits": [[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]}, 400, "hits[0][0][0][0][0][0][0][0][0][0][0][0][0][0][0]"),
    (b'{"hits": [{"id": "\\ud800", "score": 1}]}', 400, "hits[0].id"),  # a lone surrogate, escaped
    (b'{"hits": [{"id": "a", "score": 1, "text": "ok \\udfff"}]}', 400, "hits[0].text"),
    (b'{"hits": [], "\\ud800": 1}', 400, None),  # in a key
    (b"\xff\xfe", 400, None),  # not UTF-8
    (b"not json", 400, None),
    (b'{"hits": [{"id": "a", "score": NaN}]}', 400, None),
    ({"hits": "nope"}, 422, "hits"),
    ({"hits": [{"id": 1.5}]}, 422, "hits[0].id"),
    ({"hits": [{"id": None}]}, 422, "hits[0].id"),
    ({"hits": [{"id": True}]}, 422, "hits[0].id"),
    ({"hits": [{"id": 2**70}]}, 422, "hits[0].id"),  # a forged id beyond int64
    ({"hits": [{"id": "a" * 5000}]}, 413, "hits[0].id"),
    ({"hits": [{"id": "a", "score": "high"}]}, 422, "hits[0].score"),
    ({"hits": [{"id": "a", "score": 10**300}]}, 422, "hits[0].score"),
    ({"hits": [{"id": "a", "vector": ["x"]}]}, 422, "hits[0].vector[0]"),
    ({"hits": [{"id": "a", "vector": [1.0] * 5000}]}, 413, "hits[0].vector"),
    ({"hits": [{"id": "a", "text": "w " * 150_000}]}, 413, "hits[0].text"),
    ({"hits": [{"id": f"d{i}"} for i in range(1001)]}, 413, "hits"),
    ({"hits": [], "k": 0}, 422, "k"),
    ({"hits": [], "k": 10**9}, 422, "k"),
    ({"hits": [], "k": "10"}, 422, "k"),
    ({"hits": [], "max_per_cluster": -1}, 422, "max_per_cluster"),
    ({"hits": [], "unknown": "keep"}, 422, "unknown"),
    ({"hits": [], "fold_threshold": 2}, 422, "fold_threshold"),
    ({"hits": [], "extra": 1}, 422, "extra"),
    ({"hits": [{"id": "a", "sc0re": 1}]}, 422, "hits[0].sc0re"),
    ({}, 422, "hits"),
    ([1, 2], 422, None),
    ({"hits": [{"id": "a", "vector": [1.0, 0.0]}, {"id": "b", "vector": [1.0]}], "fold_threshold": 0.9}, 422, "hits"),
]


@pytest.mark.parametrize("body,status,field", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_bodies_get_one_json_error_naming_the_field(http, body, status, field):
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    r = http.post("/v1/diversify", content=content, headers={"content-type": "application/json"})
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) == {"status", "field", "message"} and err["status"] == status
    assert err["field"] == field
    assert "Traceback" not in r.text and len(err["message"]) < 600
    assert http.get("/healthz").status_code == 200  # and the server goes on


def test_a_body_over_the_limit_is_refused_before_it_is_read(http):
    r = http.post("/v1/clusters", content=b"x" * (5 << 20))
    assert r.status_code == 413 and "at most" in r.json()["error"]["message"]
    r = http.post("/v1/clusters", json={"ids": ["a"] * 10_001})
    assert r.status_code == 413 and r.json()["error"]["field"] == "ids"


@pytest.mark.parametrize("path,status,field", [
    ("/v1/clusters/abc", 422, "cluster_id"), ("/v1/clusters/99999999999999999999999", 422, "cluster_id"),
    ("/v1/clusters/1", 404, "cluster_id"),  # no cluster 1: the clusters are 0, 3, 6...
    ("/v1/clusters/0?limit=-1", 422, "limit"), ("/v1/clusters/0?limit=x", 422, "limit"),
    ("/nowhere", 404, None), ("/v1/diversify", 405, None)])
def test_bad_paths_get_json_errors(http, path, status, field):
    r = http.get(path)
    assert r.status_code == status, r.text
    assert r.json()["error"]["field"] == field


def test_a_client_that_trickles_its_headers_is_cut_off(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        start = time.monotonic()
        s.sendall(b"GET /healthz HTTP/1.1\r\n")
        closed = False
        while time.monotonic() - start < 8:
            try:
                s.sendall(b"X: y\r\n")
            except OSError:
                closed = True
                break
            s.settimeout(0.2)
            try:
                if s.recv(1) == b"":
                    closed = True
                    break
            except TimeoutError:
                pass
        assert closed and time.monotonic() - start < 5  # --client-timeout 1


def test_a_client_that_trickles_its_body_gets_408(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(b"POST /v1/clusters HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 100\r\n\r\n{\"ids\": [")
        start = time.monotonic()
        s.settimeout(6)
        answer = _read_response(s)
        assert answer.startswith(b"HTTP/1.1 408") and time.monotonic() - start < 5
        assert b'"status":408' in answer


def _read_response(s: socket.socket) -> bytes:
    """One whole HTTP response (head and a Content-Length body), however TCP splits it."""
    data = b""
    while True:
        head, sep, body = data.partition(b"\r\n\r\n")
        if sep:
            length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")[1:]
                           if line.lower().startswith(b"content-length:")), 0)
            if len(body) >= length:
                return data
        chunk = s.recv(4096)
        if not chunk:
            return data
        data += chunk


def test_the_client_has_a_method_per_endpoint(server, artifact):
    from diversify.client import Client, RequestRejected

    with Client(server.url) as c:
        out = c.diversify([Hit("d0", 0.9), {"id": "d1", "score": 0.8}, Hit("d3", 0.7)], k=2)
        assert [(h["id"], h["omitted_ids"]) for h in out["hits"]] == [("d0", ["d1"]), ("d3", [])]
        assert c.clusters(["d0", "nope"]) == [0, None]
        assert c.cluster(3, limit=1)["members"][0]["id"] == "d3"
        assert c.health()["status"] == "ok" and "diversify_requests_total" in c.metrics()
        with pytest.raises(RequestRejected) as exc:
            c.diversify([{"id": 1.5}])
        assert exc.value.status == 422 and exc.value.field == "hits[0].id" and isinstance(exc.value, ValueError)
        with pytest.raises(RequestRejected, match="live index") as exc:
            c.index_query(["a text"])
        assert exc.value.status == 404


def test_the_client_names_a_server_that_is_not_there():
    need_serve()
    from serving import free_port

    from diversify.client import Client, ServiceError

    with Client(f"http://127.0.0.1:{free_port()}", timeout=2) as c, pytest.raises(ServiceError,
                                                                                 match="did not answer"):
        c.health()


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "diversify", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})


def test_a_non_loopback_address_needs_a_token(artifact, tmp_path):
    need_serve()
    env = {"DIVERSIFY_SERVE_TOKEN": ""}
    p = _cli("serve", str(artifact), "--host", "0.0.0.0", "--check", env=env)
    assert p.returncode == 2 and "reachable from other machines" in p.stderr and "DIVERSIFY_SERVE_TOKEN" in p.stderr
    short = tmp_path / "short"
    short.write_text("abc\n")
    p = _cli("serve", str(artifact), "--host", "0.0.0.0", "--token-file", str(short), "--check", env=env)
    assert p.returncode == 2 and "at least 16" in p.stderr and "abc" not in p.stderr
    good = tmp_path / "good"
    good.write_text("s3cret-token-0123456789\n")
    p = _cli("serve", str(artifact), "--host", "0.0.0.0", "--token-file", str(good), "--check", env=env)
    assert p.returncode == 0 and "write endpoints need the token" in p.stderr
    p = _cli("serve", str(artifact), "--check", env=env)  # loopback by default: no token needed
    assert p.returncode == 0 and "127.0.0.1" in p.stderr and "60 documents in 20 clusters" in p.stderr


@pytest.mark.parametrize("args,says", [
    (["--port", "70000"], "`--port` must be in [0, 65535]"), (["--poll", "-1"], "`--poll`"),
    (["--client-timeout", "0"], "`--client-timeout`"), (["--corpus", "/nonexistent.jsonl"], "`--corpus`")])
def test_bad_options_are_named(artifact, args, says):
    p = _cli("serve", str(artifact), "--check", *args)
    assert p.returncode == 2 and says in p.stderr and "Traceback" not in p.stderr


def test_a_missing_artifact_is_one_line(tmp_path):
    need_serve()
    p = _cli("serve", str(tmp_path / "none.dvf"), "--check")
    assert p.returncode != 0 and len(p.stderr.strip().splitlines()) == 1 and "none.dvf" in p.stderr


#: the command as the console script runs it (which leaves with os._exit after the exit handlers)
_MODULES = ("import atexit, json, runpy, sys\nsys.argv = ['diversify', *sys.argv[1:]]\n"
            "atexit.register(lambda: print(json.dumps(sorted(sys.modules)), file=sys.stderr))\n"
            "runpy.run_module('diversify', run_name='__main__')\n")


@pytest.mark.parametrize("command", [["serve", "{a}", "--check"], ["show", "{a}", "3"], ["stats", "{a}"]])
def test_serving_and_looking_up_load_no_kernels(artifact, command):
    """Fast start: what answers lookups imports neither numba nor the kernels."""
    if command[0] == "serve":
        need_serve()
    args = [c.format(a=artifact) for c in command]
    p = subprocess.run([sys.executable, "-c", _MODULES, *args], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    loaded = json.loads(p.stderr.strip().splitlines()[-1])
    heavy = sorted(m for m in loaded if m.split(".")[0] in ("numba", "llvmlite") or m.startswith("diversify._kernels"))
    assert not heavy, heavy
    assert "diversify.cli.main" in loaded


def test_a_client_that_leaves_mid_body_costs_no_traceback(server, http):
    """The module's server fixture asserts at its end that the server printed no traceback."""
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
            s.sendall(b"POST /v1/diversify HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"hits\": [")
    time.sleep(0.3)
    assert http.get("/healthz").status_code == 200
    text = http.get("/metrics").text
    assert 'diversify_errors_total{kind="server"} 0' in text.splitlines()


def test_a_large_body_is_answered_as_a_small_one(http, artifact):
    from diversify import load

    hits = [{"id": f"d{i % 60}" if i < 60 else f"u{i}", "score": 1.0 - i / 2000, "text": "x" * 100} for i in range(1000)]
    r = http.post("/v1/diversify", json={"hits": hits, "k": 30})  # > 64 KiB: parsed in a worker thread
    assert r.status_code == 200
    got = r.json()
    got.pop("generation")
    assert got == expected(load(artifact), hits, k=30)


def test_without_the_extra_the_command_names_the_install(artifact, tmp_path):
    hidden = tmp_path / "starlette"
    hidden.mkdir()
    (hidden / "__init__.py").write_text("raise ImportError('not installed here')\n")
    p = subprocess.run([sys.executable, "-m", "diversify", "serve", str(artifact), "--check"], capture_output=True,
                       text=True, timeout=120, env={**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"})
    assert p.returncode != 0 and len(p.stderr.strip().splitlines()) == 1
    assert "pip install 'diversify-retrieval[serve]'" in p.stderr and "starlette" in p.stderr


def test_a_live_index_that_does_not_exist_is_one_line(tmp_path):
    need_serve()
    p = _cli("serve", f"sqlite:///{tmp_path / 'none.db'}", "--check")
    assert p.returncode != 0 and len(p.stderr.strip().splitlines()) == 1 and "there is no index" in p.stderr
    assert not (tmp_path / "none.db").exists() or (tmp_path / "none.db").stat().st_size == 0
