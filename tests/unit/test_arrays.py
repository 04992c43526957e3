"""diversify._arrays.unique_sorted is np.unique for the dtypes it takes, and np.unique itself for the
others; distinct_ascending is np.unique of an array sorted already."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from diversify._arrays import distinct_ascending, unique_sorted

_INT_DTYPES = st.sampled_from([np.int8, np.int32, np.int64, np.uint8, np.uint32, np.uint64, np.bool_])


@settings(max_examples=300, deadline=None)
@given(hnp.arrays(_INT_DTYPES, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=40)))
def test_equals_numpy_unique_on_integers(a):
    got, want = unique_sorted(a), np.unique(a)
    assert got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want)


def test_floats_with_nan_and_objects_keep_numpy_semantics():
    f = np.array([np.nan, 1.0, np.nan, 0.5, 1.0])
    assert np.array_equal(unique_sorted(f), np.unique(f), equal_nan=True) and unique_sorted(f).size == 3
    o = np.array(["b", "a", "b"], dtype=object)
    assert unique_sorted(o).tolist() == ["a", "b"]
    assert unique_sorted([3, 1, 3]).tolist() == [1, 3]  # a list, as np.unique takes


@settings(max_examples=300, deadline=None)
@given(hnp.arrays(_INT_DTYPES, hnp.array_shapes(min_dims=1, max_dims=1, min_side=0, max_side=60)))
def test_distinct_ascending_is_numpy_unique_of_a_sorted_array(a):
    a = np.sort(a)
    got, want = distinct_ascending(a), np.unique(a)
    assert got.dtype == want.dtype and np.array_equal(got, want)
    if a.size:
        got[0] = got[0]  # a new array: writing it leaves the input alone
        assert not np.shares_memory(got, a)
