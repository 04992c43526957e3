"""The main band table's Bloom filter: no false negatives, a false-positive rate within theory,
and the SQLite backend trusting it only while its stamp matches the index."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diversify.linking.keyfilter import MIN_BITS, PROBES, KeyFilter, bits_for

int64s = st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1)


@settings(max_examples=200, deadline=None)
@given(st.lists(int64s, max_size=300), st.lists(int64s, max_size=50), st.sampled_from([64, 512, 1 << 14]))
def test_every_added_key_may_be_contained(keys, more, n_bits):
    f = KeyFilter.empty(n_bits)
    f.add(np.array(keys, dtype=np.int64))
    f.add(np.array(more, dtype=np.int64))  # a second add keeps the first one's bits
    both = np.array(keys + more, dtype=np.int64)
    assert f.may_contain(both).all()
    assert f.keys == len(keys) + len(more)
    g = KeyFilter.from_bytes(f.to_bytes(), f.keys)
    assert np.array_equal(g.may_contain(both), f.may_contain(both)) and g.n_bits == n_bits


@pytest.mark.parametrize("bits_per_key", [8, 16])
def test_false_positive_rate_is_what_theory_says(bits_per_key):
    rng = np.random.default_rng(bits_per_key)
    n = 1 << 16
    f = KeyFilter.empty(n * bits_per_key)
    f.add(rng.integers(-(1 << 63), (1 << 63) - 1, n, dtype=np.int64))
    probe = rng.integers(-(1 << 63), (1 << 63) - 1, 200_000, dtype=np.int64)
    rate = f.may_contain(probe).mean()
    theory = (1 - math.exp(-PROBES / bits_per_key)) ** PROBES
    sd = math.sqrt(theory * (1 - theory) / probe.size)
    assert abs(rate - theory) < 5 * sd + 0.1 * theory, (rate, theory)


def _reference_bits(keys: np.ndarray, n_bits: int) -> np.ndarray:
    """The bits the kernel must set, in numpy alone (the probe positions of the lookups)."""
    from diversify.linking.keyfilter import _positions

    bits = np.zeros(n_bits // 8, dtype=np.uint8)
    pos = _positions(keys, np.uint64(n_bits - 1)).ravel()
    byte, bit = (pos >> np.uint64(3)).astype(np.intp), (pos & np.uint64(7)).astype(np.uint8)
    for j in range(8):  # one bit value per pass: repeated indices all set the same bit
        bits[byte[bit == j]] |= np.uint8(1 << j)
    return bits


@settings(max_examples=100, deadline=None)
@given(st.lists(int64s, max_size=400), st.sampled_from([64, 1 << 12, 1 << 16]))
def test_the_kernel_sets_the_bits_of_the_numpy_reference(keys, n_bits):
    a = KeyFilter.empty(n_bits)
    a.add(np.array(keys, dtype=np.int64))
    assert np.array_equal(a.bits, _reference_bits(np.array(keys, dtype=np.int64), n_bits)) and a.keys == len(keys)


def test_adding_to_a_filter_read_from_bytes_copies_it_first():
    f = KeyFilter.empty(1 << 12)
    f.add(np.arange(10, dtype=np.int64))
    blob = f.to_bytes()
    g = KeyFilter.from_bytes(blob, f.keys)
    g.add(np.arange(10, 20, dtype=np.int64))
    assert g.may_contain(np.arange(20, dtype=np.int64)).all() and g.keys == 20
    assert KeyFilter.from_bytes(blob, 10).to_bytes() == blob == f.to_bytes()  # the blob is untouched


def test_structured_keys_spread_like_random_ones():
    """Band keys are hashes, but the mixing must not rely on it: consecutive integers too."""
    f = KeyFilter.empty(1 << 20)
    f.add(np.arange(65_536, dtype=np.int64))
    assert f.may_contain(np.arange(65_536, dtype=np.int64)).all()
    rate = f.may_contain(np.arange(1 << 40, (1 << 40) + 100_000, dtype=np.int64)).mean()
    assert rate < 2 * (1 - math.exp(-PROBES / 16)) ** PROBES


def test_sizes():
    assert bits_for(0) == MIN_BITS and bits_for(10) == MIN_BITS
    assert bits_for(1_000_000) == 1 << 24 and bits_for(14_000_000) == 1 << 28
    f = KeyFilter.empty(1 << 10)
    assert not f.full(128) and f.full(129)  # fewer than 8 bits per key
    with pytest.raises(ValueError, match="power-of-two"):
        KeyFilter(np.zeros(3, dtype=np.uint8), 0)


# --------------------------------------------------------------------------- in the SQLite backend


def _filled(tmp_path, monkeypatch, name="f.db"):
    import diversify
    from diversify.index import sqlite as backend
    from index.contract import _doc

    monkeypatch.setattr(backend, "MERGE_MIN_ROWS", 40)
    monkeypatch.setattr(backend, "_FILTER_FROM_KEYS", 0)  # the filter for every lookup, however small
    idx = diversify.Index(f"sqlite:///{tmp_path}/{name}")
    for b in range(6):
        idx.add([_doc(100 * b + i) for i in range(5)], ids=[f"d{b}-{i}" for i in range(5)])
    return idx


def _plain(view, keys):
    from diversify.index.sqlite import _LOOKUP

    rows = view.con.execute(_LOOKUP, (__import__("json").dumps(sorted(set(keys.tolist()))),)).fetchall()
    return sorted(map(tuple, rows))


def test_sqlite_lookups_through_the_filter_equal_the_plain_lookup(tmp_path, monkeypatch):
    idx = _filled(tmp_path, monkeypatch)
    with idx.storage.read() as view:
        assert view._filter() is not None  # merges happened, and the filter is valid
        main_keys = np.array([k for (k,) in view.con.execute("SELECT key FROM bands")], dtype=np.int64)
        assert main_keys.size and view._filter().may_contain(main_keys).all()
        rng = np.random.default_rng(0)
        keys = np.concatenate([main_keys[::3], rng.integers(-(1 << 62), 1 << 62, 500, dtype=np.int64)])
        ck, cs = view.candidates(keys)
        assert sorted(zip(ck.tolist(), cs.tolist())) == _plain(view, keys)
    from index.contract import _near

    got = idx.add([_near(100 * b + 2) for b in range(6)], ids=[f"n{b}" for b in range(6)])
    assert all(m.joined for m in got) and [m.representative for m in got] == [f"d{b}-2" for b in range(6)]
    idx.delete([f"d{b}-2" for b in range(6)])  # rows leave the main table; the filter stays a superset
    assert idx.check() == []
    with idx.storage.read() as view:
        assert view._filter() is not None
    idx.close()


def test_sqlite_filter_is_ignored_once_a_writer_that_does_not_know_it_moved_the_index(tmp_path, monkeypatch):
    """An older diversify merges without the filter: a key it put in the main table must be found.
    Such a writer always moves next_seq (or main_rows) without moving the stamp."""
    import sqlite3

    idx = _filled(tmp_path, monkeypatch)
    path = f"{tmp_path}/f.db"
    stranger = 0x1234_5678_9ABC_DEF0
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("BEGIN IMMEDIATE")
    con.execute("INSERT INTO bands (key, seq) VALUES (?, 0)", (stranger,))
    con.execute("COMMIT")
    with idx.storage.read() as view:  # the stamp still matches: the filter hides the stranger
        assert view._filter() is not None
        assert not view._filter().may_contain(np.array([stranger], dtype=np.int64)).any()
        assert view.candidates(np.array([stranger], dtype=np.int64))[0].tolist() == []
    con.execute("UPDATE meta SET v = CAST(v AS INTEGER) + 1 WHERE k = 'next_seq'")  # what that writer does too
    con.close()
    with idx.storage.read() as view:
        assert view._filter() is None
        assert view.candidates(np.array([stranger], dtype=np.int64))[0].tolist() == [stranger]
    idx.close()


def test_sqlite_a_rolled_back_merge_leaves_no_filter_behind(tmp_path, monkeypatch):
    from diversify.index import sqlite as backend

    idx = _filled(tmp_path, monkeypatch)
    token = idx.storage._filters.token
    assert token
    with pytest.raises(RuntimeError, match="boom"):
        with idx.storage.write() as tx:
            tx.merge_tiers()
            assert tx._pending is not None
            raise RuntimeError("boom")
    assert idx.storage._filters.token == token
    with idx.storage.read() as view:
        assert dict(view.con.execute("SELECT k, v FROM meta WHERE k = 'filter_token'"))["filter_token"] == token
    assert idx.check() == []
    # another process (another storage object) loads the filter of the committed state
    other = backend.SQLiteStorage(f"sqlite:///{tmp_path}/f.db", idx.storage.options)
    with other.read() as view:
        assert view._filter() is not None and other._filters.token == token
    other.close()
    idx.close()


def test_sqlite_an_index_from_before_the_filter_gets_one_at_its_next_merge(tmp_path, monkeypatch):
    import sqlite3

    idx = _filled(tmp_path, monkeypatch)
    idx.close()
    con = sqlite3.connect(f"{tmp_path}/f.db", isolation_level=None)  # as an older diversify left it
    con.execute("DROP TABLE band_filter")
    con.execute("DELETE FROM meta WHERE k LIKE 'filter_%'")
    con.close()
    import diversify
    from index.contract import _doc, _near

    with diversify.Index(f"sqlite:///{tmp_path}/f.db") as idx:
        with idx.storage.read() as view:
            assert view._filter() is None
        assert idx.add([_near(2)], ids=["n"])[0].representative == "d0-2"  # the plain lookup finds it
        for b in range(6, 10):
            idx.add([_doc(100 * b + i) for i in range(5)], ids=[f"d{b}-{i}" for i in range(5)])
        with idx.storage.read() as view:
            assert view._filter() is not None
        assert idx.add([_near(102)], ids=["m"])[0].representative == "d1-2"
        assert idx.check() == []


@pytest.mark.parametrize("damage", ["flip", "truncate", "not-a-blob", "keys"])
def test_sqlite_a_damaged_filter_is_ignored_and_lookups_stay_exact(tmp_path, monkeypatch, damage):
    """Bits changed on disk (the CRC-32 in meta no longer matches), a blob cut short, a value of
    another type, a key count that is not a number: the plain lookup answers, nothing crashes."""
    import sqlite3

    idx = _filled(tmp_path, monkeypatch)
    idx.close()
    con = sqlite3.connect(f"{tmp_path}/f.db", isolation_level=None)
    (blob,) = con.execute("SELECT bits FROM band_filter WHERE id = 0").fetchone()
    if damage == "flip":  # clear every bit: a filter that would rule out every key
        con.execute("UPDATE band_filter SET bits = ? WHERE id = 0", (bytes(len(blob)),))
    elif damage == "truncate":
        con.execute("UPDATE band_filter SET bits = ? WHERE id = 0", (blob[:1000],))
    elif damage == "not-a-blob":
        con.execute("UPDATE band_filter SET bits = 'text' WHERE id = 0")
    else:
        con.execute("UPDATE meta SET v = 'many' WHERE k = 'filter_keys'")
    con.close()
    import diversify
    from index.contract import _near

    with diversify.Index(f"sqlite:///{tmp_path}/f.db") as idx:
        with idx.storage.read() as view:
            assert view._filter() is None
        got = idx.query([_near(100 * b + 2) for b in range(6)])
        assert [m.representative for m in got] == [f"d{b}-2" for b in range(6)]
        assert idx.check() == []


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=(1 << 64) - 1), max_size=50))
def test_the_array_finalizer_is_the_scalar_one(values):
    from diversify import hashing

    got = hashing.fmix64_array(np.array(values, dtype=np.uint64))
    assert [int(v) for v in got] == [hashing.fmix64(v) for v in values]


_MERGING_WRITER = r"""
import sys
import diversify
from diversify.index import sqlite as backend
from index.contract import _doc
backend.MERGE_MIN_ROWS = 60  # a merge (and a filter write) every few batches
url, trial, warm = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with diversify.Index("sqlite:///" + warm) as w:  # load the kernels before the clock starts
    w.add([_doc(1), _doc(2)], ids=["a", "b"])
idx = diversify.Index(url, lock_timeout=60)
print("ready", flush=True)
b = 0
while True:
    base = 1_000_000 * (trial + 1) + 100 * b
    idx.add([_doc(base + i) for i in range(10)], ids=[f"t{trial}b{b}-{i}" for i in range(10)])
    b += 1
"""


def test_sqlite_sigkill_during_merges_leaves_the_filter_exact(tmp_path, monkeypatch):
    """Writers that merge the band tiers (and rewrite the filter) every few batches are SIGKILLed at
    random points; afterwards check() is clean, every batch is whole, and a lookup through the
    filter finds every key of the main table."""
    import os
    import random
    import signal
    import time

    from index.contract import _spawn

    idx = _filled(tmp_path, monkeypatch)  # MERGE_MIN_ROWS 40 and the filter for every lookup, here
    url = f"sqlite:///{tmp_path}/f.db"
    with idx.storage.read() as view:
        main_before = view._tier_rows("main_rows")
    idx.close()
    rng = random.Random(20261203)
    for trial in range(4):
        writer = _spawn(_MERGING_WRITER, url, str(trial), str(tmp_path / f"warm{trial}.db"))
        assert writer.stdout.readline().strip() == "ready", writer.stderr.read()
        time.sleep(rng.uniform(0.2, 1.5))
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait(timeout=60)
    import diversify

    with diversify.Index(url) as idx:
        assert idx.check() == []
        batches: dict = {}
        for r in idx.scan():
            batches.setdefault(r.id.rsplit("-", 1)[0], []).append(r.id)
        assert any(k.startswith("t3b") for k in batches), "the last writer committed nothing"
        assert all(len(v) == (5 if k.startswith("d") else 10) for k, v in batches.items())
        with idx.storage.read() as view:
            flt = view._filter()
            assert flt is not None  # the stamp followed every committed batch
            main = np.array([k for (k,) in view.con.execute("SELECT key FROM bands")], dtype=np.int64)
            assert main.size > main_before and flt.may_contain(main).all()  # merges ran in the writers
            ck, _ = view.candidates(main)
            assert set(ck.tolist()) == set(main.tolist())


@settings(max_examples=60, deadline=None)
@given(st.lists(int64s, max_size=300), st.lists(int64s, max_size=300), st.sampled_from([64, 1 << 12, 1 << 16]))
def test_bulk_lookups_in_the_kernel_answer_as_numpy_does(keys, probes, n_bits):
    """Lookups of many keys run in the kernel (the Dask engine's pass 2); a few stay in numpy; both
    give the same mask, key for key (the kernel called directly on small inputs too)."""
    from diversify._kernels.keyfilter import filter_test
    from diversify.linking.keyfilter import _words

    f = KeyFilter.empty(n_bits)
    f.add(np.array(keys, dtype=np.int64))
    ask = _words(np.array(keys + probes, dtype=np.int64))
    out = np.empty(ask.size, dtype=bool)
    filter_test(f.bits, ask, np.uint64(n_bits - 1), PROBES, out)
    assert np.array_equal(out, f.may_contain(ask))
    assert out[:len(keys)].all()


def test_a_bulk_lookup_is_the_numpy_lookup_of_each_key(monkeypatch):
    from diversify.linking import keyfilter

    rng = np.random.default_rng(7)
    f = KeyFilter.empty(1 << 16)
    f.add(rng.integers(-(1 << 63), (1 << 63) - 1, 6000, dtype=np.int64))
    ask = rng.integers(-(1 << 63), (1 << 63) - 1, keyfilter.BULK_KEYS + 5, dtype=np.int64)
    bulk = f.may_contain(ask)
    monkeypatch.setattr(keyfilter, "BULK_KEYS", 1 << 62)
    assert np.array_equal(bulk, f.may_contain(ask)) and 0 < bulk.sum() < bulk.size
