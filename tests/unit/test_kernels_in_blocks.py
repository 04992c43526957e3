"""diversify._kernels._runtime.in_blocks: the serial kernels run over blocks of documents in threads
give the bytes of one call over every document, whatever the thread count and block size."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from diversify._kernels import _runtime
from diversify._kernels import text as kt
from diversify.config import TextConfig
from diversify.text import encode_batch
from diversify.text.shingle import doc_stats, text_rule


def _texts(n: int) -> list[str]:
    rng = np.random.default_rng(7)
    words = ["alpha", "beta", "Gamma", "delta", "épsilon", "ζήτα", "中文", "eta", "theta"]
    return [" ".join(rng.choice(words, int(rng.integers(0, 80)))) for _ in range(n)]


def _sketch(buf, offsets, rule):
    n = offsets.size - 1
    stats, sigs = doc_stats(n), np.empty((n, 64), dtype=np.uint32)
    kt.sketch_oph(buf, offsets, rule, np.uint64(12345), stats, sigs)
    return sigs, stats.n_shingles, stats.lengths, stats.exact


def _sets(buf, offsets, rule):
    n = offsets.size - 1
    starts = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.maximum(np.diff(offsets), 1), out=starts[1:])
    out, counts = np.zeros(int(starts[-1]), dtype=np.uint64), np.empty(n, dtype=np.int64)
    kt.fill_sorted_unique(buf, offsets, rule, starts, out, counts)
    return [out[starts[i]:starts[i] + counts[i]].tolist() for i in range(n)]


@pytest.mark.parametrize("shingle", ["word", "char"])
@pytest.mark.parametrize("n", [0, 1, 7, 1000])
def test_blocks_in_threads_equal_one_call(monkeypatch, shingle, n):
    buf, offsets = encode_batch(_texts(n))
    rule = text_rule(TextConfig(shingle=shingle), 3)
    monkeypatch.setattr(_runtime, "thread_count", lambda: 1)
    want_sketch, want_sets = _sketch(buf, offsets, rule), _sets(buf, offsets, rule)
    for threads in (2, 3, 5):
        monkeypatch.setattr(_runtime, "thread_count", lambda threads=threads: threads)
        for block in (1, 16):
            monkeypatch.setattr(kt, "_BLOCK", block)
            got = _sketch(buf, offsets, rule)
            assert all(np.array_equal(a, b) for a, b in zip(got, want_sketch)), (threads, block)
            assert _sets(buf, offsets, rule) == want_sets, (threads, block)


def test_blocks_cover_every_document_once_and_errors_reach_the_caller(monkeypatch):
    monkeypatch.setattr(_runtime, "thread_count", lambda: 4)
    seen, lock = [], threading.Lock()

    def disp(offsets, marks, lo, hi):
        with lock:
            seen.append((lo, hi))
        marks[lo:hi] += 1

    offsets, marks = np.arange(1001), np.zeros(1000, dtype=np.int64)
    _runtime.in_blocks(disp, (offsets, marks), 1000, 10)
    assert marks.tolist() == [1] * 1000  # every document once
    assert sorted(seen) == [(lo, min(1000, lo + 32)) for lo in range(0, 1000, 32)]  # 4 threads x ~8 blocks

    def fails(offsets, marks, lo, hi):
        if lo >= 500:
            raise ValueError(f"block at {lo}")

    with pytest.raises(ValueError, match="block at"):
        _runtime.in_blocks(fails, (offsets, marks), 1000, 10)
