"""The kernels' own sorts (diversify._kernels._common.sort_run and argsort_run) against numpy, and
the rule that no kernel sorts with Numba's generated sorts.

Why the rule: Numba builds ``np.sort``, ``np.argsort`` and ``ndarray.sort`` from closures whose
compiled names differ only by a counter private to the compiling process, and links them into
every cached kernel that uses them as weak symbols. Two cached kernels compiled by different
processes could hold different sorts (a sort, an argsort) under one name; a process that loaded
both ran the first one it loaded for both. The clique cut of the golden corpus with vectors then
gave a different representative from run to run in one process, once the on-disk cache held
kernels compiled by several processes (a Dask build's workers, the CLI's subprocesses).
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diversify._kernels._common import argsort_run, merge_sort_run, sort_run

KERNELS = Path(__file__).resolve().parents[2] / "diversify" / "_kernels"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-5, 5), max_size=200), st.booleans())
def test_argsort_run_is_numpys_stable_argsort(values, as_float):
    key = np.array(values, dtype=np.float64 if as_float else np.int64)  # few distinct values: many ties
    assert argsort_run(key, key.size).tolist() == np.argsort(key, kind="stable").tolist()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(-(2**40), 2**40), max_size=200), st.integers(0, 3))
def test_argsort_run_orders_a_prefix(values, cut):
    key = np.array(values, dtype=np.int64)
    n = max(0, key.size - cut)
    assert argsort_run(key, n).tolist() == np.argsort(key[:n], kind="stable").tolist()


@pytest.mark.parametrize("sort", [sort_run, merge_sort_run], ids=["heapsort", "merge"])
@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(0, 2**64 - 1), max_size=40), max_size=12), st.integers(0, 20), st.integers(0, 20),
       st.booleans())
def test_the_sorts_sort_the_range_only(sort, chunks, lo, tail, runs):
    """Random values, and values made of sorted runs (a sample's shingle sets one after the other)."""
    a = np.array([v for c in chunks for v in (sorted(c) if runs else c)], dtype=np.uint64)
    lo = min(lo, a.size)
    hi = max(lo, a.size - tail)
    want = a.copy()
    want[lo:hi] = np.sort(a[lo:hi])
    sort(a, lo, hi)
    assert a.tolist() == want.tolist()


_GENERATED_SORTS = {"sort", "argsort", "msort", "lexsort", "partition", "argpartition"}


def _generated_sort_calls(tree: ast.AST) -> list[int]:
    """Lines calling ``np.<sort>``/``numpy.<sort>`` or ``<array>.<sort>()``."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _GENERATED_SORTS:
            out.append(node.lineno)
    return out


def test_no_kernel_sorts_with_numbas_generated_sorts():
    found = {}
    for path in sorted(KERNELS.glob("*.py")):
        lines = _generated_sort_calls(ast.parse(path.read_text(encoding="utf-8")))
        if lines:
            found[path.name] = lines
    assert not found, f"use _common.sort_run / argsort_run in kernels, not Numba's sorts: {found}"


def test_the_rule_finds_the_calls_it_forbids():
    src = "import numpy as np\ndef f(a):\n    a.sort()\n    return np.argsort(a), np.sort(a)\n"
    assert _generated_sort_calls(ast.parse(src)) == [3, 4, 4]
    assert _generated_sort_calls(ast.parse("def f(a):\n    sort_run(a, 0, 3)\n")) == []
