"""How wrap/awrap learn what a search can do (diversify/online/wrappers.py; kind: unit).

For each capability: an explicit ``supports_exclude=``, then a single attribute
(``supports_exclude``...), then a declared :class:`~diversify.online.Capabilities`, and the
signature of a plain callable only when nothing is declared. Each adapter below has a signature
that would mislead the guess: the declaration wins.
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from diversify import Diversifier, Hit
from diversify.errors import InputTypeError
from diversify.online import Capabilities
from diversify.online.wrappers import declared, resolve_search, supports_exclude, supports_exclude_clusters
from diversify.stores import NumpyStore

RANKING = [Hit(f"d{i}", 1.0 - i / 100, payload={"cid": f"c{i // 2}"}) for i in range(40)]


def _answer(k, exclude_ids=(), exclude_clusters=()):
    ex, exc = set(exclude_ids or ()), set(exclude_clusters or ())
    return [h for h in RANKING if h.id not in ex and h.payload["cid"] not in exc][:k]


class TakesNoExclusion:
    """Its search forwards ``*args`` (the signature says: takes exclude_ids); it declares it does not."""

    capabilities = Capabilities(exclude=False)

    def __init__(self):
        self.calls: list = []

    def search(self, query, k, *args):
        self.calls.append(args)
        return _answer(k)


class ExcludesClusters:
    """Declares cluster exclusion through its capabilities only (no single attribute)."""

    capabilities = Capabilities(exclude=True, exclude_clusters=True)

    def __init__(self):
        self.calls: list = []

    def search(self, query, k, exclude_ids=None, *, exclude_clusters=None, cluster_field=None):
        self.calls.append((list(exclude_ids or ()), exclude_clusters, cluster_field))
        return _answer(k, exclude_ids, exclude_clusters)


class ReturnsAwaitables:
    """A plain ``def`` returning a coroutine (the client's call, not awaited here): the signature
    looks sync, the declaration says async."""

    capabilities = Capabilities(exclude=True, is_async=True)

    def search(self, query, k, exclude_ids=None):
        async def call():
            return _answer(k, exclude_ids)
        return call()


def test_a_declaration_beats_a_misleading_signature():
    store = TakesNoExclusion()
    assert supports_exclude(store.search) is False
    res = Diversifier(cluster_field="cid", k=5, fetch_k=5).wrap(store)("q")
    assert res.ids == ["d0", "d2", "d4", "d6", "d8"]
    assert len(store.calls) >= 2 and all(args == () for args in store.calls)  # never given exclude_ids


def test_cluster_exclusion_is_read_from_the_declaration():
    store = ExcludesClusters()
    assert supports_exclude_clusters(store.search) is True
    res = Diversifier(cluster_field="cid", k=5, fetch_k=5).wrap(store)("q")
    assert res.ids == ["d0", "d2", "d4", "d6", "d8"]
    assert store.calls[1][2] == "cid" and sorted(store.calls[1][1]) == ["c0", "c1", "c2"]


def test_a_declared_async_search_is_refused_by_wrap_and_served_by_awrap():
    store = ReturnsAwaitables()
    d = Diversifier(cluster_field="cid", k=4, fetch_k=4)
    with pytest.raises(InputTypeError, match="awrap"):
        d.wrap(store)
    res = asyncio.run(d.awrap(store)("q"))
    assert res.ids == ["d0", "d2", "d4", "d6"]


def test_store_adapters_declare_what_their_strategy_does():
    vectors = np.eye(4, dtype=np.float32)
    ids = ["a", "b", "c", "d"]
    for refill, exclude in (("exclude", True), ("grow", False)):
        store = NumpyStore(vectors, ids=ids, refill=refill)
        assert store.capabilities == Capabilities(exclude=exclude)
        assert declared(store.search) == store.capabilities
        assert resolve_search(store) == (store.search, exclude)  # not the signature, which has exclude_ids


def test_the_explicit_argument_beats_the_declaration():
    store = TakesNoExclusion()
    assert resolve_search(store, True) == (store.search, True)


class Delegating:
    """Wraps a declared async search behind a sync ``search``, forwarding every other attribute
    (its ``capabilities`` too) and overriding only ``is_async``: the narrower statement wins."""

    is_async = False

    def __init__(self, inner):
        self.inner = inner

    def search(self, query, k, exclude_ids=None):
        return asyncio.run(self.inner.search(query, k, exclude_ids))

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_a_single_attribute_overrides_the_forwarded_declaration():
    store = Delegating(ReturnsAwaitables())
    assert declared(store.search) == ReturnsAwaitables.capabilities
    res = Diversifier(cluster_field="cid", k=4, fetch_k=4).wrap(store)("q")
    assert res.ids == ["d0", "d2", "d4", "d6"]


def plain2(query, k):
    return _answer(k)


def plain3(query, k, exclude_ids=None):
    return _answer(k, exclude_ids)


def flagged(query, k, *args):
    return _answer(k)


flagged.supports_exclude = False  # type: ignore[attr-defined]


@pytest.mark.parametrize("fn, expected", [(plain2, False), (plain3, True), (flagged, False),
                                           (lambda q, k, ex: _answer(k, ex), True)])
def test_plain_callables_still_work_by_attribute_or_signature(fn, expected):
    assert declared(fn) is None
    assert resolve_search(fn) == (fn, expected)
    res = Diversifier(cluster_field="cid", k=3, fetch_k=3).wrap(fn)("q")
    assert res.ids == ["d0", "d2", "d4"]


def test_a_plain_coroutine_function_is_still_refused_by_wrap():
    async def search(query, k):
        return _answer(k)

    with pytest.raises(InputTypeError, match="coroutine"):
        Diversifier(cluster_field="cid").wrap(search)
