"""The batch normalizer that reads the strings' own code units gives the bytes of the other paths.

:func:`diversify.text.strview.fold_batch` reads each ``str``'s code units in place (one, two or four
bytes wide) and folds, NFKC-normalizes and writes UTF-8 in two kernel passes, counting the scripts
of ``shingle="auto"`` as it writes. Each test compares it with the Python-encoding path of
``encode_batch`` (itself checked against the per-document rule in test_text_batch.py) and with
``unspaced_docs``, on text built to hit the places where the two could part: pieces at document
edges, a NUL before a combining mark, folds that grow past four bytes, lone surrogates, every
code-unit width in one batch, strings that are not compact, a cached UTF-8 form.
"""

from __future__ import annotations

import ctypes
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_text_batch import _doc, reference_encode, same_for_kernels

from diversify._kernels import strings as ks
from diversify.text import encode, encode_batch, encode_batch_scripts, strview, unspaced_docs

pytestmark = pytest.mark.skipif(strview._layout() is None, reason="the str layout is CPython's")


def python_path(texts: list[str]) -> tuple[bytes, list[int], list[bool]]:
    buf, offsets = encode.encode_python(texts)
    return buf.tobytes(), offsets.tolist(), unspaced_docs(buf, offsets).tolist()


def check(texts: list[str]) -> None:
    got = strview.fold_batch(texts)
    assert got is not None
    buf, offsets, char = got
    want_buf, want_offsets, want_char = python_path(texts)
    # byte for byte, but for ASCII capitals: the Python path folds them in a document with a NUL
    # (encoded alone), this one leaves them to the kernels, which read every byte lowercased
    assert same_for_kernels(buf, want_buf)
    if not any("\x00" in t for t in texts):
        assert buf.tobytes() == want_buf
    assert offsets.tolist() == want_offsets
    assert char.tolist() == want_char
    assert not buf.flags.writeable


def test_the_layout_is_found_on_cpython():
    """On CPython the probe must find the layout: otherwise every batch silently takes the slow path."""
    if sys.implementation.name != "cpython":
        pytest.skip("CPython only")
    state_at, ascii_header, compact_header = strview._layout()
    assert ascii_header < compact_header and state_at < ascii_header


@settings(max_examples=500, deadline=None)
@given(st.lists(_doc, max_size=12))
def test_equals_the_python_path(texts):
    check(texts)


@settings(max_examples=200, deadline=None)
@given(st.lists(_doc, min_size=2, max_size=16), st.integers(2, 5))
def test_equals_the_python_path_in_ranges_in_threads(texts, threads):
    """Every batch cut into up to ``threads`` document ranges, folded in threads."""
    from diversify._kernels import _runtime

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(strview, "_THREADS_FROM", 0)
        mp.setattr(_runtime, "thread_count", lambda: threads)
        check(texts)


@pytest.mark.parametrize("doc", [
    "\u0301abc",  # a document that starts with a combining mark: its piece has no code point before it
    "abc\u0301",  # one that ends inside a piece
    "a\x00\u0301b",  # a NUL before a mark: the piece starts after the NUL
    "\u0301" * 3000,  # one piece of 3,000 units
    "\uff21\uff22\uff23\uff1a" * 2000,  # full-width: every code point a piece of its own, pieces run together
    "e\u0301 " * 3000,  # 3,000 short pieces
    "\u0390\u1f80\u0149\u0130" * 50,  # folds that grow, past four bytes
    "\U0001F600\U00020000\U00030000\U0010FFFF\ud800\udfff",  # four-byte, unassigned, lone surrogates
    "\u1100\u1161\u11a8 \uac00\u11a8",  # Hangul jamo that compose
    "\u00e9" * 10 + "\x00" + "\u00c9",  # Latin-1 units with a NUL
])
def test_pieces_at_the_edges_and_dense_pieces(doc):
    check([doc])
    check(["ascii first", doc, "\u4e2d\u6587" * 5, doc.upper(), ""])


def test_piece_room_is_found_on_a_second_scan():
    """Pieces beyond the first guess of room (a piece every 256 units) are counted, then written."""
    texts = ["\uff21" * 40_000, "x\u0301" * 30_000]
    check(texts)


def test_every_unit_width_in_one_batch():
    texts = ["plain ascii words", "caf\u00e9 \u00c9T\u00c9", "\u0416\u0443\u043a \u03a3\u03bf\u03c6\u03af\u03b1",
             "\U0001F600 emoji \U00010400", "\u65e5\u672c\u8a9e\u306e\u6587\u7ae0\u3067\u3059"]
    got = strview.fold_batch(texts)
    assert got is not None
    check(texts)


def test_documents_that_are_not_compact_strings_are_read_from_a_copy(monkeypatch):
    """A str whose units live elsewhere (possible before Python 3.12) is marked unknown by the layout
    kernel; it is then encoded to UTF-32 and read from there: the same bytes."""
    real = ks.str_layouts

    def every_other_unknown(ids, state_at, ascii_header, compact_header, addrs, kinds):
        real(ids, state_at, ascii_header, compact_header, addrs, kinds)
        kinds[::2] = ks.KIND_UNKNOWN

    monkeypatch.setattr(ks, "str_layouts", every_other_unknown)
    texts = ["\u00c9t\u00e9 " * 50, "\u0416\u0443\u043a", "\U0001F600\u0301\ud800", "ascii", "\uff21\u0301x"] * 3
    check(texts)


def test_a_string_with_its_utf8_form_cached_reads_the_same():
    """CPython caches a UTF-8 copy of a str once C code asked for it; the units stay in place."""
    texts = ["".join(chr(c) for c in (0xE9, 0x416, 0x4E2D, 0x1F600, 0x301)) * (k + 1) for k in range(5)]
    f = ctypes.pythonapi.PyUnicode_AsUTF8AndSize
    f.argtypes, f.restype = [ctypes.py_object, ctypes.POINTER(ctypes.c_ssize_t)], ctypes.c_void_p
    for t in texts:
        assert f(t, ctypes.byref(ctypes.c_ssize_t()))
    check(texts)


def test_str_subclasses_take_the_python_path():
    class Tagged(str):
        pass

    texts = [Tagged("\u00c9t\u00e9 " * 1000), "\u0416\u0443\u043a " * 1000]
    assert strview.fold_batch(texts) is None
    buf, offsets = encode_batch(texts)
    want_buf, want_offsets = reference_encode([str(t) for t in texts])
    assert same_for_kernels(buf, want_buf) and offsets.tolist() == want_offsets


def test_encode_batch_takes_this_path_from_its_threshold_and_agrees_either_side():
    small = ["caf\u00e9"] * 3
    large = ["caf\u00e9 \u65e5\u672c\u8a9e\u306e\u6587" * 100] * 10
    assert sum(map(len, small)) < strview.FOLD_FROM <= sum(map(len, large))
    for texts in (small, large):
        buf, offsets, char = encode_batch_scripts(texts)
        want_buf, want_offsets, want_char = python_path(texts)
        assert buf.tobytes() == want_buf and offsets.tolist() == want_offsets  # no NUL: the very bytes
        assert char is None or char.tolist() == want_char
    assert encode_batch_scripts(large)[2] is not None  # counted while writing


def test_large_multilingual_batch_in_threads_equals_the_python_path():
    rng = np.random.default_rng(7)
    alphabet = [chr(c) for c in (*range(0x61, 0x7B), 0x20, 0x20, 0xE9, 0xC9, 0x416, 0x436, 0x3A3, 0x3C3, 0x4E2D,
                                 0x6587, 0x3042, 0x301, 0xFF21, 0x2026, 0xFB01, 0xDF, 0x1F600, 0x3000, 0xA0)]
    texts = ["".join(rng.choice(alphabet, size=int(rng.integers(0, 3000)))) for _ in range(800)]
    assert sum(map(len, texts)) * 2 > strview._THREADS_FROM  # more than one range on a 2-core machine
    check(texts)
