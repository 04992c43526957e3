"""The page's JSON endpoints (diversify.serve.page) over real HTTP: what they answer against the
artifact, the corpus and a live index, and the clean 4xx (one error naming the field) and bounded
work they give bad parameters, forged ids, hostile documents and large bodies."""

from __future__ import annotations

import json
import urllib.parse

import numpy as np
import pytest

from serve.pagekit import need  # noqa: E402

need("starlette")
need("uvicorn")

from diversify.artifact.views import cluster_view  # noqa: E402
from diversify.serve import corpus as corpus_module  # noqa: E402
from diversify.serve import page as page_module  # noqa: E402
from diversify.serve.page import CSP, LIMITS  # noqa: E402
from serve.pagekit import HOSTILE, HOSTILE_ID, PageServer, build_artifact, call, planted_records, write_jsonl  # noqa: E402


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    d = tmp_path_factory.mktemp("page-api")
    recs = planted_records()
    corpus = write_jsonl(d / "corpus.jsonl", recs)
    cm = build_artifact(d / "planted.dvf", recs)
    srv = PageServer(cluster_map=cm, corpus_path=str(corpus))
    yield srv, cm, {r["id"]: r["text"] for r in recs}, d
    srv.close()


def _q(**params) -> str:
    return urllib.parse.urlencode(params)


def test_summary_lists_the_largest_clusters_and_the_histogram(planted):
    srv, cm, texts, _ = planted
    status, s, headers = call(srv.url + "/page/api/summary?top=5")
    assert status == 200 and headers["content-security-policy"] == CSP
    cids, sizes = cm.cluster_sizes()
    oracle = sorted(zip((-sizes).tolist(), cids.tolist()))[:5]
    assert [(-c["size"], c["cluster_id"]) for c in s["largest"]] == oracle
    assert s["largest"][0]["size"] == 6 and s["largest"][0]["representative"].startswith("a-")
    assert s["largest"][0]["stages"] == ["minhash"]
    assert s["largest"][0]["text"] == texts[s["largest"][0]["representative"]][:160] + "…"
    assert sum(h["clusters"] for h in s["histogram"]) == cm.n_clusters
    assert sum(h["documents"] for h in s["histogram"]) == cm.n_docs
    assert [(h["lo"], h["hi"]) for h in s["histogram"]] == [(1, 1), (2, 2), (3, 4), (5, 8)]
    assert (s["documents"], s["clusters"], s["source"], s["has_index"]) == (cm.n_docs, cm.n_clusters, "artifact", False)
    assert s["corpus"]["documents"] == len(texts)


@pytest.mark.parametrize("top", ["0", "101", "abc", "1e3", "-1", "99999999999999999999999"])
def test_summary_refuses_a_top_out_of_bounds_naming_it(planted, top):
    status, body, _ = call(planted[0].url + "/page/api/summary?" + _q(top=top))
    assert status == 400 and body["error"]["field"] == "top" and "from 1 to 100" in body["error"]["message"]
    assert body["error"]["status"] == 400


def test_a_cluster_shows_its_members_texts_and_diffs(planted):
    srv, cm, texts, _ = planted
    big = int(cm.lookup(["a-0"])[0])
    status, c, _ = call(srv.url + f"/page/api/cluster/{big}?limit=50")
    assert status == 200
    oracle = cluster_view(cm, cluster_id=big)
    assert [(m["id"], m["similarity"], m["stages"]) for m in c["members"]] == \
        [(m["id"], m["similarity"], m["stages"]) for m in oracle["members"]]
    rep, *rest = c["members"]
    assert rep["is_representative"] and "diff" not in rep and rep["text"] == texts[rep["id"]]
    assert len(rest) == 5
    for m in rest:
        assert m["text"] == texts[m["id"]]
        assert "".join(t for op, t in m["diff"]["ops"] if op != "-") == texts[m["id"]]
        # the planted variants change single words in place: the marks are the words that differ by position
        a, b = texts[rep["id"]].split(), texts[m["id"]].split()
        differ = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
        assert " ".join(t for op, t in m["diff"]["ops"] if op == "-").split() == [a[i] for i in differ]
        assert " ".join(t for op, t in m["diff"]["ops"] if op == "+").split() == [b[i] for i in differ]
        assert 0.8 <= m["similarity"] < 1.0


def test_the_member_limit_counts_the_rest(planted):
    srv, cm, _, _ = planted
    big = int(cm.lookup(["a-0"])[0])
    status, c, _ = call(srv.url + f"/page/api/cluster/{big}?limit=2")
    assert status == 200 and len(c["members"]) == 2 and c["more"] == 4 and c["size"] == 6
    status, body, _ = call(srv.url + f"/page/api/cluster/{big}?limit={LIMITS['members'] + 1}")
    assert status == 400 and body["error"]["field"] == "limit"


@pytest.mark.parametrize("cluster", ["999999", "-1", "abc", "1.5", "9" * 30, "%00", "0x10", "9" * 19, "-" + "9" * 19])
def test_a_forged_cluster_id_is_a_404_naming_it(planted, cluster):
    status, body, _ = call(planted[0].url + "/page/api/cluster/" + cluster)
    assert status == 404 and body["error"]["field"] == "cluster_id"


def test_a_hostile_document_comes_back_as_data(planted):
    srv, cm, texts, _ = planted
    c = int(cm.lookup([HOSTILE_ID])[0])
    status, body, headers = call(srv.url + f"/page/api/cluster/{c}")
    assert status == 200 and headers["content-type"].startswith("application/json")
    got = {m["id"]: m["text"] for m in body["members"]}
    assert got[HOSTILE_ID] == texts[HOSTILE_ID] and got[HOSTILE_ID].startswith(HOSTILE)


def test_search_by_id_and_by_text(planted):
    srv, cm, texts, _ = planted
    status, r, _ = call(srv.url + "/page/api/search?" + _q(q="a-3"))
    assert status == 200 and r["id_match"] == {"id": "a-3", "cluster_id": int(cm.lookup(["a-3"])[0])}
    assert r["text"] is None and r["texts_skipped"] is True  # an id found: the texts are read on request only
    status, r, _ = call(srv.url + "/page/api/search?" + _q(q="a-3", texts=1))
    assert r["id_match"]["id"] == "a-3" and r["text"]["hits"] == [] and r["text"]["scanned"] == len(texts)
    status, r, _ = call(srv.url + "/page/api/search?" + _q(q="NEEDLE7"))
    assert status == 200 and r["id_match"] is None
    assert [h["id"] for h in r["text"]["hits"]] == ["s-7"] and "needle7" in r["text"]["hits"][0]["snippet"]
    assert r["text"]["hits"][0]["cluster_id"] == int(cm.lookup(["s-7"])[0]) and r["text"]["next"] is None
    status, r, _ = call(srv.url + "/page/api/search?" + _q(q=HOSTILE_ID))
    assert r["id_match"]["id"] == HOSTILE_ID


def test_text_search_reads_a_bounded_number_of_documents_a_request(planted, monkeypatch):
    srv, _, texts, _ = planted
    monkeypatch.setattr(corpus_module, "SCAN_DOCS", 5)
    order = list(texts)  # file order
    oracle = [i for i, t in enumerate(texts.values()) if "winter" in t.casefold()]
    found, start, pages = [], 0, 0
    while start is not None:
        status, r, _ = call(srv.url + "/page/api/search?" + _q(q="Winter", start=start, texts=1))
        assert status == 200 and r["text"]["scanned"] <= 5
        found += [h["record"] for h in r["text"]["hits"]]
        assert [order[h["record"]] for h in r["text"]["hits"]] == [h["id"] for h in r["text"]["hits"]]
        start, pages = r["text"]["next"], pages + 1
    assert found == oracle and pages >= len(texts) // 5


@pytest.mark.parametrize("query", ["", "   ", "x" * 1001])
def test_search_refuses_an_empty_or_long_query_naming_q(planted, query):
    status, body, _ = call(planted[0].url + "/page/api/search?" + _q(q=query))
    assert status == 400 and body["error"]["field"] == "q"


@pytest.mark.parametrize("raw", ["q=%ED%A0%80", "q=%FF%FE", "q=a%00b", "q=doc&start=-5", "q=doc&start=" + "9" * 40,
                                 "q=doc&texts=2", "q=doc&texts=yes"])
def test_search_takes_broken_bytes_as_text_and_refuses_a_bad_start(planted, raw):
    status, body, _ = call(planted[0].url + "/page/api/search?" + raw)
    if "start" in raw or "texts" in raw:
        assert status == 400 and body["error"]["field"] == raw.split("&")[1].split("=")[0]
    else:
        assert status == 200 and body["id_match"] is None and body["text"]["hits"] == []


def test_a_huge_start_reads_nothing(planted):
    status, r, _ = call(planted[0].url + "/page/api/search?" + _q(q="winter", start=1 << 40))
    assert status == 200 and r["text"] == {**r["text"], "hits": [], "scanned": 0, "next": None}


def test_pasting_needs_a_live_index(planted):
    status, body, _ = call(planted[0].url + "/page/api/near", data=b"some text")
    assert status == 404 and body["error"]["field"] == "text" and "live index" in body["error"]["message"]


@pytest.mark.parametrize("data,status", [(b"", 400), (b"  \n", 400), (b"\xff\xfe\x00", 400),
                                         (b"x" * (LIMITS["paste_bytes"] + 1), 413)])
def test_a_bad_paste_is_refused_before_any_work(planted, data, status):
    got, body, _ = call(planted[0].url + "/page/api/near", data=data)
    assert got == status and body["error"]["field"] == "text"


def test_the_page_and_its_files_and_nothing_else(planted):
    srv = planted[0]
    status, body, headers = call(srv.url + "/")
    assert status == 200 and headers["content-security-policy"] == CSP and "/page/static/app.js" in body["raw"]
    assert "http://" not in body["raw"] and "https://" not in body["raw"]
    for name in ("app.js", "page.css"):
        status, body, headers = call(srv.url + "/page/static/" + name)
        assert status == 200 and headers["x-content-type-options"] == "nosniff"
        assert "http://" not in body["raw"] and "https://" not in body["raw"] and "innerHTML" not in body["raw"]
    for name in ("index.html", "../page.py", "..%2Fpage.py", "corpus.py", "x" * 300):
        status, body, _ = call(srv.url + "/page/static/" + name)
        assert status == 404


def test_a_corpus_the_page_cannot_read_is_reported_not_raised(planted, tmp_path):
    srv, cm, _, _ = planted
    bad = tmp_path / "corpus.csv"
    bad.write_text("id,text\na-0,x\n")
    for path, words in ((bad, "JSONL or Parquet"), (tmp_path / "missing.jsonl", "not a file")):
        srv.snapshot.corpus_path = str(path)
        try:
            status, s, _ = call(srv.url + "/page/api/summary")
            assert status == 200 and words in s["corpus"]["error"] and s["largest"][0]["size"] == 6
            assert "text" not in s["largest"][0]
            status, r, _ = call(srv.url + "/page/api/search?" + _q(q="a-1", texts=1))
            assert status == 200 and r["id_match"]["id"] == "a-1" and r["text"] is None and words in r["corpus_error"]
        finally:
            srv.snapshot.corpus_path = str(planted[3] / "corpus.jsonl")


class PublicOnly:
    """An Index seen through its public names alone (as diversify.serve's per-thread index shows it)."""

    def __init__(self, index) -> None:
        self._index = index

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._index, name)


def test_a_live_index_summary_cluster_and_paste(planted, tmp_path, monkeypatch):
    import diversify

    srv, _, texts, d = planted
    index = diversify.Index(f"sqlite:///{tmp_path / 'live.db'}")
    index.add(list(texts.values()), ids=list(texts))
    # the server hands the page an Index per thread behind a proxy of its public names only
    srv.snapshot.cluster_map, srv.snapshot.index, cm = None, PublicOnly(index), srv.snapshot.cluster_map
    try:
        status, s, _ = call(srv.url + "/page/api/summary")
        assert status == 200 and s["source"] == "index" and s["has_index"] and s["partial"] is False
        assert s["largest"][0]["size"] == 6 and s["documents"] == len(texts)
        big = s["largest"][0]["cluster_id"]
        status, c, _ = call(srv.url + f"/page/api/cluster/{big}")
        assert status == 200 and c["members"][0]["is_representative"] and len(c["members"]) == 6
        assert sorted(m["id"] for m in c["members"]) == sorted(index.members(big))
        assert all(m["text"] == texts[m["id"]] for m in c["members"])
        status, body, _ = call(srv.url + "/page/api/cluster/123456789")
        assert status == 404 and body["error"]["field"] == "cluster_id"
        pasted = texts["a-0"].replace("winter", "summer", 1)
        status, r, _ = call(srv.url + "/page/api/near", data=pasted.encode())
        assert status == 200 and r["joined"] and r["cluster_id"] == big
        assert r["near"] and all(n["id"].startswith("a-") and 0.8 <= n["similarity"] <= 1 for n in r["near"])
        assert all("".join(t for op, t in n["diff"]["ops"] if op != "-") == texts[n["id"]] for n in r["near"])
        status, r, _ = call(srv.url + "/page/api/near", data=b"nothing like any document here")
        assert status == 200 and r["near"] == [] and not r["joined"]
        status, r, _ = call(srv.url + "/page/api/search?" + _q(q="c-1"))
        assert r["id_match"] == {"id": "c-1", "cluster_id": index.cluster_of(["c-1"])[0]}
        # the counts are reused for a few seconds, then read again
        index.add([texts["a-0"] + " and a new ending"], ids=["a-new"])
        status, s, _ = call(srv.url + "/page/api/summary")
        assert s["documents"] == len(texts)
        monkeypatch.setattr(page_module, "_INDEX_SUMMARY_AGE", 0.0)
        status, s, _ = call(srv.url + "/page/api/summary")
        assert s["documents"] == len(texts) + 1 and s["largest"][0]["size"] == 7
    finally:
        srv.snapshot.cluster_map, srv.snapshot.index = cm, None
        index.close()


def test_a_parquet_corpus_gives_the_same_texts(planted, tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    srv, cm, texts, _ = planted
    path = tmp_path / "corpus.parquet"
    pq.write_table(pa.table({"id": list(texts), "text": list(texts.values())}), path, row_group_size=4)
    srv.snapshot.corpus_path, before = str(path), srv.snapshot.corpus_path
    try:
        big = int(cm.lookup(["a-0"])[0])
        status, c, _ = call(srv.url + f"/page/api/cluster/{big}")
        assert status == 200 and all(m["text"] == texts[m["id"]] for m in c["members"])
        status, r, _ = call(srv.url + "/page/api/search?" + _q(q="needle11"))
        assert [h["id"] for h in r["text"]["hits"]] == ["s-11"]
    finally:
        srv.snapshot.corpus_path = before


def test_a_corpus_replaced_while_served_is_read_again(tmp_path):
    from diversify.serve.corpus import open_corpus

    recs = planted_records()
    path = write_jsonl(tmp_path / "c.jsonl", recs)
    c = open_corpus(path)
    assert c.texts_of(["a-1", "nope", 5]) == [recs[1]["text"], None, None]
    recs[1]["text"] = "a new text " * 50
    write_jsonl(tmp_path / "c.tmp", recs).replace(path)
    assert c.texts_of(["a-1"]) == [recs[1]["text"]]
    assert open_corpus(path) is c


def test_record_number_ids_when_the_corpus_has_none(tmp_path):
    from diversify.serve.corpus import open_corpus

    path = tmp_path / "noids.jsonl"
    path.write_text("".join(f'{{"text": "doc {i}"}}\n' for i in range(10)))
    c = open_corpus(path)
    assert c.id_kind == "int" and c.texts_of([3, 9, 10, "3"]) == ["doc 3", "doc 9", None, None]
    assert c.ids_of_rows([0, 4]) == [0, 4]
    assert np.array_equal(c.rows_of([2, 11]), np.array([2, None], dtype=object))


def test_missing_tools_skip_here_and_fail_in_ci(monkeypatch):
    from serve import pagekit

    monkeypatch.setattr(pagekit.shutil, "which", lambda name: None)
    monkeypatch.delenv("DIVERSIFY_CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="chromium is not installed"):
        pagekit.chromium()
    with pytest.raises(pytest.skip.Exception, match="no_such_module_here is not installed"):
        pagekit.need("no_such_module_here")
    monkeypatch.setenv("DIVERSIFY_CI", "1")
    with pytest.raises(pytest.fail.Exception, match="DIVERSIFY_CI=1 but chromium is not installed"):
        pagekit.chromium()
    with pytest.raises(pytest.fail.Exception, match="DIVERSIFY_CI=1 but no_such_module_here"):
        pagekit.need("no_such_module_here")


def test_int_ids_and_record_numbers_are_searched_as_numbers(tmp_path):
    recs = planted_records()
    path = tmp_path / "noids.jsonl"
    path.write_text("".join(f'{{"text": {json.dumps(r["text"])}}}\n' for r in recs))
    cm = build_artifact(tmp_path / "int.dvf", [{"id": i, "text": r["text"]} for i, r in enumerate(recs)])
    assert cm.id_kind == "int"
    srv = PageServer(cluster_map=cm, corpus_path=str(path))
    try:
        status, r, _ = call(srv.url + "/page/api/search?" + _q(q="3"))
        assert status == 200 and r["id_match"] == {"id": 3, "cluster_id": int(cm.lookup([3])[0])}
        status, r, _ = call(srv.url + "/page/api/search?" + _q(q="needle2"))
        assert [(h["id"], h["cluster_id"]) for h in r["text"]["hits"]] == [(13, int(cm.lookup([13])[0]))]
        status, c, _ = call(srv.url + f"/page/api/cluster/{int(cm.lookup([0])[0])}")
        assert status == 200 and all(m["text"] == recs[m["id"]]["text"] for m in c["members"])
        status, r, _ = call(srv.url + "/page/api/search?" + _q(q=str(1 << 63)))
        assert status == 200 and r["id_match"] is None
    finally:
        srv.close()


def test_a_corpus_that_fails_is_read_again_only_once_it_changes(tmp_path, monkeypatch):
    from diversify.errors import InputError
    from diversify.serve import corpus

    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": "a", "text": "one"}\n{"id": "b", "text": 5}\n')
    opened = []
    real = corpus.Corpus.__init__

    def counting(self, *a, **k):
        opened.append(1)
        real(self, *a, **k)

    monkeypatch.setattr(corpus.Corpus, "__init__", counting)
    for _ in range(3):
        with pytest.raises(InputError, match="must be a string"):
            corpus.open_corpus(path)
    assert len(opened) == 1
    path.write_text('{"id": "a", "text": "one"}\n{"id": "b", "text": "two"}\n')
    assert corpus.open_corpus(path).texts_of(["b"]) == ["two"] and len(opened) == 2


def test_lone_surrogates_in_a_corpus_come_back_escaped(tmp_path):
    recs = planted_records()
    cm = build_artifact(tmp_path / "a.dvf", recs)
    recs[0]["text"] = "bad \ud800 surrogate " + recs[0]["text"]  # json.dumps writes it as an escape
    srv = PageServer(cluster_map=cm, corpus_path=str(write_jsonl(tmp_path / "c.jsonl", recs)))
    try:
        c = int(cm.lookup(["a-0"])[0])
        status, body, _ = call(srv.url + f"/page/api/cluster/{c}?limit=50")
        assert status == 200 and {m["id"]: m["text"] for m in body["members"]}["a-0"] == recs[0]["text"]
        status, r, _ = call(srv.url + "/page/api/search?" + _q(q="surrogate"))
        assert status == 200 and [h["id"] for h in r["text"]["hits"]] == ["a-0"]
    finally:
        srv.close()


def test_a_reloaded_artifact_is_what_the_page_shows_next(planted, tmp_path):
    srv, cm, _, _ = planted
    recs = [r for r in planted_records() if not r["id"].startswith("a-")]  # the largest family gone
    smaller = build_artifact(tmp_path / "smaller.dvf", recs)
    srv.snapshot.cluster_map, srv.snapshot.generation = smaller, 2
    try:
        status, s, _ = call(srv.url + "/page/api/summary")
        assert status == 200 and s["generation"] == 2 and s["documents"] == len(recs)
        assert s["largest"][0]["size"] == 3 and s["largest"][0]["representative"] in ("h-0", HOSTILE_ID, "h-2")
        old = int(cm.lookup(["a-0"])[0])  # a cluster id of the old artifact, asked of the new one
        status, body, _ = call(srv.url + f"/page/api/cluster/{old}")
        assert old in smaller.cluster_sizes()[0].tolist()  # ids are document indices: the new one has it too
        assert status == 200 and [m["id"] for m in body["members"]] == \
            [m["id"] for m in cluster_view(smaller, cluster_id=old, limit=12)["members"]]
        assert not {m["id"] for m in body["members"]} & {f"a-{i}" for i in range(6)}
    finally:
        srv.snapshot.cluster_map, srv.snapshot.generation = cm, 1
    status, s, _ = call(srv.url + "/page/api/summary")
    assert s["largest"][0]["size"] == 6 and s["generation"] == 1
