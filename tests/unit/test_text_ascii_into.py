"""ASCII chunks written from the strings' own bytes into a lent buffer (diversify/strview.py:
ascii_into, diversify/text.py: encode_batch_scripts(into=...), diversify/sketches/batch.py:
_BufferRing): the same bytes as joining the strings, and the same build."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import diversify
import diversify.sketches.batch as sb
from diversify.text import encode_batch_scripts, strview

ascii_texts = st.lists(st.text(alphabet=st.characters(max_codepoint=127), max_size=60), max_size=40)


def offsets_of(texts):
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum([len(t) for t in texts], out=offsets[1:])
    return offsets


@settings(max_examples=200, deadline=None)
@given(ascii_texts, st.integers(0, 16))
def test_ascii_into_writes_the_joined_bytes(texts, slack):
    offsets = offsets_of(texts)
    out = np.full(int(offsets[-1]) + slack, 0xEE, dtype=np.uint8)
    if strview._layout() is None:
        pytest.skip("this interpreter's str layout is not readable")
    assert strview.ascii_into(texts, offsets, out)
    assert out[: offsets[-1]].tobytes() == "".join(texts).encode("ascii")
    assert (out[offsets[-1]:] == 0xEE).all()  # nothing past the batch


def test_ascii_into_declines_what_it_cannot_read():
    offsets = offsets_of(["abc", "de"])

    class Sub(str):
        pass

    assert not strview.ascii_into([Sub("abc"), "de"], offsets, np.empty(5, np.uint8))  # a str subclass
    assert not strview.ascii_into(["abc", "dé"], offsets_of(["abc", "dé"]), np.empty(5, np.uint8))  # not ASCII
    assert not strview.ascii_into(["abc", "de"], offsets, np.empty(4, np.uint8))  # too small


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(max_size=40), max_size=20))
def test_encode_with_a_lent_buffer_equals_without(texts):
    lent = []

    def into(size):
        buf = np.empty(size + 3, dtype=np.uint8)
        lent.append(buf)
        return buf

    a_buf, a_off, a_chars = encode_batch_scripts(texts, into=into)
    b_buf, b_off, b_chars = encode_batch_scripts(texts)
    assert a_buf.tobytes() == b_buf.tobytes() and a_off.tolist() == b_off.tolist()
    assert (a_chars is None) == (b_chars is None) and (a_chars is None or a_chars.tolist() == b_chars.tolist())
    assert not a_buf.flags.writeable  # the kernels' one buffer type
    if texts and all(t.isascii() for t in texts):
        assert len(lent) == 1


def test_ring_lends_two_buffers_in_turn():
    ring = sb._BufferRing()
    a, b, c = ring.lend(10), ring.lend(10), ring.lend(10)
    assert a is not b and c is a and a.size >= 10
    d = ring.lend(100)  # b is too small: replaced
    assert d is not b and d.size >= 100


@pytest.mark.parametrize("tuned", [False, True])
def test_a_build_in_chunks_is_the_same_with_or_without_the_ring(tmp_path, monkeypatch, tuned):
    """Many ASCII chunks through the two-buffer ring (an untuned allocator: the library) or joined
    (the console script's tuned allocator): the same artifact as one chunk."""
    rng = np.random.default_rng(3)
    words = [f"w{i}" for i in range(300)]
    base = [" ".join(rng.choice(words, 40)) for _ in range(150)]
    texts = base + [t + " extra" for t in base[:60]] + ["Ünïcode " + t for t in base[:20]]  # a non-ASCII chunk too
    monkeypatch.setattr(sb, "allocator_tuned", lambda: tuned)
    lent = []
    real = sb._BufferRing.lend
    monkeypatch.setattr(sb._BufferRing, "lend", lambda self, size: lent.append(size) or real(self, size))
    chunked = diversify.build(texts, chunk_size=16, created_at="2000-01-01T00:00:00Z")
    whole = diversify.build(texts, chunk_size=10_000, created_at="2000-01-01T00:00:00Z")
    assert (len(lent) > 5) != tuned
    a, b = tmp_path / "a.dvf", tmp_path / "b.dvf"
    chunked.save(a)
    whole.save(b)
    assert a.read_bytes() == b.read_bytes()
