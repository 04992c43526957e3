"""The served artifact replaced under concurrent requests: every answer equals the answer of one
of the two artifacts (never a mix), both are seen, nothing fails; a replacement that does not load
leaves the last good artifact serving and is counted."""

from __future__ import annotations

import os
import threading

import pytest
from serving import Server, grouped_map, need_serve

try:
    import httpx
except ImportError:  # the serve extra is absent: need_serve() skips (fails under DIVERSIFY_CI=1)
    httpx = None

from diversify.online import Hit, select

IDS = [f"d{i}" for i in range(300)]
HITS = [{"id": f"d{i}", "score": 1.0 - i / 1000} for i in range(0, 120, 2)]  # 60 hits


def _answer(cm) -> dict:
    cids = [None if c < 0 else c for c in cm.lookup([h["id"] for h in HITS]).tolist()]
    res = select([Hit(h["id"], h["score"]) for h in HITS], cids, k=10)
    return {"hits": [{"id": kp.id, "score": kp.score, "cluster_id": kp.cluster_id, "omitted": kp.omitted,
                      "omitted_ids": [f.id for f in kp.folded]} for kp in res.hits],
            "short": res.short, "omitted": res.omitted, "dropped": res.dropped, "considered": res.considered}


@pytest.fixture(scope="module")
def maps(tmp_path_factory):
    d = tmp_path_factory.mktemp("reload")
    pairs = grouped_map(IDS, [i // 2 for i in range(300)], "pairs")
    fours = grouped_map(IDS, [i // 4 for i in range(300)], "fours")
    pairs.save(d / "pairs.dvf")
    fours.save(d / "fours.dvf")
    return d, {"pairs": _answer(pairs), "fours": _answer(fours)}


def _replace(d, name: str, n: int) -> None:
    """Write a copy under a temporary name, then rename it over the served file (as `build -o` does)."""
    tmp = d / f"tmp{n}.dvf"
    tmp.write_bytes((d / f"{name}.dvf").read_bytes())
    os.replace(tmp, d / "served.dvf")


def test_every_answer_during_reloads_is_one_artifacts_answer(maps):
    need_serve()
    d, answers = maps
    assert answers["pairs"] != answers["fours"]
    _replace(d, "pairs", 0)
    srv = Server(str(d / "served.dvf"), "--poll", "0.02")
    seen: list = []
    errors: list = []
    stop = threading.Event()

    def ask() -> None:
        with httpx.Client(base_url=srv.url, timeout=10) as c:
            while not stop.is_set():
                r = c.post("/v1/diversify", json={"hits": HITS, "k": 10})
                if r.status_code != 200:
                    errors.append(r.text)
                    continue
                body = r.json()
                gen = body.pop("generation")
                which = next((n for n, a in answers.items() if a == body), None)
                seen.append((gen, which))

    threads = [threading.Thread(target=ask) for _ in range(4)]
    try:
        for t in threads:
            t.start()
        for n in range(1, 13):
            _replace(d, "fours" if n % 2 else "pairs", n)
            stop.wait(0.15)
    finally:
        stop.set()
        for t in threads:
            t.join()
        with httpx.Client(base_url=srv.url) as c:
            metrics = c.get("/metrics").text
        status, err = srv.stop()
    assert not errors, errors[:3]
    torn = [s for s in seen if s[1] is None]
    assert not torn, f"{len(torn)} of {len(seen)} answers equal neither artifact's"
    assert {w for _, w in seen} == {"pairs", "fours"}
    gens = {g for g, _ in seen}
    assert len(gens) >= 3  # several reloads were answered from
    by_gen = {}
    for g, w in seen:  # one generation answers from one artifact only
        by_gen.setdefault(g, set()).add(w)
    assert all(len(v) == 1 for v in by_gen.values()), by_gen
    assert by_gen.get(1, {"pairs"}) == {"pairs"}  # the first load served the pairs
    reloads = int(next(line.split()[-1] for line in metrics.splitlines() if line.startswith("diversify_reloads_total")))
    assert reloads >= len(gens) - 1 and status == 0, err


def test_a_replacement_that_does_not_load_keeps_the_last_good_one(maps):
    need_serve()
    d, answers = maps
    _replace(d, "pairs", 20)
    srv = Server(str(d / "served.dvf"), "--poll", "0.02")
    try:
        with httpx.Client(base_url=srv.url, timeout=10) as c:
            (d / "bad.dvf").write_bytes(b"not an artifact at all" * 10)
            os.replace(d / "bad.dvf", d / "served.dvf")
            for _ in range(200):
                metrics = c.get("/metrics").text
                if "diversify_reload_failures_total 1" in metrics:
                    break
                threading.Event().wait(0.02)
            assert "diversify_reload_failures_total 1" in metrics
            assert 'diversify_errors_total{kind="reload"} 1' in metrics
            body = c.post("/v1/diversify", json={"hits": HITS, "k": 10}).json()
            assert body.pop("generation") == 1 and body == answers["pairs"]
            _replace(d, "fours", 21)  # a good file again is picked up
            for _ in range(200):
                body = c.post("/v1/diversify", json={"hits": HITS, "k": 10}).json()
                if body.pop("generation") == 2:
                    break
                threading.Event().wait(0.02)
            assert body == answers["fours"]
    finally:
        status, err = srv.stop()
    assert status == 0 and "did not load" in err
