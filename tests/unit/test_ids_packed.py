"""The ids of a streamed build, gathered block by block in packed form (diversify.ids.PackedIds).

Oracle: the list of the same ids. Packed, they must give the artifact the same columns and keys,
decode to the same values, and refuse a broken corpus with the message the list gets.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import diversify
from diversify.artifact.assemble import id_columns
from diversify.cli.main import main
from diversify.errors import DiversifyError, DuplicateIdError, InputError, InputTypeError
from diversify.ids import PackedIds, check_ids

_ID_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)


def _packed(ids: list, cuts: list[int]) -> PackedIds:
    p = PackedIds()
    at = 0
    for cut in sorted(c % (len(ids) + 1) for c in cuts) + [len(ids)]:
        p.extend(ids[at:cut])
        at = max(at, cut)
    return p


def _error_of(fn):
    try:
        fn()
    except DiversifyError as exc:
        return type(exc), str(exc)
    return None


_INT64 = st.integers(-(2**63), 2**63 - 1)


@settings(max_examples=150, deadline=None)
@given(ids=st.one_of(st.lists(_ID_TEXT, max_size=40), st.lists(_INT64, max_size=40),
                     # mostly one kind, now and then another kind or a non-id: the first offender is named
                     st.lists(st.one_of(_ID_TEXT, _ID_TEXT, _ID_TEXT, _INT64, st.floats(), st.none()), max_size=40)),
       cuts=st.lists(st.integers(0, 40), max_size=5))
def test_packed_ids_are_the_columns_of_the_list(ids, cuts):
    want = _error_of(lambda: check_ids(ids))
    assert _error_of(lambda: _packed(ids, cuts).check_unique()) == want
    if want is None:
        packed = _packed(ids, cuts)
        assert len(packed) == len(ids)
        assert [packed[i] for i in range(len(ids))] == ids
        assert packed[-1:] == ids[-1:]
        cols, got = id_columns(ids), id_columns(packed)
        assert got.kind == cols.kind
        np.testing.assert_array_equal(got.keys, cols.keys)
        assert got.arrays.keys() == cols.arrays.keys()
        for name in cols.arrays:
            np.testing.assert_array_equal(got.arrays[name], cols.arrays[name])
            assert got.arrays[name].dtype == cols.arrays[name].dtype
        assert [got.id_at(i) for i in range(len(ids))] == ids


@pytest.mark.parametrize("blocks, kind", [
    ([["a", "b"], ["c", "a"]], DuplicateIdError),
    ([[1, 2], [3], [2]], DuplicateIdError),
    ([["a", "b"], [3]], InputTypeError),
    ([[1], ["x"]], InputTypeError),
    ([["a", "b"], [3, "c"]], InputTypeError),
    ([[1, 2], [3, "x", 4.5]], InputTypeError),
    ([["a"], ["b", 2.5, 7]], InputTypeError),
    ([["a"], ["b\ud800"]], InputError),
    ([[1], [2**63]], InputError),
    ([["a"], [None]], InputTypeError),
    ([["a"], [b"b"]], InputTypeError),
], ids=["dup-str", "dup-int", "str-then-int", "int-then-str", "int-opens-a-block", "str-in-ints", "float-in-strs",
        "surrogate", "int64", "none", "bytes"])
def test_a_broken_block_gets_the_message_of_the_whole_list(blocks, kind):
    packed = PackedIds()

    def gather():
        for b in blocks:
            packed.extend(b)
        packed.check_unique()

    whole = [x for b in blocks for x in b]
    got, want = _error_of(gather), _error_of(lambda: check_ids(whole))
    assert got is not None and got[0] is kind
    assert got == want


def test_the_earliest_repeat_is_named_across_blocks():
    """The list names the earliest position that repeats an id: "b" at 4, not "d" at 6, the
    repeat found within the second block."""
    packed = PackedIds()
    packed.extend(["a", "b", "c"])
    packed.extend(["d", "b", "a", "d"])
    with pytest.raises(DuplicateIdError, match=r"'b' occurs at positions 1 and 4"):
        packed.check_unique()


def test_a_spilled_build_refuses_duplicate_ids_as_a_build_in_memory_does(tmp_path):
    texts = [f"document number {i} with some words" for i in range(50)]
    ids = [f"d{i}" for i in range(50)]
    ids[41] = "d7"
    held = _error_of(lambda: diversify.build(texts, ids=ids, chunk_size=8))
    spilled = _error_of(lambda: diversify.build(iter(texts), ids=ids, chunk_size=8, spill_dir=tmp_path))
    assert held is not None and held[0] is DuplicateIdError
    assert spilled == held
    assert list(tmp_path.iterdir()) == []


def test_a_spilled_build_with_int_and_no_ids_reads_back_its_ids(tmp_path):
    texts = [f"text {i} " + "word " * (i % 7) for i in range(300)]
    for ids in (None, list(range(1000, 1300)), np.arange(5, 305)):
        spilled = diversify.build(iter(texts), ids=ids, chunk_size=64, spill_dir=tmp_path)
        held = diversify.build(texts, ids=ids, chunk_size=64)
        np.testing.assert_array_equal(np.asarray(spilled.cluster_map.ids), np.asarray(held.cluster_map.ids))
        assert spilled.cluster_map.lookup([int(np.asarray(held.cluster_map.ids)[7])]).tolist() == \
            held.cluster_map.lookup([int(np.asarray(held.cluster_map.ids)[7])]).tolist()


def test_build_stream_names_a_duplicate_id_as_the_plain_build_does(tmp_path, capsys):
    p = tmp_path / "c.jsonl"
    rows = [{"id": f"r{i}", "text": f"some text number {i}"} for i in range(40)]
    rows[33]["id"] = "r5"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    said = []
    for extra in ([], ["--stream"]):
        assert main(["build", str(p), "-o", str(tmp_path / "x.dvf"), "--no-progress", "--chunk-size", "8",
                     *extra]) != 0
        err = capsys.readouterr().err
        assert "Traceback" not in err and "occurs at positions 5 and 33" in err
        said.append(err)
    assert said[0] == said[1]
    assert not (tmp_path / "x.dvf").exists()
