"""The bucket argsort of hash keys (diversify._kernels.linking.argsort_hashes) gives numpy's
stable argsort, equal keys in their order, and hands keys it cannot sort fast back to numpy."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from diversify._kernels.linking import argsort_hashes
from diversify.linking.keys import stable_argsort

_U64 = st.integers(0, 2**64 - 1)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_U64, st.sampled_from([0, 1, 2**63, 2**64 - 1, 2**63 - 1])), max_size=300),
       st.integers(0, 3))
def test_the_permutation_of_numpys_stable_argsort(values, repeats):
    keys = np.array(values * (repeats + 1), dtype=np.uint64)  # repeated runs: many equal keys
    assert stable_argsort(keys).tolist() == np.argsort(keys, kind="stable").tolist()


def test_random_band_keys_with_duplicates_take_the_bucket_pass():
    rng = np.random.default_rng(3)
    keys = rng.integers(0, 2**64 - 1, size=200_000, dtype=np.uint64, endpoint=True)
    keys[::5] = keys[7]  # a giant bucket of one key: equal keys, no moves
    perm = np.empty(keys.size, dtype=np.int64)
    assert argsort_hashes(keys, perm)
    assert np.array_equal(perm, np.argsort(keys, kind="stable"))


def test_keys_far_from_uniform_fall_back_to_numpy():
    keys = np.arange(50_000, dtype=np.uint64)[::-1].copy()  # one bucket, reversed: quadratic insertion
    perm = np.empty(keys.size, dtype=np.int64)
    assert not argsort_hashes(keys, perm)
    assert np.array_equal(stable_argsort(keys), np.argsort(keys, kind="stable"))


def test_empty_single_and_other_dtypes():
    for keys in (np.zeros(0, np.uint64), np.array([5], np.uint64), np.array([3, -1, 3, 0], np.int64)):
        assert stable_argsort(keys).tolist() == np.argsort(keys, kind="stable").tolist()
        assert stable_argsort(keys).dtype == np.int64


def test_millions_of_keys_sorted_by_buckets_in_threads():
    """Enough keys for hundreds of top buckets shared between threads, with runs of equal keys:
    numpy's permutation. Keys that agree on their top 16 bits make one bucket too slow to insert
    into: numpy sorts them, and the permutation is the same."""
    rng = np.random.default_rng(11)
    keys = rng.integers(0, 2**64 - 1, size=1_000_000, dtype=np.uint64, endpoint=True)
    keys[::9] = keys[4]
    perm = np.empty(keys.size, dtype=np.int64)
    assert argsort_hashes(keys, perm)
    assert np.array_equal(perm, np.argsort(keys, kind="stable"))
    keys[1::13] = (keys[1::13] & np.uint64(0xFFFF)) | np.uint64(0xABCD << 48)
    assert not argsort_hashes(keys, perm)
    assert np.array_equal(stable_argsort(keys), np.argsort(keys, kind="stable"))


def test_one_bad_bucket_among_good_ones_falls_back():
    rng = np.random.default_rng(5)
    keys = rng.integers(0, 2**64 - 1, size=300_000, dtype=np.uint64, endpoint=True)
    keys[:40_000] = np.arange(40_000, dtype=np.uint64)[::-1]  # one bucket, reversed: quadratic
    perm = np.empty(keys.size, dtype=np.int64)
    assert not argsort_hashes(keys, perm)
    assert np.array_equal(stable_argsort(keys), np.argsort(keys, kind="stable"))


@settings(max_examples=100, deadline=None)
@given(st.lists(_U64, max_size=400), st.integers(0, 2))
def test_sort_keys_gives_the_keys_in_their_sorted_order(values, repeats):
    """The sorted keys come out of the same passes: ``keys[perm]``, whichever way they were sorted."""
    from diversify.linking.keys import sort_keys

    keys = np.array(values * (repeats + 1), dtype=np.uint64)
    for k in (keys, keys.astype(np.int64) if keys.size and keys.max() < 2**63 else keys):
        perm, ordered = sort_keys(k)
        assert perm.tolist() == np.argsort(k, kind="stable").tolist()
        assert ordered is not None and ordered.dtype == k.dtype and ordered.tolist() == k[perm].tolist()
    assert sort_keys(keys, with_sorted=False)[1] is None


def test_sorted_keys_of_millions_and_of_the_numpy_fallback():
    from diversify.linking.keys import sort_keys

    rng = np.random.default_rng(2)
    keys = rng.integers(0, 2**64 - 1, size=600_000, dtype=np.uint64, endpoint=True)
    keys[::4] = keys[9]
    perm, ordered = sort_keys(keys)
    assert np.array_equal(ordered, keys[np.argsort(keys, kind="stable")])
    bad = np.arange(50_000, dtype=np.uint64)[::-1].copy()  # the kernel gives up: numpy sorts, same outputs
    perm, ordered = sort_keys(bad)
    assert np.array_equal(perm, np.argsort(bad, kind="stable")) and np.array_equal(ordered, np.sort(bad))
