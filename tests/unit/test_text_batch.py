"""The batch paths of the normalizer equal the per-document rule they replace.

``encode_batch`` normalizes the non-ASCII documents of a batch as one string and encodes the batch
once; ``unspaced_docs`` counts scripts with code-point tables. Both are checked here against the
plain per-document definitions (written out below, as the rule in docs/artifact-format.md reads),
on generated text that mixes the cases where joining could go wrong: combining marks at document
starts and ends, Hangul jamo, compatibility characters, Unicode spaces, NULs, lone surrogates.
"""

from __future__ import annotations

import re
import unicodedata

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diversify.text import buffers, encode_batch, fold, normalization, tables, unspaced_docs

_SPACES = {cp: " " for cp in tables.UNICODE_SPACES}


def reference_encode(texts: list[str]) -> tuple[bytes, list[int]]:
    parts = []
    for t in texts:
        if not t.isascii():
            t = unicodedata.normalize("NFKC", t).casefold().translate(_SPACES)
        parts.append(t.encode("utf-8", "surrogatepass"))
    offsets = [0]
    for p in parts:
        offsets.append(offsets[-1] + len(p))
    return b"".join(parts), offsets


_UNSPACED = re.compile("[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff"
                       "\uf900-\ufaff\U00020000-\U0002fa1f]")
_LETTER = re.compile(r"[^\W\d_]")


def reference_unspaced(texts: list[str]) -> list[bool]:
    out = []
    for t in texts:
        t = t.encode("utf-8", "surrogatepass").decode("utf-8", "surrogatepass")
        unspaced = len(_UNSPACED.findall(t))
        out.append(bool(unspaced) and 2 * unspaced >= len(_LETTER.findall(t)))
    return out


def same_for_kernels(buf: np.ndarray, want: bytes) -> bool:
    """Equal as the kernels read them: every byte goes through the TextRule's lower table (A-Z ->
    a-z), so the batch path may leave ASCII capitals of a non-ASCII document for the kernel."""
    return bool(np.array_equal(tables.LOWER[buf], tables.LOWER[np.frombuffer(want, dtype=np.uint8)]))


# characters where a batch could differ from one document at a time
_TRICKY = ("\u0301", "\u0308", "\u0327", "e", "E", "\u1100", "\u1161", "\u11a8", "\uac00", "\ufb01", "\u00df",
           "\u2126", "\u212b", "\u1e9e", "\u0130", "\u03a3", "\u00a0", "\u2028", "\u3000", "\u0085", "\x00",
           "\ud800", "\udfff", " ", "\t", "x", "\u4e2d", "\u6587", "\u3042", "\u0e01", "\uff21", "\u00bd", "1",
           "\U00020000", "\u0410", "\u03b1", "\u0149", "\u1f80", "\u017f", "\u0587", "\u10a0",
           "\U00010400", "\U0001e900", "\u24b6", "\u2c00", "\uab70")
_doc = st.text(alphabet=st.one_of(st.sampled_from(_TRICKY), st.characters(codec=None)), max_size=12)


@settings(max_examples=400, deadline=None)
@given(st.lists(_doc, max_size=12))
def test_encode_batch_equals_per_document_rule(texts):
    buf, offsets = encode_batch(texts)
    want_buf, want_offsets = reference_encode(texts)
    assert same_for_kernels(buf, want_buf)
    assert offsets.tolist() == want_offsets


@settings(max_examples=300, deadline=None)
@given(st.lists(_doc, max_size=12), st.integers(2, 5), st.sampled_from([8, 24, 64]))
def test_encode_batch_in_segments_equals_per_document_rule(texts, threads, segment_from):
    """Large batches are scanned in segments, in threads (NFKC pieces, case folds, growing folds),
    and their NFKC pieces spliced in by the kernel: here every batch is cut, into up to
    ``threads`` segments at ASCII bytes, and takes the splice path, and must give the bytes of the
    per-document rule. (Small batches take the Python splice: the test above.)"""
    from diversify._kernels import _runtime

    old = buffers.SEGMENT_FROM, normalization.SPLICE_FROM, _runtime.thread_count
    buffers.SEGMENT_FROM, normalization.SPLICE_FROM, _runtime.thread_count = segment_from, 0, lambda: threads
    try:
        buf, offsets = encode_batch(texts)
    finally:
        buffers.SEGMENT_FROM, normalization.SPLICE_FROM, _runtime.thread_count = old
    want_buf, want_offsets = reference_encode(texts)
    assert same_for_kernels(buf, want_buf)
    assert offsets.tolist() == want_offsets


def test_segments_cut_at_ascii_bytes_and_cover_the_buffer():
    from diversify._kernels import _runtime

    rng = np.random.default_rng(4)
    text = "".join(rng.choice(list("中文é́ a\x00…𠀀"), 400_000))
    raw = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
    old = _runtime.thread_count
    _runtime.thread_count = lambda: 4
    try:
        segs = buffers.segments(raw)
    finally:
        _runtime.thread_count = old
    assert len(segs) == 1 + (raw.size >= 2 * buffers.SEGMENT_FROM) * (min(4, raw.size // buffers.SEGMENT_FROM) - 1)
    assert segs[0][0] == 0 and segs[-1][1] == raw.size
    assert all(a[1] == b[0] for a, b in zip(segs, segs[1:]))
    assert all(raw[lo] < 0x80 for lo, _ in segs[1:])


def test_large_multilingual_batch_equals_per_document_rule():
    """A batch of several MB (cut into segments by default) with marks at document starts, growing
    folds and compatibility characters."""
    rng = np.random.default_rng(11)
    words = ["́e", "İstanbul", "ＡＢＣ", "…", "½", "café", "中文",
             "ᾀ", "ß", "АБ", "Σα", "ﬁx", "각", "　", "plain"]
    texts = [" ".join(rng.choice(words, 60)) for _ in range(30_000)]
    buf, offsets = encode_batch(texts)
    assert buf.size > 2 * buffers.SEGMENT_FROM
    want_buf, want_offsets = reference_encode(texts)
    assert same_for_kernels(buf, want_buf)
    assert offsets.tolist() == want_offsets


@settings(max_examples=400, deadline=None)
@given(st.lists(_doc, max_size=12))
def test_unspaced_docs_equals_regex_rule(texts):
    buf, offsets = encode_batch(texts)
    assert unspaced_docs(buf, offsets).tolist() == reference_unspaced([normalization.prepare(t) for t in texts])


def test_unspaced_docs_on_every_utf8_width_and_empty_documents():
    # 1- to 4-byte characters (CJK extension B is 4 bytes and unspaced), a lone surrogate, empty
    # documents between, documents that end on a multi-byte character
    texts = ["中文文本没有空格" * 3, "", "plain ascii text", "mixed 中文 and words words words", "",
             "ไทยไม่มีช่องว่าง", "Ünïcödé wörds only", "日本語のテキスト", "", "\U00020000\U00020001\U0002a700 x",
             "emoji \U0001f600\U0001f601 and words", "lone \ud800 surrogate 中", "…“quoted”…", "語"]
    buf, offsets = encode_batch(texts)
    assert unspaced_docs(buf, offsets).tolist() == reference_unspaced([normalization.prepare(t) for t in texts])


def test_batch_with_nul_falls_back_to_per_document():
    texts = ["Caf\u00e9\x00bar", "plain", "\u00c9t\u00e9\x00"]
    buf, offsets = encode_batch(texts)
    want_buf, want_offsets = reference_encode(texts)
    assert same_for_kernels(buf, want_buf) and offsets.tolist() == want_offsets
    assert np.all(np.diff(offsets) >= 0)


def test_fold_tables_cover_every_code_point_that_folds():
    import sys

    assert all(chr(cp).casefold() == chr(cp) for cp in range(tables.FOLD_TOP, sys.maxunicode + 1))


@pytest.mark.parametrize("doc", ["\u0130stanbul \u0130ZM\u0130R", "\u1f80\u1f81 \u0390 \u03b0 \u0149", "Stra\u00dfe \u1e9e \u017fs",
                                 "\u0587\u0587", "ASCII \u00c9T\u00c9 \u0410\u0411\u0412 \U00010400\U0001e900"])
@pytest.mark.parametrize("ascii_words", [0, 400])  # dense non-ASCII (one fold pass), mostly ASCII (numpy scan)
def test_folds_that_grow_shrink_or_leave_the_bmp(doc, ascii_words):
    texts = ["plain Ascii " + "words " * ascii_words, doc, "caf\u00e9", doc.upper()]
    joined = np.frombuffer("\x00".join(texts).encode("utf-8"), dtype=np.uint8)
    dense = np.count_nonzero(joined[:-1] >= 0xC0) >= fold.SPARSE_LEADS * joined.size
    assert dense == (ascii_words == 0)
    buf, offsets = encode_batch(texts)
    want_buf, want_offsets = reference_encode(texts)
    assert same_for_kernels(buf, want_buf) and offsets.tolist() == want_offsets


@settings(max_examples=300, deadline=None)
@given(st.lists(_doc, min_size=1, max_size=12))
def test_fold_kernel_and_numpy_scan_agree(texts):
    """The case fold on UTF-8 bytes gives the same bytes by its two paths: the one kernel pass of
    dense non-ASCII text (fold and drop the NULs) and the numpy scan of lead bytes (mostly ASCII,
    in place, then the NULs dropped); the numpy scan gives up, writing nothing, on a fold that grows."""
    texts = [t.replace("\x00", " ") for t in texts]  # NUL is the batch separator
    joined = "\x00".join(texts).encode("utf-8", "surrogatepass")
    n = len(texts)
    dense = fold.fold_dense(buffers.readonly(np.frombuffer(joined, dtype=np.uint8)), n)
    assert dense is not None
    raw = np.frombuffer(bytearray(joined), dtype=np.uint8)
    grows = any(tables.fold_tables()[2][ord(c)] for t in texts for c in t if ord(c) < tables.FOLD_TOP)
    if not fold.fold_bytes(raw):
        assert grows and raw.tobytes() == joined
        return
    assert not grows
    # the numpy scan pads folds that shrink with NULs: a document's bytes are its NUL-free pieces
    pieces = raw.tobytes()
    starts = [0] + [i + 1 for i, b in enumerate(joined) if b == 0]
    ends = [i for i, b in enumerate(joined) if b == 0] + [len(joined)]
    docs = [pieces[lo:hi].replace(b"\x00", b"") for lo, hi in zip(starts, ends)]
    buf, offsets = dense
    assert [bytes(buf[offsets[i]:offsets[i + 1]]) for i in range(n)] == docs


def test_ascii_batch_bytes_are_the_str_in_place_and_outlive_it():
    """The ASCII path hands the kernels the joined str's own bytes: equal to encoding it,
    read-only, alive after every other reference to the str is gone, and empty for no text."""
    import gc

    from diversify.text.strview import ascii_bytes

    texts = [f"Doc {i} the quick brown fox\tjumps" * (i % 7) for i in range(2000)]
    joined = "".join(texts)
    want = joined.encode("ascii")
    buf = ascii_bytes(joined)
    del joined
    gc.collect()
    _ = ["x" * 1000 for _ in range(20000)]  # reuse freed memory, if the str had been freed
    assert bytes(buf) == want and buf.dtype == np.uint8 and not buf.flags.writeable
    with pytest.raises(ValueError):
        buf[0] = 1
    assert ascii_bytes("").size == 0
    b, off = encode_batch(texts)
    assert bytes(b) == want and off[-1] == len(want)


def test_folds_that_grow_past_the_room_of_one_pass():
    """Documents made of code points whose fold is three times as long (U+0390, U+1F80): the one
    pass runs out of room, counts, and writes again into exactly the room needed."""
    texts = ["\u0390" * 60_000, "x \u1f80" * 30_000, "plain", "\u0130" * 100]
    buf, offsets = encode_batch(texts)
    assert buf.size > 1.25 * len("\x00".join(texts).encode("utf-8"))
    want_buf, want_offsets = reference_encode(texts)
    assert same_for_kernels(buf, want_buf) and offsets.tolist() == want_offsets


def test_segmenting_a_batch_does_not_start_numba_threads():
    """Cutting a large batch into segments asks for the thread count without launching numba's
    threading layer (diversify picks a fork-safe one at the first parallel kernel)."""
    import subprocess
    import sys

    code = ("import numpy as np\nfrom diversify.text import buffers as t\nfrom diversify._kernels import _runtime\n"
            "raw = np.frombuffer(('\\u4e2d\\u6587 ' * 1_000_000).encode(), dtype=np.uint8)\n"
            "assert len(t.segments(raw)) >= 1\nprint(_runtime.started_layer())")
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert got.returncode == 0, got.stderr[-2000:]
    assert got.stdout.strip().splitlines()[-1] == "None"


@pytest.mark.parametrize("size", [100, 4000, 5000])
def test_nfkc_of_texts_dense_in_pieces(size):
    """A piece after every other character (a compatibility character between ASCII letters): as
    many pieces as the text allows, on both sides of the Python / kernel splice threshold."""
    text = ("a\uff21" * size)[:size]
    assert normalization.nfkc(text) == unicodedata.normalize("NFKC", text)
    buf, offsets = encode_batch([text, "x\u2026" * size])
    want_buf, want_offsets = reference_encode([text, "x\u2026" * size])
    assert same_for_kernels(buf, want_buf) and offsets.tolist() == want_offsets


@settings(max_examples=300, deadline=None)
@given(st.lists(_doc.filter(lambda t: "\x00" not in t), min_size=1, max_size=12), st.integers(1, 4),
       st.sampled_from([8, 24, 64, 1 << 20]))
def test_one_pass_nfkc_and_fold_gives_the_bytes_of_the_two_passes(texts, threads, segment_from):
    """Dense non-ASCII batches take NFKC and the fold in one kernel pass (pieces copied, normalized
    and folded afterwards, spliced back segment by segment): byte for byte what NFKC of the whole
    batch followed by the fold pass gives, ASCII capitals included, in any number of segments."""
    from diversify._kernels import _runtime

    joined = "\x00".join(texts).encode("utf-8", "surrogatepass")
    old = buffers.SEGMENT_FROM, normalization.SPLICE_FROM, _runtime.thread_count
    buffers.SEGMENT_FROM, normalization.SPLICE_FROM, _runtime.thread_count = segment_from, 0, lambda: threads
    try:
        one = fold.nfkc_fold_dense(buffers.readonly(np.frombuffer(joined, dtype=np.uint8)), len(texts))
        two = fold.fold_dense(buffers.readonly(normalization.nfkc_utf8(joined).view()), len(texts))
    finally:
        buffers.SEGMENT_FROM, normalization.SPLICE_FROM, _runtime.thread_count = old
    assert one is not None and two is not None
    assert one[0].tobytes() == two[0].tobytes()
    assert one[1].tolist() == two[1].tolist()


def test_one_pass_nfkc_and_fold_refuses_a_nul_inside_a_document():
    joined = "\x00".join(["caf\u00e9 \uff21", "a\x00b \u2026"]).encode("utf-8")
    assert fold.nfkc_fold_dense(buffers.readonly(np.frombuffer(joined, dtype=np.uint8)), 2) is None
    buf, offsets = encode_batch(["caf\u00e9 \uff21" * 2000, "a\x00b \u2026" * 2000])  # the per-document path
    want_buf, want_offsets = reference_encode(["caf\u00e9 \uff21" * 2000, "a\x00b \u2026" * 2000])
    assert same_for_kernels(buf, want_buf) and offsets.tolist() == want_offsets
