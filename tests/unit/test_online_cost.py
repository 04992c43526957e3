"""A query that touches a giant cluster costs what a query over a small one costs (a hostile
input: a huge cluster): the online path never does work proportional to a cluster's size.

Two real artifacts that differ only in the size of the cluster at the top of the ranking
(1,000 vs 250,000 members). Counted (deterministic): member ids the refetch lists from the
artifact and ids looked up; timed (a ratio, generous): the median query.
"""

from __future__ import annotations

import statistics
import time

import numpy as np
import pytest

from diversify import ClusterMap, Diversifier

N_OTHER = 5_000


class Counting:
    """The real ClusterMap, with every member id it lists and every id it looks up counted."""

    def __init__(self, cm):
        self._cm = cm
        self.listed = 0
        self.looked = 0

    def __getattr__(self, name):
        return getattr(self._cm, name)

    def members(self, cluster_id):
        out = self._cm.members(cluster_id)
        self.listed += len(out)
        return out

    def lookup(self, ids):
        self.looked += len(ids)
        return self._cm.lookup(ids)


def artifact(big: int) -> tuple[ClusterMap, list]:
    """``big`` members in cluster 0 (doc-0000000...), then N_OTHER singletons; and a ranking
    where three of every four hits belong to the big cluster."""
    n = big + N_OTHER
    ids = [f"doc-{j:07d}" for j in range(n)]
    cids = np.arange(n, dtype=np.int64)
    cids[:big] = 0
    rep = np.ones(n, dtype=bool)
    rep[1:big] = False
    cm = ClusterMap.from_arrays(ids, cids, rep, np.zeros(n, np.uint8), np.zeros(n, np.uint32), config={},
                                fingerprint="cost", seed=0, hash_scheme="test", build_info={})
    members, others = iter(ids[:big]), iter(ids[big:])
    return cm, [next(others) if j % 4 == 3 else next(members) for j in range(900)]


@pytest.fixture(scope="module")
def maps():
    return {big: artifact(big) for big in (1_000, 250_000)}


def store(ranking):
    def search(query, k, exclude_ids=None):
        ex = set(exclude_ids or ())
        return [(i, 1.0 - j / 10_000) for j, i in enumerate(ranking) if i not in ex][:k]
    return search


def run(cm, ranking, queries: int = 1, page2: bool = False):
    counting = Counting(cm)
    d = Diversifier(counting, k=10)
    w = d.wrap(store(ranking))
    cursor = w("q").cursor if page2 else None
    times = []
    for _ in range(queries):
        counting.listed = counting.looked = 0
        t0 = time.perf_counter()
        res = w("q", cursor=cursor)
        times.append(time.perf_counter() - t0)
    return res, counting, statistics.median(times)


@pytest.mark.parametrize("page2", [False, True])
def test_member_ids_listed_are_bounded_by_the_budget_not_the_cluster(maps, page2):
    small_res, small, _ = run(*maps[1_000], page2=page2)
    big_res, big, _ = run(*maps[250_000], page2=page2)
    assert len(small_res) == len(big_res) == 10
    budget = Diversifier().max_exclude_members
    for c in (small, big):
        assert c.listed <= budget + 100 and c.looked <= 1_000, (c.listed, c.looked)
    assert big.listed <= 100  # the giant cluster is never listed at all (only a few singletons)


def test_a_page_after_the_giant_cluster_does_not_list_it_or_carry_its_copies(maps):
    cm, ranking = maps[250_000]
    d = Diversifier(cm, k=10)
    p1 = d.wrap(store(ranking))("q")
    assert p1.omitted > 10  # its copies were fetched and folded...
    assert len(p1.cursor) < 300  # ...and are not carried: one id per shown cluster


def test_query_time_does_not_grow_with_the_cluster(maps):
    """250x the members, not 250x the time (it was ~340x: listing the giant cluster). The giant
    cluster cannot be excluded member by member, so its queries may take a few more refetch
    rounds (bounded by max_fetch_k): hence the generous factor."""
    for page2 in (False, True):
        _, _, small = run(*maps[1_000], queries=15, page2=page2)
        _, _, big = run(*maps[250_000], queries=15, page2=page2)
        assert big < 25 * small + 0.005, (page2, small, big)


class ByCluster:
    """A search callable that can exclude clusters by their payload value (the optional
    capability a store adapter declares with ``supports_exclude_clusters = True``)."""

    supports_exclude_clusters = True

    def __init__(self, ranking, cluster_of):
        self.ranking, self.cluster_of = ranking, cluster_of
        self.calls: list = []

    def __call__(self, query, k, exclude_ids=None, *, exclude_clusters=None, cluster_field=None):
        self.calls.append((k, list(exclude_ids or ()), exclude_clusters, cluster_field))
        ex, exc = set(exclude_ids or ()), set(exclude_clusters or ())
        return [(i, 1.0 - j / 10_000, {"cid": self.cluster_of[i]}) for j, i in enumerate(self.ranking)
                if i not in ex and self.cluster_of[i] not in exc][:k]


def test_a_store_that_excludes_clusters_is_asked_by_cluster_not_by_member(maps):
    cm, ranking = maps[250_000]
    cluster_of = dict(zip(ranking, cm.lookup(ranking).tolist()))
    search = ByCluster(ranking, cluster_of)
    d = Diversifier(cluster_field="cid", k=10)
    p1 = d.wrap(search)("q")
    assert len(p1) == 10 and len(search.calls) == 2
    assert search.calls[0][2] == [] and search.calls[1][3] == "cid"
    assert set(search.calls[1][2]) == {cluster_of[i] for i in ranking[:25]}  # the full clusters, giant one too
    assert len(search.calls[1][1]) == 25  # the ids seen; no member of the giant cluster listed
    p2 = d.wrap(search)("q", cursor=p1.cursor)
    assert sorted(search.calls[2][2]) == sorted({cluster_of[i] for i in p1.ids})
    assert not {cluster_of[i] for i in p2.ids} & {cluster_of[i] for i in p1.ids} and len(p2) == 10
    # only with cluster ids read from the payload: an artifact's numbering may not be the store's
    plain = ByCluster(ranking, cluster_of)
    Diversifier(cm, k=10).wrap(plain)("q")
    assert all(c[2] is None for c in plain.calls)
