"""ClusterMap: construction rules, round trip, lookups against a dict oracle, aliases, golden bytes."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import diversify
from diversify.artifact import ClusterMap, load
from diversify.artifact.format import read_container, write_container
from diversify.errors import ArtifactError, DuplicateIdError, InputError, InputTypeError
from diversify.ids import ID_KEY_SCHEME, check_id, check_ids, id_key, id_keys, query_keys

REPO = Path(diversify.__file__).resolve().parent.parent
CREATED = "2024-01-31T12:00:00Z"


def build(ids, cluster_ids, reps=None, *, stages=None, lengths=None, extras=None, **kw):
    n = len(ids)
    cluster_ids = np.asarray(cluster_ids) if len(cluster_ids) else np.zeros(0, np.int64)
    if reps is None:
        reps = np.zeros(n, bool)
        seen = set()
        for i, c in enumerate(cluster_ids.tolist()):
            if c not in seen:
                seen.add(c)
                reps[i] = True
    args = dict(
        config={"threshold": 0.8, "num_perm": 128},
        fingerprint="fp-0123456789abcdef",
        seed=42,
        hash_scheme="blake2b64-v1",
        build_info={"n_candidates": 3, "lsh": {"bands": 16, "rows": 8, "expected_recall": 0.99}},
        metadata={"embedding_model": "all-MiniLM-L6-v2"},
        created_at=CREATED,
        extras=extras,
    )
    args.update(kw)
    return ClusterMap.from_arrays(
        ids,
        cluster_ids,
        reps,
        np.zeros(n, np.uint8) if stages is None else stages,
        np.arange(n, dtype=np.uint32) if lengths is None else lengths,
        **args,
    )


def small(**kw):
    ids = ["a", "b", "c", "d", "e", "f"]
    # clusters: {a, b, d} -> 0, {c} -> 2, {e, f} -> 4
    cl = [0, 0, 2, 0, 4, 4]
    reps = np.array([False, True, True, False, True, False])
    stages = np.array([1, 1, 0, 2, 4, 4], np.uint8)
    extras = {"minhash": np.arange(12, dtype=np.uint32).reshape(6, 2), "exact_hash": np.arange(6, dtype=np.uint64)}
    return build(ids, cl, reps, stages=stages, extras=extras, **kw)


# --------------------------------------------------------------------------- id keys (golden)


def test_id_key_golden_values():
    # Pinned: changing the key scheme is a breaking format change (bump ID_KEY_SCHEME and major).
    assert ID_KEY_SCHEME == "diversify.idkey.v1"
    assert id_key("") == 13020603013274838756
    assert id_key("doc-1") == 4752762565065110614
    assert id_key("héllo wörld") == 1394302091215309163
    assert id_key("文書") == 11282851106417135841
    assert id_key(0) == 0 and id_key(1) == 1
    assert id_key(-1) == 2**64 - 1
    assert id_key(2**63 - 1) == 2**63 - 1 and id_key(-(2**63)) == 2**63
    assert id_key(np.int32(5)) == 5


def test_id_key_matches_spec_oracle():
    for s in ["", "x", "doc-1", "é" * 50, "🙂 emoji"]:
        want = int.from_bytes(hashlib.blake2b(s.encode("utf-8"), digest_size=8).digest(), "little")
        assert id_key(s) == want, s
    keys = id_keys(["a", "b", "doc-1"])
    assert keys.dtype == np.uint64 and keys.tolist() == [id_key("a"), id_key("b"), id_key("doc-1")]
    assert id_keys(np.array([-1, 3], dtype=np.int64)).tolist() == [2**64 - 1, 3]


@pytest.mark.parametrize("bad", [1.5, None, True, b"bytes", ("t",)])
def test_id_key_rejects_non_ids(bad):
    with pytest.raises(InputTypeError, match="must be str or int"):
        id_key(bad)


def test_id_key_rejects_out_of_range_and_surrogates():
    with pytest.raises(InputError, match="int64"):
        id_key(2**63)
    with pytest.raises(InputError, match="UTF-8"):
        id_key("\ud800")
    with pytest.raises(InputTypeError, match="position 1"):
        id_keys(["a", 2.0])


def test_check_ids_is_the_one_set_of_id_rules():
    assert check_ids(["a", "b"]) == "str" and check_ids([3, np.int64(4)]) == "int" and check_ids([]) == "str"
    assert check_ids(np.array([3, 1], dtype=np.uint8)) == "int" and check_ids(np.array(["x", "y"])) == "str"
    with pytest.raises(DuplicateIdError, match=r"`ids` must be unique; id 5 occurs at positions 0 and 2"):
        check_ids(np.array([5, 7, 5, 7]))
    with pytest.raises(DuplicateIdError, match=r"id 'b' occurs at positions 11 and 12"):
        check_ids(["a", "b", "b"], offset=10)
    with pytest.raises(InputError, match=r"int64 .*got 9223372036854775808 at position 1"):
        check_ids([np.int64(1), np.uint64(2**63)])
    with pytest.raises(InputError, match=r"int64 .*at position 0"):
        check_ids(np.array([2**63], dtype=np.uint64))
    with pytest.raises(InputError, match=r"UTF-8; got '\\ud800' at position 1"):
        check_ids(["a", "\ud800"])
    with pytest.raises(InputTypeError, match=r"`keys`: document ids must be str or int; got bool True at position 0"):
        check_ids([True], param="keys")
    with pytest.raises(InputTypeError, match=r"dtype float64"):
        check_ids(np.array([1.0]))
    # one id: the same rules; the online lookup treats the same values as unknown, not errors
    assert check_id("x") == "str" and check_id(np.int32(-1)) == "int"
    with pytest.raises(InputError, match="int64"):
        check_id(2**63)
    keys, valid = query_keys([2**63, 1], "int")
    assert valid.tolist() == [False, True]


def test_from_arrays_checks_ids_with_the_same_rules():
    with pytest.raises(InputError, match=r"`ids`: str ids must be encodable as UTF-8.*at position 1"):
        build(["a", "\udc80"], [0, 1])
    with pytest.raises(DuplicateIdError, match=r"id 3 occurs at positions 0 and 1"):
        build(np.array([3, 3]), [0, 0])


# --------------------------------------------------------------------------- construction rules


def test_basic_properties():
    cm = small()
    assert cm.n_docs == len(cm) == 6 and cm.n_clusters == 3 and cm.n_duplicates == 3
    assert cm.id_kind == "str" and cm.ids == ["a", "b", "c", "d", "e", "f"]
    assert cm.cluster_ids.dtype == np.int64 and cm.cluster_ids.tolist() == [0, 0, 2, 0, 4, 4]
    assert cm.is_representative.tolist() == [False, True, True, False, True, False]
    assert cm.doc_stages.dtype == np.uint8 and cm.doc_lengths.dtype == np.uint32
    assert cm.config == {"num_perm": 128, "threshold": 0.8}
    assert cm.fingerprint == "fp-0123456789abcdef" and cm.seed == 42 and cm.hash_scheme == "blake2b64-v1"
    assert cm.build_info["lsh"]["bands"] == 16 and cm.metadata == {"embedding_model": "all-MiniLM-L6-v2"}
    assert cm.created_at == CREATED and cm.format_version == (1, 0)
    assert sorted(cm.extras) == ["exact_hash", "minhash"]
    assert cm.members(0) == ["a", "b", "d"] and cm.members(4) == ["e", "f"] and cm.members(2) == ["c"]
    assert cm.representative_of(0) == "b" and cm.representative_of(2) == "c"
    cids, sizes = cm.cluster_sizes()
    assert cids.tolist() == [0, 2, 4] and sizes.tolist() == [3, 1, 2]
    assert cm.cluster_stages(0) == 3 and cm.cluster_stages(2) == 0 and cm.cluster_stages(4) == 4
    assert cm.cluster_of("d") == 0 and cm.cluster_of("zz") is None
    assert "e" in cm and "zz" not in cm and 3 not in cm and 1.5 not in cm
    r = repr(cm)
    assert "n_docs=6" in r and "n_clusters=3" in r and "id_kind='str'" in r
    assert not cm.cluster_ids.flags.writeable


def test_int_ids():
    cm = build([10, -5, 2**62, 7], [0, 0, 2, 3])
    assert cm.id_kind == "int" and cm.ids.dtype == np.int64 and cm.ids.tolist() == [10, -5, 2**62, 7]
    assert cm.lookup([-5, 7, 8, "10"]).tolist() == [0, 3, -1, -1]
    assert cm.members(0) == [10, -5]
    cm2 = build(np.array([3, 1, 2], dtype=np.int64), [0, 1, 2])
    assert cm2.lookup(np.array([1, 2, 3, 4])).tolist() == [1, 2, 0, -1]


def test_duplicate_ids_named_with_positions():
    with pytest.raises(DuplicateIdError, match=r"'b' occurs at positions 1 and 3"):
        build(["a", "b", "c", "b", "a"], [0, 1, 2, 3, 4])
    with pytest.raises(DuplicateIdError, match=r"7 occurs at positions 0 and 2"):
        build([7, 8, 7], [0, 1, 2])
    assert issubclass(DuplicateIdError, ValueError)


def test_mixed_and_bad_id_types():
    with pytest.raises(InputTypeError, match=r"all str or all int; position 0 is str but position 2 is int"):
        build(["a", "b", 3], [0, 1, 2])
    with pytest.raises(InputTypeError, match=r"float 1.5 at position 1"):
        build(["a", 1.5], [0, 1])
    with pytest.raises(InputTypeError, match=r"NoneType None at position 0"):
        build([None, "a"], [0, 1])
    with pytest.raises(InputTypeError, match=r"bool"):
        build([1, True], [0, 1])
    with pytest.raises(InputError, match="int64"):
        build([1, 2**64], [0, 1])
    with pytest.raises(InputTypeError, match="list"):
        build("abc", [0, 1, 2])


def test_array_rules():
    ids = ["a", "b", "c"]
    with pytest.raises(InputError, match=r"`cluster_ids` must have one entry per document \(length 3"):
        build(ids, [0, 0])
    with pytest.raises(InputError, match=r"`cluster_ids` values must lie in \[0, 2\]; got 3 at position 2"):
        build(ids, [0, 0, 3])
    with pytest.raises(InputError, match=r"got -1 at position 1"):
        build(ids, [0, -1, 2])
    with pytest.raises(InputTypeError, match="integer"):
        build(ids, np.array([0.0, 0.0, 1.0]))
    with pytest.raises(InputError, match=r"cluster 0 \(members at positions \[0, 1\]\) has 2 representatives at \[0, 1\]"):
        build(ids, [0, 0, 2], np.array([True, True, True]))
    with pytest.raises(InputError, match=r"cluster 0 .* has 0 representatives"):
        build(ids, [0, 0, 2], np.array([False, False, True]))
    with pytest.raises(InputError, match="doc_stages"):
        build(ids, [0, 1, 2], stages=np.array([0, 1, 256]))
    with pytest.raises(InputError, match="doc_lengths"):
        build(ids, [0, 1, 2], lengths=np.array([0, -1, 2]))
    with pytest.raises(InputTypeError, match="is_representative"):
        build(ids, [0, 1, 2], np.array([0.5, 1, 1]))
    with pytest.raises(InputTypeError, match=r"config\.bad"):
        build(ids, [0, 1, 2], config={"bad": {1, 2}})
    with pytest.raises(InputTypeError, match=r"extras\['obj'\].*dtype must be one of"):
        build(ids, [0, 1, 2], extras={"obj": np.array(["x"], dtype=object)})
    with pytest.raises(InputError, match="extras"):
        build(ids, [0, 1, 2], extras={"no spaces": np.zeros(3)})
    with pytest.raises(InputError, match="created_at"):
        build(ids, [0, 1, 2], created_at="yesterday")


def test_caller_arrays_not_aliased_or_frozen():
    reps = np.array([True, True])
    cm = build(["a", "b"], np.array([0, 1]), reps)
    assert reps.flags.writeable
    reps[0] = False
    assert cm.is_representative.tolist() == [True, True]


def test_empty_corpus_round_trip(tmp_path):
    cm = build([], [])
    assert cm.n_docs == 0 and cm.n_clusters == 0 and cm.lookup(["a"]).tolist() == [-1]
    cm.save(tmp_path / "e.dvf")
    cm2 = load(tmp_path / "e.dvf")
    assert cm2.n_docs == 0 and cm2.ids == [] and cm2.lookup([]).tolist() == []


# --------------------------------------------------------------------------- aliases


def test_alias_chains_resolve_transitively(tmp_path):
    ids = [f"d{i}" for i in range(8)]
    # Incremental merges: 6 -> 4 -> 2 -> 0; 7 is alone.
    cl = [0, 0, 2, 2, 4, 4, 6, 7]
    reps = np.array([True, False, False, False, False, False, False, True])
    aliases = np.array([[4, 2], [2, 0], [6, 4]], dtype=np.int64)
    cm = build(ids, cl, reps, extras={"aliases": aliases})
    assert cm.cluster_ids.tolist() == [0, 0, 0, 0, 0, 0, 0, 7]
    assert cm.n_clusters == 2
    cm.save(tmp_path / "a.dvf")
    for c in (cm, load(tmp_path / "a.dvf")):
        assert c.members(6) == ids[:7] and c.resolve_cluster(4) == 0 and c.representative_of(2) == "d0"
        assert c.lookup(["d5", "d7"]).tolist() == [0, 7]
        np.testing.assert_array_equal(c.extras["aliases"], aliases)
        with pytest.raises(InputError, match="not a cluster"):
            c.members(3)


def test_alias_rules():
    ids = ["a", "b", "c"]
    with pytest.raises(InputError, match=r"cycle: 0 -> 1 -> 0"):
        build(ids, [0, 1, 2], extras={"aliases": np.array([[0, 1], [1, 0]])})
    with pytest.raises(InputError, match="maps cluster 1 twice"):
        build(ids, [0, 1, 2], extras={"aliases": np.array([[1, 0], [1, 2]])})
    with pytest.raises(InputError, match=r"\[0, 3\)"):
        build(ids, [0, 1, 2], extras={"aliases": np.array([[1, 9]])})
    with pytest.raises(InputTypeError, match=r"shape \(m, 2\)"):
        build(ids, [0, 1, 2], extras={"aliases": np.array([1, 2, 3])})


# --------------------------------------------------------------------------- persistence


@pytest.mark.parametrize("mmap", [True, False])
@pytest.mark.parametrize("verify", [True, False])
def test_round_trip(tmp_path, mmap, verify):
    cm = small()
    path = tmp_path / "cm.dvf"
    cm.save(path)
    got = load(path, mmap=mmap, verify=verify)
    assert got.ids == cm.ids and got.n_clusters == cm.n_clusters and got.path == str(path)
    for attr in ("cluster_ids", "is_representative", "doc_stages", "doc_lengths"):
        np.testing.assert_array_equal(getattr(got, attr), getattr(cm, attr), err_msg=attr)
    for attr in ("config", "fingerprint", "seed", "hash_scheme", "build_info", "metadata", "created_at", "format_version"):
        assert getattr(got, attr) == getattr(cm, attr), attr
    assert sorted(got.extras) == sorted(cm.extras)
    for name in cm.extras:
        np.testing.assert_array_equal(got.extras[name], cm.extras[name])
    q = ["a", "e", "zz", "c", 5]
    assert got.lookup(q).tolist() == cm.lookup(q).tolist() == [0, 4, -1, 2, -1]
    assert got.doc_index(["f", "a", "x"]).tolist() == [5, 0, -1]
    assert got.members(0) == ["a", "b", "d"] and got.representative_of(4) == "e"
    assert ClusterMap.load(path).fingerprint == cm.fingerprint


def test_header_contents(tmp_path):
    small().save(tmp_path / "cm.dvf")
    header, arrays = read_container(tmp_path / "cm.dvf")
    assert header["format"] == "diversify.clustermap"
    assert header["counts"] == {"n_docs": 6, "n_clusters": 3, "n_duplicates": 3}
    assert header["library_version"] == diversify.__version__ and header["id_kind"] == "str"
    assert header["id_key_scheme"] == ID_KEY_SCHEME
    assert {"lookup/key", "lookup/cluster", "ids/str_bytes", "extra/minhash"} <= set(arrays)


def test_byte_determinism_and_source_date_epoch(tmp_path, monkeypatch):
    small().save(tmp_path / "1")
    small(config={"num_perm": 128, "threshold": 0.8}).save(tmp_path / "2")
    assert (tmp_path / "1").read_bytes() == (tmp_path / "2").read_bytes()
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    a = small(created_at=None)
    assert a.created_at == "2023-11-14T22:13:20Z"
    a.save(tmp_path / "3")
    small(created_at=None).save(tmp_path / "4")
    assert (tmp_path / "3").read_bytes() == (tmp_path / "4").read_bytes()
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "soon")
    with pytest.raises(InputError, match="SOURCE_DATE_EPOCH"):
        small(created_at=None)


# The golden artifact: if this hash changes, the format changed. Make that deliberate: bump
# FORMAT_MINOR (additive) or FORMAT_MAJOR (breaking), update docs/artifact-format.md, then the hash.
GOLDEN_SHA256 = "9cbbba709fd5e9e06004983213e726cf5d9046681e3d19c9d78c8df0c05781f8"


def test_golden_bytes(tmp_path):
    path = tmp_path / "golden.dvf"
    cm = small(library_version="0.1.0")
    cm.save(path)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert digest == GOLDEN_SHA256, f"artifact bytes changed: sha256 {digest}"


# --------------------------------------------------------------------------- lookups vs an oracle


def _forced_paths(cm):
    """Yield the ClusterMap with each lookup strategy (binary search and bucket window)."""
    table = cm._lookup_table
    table.use_buckets = False
    yield cm
    if cm._header["lookup"]["bucket_bits"] > 0:
        table.use_buckets = True
        yield cm
    table.use_buckets = False


id_text = st.text(min_size=0, max_size=12)
id_int = st.integers(min_value=-(2**63), max_value=2**63 - 1)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.data(),
    kind=st.sampled_from(["str", "int"]),
)
def test_lookup_matches_dict_oracle(tmp_path, data, kind):
    ids = data.draw(st.lists(id_text if kind == "str" else id_int, unique=True, max_size=60), label="ids")
    n = len(ids)
    group = data.draw(st.lists(st.integers(0, max(n - 1, 0)), min_size=n, max_size=n), label="group")
    first = {}
    cl = []
    for i, g in enumerate(group):
        cl.append(first.setdefault(g, i))
    cm = build(ids, cl)
    oracle = {x: c for x, c in zip(ids, cl)}
    absent = data.draw(st.lists(id_text | id_int, max_size=20), label="absent")
    queries = data.draw(st.permutations(list(ids) + absent), label="order")
    want = [oracle[q] if (q in oracle and type(q) is (str if kind == "str" else int)) else -1 for q in queries]
    path = tmp_path / "o.dvf"
    cm.save(path)
    for c in (cm, load(path), load(path, mmap=False)):
        for variant in _forced_paths(c):
            assert variant.lookup(queries).tolist() == want
            assert variant.lookup(np.array(queries, dtype=object)).tolist() == want
            for q in queries[:5]:
                w = oracle[q] if (q in oracle and type(q) is (str if kind == "str" else int)) else None
                assert variant.cluster_of(q) == w


def test_large_lookup_both_strategies():
    rng = np.random.default_rng(7)
    n = 50_000
    ids = [f"https://example.com/{i}" for i in range(n)]
    heads = np.arange(n)
    cl = np.where(rng.random(n) < 0.3, np.maximum(heads - rng.integers(1, 5, n), 0), heads)
    cl = cl.copy()
    for i in range(n):  # point to a head (cluster id = doc index of first member)
        cl[i] = cl[cl[i]]
    cm = build(ids, cl)
    q_idx = rng.integers(0, n, 500)
    queries = [ids[i] for i in q_idx] + [f"nope-{i}" for i in range(100)]
    want = cl[q_idx].tolist() + [-1] * 100
    assert cm._header["lookup"]["bucket_bits"] > 10 and cm._header["lookup"]["window"] >= 1
    for variant in _forced_paths(cm):
        assert variant.lookup(queries).tolist() == want
    int_cm = build(np.arange(0, 3 * n, 3, dtype=np.int64), cl)  # sequential ints spread by slot keys
    assert int_cm._header["lookup"]["window"] < 40
    for variant in _forced_paths(int_cm):
        assert variant.lookup(np.arange(0, 60, 1)).tolist() == [int(cl[i // 3]) if i % 3 == 0 else -1 for i in range(60)]


def test_lookup_input_rules():
    cm = small()
    with pytest.raises(InputTypeError, match=r"float 1.5 at position 1"):
        cm.lookup(["a", 1.5])
    with pytest.raises(InputTypeError, match="None"):
        cm.lookup([None])
    with pytest.raises(InputTypeError, match="bool"):
        cm.lookup([True])
    with pytest.raises(InputTypeError, match=r"single str .*cluster_of"):
        cm.lookup("a")
    with pytest.raises(InputTypeError, match="float"):
        cm.cluster_of(2.0)
    with pytest.raises(InputTypeError, match="dtype float64"):
        cm.lookup(np.array([1.0]))
    assert cm.lookup([]).tolist() == []
    assert cm.lookup(["\ud800", 2**70, 3]).tolist() == [-1, -1, -1]  # unencodable / out of range / wrong kind
    assert cm.lookup(np.array([1, 2])).tolist() == [-1, -1]
    assert cm.lookup(("a", "b")).tolist() == [0, 0]
    with pytest.raises(InputError, match="not a cluster"):
        cm.members(1)
    with pytest.raises(InputTypeError):
        cm.representative_of("a")


# --------------------------------------------------------------------------- hostile ClusterMaps


def _tamper(tmp_path, **changes):
    """Save a good artifact, then rewrite it with valid checksums but altered content."""
    small().save(tmp_path / "good.dvf")
    header, arrays = read_container(tmp_path / "good.dvf")
    header = {k: v for k, v in header.items() if k != "format_version"}
    arrays = {k: np.array(v) for k, v in arrays.items()}
    for name, fn in changes.items():
        fn(header, arrays)
    write_container(tmp_path / "bad.dvf", header, arrays)
    return tmp_path / "bad.dvf"


def _set(name, idx, value):
    def fn(h, a):
        a[name][idx] = value

    return fn


@pytest.mark.parametrize(
    "change,message",
    [
        (lambda h, a: h.update(format="something.else"), "not a diversify artifact"),
        (lambda h, a: h.update(id_kind="float"), "id_kind"),
        (lambda h, a: h.update(id_key_scheme="md5"), "id key scheme"),
        (lambda h, a: h.update(seed="42"), "`seed` must be an int"),
        (lambda h, a: h["counts"].update(n_docs=7), "inconsistent"),
        (lambda h, a: h["lookup"].update(window=10**6), "out of range"),
        (lambda h, a: h["lookup"].update(bucket_bits=63), "out of range"),
        (lambda h, a: h["lookup"].update(slot_multiplier=3), "slot_multiplier"),
        (lambda h, a: a.pop("lookup/cluster"), "missing"),
        (lambda h, a: a.update({"doc/stages": a["doc/stages"].astype(np.uint16)}), "must have dtype u1"),
        (lambda h, a: a.update({"lookup/key": a["lookup/key"][::-1].copy()}), "strictly increasing"),
        (_set("lookup/cluster", 0, 99), r"\[0, 6\)"),
        (_set("lookup/cluster", 0, 4), "disagrees"),
        (_set("doc/cluster_id", 2, 4), "disagrees"),
        (_set("cluster/indptr", 1, 5), "disagrees|indptr"),
        (_set("cluster/representative", 0, 0), "representative"),
        (_set("lookup/bucket_start", -1, 3), "bucket_start"),
        (_set("lookup/doc", 0, 1), "permutation"),
    ],
)
def test_tampered_clustermaps_rejected(tmp_path, change, message):
    path = _tamper(tmp_path, x=change)
    with pytest.raises(ArtifactError, match=message):
        load(path)


def test_tampered_int_ids_rejected(tmp_path):
    build([5, 6, 7], [0, 0, 2]).save(tmp_path / "good.dvf")
    header, arrays = read_container(tmp_path / "good.dvf")
    header = {k: v for k, v in header.items() if k != "format_version"}
    arrays = {k: np.array(v) for k, v in arrays.items()}
    arrays["ids/int"][1] = 99
    write_container(tmp_path / "bad.dvf", header, arrays)
    with pytest.raises(ArtifactError, match="disagrees with `ids/int`"):
        load(tmp_path / "bad.dvf")


def test_tampered_ids_blob_is_refused_at_load(tmp_path):
    """An id changed under valid checksums no longer matches its lookup key: refused at load (once: on first use
    of ``ids``). Invalid UTF-8 whose keys do match: tests/unit/test_artifact_reader_lies.py."""
    path = _tamper(tmp_path, x=_set("ids/str_bytes", 0, 0xFF))
    with pytest.raises(ArtifactError, match="does not belong to the stored ids"):
        load(path)
    path = _tamper(tmp_path, x=_set("ids/str_offsets", 1, 100))
    with pytest.raises(ArtifactError, match="str_offsets"):
        load(path)


def test_not_found(tmp_path):
    from diversify.errors import ArtifactNotFoundError

    with pytest.raises(ArtifactNotFoundError, match="build the artifact first"):
        load(tmp_path / "missing.dvf")


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=st.sampled_from(
        ["doc/cluster_id", "doc/is_representative", "lookup/key", "lookup/cluster", "lookup/doc", "lookup/bucket_start",
         "cluster/id", "cluster/indptr", "cluster/members", "cluster/representative", "ids/str_offsets", "ids/str_bytes"]
    ),
    index=st.integers(min_value=0),
    value=st.integers(min_value=-(2**63), max_value=2**63 - 1),
)
def test_fuzz_consistent_checksums_load_or_artifact_error(tmp_path, name, index, value):
    changed = []

    def change(h, a):
        arr = a[name].reshape(-1)
        if arr.size:
            info = np.iinfo(arr.dtype) if arr.dtype.kind in "iu" else None
            before = arr[index % arr.size].item()
            arr[index % arr.size] = (value % 2) if info is None else min(max(value, info.min), info.max)
            changed.append(arr[index % arr.size].item() != before)

    path = _tamper(tmp_path, x=change)
    try:
        cm = load(path)
        # loaded: whatever was changed, the map answers every question consistently
        assert len(cm.ids) == cm.n_docs == len(cm) == 6
        assert cm.lookup(["a", "b", "zz"]).shape == (3,) and cm.lookup(["zz"])[0] == -1
        cids, sizes = cm.cluster_sizes()
        assert len(cids) == cm.n_clusters and int(sizes.sum()) == cm.n_docs
        for c, size in zip(cids.tolist(), sizes.tolist()):
            members = cm.members(c)
            assert len(members) == size and cm.representative_of(c) in members
            assert cm.cluster_stages(c) >= 0
    except ArtifactError as exc:  # refused, at load or at the first use of an array
        assert any(changed), f"the untampered artifact was refused: {exc}"
        assert str(exc).strip()
        return
    if not any(changed):
        assert (cm.lookup(cm.ids) == small().lookup(small().ids)).all()


# --------------------------------------------------------------------------- import budget


def test_import_artifact_does_not_load_numba():
    code = "import diversify.artifact, diversify.ids, sys; assert 'numba' not in sys.modules, 'numba was imported'"
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_documented_standalone_reader(tmp_path):
    """The Python snippet in docs/artifact-format.md reads a real artifact without diversify."""
    doc = (REPO / "docs" / "artifact-format.md").read_text(encoding="utf-8")
    snippet = doc.split("```python\n")[-1].split("```")[0]
    small().save(tmp_path / "clusters.dvf")
    snippet += "\nassert arrays['doc/cluster_id'].tolist() == [0, 0, 2, 0, 4, 4]\n"
    proc = subprocess.run([sys.executable, "-c", snippet], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "'n_docs': 6" in proc.stdout


def test_caller_id_list_not_aliased():
    ids = ["a", "b"]
    cm = build(ids, [0, 1])
    ids[0] = "zzz"
    assert cm.ids == ["a", "b"] and cm.members(0) == ["a"]


def test_self_alias_is_a_no_op():
    cm = build(["a", "b"], [0, 0], extras={"aliases": np.array([[0, 0]])})
    assert cm.cluster_ids.tolist() == [0, 0] and cm.members(0) == ["a", "b"]


def test_extras_checksums_verified_lazily(tmp_path):
    path = tmp_path / "cm.dvf"
    small().save(path)
    header, arrays = read_container(path)
    e = arrays.entry("extra/minhash")
    start = -(-(24 + struct_len(path)) // 64) * 64
    data = bytearray(path.read_bytes())
    data[start + e["offset"]] ^= 0xFF
    path.write_bytes(bytes(data))
    cm = load(path)  # the lookup path is intact
    assert cm.lookup(["a"]).tolist() == [0]
    with pytest.raises(ArtifactError, match=r"'extra/minhash' fails its checksum"):
        cm.extras
    assert load(path, verify=False).extras["minhash"].shape == (6, 2)


def struct_len(path) -> int:
    import struct

    return struct.unpack_from("<Q", path.read_bytes(), 16)[0]


def test_hot_reload_replacing_a_mapped_file(tmp_path):
    """Saving over a path that a live ClusterMap has mapped leaves the live one consistent."""
    path = tmp_path / "live.dvf"
    small().save(path)
    old = load(path)
    build(["a", "x"], [0, 1]).save(path)  # atomic replace: a new inode
    new = load(path)
    assert old.lookup(["a", "e", "x"]).tolist() == [0, 4, -1] and old.members(4) == ["e", "f"]
    assert new.lookup(["a", "e", "x"]).tolist() == [0, -1, 1] and new.n_docs == 2


def test_concurrent_lookups_are_consistent():
    import concurrent.futures

    n = 20_000
    ids = [f"id{i}" for i in range(n)]
    cl = np.arange(n) // 3 * 3
    cm = build(ids, cl)
    rng = np.random.default_rng(3)
    batches = [rng.integers(0, n, 50) for _ in range(400)]

    def work(b):
        return bool((cm.lookup([ids[i] for i in b]) == cl[b]).all())

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        assert all(pool.map(work, batches))
