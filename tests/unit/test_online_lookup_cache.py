"""The per-artifact cache of cluster ids (per-query CPU): an id looked up once is
not hashed and searched again while the same artifact answers, and the cache never changes an
answer.

Rules under test (diversify/online/source.py, ``ClusterSource._lookup``): only a loaded
ClusterMap is cached (a lookup object of the caller's may change between queries); only
batches of exactly-str or exactly-int ids use it, so ids that compare equal across types
(``1``, ``True``, ``1.0``, ``numpy.int64(1)``) keep the artifact's own answer; a reload starts
a new cache; the cache is bounded.
"""

from __future__ import annotations

import uuid

import numpy as np
import pytest
from contract import make_cluster_map

import diversify.online.source as source_mod
from diversify import Diversifier, Hit


def _ranked(ids):
    return [Hit(i, 1.0 - 0.01 * j) for j, i in enumerate(ids)]


def _search(ids):
    hits = _ranked(ids)
    return lambda q, k: hits[:k]


@pytest.fixture
def counted(monkeypatch):
    """Every id the artifact is asked about (the hashing and searching the cache saves)."""
    asked: list = []
    real = source_mod.lookup_ids

    def lookup_ids(cm, ids, kind, form):
        asked.extend(ids)
        return real(cm, ids, kind, form)

    monkeypatch.setattr(source_mod, "lookup_ids", lookup_ids)
    return asked


def test_ids_looked_up_once_are_answered_from_the_cache(counted):
    ids = [f"doc-{j}" for j in range(40)]
    cm = make_cluster_map(ids, [j // 4 for j in range(40)])
    search = Diversifier(cm, k=5).wrap(_search(ids[:20]), supports_exclude=False)
    first = search("q")
    assert len(counted) == first.considered == 20
    again = search("q")
    assert len(counted) == 20  # nothing asked twice
    assert again.ids == first.ids and [kp.cluster_id for kp in again] == [kp.cluster_id for kp in first]
    other = Diversifier(cm, k=5).wrap(_search(ids[:20]), supports_exclude=False)("q")
    assert len(counted) == 20 + other.considered  # another Diversifier: its own cache


# (label, artifact ids, first query's ids, second query's ids): the second holds ids equal to
# (or spelt like) ids of the first that the artifact answers differently
CRAFTED = [
    ("bool after int", [1, 2, 3], [1, 2], [True, 2, False]),
    ("float after int", [1, 2, 3], [1, 2], [1.0, 2.0, 3]),
    ("numpy int after int", [1, 2, 3], [1, 2], [np.int64(1), np.int32(2), 3]),
    ("str after int", [1, 2, 3], [1, 2], ["1", "2", 3]),
    ("int after str", ["1", "2", "3"], ["1", "2"], [1, 2, "3"]),
    ("int over int64 after int", [1, 2, 2**63 - 1], [2**63 - 1, 1], [2**63, 2**64 + 1, 1]),
    ("lone surrogate after str", ["a", "b", "c"], ["a", "\ud800"], ["\ud800", "a", "b"]),
    ("other UUID spelling after canonical", [str(uuid.UUID(int=j)) for j in range(3)],
     [str(uuid.UUID(int=j)) for j in range(2)],
     [str(uuid.UUID(int=0)).upper(), uuid.UUID(int=1).hex, uuid.UUID(int=2).urn, uuid.UUID(int=1)]),
    ("UUID object after its str", [str(uuid.UUID(int=j)) for j in range(3)], [str(uuid.UUID(int=1))],
     [uuid.UUID(int=1), str(uuid.UUID(int=1))]),
]


@pytest.mark.parametrize("label,artifact_ids,first,second", CRAFTED, ids=[c[0] for c in CRAFTED])
def test_the_cache_never_changes_an_answer(label, artifact_ids, first, second):
    cm = make_cluster_map(artifact_ids, [0, 0, 1])
    warm = Diversifier(cm, k=10, max_per_cluster=5)
    for ids in (first, second, first, second):
        got = warm.wrap(_search(ids), supports_exclude=False)("q")
        cold = Diversifier(cm, k=10, max_per_cluster=5).wrap(_search(ids), supports_exclude=False)("q")
        assert [(kp.hit.id, type(kp.hit.id), kp.cluster_id) for kp in got] == \
               [(kp.hit.id, type(kp.hit.id), kp.cluster_id) for kp in cold], label


class Live:
    """A lookup object of the caller's whose answers change (a table updated in place)."""

    def __init__(self):
        self.table = {"a": 0, "b": 1}

    def lookup(self, ids):
        return np.array([self.table.get(i, -1) for i in ids], dtype=np.int64)


def test_a_lookup_object_of_the_callers_is_asked_every_time():
    live = Live()
    search = Diversifier(live, k=5).wrap(_search(["a", "b"]), supports_exclude=False)
    assert [kp.cluster_id for kp in search("q")] == [0, 1]
    live.table["b"] = 0
    res = search("q")
    assert [kp.cluster_id for kp in res] == [0] and res.hits[0].folded[0].id == "b"


def test_a_reload_starts_a_new_cache(counted):
    ids = ["a", "b", "c"]
    d = Diversifier(make_cluster_map(ids, [0, 1, 2]), k=5)
    search = d.wrap(_search(ids), supports_exclude=False)
    assert [kp.cluster_id for kp in search("q")] == [0, 1, 2]
    d.reload(make_cluster_map(ids, [0, 0, 2], fingerprint="second"))
    res = search("q")
    assert [kp.cluster_id for kp in res] == [0, 2] and res.hits[0].folded[0].id == "b"
    assert len(counted) == 6


def test_the_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(source_mod, "LOOKUP_CACHE_IDS", 50)
    ids = [f"doc-{j}" for j in range(400)]
    d = Diversifier(make_cluster_map(ids, list(range(400))), k=5)
    for s in range(0, 400, 20):
        d.wrap(_search(ids[s:s + 20]), supports_exclude=False)("q")
        assert len(d._source.current.looked) <= 50
