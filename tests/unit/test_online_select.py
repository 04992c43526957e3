"""`select`: unit tests, a slow oracle, and hypothesis properties."""

from __future__ import annotations

import copy
import pickle
from collections.abc import Sequence

import numpy as np
import pytest
from contract import oracle_select
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diversify import Hit, select
from diversify.errors import ConfigError, InputError, InputTypeError
from diversify.online import Group, Kept, Result


def hits_of(ids, scores=None):
    scores = scores or [1.0 - j / 100 for j in range(len(ids))]
    return [Hit(i, s, {"n": j}) for j, (i, s) in enumerate(zip(ids, scores))]


# ---------------------------------------------------------------------- examples


def test_keeps_one_per_cluster_in_rank_order_and_reports_folds():
    hits = hits_of(["a", "b", "c", "d", "e", "f"])
    res = select(hits, [5, 5, 7, -1, 7, 5], k=3)
    assert isinstance(res, Result) and all(isinstance(h, Kept) for h in res.hits)
    assert res.ids == ["a", "c", "d"]
    assert [h.cluster_id for h in res.hits] == [5, 7, None]
    assert [[f.id for f in h.folded] for h in res.hits] == [["b", "f"], ["e"], []]
    assert [h.omitted for h in res.hits] == [2, 1, 0] and res.omitted == 3
    assert [h.rank for h in res.hits] == [0, 2, 3]
    assert res.hits[0].hit is hits[0]  # the caller's object, not a copy
    assert not res.short and res.considered == 6


def test_max_per_cluster_two():
    hits = hits_of(list("abcdef"))
    res = select(hits, [1, 1, 1, 2, 1, 2], k=10, max_per_cluster=2)
    assert res.ids == ["a", "b", "d", "f"]
    assert [f.id for f in res.hits[0].folded] == ["c", "e"] and res.hits[1].folded == ()
    assert res.short


def test_unknown_policies():
    hits = hits_of(list("abcd"))
    cids = [None, 3, -1, 3]
    assert select(hits, cids, k=4).ids == ["a", "b", "c"]
    res = select(hits, cids, k=4, unknown="drop")
    assert res.ids == ["b"] and res.dropped == 2
    assert select(hits, None, k=2).ids == ["a", "b"]  # no cluster ids: every hit is its own


def test_cluster_ids_as_int64_array_and_strings():
    hits = hits_of(list("abcd"))
    assert select(hits, np.array([0, 0, -1, 1], dtype=np.int64), k=3).ids == ["a", "c", "d"]
    assert select(hits, ["x", "x", "y", None], k=3).ids == ["a", "c", "d"]


def test_grouped_output():
    hits = hits_of(list("abcdefg"))
    res = select(hits, [1, 2, 1, 1, 3, 2, 4], k=2, max_per_cluster=2, groups=True)
    assert isinstance(res.groups[0], Group)
    assert [(g.cluster_id, [h.id for h in g.hits], [f.id for f in g.folded]) for g in res.groups] == [
        (1, ["a", "c"], ["d"]), (2, ["b", "f"], [])]
    assert res.ids == ["a", "c", "b", "f"] and res.omitted == 1 and not res.short
    assert res.groups[0].omitted == 1


def test_result_is_a_sequence_of_its_kept_hits():
    hits = hits_of(list("abcde"))
    res = select(hits, [1, 1, 2, 3, 3], k=3)
    assert isinstance(res, Sequence) and len(res) == 3 and res
    assert res[0] is res.hits[0] and res[-1] is res.hits[-1] and res[0].id == "a"
    assert res[1:] == res.hits[1:] and isinstance(res[1:], tuple)
    assert list(res) == list(res.hits) and [kept.id for kept in res] == res.ids == ["a", "c", "d"]
    assert res.hits[1] in res and hits[1] not in res and "a" not in res
    assert list(reversed(res)) == list(res.hits)[::-1]
    assert res.index(res[2]) == 2 and res.count(res[0]) == 1
    with pytest.raises(IndexError):
        res[3]
    hit, cluster_id, rank, folded = res[0]  # a Kept is the 4-tuple it says it is
    assert (hit, cluster_id, rank, [f.id for f in folded]) == (hits[0], 1, 0, ["b"])
    empty = select([], None, k=3)
    assert len(empty) == 0 and not empty and list(empty) == [] and empty.short


def test_result_equality_hash_immutability_and_copies():
    hits = hits_of(list("abcde"))
    a, b = select(hits, [1, 1, 2, 3, 3], k=3), select(hits, [1, 1, 2, 3, 3], k=3)
    assert a == b and hash(a) == hash(b) and a is not b
    assert a != select(hits, [1, 1, 2, 3, 3], k=2)
    # only a Result equals a Result; compare list(result) or result.ids with a list
    assert a != list(a) and a != a.hits and list(a) == list(b)
    for name in ("hits", "k", "cursor", "anything"):
        with pytest.raises(AttributeError):
            setattr(a, name, None)
    assert pickle.loads(pickle.dumps(a)) == a and copy.deepcopy(a) == a
    assert a._asdict()["k"] == 3 and Result(**a._asdict()) == a
    assert repr(a).startswith("Result(ids=['a', 'c', 'd'], k=3, omitted=2")


def test_ties_are_broken_by_id_whatever_the_store_order():
    a = [Hit("z", 0.5), Hit("y", 0.5), Hit(3, 0.5), Hit("x", 0.4)]
    b = [a[2], a[0], a[1], a[3]]
    ra = select(a, [1, 1, 1, 2], k=2)
    rb = select(b, [1, 1, 1, 2], k=2)
    assert ra.ids == rb.ids == [3, "x"]  # ints before strings, then by value


def test_exclude_clusters():
    hits = hits_of(list("abcd"))
    res = select(hits, [1, 2, 2, 3], k=3, exclude_clusters={2})
    assert res.ids == ["a", "d"] and res.dropped == 2


def test_on_the_fly_folding_of_unknown_hits_with_vectors():
    base = np.array([1.0, 0.0, 0.0])
    near = np.array([0.99, 0.05, 0.0])
    far = np.array([0.0, 1.0, 0.0])
    hits = [Hit("a", 0.9, vector=base), Hit("new-copy", 0.8, vector=near),
            Hit("b", 0.7, vector=far), Hit("new-other", 0.6, vector=np.array([0.0, 0.0, 1.0]))]
    cids = [10, None, 20, None]
    res = select(hits, cids, k=3, fold_threshold=0.95)
    assert res.ids == ["a", "b", "new-other"]
    assert [f.id for f in res.hits[0].folded] == ["new-copy"]
    # without folding the copy is its own cluster
    assert select(hits, cids, k=3).ids == ["a", "new-copy", "b"]
    # a folded hit joins the cluster: with room (n=2) it is kept and labelled with it
    res2 = select(hits, cids, k=4, max_per_cluster=2, fold_threshold=0.95)
    assert res2.ids == ["a", "new-copy", "b", "new-other"] and res2.hits[1].cluster_id == 10
    # vectors can come separately (overriding Hit.vector)
    plain = [Hit(h.id, h.score) for h in hits]
    vecs = np.stack([h.vector for h in hits])
    assert select(plain, cids, k=3, fold_threshold=0.95, vectors=vecs).ids == res.ids


def test_on_the_fly_ignores_nan_and_zero_vectors_and_rejects_ragged():
    hits = [Hit("a", 0.9, vector=np.array([1.0, 0.0])), Hit("b", 0.8, vector=np.array([np.nan, 1.0])),
            Hit("c", 0.7, vector=np.zeros(2))]
    assert select(hits, None, k=3, fold_threshold=0.5).ids == ["a", "b", "c"]
    ragged = [Hit("a", 0.9, vector=np.ones(2)), Hit("b", 0.8, vector=np.ones(3))]
    with pytest.raises(InputError, match="same dimension"):
        select(ragged, None, k=2, fold_threshold=0.5)


@pytest.mark.parametrize("kwargs, match", [
    ({"k": 0}, "`k` must be >= 1"),
    ({"k": 2.5}, "`k` must be an int"),
    ({"k": True}, "`k` must be an int"),
    ({"max_per_cluster": 0}, "max_per_cluster"),
    ({"unknown": "keep"}, "`unknown` must be one of"),
    ({"fold_threshold": 1.5}, "fold_threshold"),
])
def test_bad_parameters_are_config_errors(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        select(hits_of(["a"]), [1], **kwargs)


def test_bad_inputs():
    with pytest.raises(InputError, match="one entry per hit"):
        select(hits_of(["a", "b"]), [1])
    with pytest.raises(InputTypeError, match="integer dtype"):
        select(hits_of(["a"]), np.array([1.5]))
    with pytest.raises(InputTypeError, match="string"):
        select("abc", None)
    with pytest.raises(InputError, match="one row per hit"):
        select(hits_of(["a"]), None, fold_threshold=0.9, vectors=np.ones((2, 3)))


def test_empty_input():
    res = select([], [], k=3)
    assert res.hits == () and res.short and res.omitted == 0


# ---------------------------------------------------------------------- properties

ids_st = st.lists(st.one_of(st.integers(0, 60), st.text("abc", min_size=1, max_size=3)),
                  unique=True, max_size=40)


@st.composite
def ranked_inputs(draw):
    ids = draw(ids_st)
    # few distinct scores -> many ties; sorted descending like a store's ranking
    scores = sorted((draw(st.sampled_from([0.1, 0.2, 0.3, 0.5, 0.9])) for _ in ids), reverse=True)
    cids = [draw(st.one_of(st.just(-1), st.integers(0, 6))) for _ in ids]
    hits = [Hit(i, s, {"pos": j}) for j, (i, s) in enumerate(zip(ids, scores))]
    k = draw(st.integers(1, 12))
    n = draw(st.integers(1, 3))
    return hits, cids, k, n


def canonical(hits, cids):
    """Input order with runs of equal scores sorted by id (the documented tie rule)."""
    def key(j):
        i = hits[j].id
        return (-hits[j].score, (0, i, "") if isinstance(i, int) else (1, 0, i))
    order = sorted(range(len(hits)), key=key)
    return [hits[j] for j in order], [cids[j] for j in order]


def as_cluster_of(hits, cids):
    return {h.id: c for h, c in zip(hits, cids) if c != -1}


settings.register_profile("online", max_examples=150, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("online")


@given(ranked_inputs())
def test_property_matches_oracle_and_invariants(data):
    hits, cids, k, n = data
    before = (copy.deepcopy(hits), list(cids))
    res = select(hits, cids, k=k, max_per_cluster=n)
    ch, cc = canonical(hits, cids)
    cluster_of = as_cluster_of(ch, cc)
    expected = oracle_select([h.id for h in ch], cluster_of, k=k, n=n)
    assert res.ids == expected
    # subsequence of the (tie-broken) ranking, in rank order
    pos = {h.id: j for j, h in enumerate(ch)}
    ranks = [pos[i] for i in res.ids]
    assert ranks == sorted(ranks) and [h.rank for h in res.hits] == ranks
    # at most n per known cluster
    counts = {}
    for h in res.hits:
        if h.cluster_id is not None:
            counts[h.cluster_id] = counts.get(h.cluster_id, 0) + 1
    assert all(v <= n for v in counts.values()), counts
    # length = min(k, available)
    available = len(oracle_select([h.id for h in ch], cluster_of, k=10**6, n=n))
    assert len(res.hits) == min(k, available) and res.short == (available < k)
    # folded = every hit of a kept cluster that is not itself kept
    kept_clusters = {h.cluster_id for h in res.hits if h.cluster_id is not None}
    beyond = sum(1 for c in cc if c in kept_clusters) - sum(1 for h in res.hits if h.cluster_id is not None)
    assert res.omitted == beyond == sum(h.omitted for h in res.hits)
    # the caller's objects are unchanged (and the same objects are returned)
    assert (hits, cids) == before and all(any(h.hit is x for x in hits) for h in res.hits)


@given(ranked_inputs())
def test_property_idempotent(data):
    hits, cids, k, n = data
    res = select(hits, cids, k=k, max_per_cluster=n)
    again = select([h.hit for h in res.hits], [-1 if h.cluster_id is None else h.cluster_id for h in res.hits],
                   k=k, max_per_cluster=n)
    assert again.ids == res.ids


@given(ranked_inputs())
def test_property_k_is_a_prefix_of_k_plus_one(data):
    hits, cids, k, n = data
    a = select(hits, cids, k=k, max_per_cluster=n).ids
    b = select(hits, cids, k=k + 1, max_per_cluster=n).ids
    assert b[: len(a)] == a and len(b) - len(a) in (0, 1)


@given(ranked_inputs(), st.randoms(use_true_random=False))
def test_property_store_order_of_ties_does_not_matter(data, rnd):
    hits, cids, k, n = data
    pairs = list(zip(hits, cids))
    # shuffle within runs of equal score (what a store may do with ties)
    runs, out = {}, []
    for p in pairs:
        runs.setdefault(p[0].score, []).append(p)
    for s in sorted(runs, reverse=True):
        r = runs[s][:]
        rnd.shuffle(r)
        out.extend(r)
    assert select([p[0] for p in out], [p[1] for p in out], k=k, max_per_cluster=n).ids == \
        select(hits, cids, k=k, max_per_cluster=n).ids


@given(ranked_inputs())
def test_property_grouped(data):
    hits, cids, k, n = data
    res = select(hits, cids, k=k, max_per_cluster=n, groups=True)
    ch, cc = canonical(hits, cids)
    keys = []
    for h, c in zip(ch, cc):
        key = c if c != -1 else ("own", h.id)
        if key not in keys:
            keys.append(key)
    assert len(res.groups) == min(k, len(keys))
    for g, key in zip(res.groups, keys):
        members = [h.id for h, c in zip(ch, cc) if (c if c != -1 else ("own", h.id)) == key]
        assert [h.id for h in g.hits] == members[:n]
        assert [f.id for f in g.folded] == members[n:]


@given(ranked_inputs())
def test_property_fast_path_equals_general_path(data):
    """The flat fast path and the general loop (taken when folding is on) agree."""
    hits, cids, k, n = data
    for unknown in ("own", "drop"):
        fast = select(hits, cids, k=k, max_per_cluster=n, unknown=unknown, exclude_clusters={2})
        general = select(hits, cids, k=k, max_per_cluster=n, unknown=unknown, exclude_clusters={2},
                         fold_threshold=1.0)  # no vectors: nothing folds, but the general loop runs
        assert fast == general


@given(ranked_inputs())
def test_property_cluster_id_encodings_agree(data):
    """Cluster ids as a list, an int64 array or with None for unknown give the same result."""
    hits, cids, k, n = data
    expected = select(hits, cids, k=k, max_per_cluster=n)
    for c in (np.array(cids, dtype=np.int64), [None if x == -1 else x for x in cids]):
        assert select(hits, c, k=k, max_per_cluster=n) == expected


def test_on_the_fly_folding_by_text():
    hits = [Hit("a", 0.9, text="The quick brown fox jumps over the lazy dog"),
            Hit("new", 0.8, text="the QUICK brown fox jumps over the lazy dog!"),
            Hit("b", 0.7, text="An entirely different sentence about databases"),
            Hit("near", 0.6, text="the quick brown fox jumps over a lazy cat")]
    res = select(hits, [1, None, 2, None], k=4, fold_text_threshold=0.9)
    assert res.ids == ["a", "b", "near"] and [f.id for f in res.hits[0].folded] == ["new"]
    loose = select(hits, [1, None, 2, None], k=4, fold_text_threshold=0.3)
    assert loose.ids == ["a", "b"] and [f.id for f in loose.hits[0].folded] == ["new", "near"]
    # texts can come separately; vectors are tried first, text second
    plain = [Hit(h.id, h.score) for h in hits]
    assert select(plain, [1, None, 2, None], k=4, fold_text_threshold=0.9,
                  texts=[h.text for h in hits]).ids == res.ids
    with pytest.raises(ConfigError, match="fold_text_threshold"):
        select(hits, None, fold_text_threshold=0.0)
    with pytest.raises(InputError, match="texts"):
        select(hits, None, fold_text_threshold=0.5, texts=["x"])


def test_text_shingles():
    from diversify.online.folding import jaccard, shingle_set

    a = shingle_set("Ｈｅｌｌｏ, big   World")  # NFKC + casefold + word runs
    assert a == frozenset({"hello big world"})
    assert shingle_set("") is None and shingle_set(None) is None and shingle_set("!!") is None
    assert shingle_set("one two") == frozenset({"one two"})
    b = shingle_set("a b c d")
    assert b == frozenset({"a b c", "b c d"}) and jaccard(b, shingle_set("a b c e")) == 1 / 3


def test_unhashable_cluster_ids_are_a_type_error():
    with pytest.raises(InputTypeError, match="hashable"):
        select(hits_of(["a", "b"]), [[1], [1]], k=2)
    with pytest.raises(InputTypeError, match="hashable"):
        select(hits_of(["a", "b"]), [{"c": 1}, 2], k=2, groups=True)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.integers(0, 30), st.text(max_size=3)), st.sampled_from([None, 0.5, 0.7, 0.9])),
                max_size=40), st.integers(0, 40))
def test_tie_order_extended_round_by_round_equals_the_whole(items, cut):
    """The refetch loop extends the tie order of its first round instead of redoing it (a
    refetch appends hits); that must be the order of the whole list, ties crossing the cut too."""
    from diversify.online.selection import _tie_order, extend_tie_order

    hits = [Hit(i, s) for i, s in items]
    cut = min(cut, len(hits))
    assert extend_tie_order(hits, _tie_order(hits[:cut]), cut) == _tie_order(hits)
