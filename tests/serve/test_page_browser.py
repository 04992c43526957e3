"""The page in a real headless browser (Debian's chromium, driven from its command line): the DOM
after the page's script ran, for each view by its URL, and screenshots. A document holding
``<script>`` or an ``onerror`` handler must show those characters and run nothing."""

from __future__ import annotations

import html
import re
import struct
import urllib.parse

import pytest

from serve.pagekit import need  # noqa: E402

need("starlette")
need("uvicorn")

from serve.pagekit import (  # noqa: E402
    HOSTILE_ID,
    PageServer,
    build_artifact,
    chromium,
    dump_dom,
    planted_records,
    screenshot,
    write_jsonl,
)


@pytest.fixture(scope="module")
def browser():
    return chromium()


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    d = tmp_path_factory.mktemp("page-browser")
    recs = planted_records()
    corpus = write_jsonl(d / "corpus.jsonl", recs)
    cm = build_artifact(d / "planted.dvf", recs)
    srv = PageServer(cluster_map=cm, corpus_path=str(corpus))
    yield srv, cm, d
    srv.close()


def _dom(browser, page, url: str) -> str:
    srv, _, d = page
    dom = dump_dom(browser, srv.url + url, d / "profile")
    assert 'data-ready="1"' in dom, dom[-3000:]  # the script finished its view
    assert 'id="error"' not in dom, dom[-3000:]
    return dom


def _not_executed(dom: str) -> None:
    assert "data-pwned" not in dom.split("<main", 1)[0] and "<body data-pwned" not in dom
    assert not re.search(r"<body[^>]*data-pwned", dom)
    assert "<title>diversify: clusters</title>" in dom
    assert '<b id="pwned-id"' not in dom  # the hostile id never became an element
    assert "<script>document.title" not in dom and "<img src=\"x\"" not in dom


def test_home_lists_the_largest_cluster_first_and_the_histogram(browser, page):
    _, cm, _ = page
    dom = _dom(browser, page, "/")
    rows = re.findall(r'<tr data-cluster="(\d+)" data-size="(\d+)">', dom)
    cids, sizes = cm.cluster_sizes()
    assert rows[0] == (str(int(cm.lookup(["a-0"])[0])), "6")
    assert [int(s) for _, s in rows] == sorted(sizes.tolist(), reverse=True)[: len(rows)]
    assert re.findall(r'class="hist-row" data-lo="(\d+)" data-hi="(\d+)"', dom) == [("1", "1"), ("2", "2"), ("3", "4"),
                                                                                     ("5", "8")]
    assert f"{cm.n_docs} documents · {cm.n_clusters} clusters · {cm.n_docs - cm.n_clusters} folded" in dom
    # the hostile representative: its id and text shown as characters
    assert html.escape(HOSTILE_ID, quote=False) in dom
    assert "&lt;script&gt;document.title='pwned'" in dom
    _not_executed(dom)


def test_a_cluster_shows_members_side_by_side_with_their_differences(browser, page):
    _, cm, _ = page
    big = int(cm.lookup(["a-0"])[0])
    dom = _dom(browser, page, f"/#/cluster/{big}")
    assert f'data-view="cluster" data-cluster="{big}"' in dom
    cards = re.findall(r'<article class="card member( shown)?" data-id="([^"]+)"(?: data-similarity="([0-9.]+)")?', dom)
    assert len(cards) == 6 and cards[0][0] == " shown" and all(c[0] == "" for c in cards[1:])
    assert {c[1] for c in cards} == {f"a-{i}" for i in range(6)}
    assert all(0.8 <= float(c[2]) < 1 for c in cards[1:])
    assert cards[0][1] == cm.representative_of(big)
    adds = re.findall(r'<ins class="diff-add">([^<]*)</ins>', dom)
    dels = re.findall(r'<del class="diff-del">([^<]*)</del>', dom)
    assert len(adds) >= 5 + 1 and len(dels) >= 5 + 1  # the legend's own two marks, then each member's
    assert any(a.strip().endswith("x") and a.strip()[:-1].isupper() for a in adds)
    assert dom.count('<span class="stage">minhash</span>') >= 6


def test_a_hostile_cluster_renders_its_markup_as_text(browser, page):
    _, cm, _ = page
    c = int(cm.lookup([HOSTILE_ID])[0])
    dom = _dom(browser, page, f"/#/cluster/{c}")
    assert dom.count("&lt;script&gt;document.title='pwned';") == 3
    assert dom.count("onerror=\"document.body.setAttribute('data-pwned','img')\"&gt;") == 3
    assert f'data-id="{html.escape(HOSTILE_ID)}"' in dom
    _not_executed(dom)


def test_search_by_id_from_the_address_and_by_text(browser, page):
    _, cm, _ = page
    dom = _dom(browser, page, "/?q=a-3")
    assert 'data-view="search"' in dom and 'id="id-match"' in dom
    assert 'href="#/search?q=a-3&amp;texts=1"' in dom and 'id="text-hits"' not in dom
    assert f'href="#/cluster/{int(cm.lookup(["a-3"])[0])}"' in dom.split('id="id-match"', 1)[1].split("</p>", 1)[0]
    dom = _dom(browser, page, "/#/search?q=needle5")
    assert 'id="no-id-match"' in dom
    hits = re.findall(r'<tr data-id="([^"]+)">', dom.split('id="text-hits"', 1)[1])
    assert hits == ["s-5"]
    dom = _dom(browser, page, "/#/search?" + urllib.parse.urlencode({"q": "<script>"}))
    assert re.findall(r'<tr data-id="([^"]+)">', dom.split('id="text-hits"', 1)[1]) == ["h-0", html.escape(HOSTILE_ID),
                                                                                          "h-2"]
    _not_executed(dom)


def test_an_unknown_cluster_shows_the_servers_message(browser, page):
    srv, _, d = page
    dom = dump_dom(browser, srv.url + "/#/cluster/987654", d / "profile")
    assert re.search(r'<p class="error" id="error">`cluster_id` 987654 is not a cluster', dom)


def test_the_near_duplicates_of_a_pasted_document(browser, page, tmp_path):
    import diversify

    srv, cm, d = page
    recs = planted_records()
    index = diversify.Index(f"sqlite:///{tmp_path / 'live.db'}")
    index.add([r["text"] for r in recs], ids=[r["id"] for r in recs])
    srv.snapshot.cluster_map, srv.snapshot.index = None, index
    try:
        dom = _dom(browser, page, "/")
        assert 'id="near-form"' in dom and "live index" in dom
        pasted = recs[0]["text"].replace("winter", "summer", 1)
        dom = _dom(browser, page, "/#/near?" + urllib.parse.urlencode({"text": pasted}))
        cards = re.findall(r'<article class="card member( shown)?" data-id="([^"]+)"', dom)
        assert cards[0] == (" shown", "(pasted)") and len(cards) >= 2
        assert all(c[1].startswith("a-") for c in cards[1:])
        assert '<ins class="diff-add">winter' in dom or "<ins class=\"diff-add\">winter" in dom.replace("\n", "")
        assert "It would fold into cluster" in dom
    finally:
        srv.snapshot.cluster_map, srv.snapshot.index = cm, None
        index.close()


def _png_size(path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


def test_screenshots_of_the_main_views(browser, page, tmp_path):
    srv, cm, d = page
    big = int(cm.lookup(["a-0"])[0])
    for name, url in (("home", "/"), ("cluster", f"/#/cluster/{big}"), ("search", "/#/search?q=winter")):
        shot = screenshot(browser, srv.url + url, tmp_path / f"{name}.png", d / "profile")
        assert _png_size(shot) == (1280, 860)
