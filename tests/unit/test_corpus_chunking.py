"""diversify.corpus.chunking: paragraph-aligned chunks with offsets (docs/recipes/chunked-rag.md)."""

from __future__ import annotations

import random
import re
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diversify.corpus.chunking import BLANK_LINES, Chunk, chunk_paragraphs
from diversify.errors import DiversifyError, InputError, InputTypeError

WORDS = st.text(alphabet=st.sampled_from("abcxyzé漢-.,"), min_size=1, max_size=6)
SEPARATORS = st.sampled_from([" ", "  ", "\t", "\n", "\n\n", "\n \n", "\n\n\n", " \r\n\r\n "])


@st.composite
def pages(draw):
    words = draw(st.lists(WORDS, min_size=0, max_size=120))
    seps = draw(st.lists(SEPARATORS, min_size=len(words) + 1, max_size=len(words) + 1))
    return seps[0] + "".join(w + s for w, s in zip(words, seps[1:]))


def _paragraphs(text: str) -> list[list[str]]:
    return [p.split() for p in re.split(BLANK_LINES, text) if p.split()]


@settings(max_examples=300, deadline=None)
@given(pages(), st.integers(1, 40), st.one_of(st.none(), st.integers(0, 40)))
def test_chunks_cover_the_page_in_order_within_the_size_property(text, max_words, min_words):
    if min_words is not None and min_words > max_words:
        min_words = max_words
    chunks = chunk_paragraphs(text, max_words=max_words, min_words=min_words)
    assert chunks == chunk_paragraphs(text, max_words=max_words, min_words=min_words)  # deterministic
    words: list[str] = []
    last_end = 0
    for c in chunks:
        assert isinstance(c, Chunk)
        assert text[c.start:c.end] == c.text  # offsets round-trip
        assert c.start >= last_end  # in page order, no overlap
        assert 1 <= c.words <= max_words and len(c.text.split()) == c.words  # never empty, never too big
        assert not c.text[0].isspace() and not c.text[-1].isspace()
        words.extend(c.text.split())
        last_end = c.end
    assert words == text.split()  # every word in exactly one chunk


@settings(max_examples=200, deadline=None)
@given(pages(), st.integers(1, 40))
def test_chunks_end_at_paragraph_breaks_when_no_paragraph_is_too_long_property(text, max_words):
    paragraphs = _paragraphs(text)
    if any(len(p) > max_words for p in paragraphs):
        return
    chunks = chunk_paragraphs(text, max_words=max_words)
    for a, b in zip(chunks, chunks[1:]):
        assert re.search(BLANK_LINES, text[a.end:b.start]), (a, b)
    # and each chunk is whole paragraphs: as many chunks' words as the paragraphs they hold
    assert sum(c.words for c in chunks) == sum(len(p) for p in paragraphs)


def test_a_paragraph_longer_than_max_words_is_cut_into_even_pieces():
    text = " ".join(f"w{i}" for i in range(25))
    chunks = chunk_paragraphs(text, max_words=10, min_words=0)
    assert [c.words for c in chunks] == [9, 8, 8]
    assert " ".join(c.text for c in chunks) == text


def test_an_empty_or_blank_page_has_no_chunk():
    assert chunk_paragraphs("") == []
    assert chunk_paragraphs(" \n\n\t \n") == []


def _page(rng: random.Random, n_paragraphs: int) -> list[str]:
    vocab = [f"term{i}" for i in range(4000)]
    return [" ".join(rng.choice(vocab) for _ in range(rng.randint(20, 90))) for _ in range(n_paragraphs)]


def test_a_paragraph_added_at_the_top_moves_few_chunk_boundaries():
    """The reason the anchors exist: a second version of a page with one more paragraph at the top cuts
    most of its chunks exactly where the first version does, clearly more often than greedy packing
    to max_words (whose boundaries after the insertion move until a forced cut happens to line up)."""
    kept = total = greedy_kept = 0
    for seed in range(30):
        rng = random.Random(seed)
        paragraphs = _page(rng, 24)
        v1 = "\n\n".join(paragraphs)
        v2 = "\n\n".join(_page(rng, 1) + paragraphs)
        a = {c.text for c in chunk_paragraphs(v1, max_words=200)}
        b = {c.text for c in chunk_paragraphs(v2, max_words=200)}
        kept += len(a & b)
        total += len(a)
        ga = {c.text for c in chunk_paragraphs(v1, max_words=200, min_words=200)}  # no anchors: greedy packing
        gb = {c.text for c in chunk_paragraphs(v2, max_words=200, min_words=200)}
        greedy_kept += len(ga & gb)
    assert kept >= 0.55 * total, (kept, total)
    assert kept >= 1.3 * greedy_kept, (greedy_kept, kept)


def test_breaks_take_any_pattern_such_as_roff_paragraph_macros():
    macros = r"\n(?=\.(?:SH|SS|PP|P|LP|TP|IP)\b)"
    roff = "\n".join(f".{m} {' '.join(f'w{i}x{j}' for j in range(7))}" for i, m in enumerate(["SH", "PP", "TP", "SH"] * 5))
    assert len(chunk_paragraphs(roff, max_words=1000)) == 1  # no blank line: one paragraph by default
    chunks = chunk_paragraphs(roff, max_words=30, min_words=0, breaks=macros)
    assert len(chunks) > 1 and all(c.text.startswith(".") and c.words <= 30 for c in chunks)
    assert all(roff[c.start:c.end] == c.text for c in chunks)
    assert chunk_paragraphs(roff, max_words=30, min_words=0, breaks=re.compile(macros)) == chunks


@pytest.mark.parametrize("kwargs, error, words", [
    ({"text": b"bytes"}, InputTypeError, "`text` must be a str"),
    ({"text": None}, InputTypeError, "`text` must be a str"),
    ({"max_words": 0}, InputError, "`max_words` must be at least 1; got 0"),
    ({"max_words": None}, InputError, "`max_words` must be at least 1"),
    ({"max_words": 2.5}, InputTypeError, "`max_words` must be an int; got float"),
    ({"max_words": True}, InputTypeError, "`max_words` must be an int; got bool"),
    ({"min_words": 300}, InputError, "`min_words` must be between 0 and max_words (200); got 300"),
    ({"min_words": -1}, InputError, "`min_words` must be between 0 and max_words"),
    ({"breaks": "("}, InputError, "`breaks` must be a regular expression; '(' is not"),
    ({"breaks": 3}, InputTypeError, "`breaks` must be a regular expression (str or re.Pattern); got int"),
    ({"breaks": r"\n*"}, InputError, "`breaks` must not match the empty string"),
])
def test_bad_arguments_name_the_parameter_the_rule_and_the_fix(kwargs, error, words):
    args = {"text": "one two three", **kwargs}
    text = args.pop("text")
    with pytest.raises(error) as got:
        chunk_paragraphs(text, **args)
    assert isinstance(got.value, DiversifyError)
    assert words in str(got.value)


def test_importing_the_chunker_loads_nothing_heavy():
    code = ("import sys; from diversify.corpus.chunking import chunk_paragraphs; chunk_paragraphs('a b\\n\\nc'); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numba', 'llvmlite', 'numpy')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
