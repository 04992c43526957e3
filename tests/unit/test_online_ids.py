"""Ids from the store that the artifact cannot hold, ids in another form, and ids that silently
match nothing: the online half of silent id mismatches.

Rules under test (docs/online.md, "Ids that match"): an id no artifact can hold is an unknown
id (its own cluster, never folded, passed through) under every ``on_error`` policy; the next
page does not show it again when the cursor can carry it (int or str); ``stats()`` counts hits
looked up and unknown; one WARNING per artifact generation when most hits are unknown, naming
the likely cause; UUIDs match whatever form the store and the artifact write them in.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

import numpy as np
import pytest
from contract import make_cluster_map

from diversify import Diversifier, Hit
from diversify.errors import StoreError
from diversify.online.cursor import decode_cursor
from diversify.online.stats import UNKNOWN_WARN_MIN

POLICIES = ("raise", "last_good", "passthrough")

# Crafted from the id rules (diversify/ids/rules.py): what a store can hand back that no artifact holds.
# (label, id, the cursor can carry it so the next page must not show it again)
HOSTILE = [
    ("lone high surrogate", "\ud800", True),
    ("lone low surrogate", "\udfff", True),
    ("surrogate inside", "doc-\ud83d-1", True),
    ("surrogateescape byte", "doc-\udc80", True),
    ("int just over int64", 2**63, True),
    ("int under int64", -(2**63) - 1, False),
    ("int over uint64", 2**64 + 5, False),
    ("bool True", True, False),
    ("bool False", False, False),
    ("float", 1.0, False),
    ("nan", float("nan"), False),
    ("bytes", b"a1", False),
    ("tuple", ("a1", 1), False),
    ("numpy bool", np.bool_(True), False),
    ("frozenset", frozenset({"a1"}), False),
]


def str_map():
    return make_cluster_map(["a1", "a2", "b1", "c1"], [0, 0, 1, 2])


def int_map():
    return make_cluster_map([101, 102, 103, 104], [0, 0, 1, 2])


def ranking_with(bad, known):
    """Two copies of one cluster, the hostile id, then two other clusters."""
    a1, a2, b1, c1 = known
    return [Hit(a1, 0.9), Hit(a2, 0.8), Hit(bad, 0.7), Hit(b1, 0.6), Hit(c1, 0.5)]


def searcher(hits):
    def search(query, k, exclude_ids=None):
        ex = set(exclude_ids or ())
        return [h for h in hits if h.id not in ex][:k]
    return search


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("kind", ["str", "int", "mapping"])
@pytest.mark.parametrize("label,bad,carried", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_an_id_no_artifact_holds_is_unknown_under_every_policy(label, bad, carried, kind, policy):
    if kind == "str":
        cm, known = str_map(), ["a1", "a2", "b1", "c1"]
    elif kind == "int":
        cm, known = int_map(), [101, 102, 103, 104]
    else:
        cm, known = {"a1": 0, "a2": 0, "b1": 1, "c1": 2}, ["a1", "a2", "b1", "c1"]
    hits = ranking_with(bad, known)
    d = Diversifier(cm, k=3, on_error=policy)
    for res in (d.wrap(searcher(hits))("q"), asyncio.run(d.awrap(searcher(hits))("q")), d.select_items(hits)):
        assert [k.id for k in res] == [known[0], bad, known[2]] and res[1].id is bad
        assert res[1].cluster_id is None and res[1].omitted == 0  # its own cluster, nothing folded into it
        assert res[0].omitted == 1  # the known copies still fold
    s = d.stats()
    assert s["lookup_errors"] == 0 and s["unknown"] >= 3 and s["looked_up"] == 15
    page2 = d.wrap(searcher(hits))("q", cursor=d.wrap(searcher(hits))("q").cursor)
    assert [k.id for k in page2] == ([] if carried else [bad]) + [known[3]]


def test_bool_ids_never_match_int_ids():
    d = Diversifier(make_cluster_map([1, 2, 3], [0, 0, 1]), k=5)
    res = d.select_items([Hit(1, 0.9), Hit(True, 0.8), Hit(2, 0.7)])
    assert res[1].id is True and res[1].cluster_id is None and res[0].omitted == 1 and len(res) == 2


@pytest.mark.parametrize("bad", [None, ["a", "list"], {"a": 1}])
def test_a_hit_without_a_usable_id_is_a_store_error(bad):
    d = Diversifier(str_map(), k=3, on_error="last_good")
    with pytest.raises(StoreError, match="id"):
        d.wrap(lambda q, k: [Hit("a1", 0.9), Hit(bad, 0.8)])("q")


# ---------------------------------------------------------------------- UUIDs

U = [uuid.UUID(int=(7 + j) * 0x1234567890ABCDEF1234567) for j in range(4)]
FORMS = {
    "canonical": str, "upper": lambda u: str(u).upper(), "hex": lambda u: u.hex,
    "HEX": lambda u: u.hex.upper(), "urn": lambda u: u.urn, "braces": lambda u: "{" + str(u) + "}",
    "BRACES": lambda u: "{" + str(u).upper() + "}", "uuid object": lambda u: u,
}


@pytest.mark.parametrize("built", [f for f in FORMS if f != "uuid object"])
@pytest.mark.parametrize("returned", list(FORMS))
def test_uuids_match_whatever_form_store_and_artifact_write(built, returned):
    cm = make_cluster_map([FORMS[built](u) for u in U], [0, 0, 1, 2])
    hits = [Hit(FORMS[returned](u), 0.9 - j / 10) for j, u in enumerate(U)]
    d = Diversifier(cm, k=4)
    res = d.select_items(hits)
    assert [k.cluster_id is not None for k in res] == [True, True, True]
    assert res.ids == [hits[0].id, hits[2].id, hits[3].id] and res[0].omitted == 1
    assert d.stats()["unknown"] == 0


def test_uuid_rule_leaves_non_uuid_artifacts_and_mappings_alone():
    d = Diversifier(make_cluster_map(["a1", "a2"], [0, 0]), k=3)
    assert d.select_items([Hit(U[0], 0.9), Hit(str(U[0]), 0.8)]).ids == [U[0], str(U[0])]
    m = Diversifier({U[0]: 0, U[1]: 0}, k=3)  # a mapping compares ids with ==: UUID objects as keys
    assert m.select_items([Hit(U[0], 0.9), Hit(U[1], 0.8)]).ids == [U[0]]


# ---------------------------------------------------------------------- counting and the warning


def warnings_of(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "diversify" and r.levelno == logging.WARNING]


def _queries(d, hits, n):
    w = d.wrap(lambda q, k: hits[:k])
    for _ in range(n):
        w("q")


@pytest.mark.parametrize("case,cm,hits,cause", [
    ("int store, str artifact", lambda: str_map(), [Hit(j, 1 - j / 100) for j in range(20)], "int ids"),
    ("str store, int artifact", lambda: int_map(), [Hit(str(j), 1 - j / 100) for j in range(1, 21)], "str ids"),
    ("uuids, non-uuid artifact", lambda: str_map(), [Hit(str(uuid.UUID(int=j)), 1 - j / 100) for j in range(20)],
     "not UUIDs"),
    ("lone surrogates", lambda: str_map(), [Hit(f"d\ud800{j}", 1 - j / 100) for j in range(20)], "not valid UTF-8"),
    ("stale artifact", lambda: str_map(), [Hit(f"new-{j}", 1 - j / 100) for j in range(20)], "diversify add"),
    ("float ids", lambda: str_map(), [Hit(j + 0.5, 1 - j / 100) for j in range(20)], "type float"),
])
def test_most_hits_unknown_warns_once_naming_the_cause(caplog, case, cm, hits, cause):
    d = Diversifier(cm(), k=10)
    with caplog.at_level(logging.WARNING, logger="diversify"):
        _queries(d, hits, 30)
    got = warnings_of(caplog)
    assert len(got) == 1 and cause in got[0] and "Ids that match" in got[0], got
    s = d.stats()
    assert s["looked_up"] == s["unknown"] == 30 * 20 and s["queries"] == 30


def test_warning_again_after_a_reload_and_not_when_most_hits_are_known(caplog):
    known = [Hit(i, 0.9 - j / 10) for j, i in enumerate(["a1", "b1", "c1"])]
    d = Diversifier(str_map(), k=10)
    with caplog.at_level(logging.WARNING, logger="diversify"):
        _queries(d, known + [Hit("new-1", 0.1), Hit("new-2", 0.05)], 60)  # 2 of 5 unknown: no warning
        assert warnings_of(caplog) == []
        assert d.stats()["unknown"] == 120 and d.stats()["looked_up"] == 300
        _queries(d, [Hit(j, 1 - j / 100) for j in range(20)], 10)  # the generation's window tips over half
        assert len(warnings_of(caplog)) == 1
        _queries(d, [Hit(j, 1 - j / 100) for j in range(20)], 10)
        assert len(warnings_of(caplog)) == 1  # once per generation
        d.reload(str_map())
        _queries(d, [Hit(j, 1 - j / 100) for j in range(20)], 10)
        assert len(warnings_of(caplog)) == 2


def test_no_warning_below_the_minimum_sample(caplog):
    d = Diversifier(str_map(), k=10)
    with caplog.at_level(logging.WARNING, logger="diversify"):
        d.select_items([Hit(j, 1.0 - j / 100) for j in range(UNKNOWN_WARN_MIN - 1)])
        assert warnings_of(caplog) == []
        d.select_items([Hit(-1, 0.0)])
        assert len(warnings_of(caplog)) == 1


def test_payload_field_without_values_warns_to_write_clusters(caplog):
    d = Diversifier(cluster_field="cluster_id", k=10)
    hits = [Hit(f"d{j}", 1 - j / 100, {"cluster_id": 1} if j < 3 else {}) for j in range(20)]
    with caplog.at_level(logging.WARNING, logger="diversify"):
        _queries(d, hits, 10)
    got = warnings_of(caplog)
    assert len(got) == 1 and "write_clusters" in got[0]
    assert d.stats()["looked_up"] == 200 and d.stats()["unknown"] == 170


def test_no_artifact_no_field_counts_nothing():
    d = Diversifier(k=5)
    _queries(d, [Hit(j, 1 - j / 100) for j in range(20)], 5)
    assert d.stats()["looked_up"] == 0 and d.stats()["unknown"] == 0


def test_cursor_carries_surrogate_ids_through_a_round_trip():
    hits = [Hit("\ud800", 0.9), Hit("a1", 0.8), Hit("\udfff-x", 0.7), Hit("b1", 0.6)]
    d = Diversifier(str_map(), k=2)
    p1 = d.wrap(lambda q, k: hits[:k])("q")
    assert p1.ids == ["\ud800", "a1"] and decode_cursor(p1.cursor).anchors == ("\ud800", "a1")
    assert d.wrap(lambda q, k: hits[:k])("q", cursor=p1.cursor).ids == ["\udfff-x", "b1"]
