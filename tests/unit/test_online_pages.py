"""Pagination with any search callable: nothing skipped, nothing repeated,
``exhausted`` exactly when nothing is left, a cursor whose size follows what was shown.

The invariant, for a store that ranks deterministically (``search(q, m)`` is the first ``m`` of
one ranking R, minus the excluded ids):

* page ``p`` = ``select(R without the clusters shown on pages < p, k, n)`` when the round budget
  is not what stops it; for ``n = 1`` the pages, concatenated, are ``select(R, k=inf, n=1)``
  whatever the budget (a page cut short by the budget is a prefix of what remains);
* ``exhausted`` is True exactly when the last call came back with fewer hits than asked and
  every hit was used: then the next page is empty; when it is False, the last call came back
  full (the store may have more);
* the cursor carries one id per shown cluster (and per shown hit without a cluster), so its
  length is bounded by what was shown, not by what was fetched or folded.
"""

from __future__ import annotations

import math

import pytest
from contract import make_cluster_map
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diversify import Diversifier
from diversify.online.cursor import decode_cursor


class Ranked:
    """A real search callable over one fixed ranking; records ``(k asked, hits returned)``."""

    def __init__(self, ranking, *, exclusion: bool):
        self.ranking = list(ranking)
        self.calls: list = []
        self.supports_exclude = exclusion

    def __call__(self, query, k, exclude_ids=None):
        ex = set(exclude_ids or ())
        out = [(i, 1.0 - j / 10_000) for j, i in enumerate(self.ranking) if i not in ex][:k]
        self.calls.append((k, len(out)))
        return out


def oracle_pages(ranking, cluster_of, k, n):
    """What the pages must be: each one select(R minus clusters shown before, k, n); unknown ids own."""
    shown: set = set()
    used: set = set()
    pages = []
    while True:
        page, counts = [], {}
        for i in ranking:
            c = cluster_of.get(i, ("own", i))
            if c in shown or i in used:
                continue
            if counts.get(c, 0) >= n:
                continue
            if len(page) >= k:
                break
            counts[c] = counts.get(c, 0) + 1
            page.append(i)
        if not page:
            return pages
        pages.append(page)
        for i in page:
            shown.add(cluster_of.get(i, ("own", i)))
            used.add(i)


def _width(i) -> int:
    return len(i.encode("utf-8", "surrogatepass")) + 3 if isinstance(i, str) else 9


def cursor_bound(shown_ids, cluster_of) -> int:
    """Characters a cursor may take after showing ``shown_ids``: 32 bytes of frame, and for each
    cluster shown its widest id (str: UTF-8 length + 3, int: 9), base64 (4 characters per 3 bytes)."""
    widest: dict = {}
    for i in shown_ids:
        c = cluster_of.get(i, ("own", i))
        widest[c] = max(widest.get(c, 0), _width(i))
    return math.ceil((32 + sum(widest.values())) * 4 / 3)


def paginate(d, search, k, limit):
    """Every page until ``exhausted`` (at most ``limit``): [(result, calls made for it)]."""
    wrapped = d.wrap(search)
    out, cursor = [], None
    for _ in range(limit):
        before = len(search.calls)
        res = wrapped("q", cursor=cursor)
        out.append((res, search.calls[before:]))
        if res.exhausted:
            return out
        cursor = res.cursor
    raise AssertionError(f"no exhausted page within {limit} pages: {[r.ids for r, _ in out]}")


@st.composite
def stores(draw):
    n_known = draw(st.integers(0, 40))
    n_unknown = draw(st.integers(0, 6))
    n_groups = draw(st.integers(1, max(1, n_known)))
    groups = [draw(st.integers(0, n_groups - 1)) for _ in range(n_known)]
    str_ids = draw(st.booleans())
    known = [f"doc-{j}" if str_ids else 1000 + j for j in range(n_known)]
    unknown = [("new-\ud800" if j % 2 else "new-") + str(j) if str_ids else 5000 + j for j in range(n_unknown)]
    ranking = draw(st.permutations(known + unknown))
    return known, groups, ranking


SETTINGS = dict(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@settings(**SETTINGS)
@given(stores(), st.integers(1, 7), st.integers(1, 3), st.booleans())
def test_pages_are_select_of_what_earlier_pages_left(store, k, n, exclusion):
    known, groups, ranking = store
    cm = make_cluster_map(known, groups) if known else {}
    cluster_of = {i: int(c) for i, c in zip(known, cm.lookup(known).tolist())} if known else {}
    search = Ranked(ranking, exclusion=exclusion)
    d = Diversifier(cm, k=k, max_per_cluster=n, fetch_k=k, max_rounds=32, max_fetch_k=10_000)
    pages = paginate(d, search, k, limit=len(ranking) + 3)
    expected = oracle_pages(ranking, cluster_of, k, n)
    got = [r.ids for r, _ in pages]
    assert got == expected or got == expected + [[]]  # the last page may be the empty one that says so
    _check_exhaustion_and_cursor(pages, cluster_of, d, search)


@settings(**SETTINGS)
@given(stores(), st.integers(1, 6), st.integers(1, 8), st.integers(0, 2), st.booleans())
def test_pages_concatenate_to_the_one_shot_result_whatever_the_budget(store, k, fetch_extra, rounds, exclusion):
    known, groups, ranking = store
    cm = make_cluster_map(known, groups) if known else {}
    cluster_of = {i: int(c) for i, c in zip(known, cm.lookup(known).tolist())} if known else {}
    search = Ranked(ranking, exclusion=exclusion)
    d = Diversifier(cm, k=k, fetch_k=k + fetch_extra, max_rounds=rounds)
    pages = paginate(d, search, k, limit=4 * len(ranking) + 10)
    flat = [i for r, _ in pages for i in r.ids]
    one_shot = [i for p in oracle_pages(ranking, cluster_of, 10**9, 1) for i in p]
    assert flat == one_shot  # nothing skipped, nothing repeated, rank order kept
    _check_exhaustion_and_cursor(pages, cluster_of, d, search)


def _check_exhaustion_and_cursor(pages, cluster_of, d, search):
    shown: list = []
    for j, (res, calls) in enumerate(pages):
        asked, returned = calls[-1]
        if res.exhausted:
            assert returned < asked and j == len(pages) - 1
            after = d.wrap(search)("q", cursor=res.cursor)
            assert not after.ids and after.exhausted
        else:  # the store may have more (it answered in full), or this page left some for the next
            assert returned == asked or pages[j + 1][0].ids, (j, asked, returned)
        shown += res.ids
        state = decode_cursor(res.cursor)
        clusters = {cluster_of.get(i, ("own", i)) for i in shown}
        assert len(state.anchors) == len(clusters)  # one anchor per shown cluster, none for folds
        assert len(res.cursor) <= cursor_bound(shown, cluster_of)
    last = pages[-1][0]
    assert last.exhausted


@pytest.mark.parametrize("exclusion", [False, True])
def test_sixty_clusters_deep_pages_nothing_skipped_exhausted_at_the_end(exclusion):
    """The reported case: 60 clusters of 10 near-copies behind a plain search(query, k); every
    cluster shows exactly once, pages past 200 results still fill, and the last page says so."""
    ids = [f"chunk-{j:04d}" for j in range(600)]
    groups = [(j * 7) % 60 for j in range(600)]  # members spread over the ranking
    cm = make_cluster_map(ids, groups)
    cluster_of = dict(zip(ids, cm.lookup(ids).tolist()))
    search = Ranked(ids, exclusion=exclusion)
    pages = paginate(Diversifier(cm, k=4), search, 4, limit=40)
    shown = [i for r, _ in pages for i in r.ids]
    assert sorted(cluster_of[i] for i in shown) == sorted(set(cluster_of.values()))
    assert all(len(r) == 4 for r, _ in pages[:15]) and pages[-1][0].exhausted
    _check_exhaustion_and_cursor(pages, cluster_of, Diversifier(cm, k=4), search)


def test_cursor_size_follows_clusters_shown_not_hits_fetched():
    """30 pages over 160 clusters of 40 copies each (in runs of 4 along the ranking): the cursor
    holds 30 x 5 ids, never the hits fetched and folded on the way (the old token listed every
    one of them: 34 KB by page 30)."""
    ids = [f"{j:032x}" for j in range(6_400)]  # 32-character ids, like hex UUIDs
    groups = [(j // 4) % 160 for j in range(6_400)]
    cm = make_cluster_map(ids, groups)
    cluster_of = dict(zip(ids, cm.lookup(ids).tolist()))
    search = Ranked(ids, exclusion=False)
    w = Diversifier(cm, k=5).wrap(search)
    cursor, shown = None, []
    for _ in range(30):
        res = w("q", cursor=cursor)
        assert len(res) == 5 and not res.exhausted
        shown += res.ids
        cursor = res.cursor
    assert len(decode_cursor(cursor).anchors) == 150
    import pickle

    again = pickle.loads(pickle.dumps(res))  # the cursor is encoded on first read; results still pickle
    assert again == res and again.cursor == res.cursor == cursor and hash(again) == hash(res)
    assert len(cursor) <= cursor_bound(shown, cluster_of) < 7_100  # ~47 characters per shown cluster
    assert sum(r for _, r in search.calls) > 30 * 5 * 10  # what was fetched is far more than what is carried


# ---------------------------------------------------------------------- the cursor is client input


def _token(obj) -> str:
    import base64

    import msgpack

    return base64.urlsafe_b64encode(msgpack.packb(obj, use_bin_type=True)).decode().rstrip("=")


OK = {"v": 2, "o": 3, "a": [b"doc-1", 7], "p": [b"x", 4]}
FORGED = [
    ("offset over the limit", {**OK, "o": 100_001}),
    ("negative offset", {**OK, "o": -1}),
    ("float offset", {**OK, "o": 1.5}),
    ("bool offset", {**OK, "o": True}),
    ("bool anchor", {**OK, "a": [True]}),
    ("float anchor", {**OK, "a": [1.5]}),
    ("nil anchor", {**OK, "a": [None]}),
    ("nested anchor", {**OK, "a": [[b"x"]]}),
    ("str instead of bytes", {**OK, "a": ["doc-1"]}),
    ("bytes that are not UTF-8", {**OK, "a": [b"\xff\xfe"]}),
    ("anchors not a list", {**OK, "a": b"doc-1"}),
    ("payload clusters not a list", {**OK, "p": 4}),
    ("a key missing", {"v": 2, "o": 0, "a": []}),
    ("an extra key", {**OK, "x": 1}),
    ("an unknown version", {**OK, "v": 3}),
    ("version 1 with a float id", {"v": 1, "i": [1.5], "c": [], "f": ""}),
    ("not a map", [2, 0, [], []]),
]


@pytest.mark.parametrize("label,obj", FORGED, ids=[f[0] for f in FORGED])
def test_forged_cursors_are_input_errors(label, obj):
    from diversify.errors import InputError

    w = Diversifier({"a": 1}).wrap(lambda q, k: [])
    assert w("q", cursor=_token(OK)).exhausted  # the well-formed token next to it is accepted
    with pytest.raises(InputError, match="cursor"):
        w("q", cursor=_token(obj))


def test_a_well_formed_forged_cursor_only_changes_its_own_results():
    state = decode_cursor(_token(OK))
    assert state.anchors == ("doc-1", 7) and state.clusters == frozenset({"x", 4}) and state.offset == 3


def test_oversized_cursor_is_refused_before_decoding():
    from diversify.errors import InputError
    from diversify.online.cursor import MAX_CURSOR_CHARS

    assert MAX_CURSOR_CHARS == 65_536  # was 4,000,000: ~0.8 s of decoding and a 2.9-million-id filter
    with pytest.raises(InputError, match="too long"):
        decode_cursor("A" * 65_537)


def test_a_version_1_cursor_still_gives_the_next_page():
    """Compatibility guard (holds before and after): tokens handed out before the upgrade work."""
    ids = [f"d{j}" for j in range(8)]
    cm = make_cluster_map(ids, [j // 2 for j in range(8)])
    w = Diversifier(cm, k=2).wrap(Ranked(ids, exclusion=False))
    old = _token({"v": 1, "i": ["d0", "d1", "d2", "d3"], "c": [0, 2], "f": "contract"})  # what page 1 used to give
    assert w("q", cursor=old).ids == ["d4", "d6"]
