"""Tokenization, normalization and shingle hashing.

Kinds: oracle (kernels vs tests/reference.py, bit for bit), property (hypothesis), golden (pinned
hash values), hostile (empty, whitespace-only, control bytes, lone surrogates, wrong types).
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import reference as R
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diversify.config import TextConfig
from diversify.errors import InputTypeError
from diversify.sketches.minhash import sketch_oph_buffer
from diversify.text import encode_batch, normalize, shingle_hashes

HOSTILE = [
    "",
    " ",
    "   \t\n\r\x0b\x0c ",
    "\u2028\u2029\u3000\xa0\x85",  # Unicode-only whitespace: empty after normalization
    "!!! ... ,,, ---",  # punctuation only: no words, but characters
    "one",
    "two words",
    "Hello, World! This is a test of the shingler, isn't it?",
    "ﬁsh ﬁnd ﬂow",  # ligatures -> fi, fl under NFKC
    "Straße STRASSE strasse",  # casefold: ß -> ss
    "ＦＵＬＬ－ｗｉｄｔｈ　ｔｅｘｔ！",  # full-width letters, hyphen, space and bang
    "cafe\u0301 café naïve nai\u0308ve",  # combining accents compose under NFKC
    "line\u2028separator\u2029para",
    "İstanbul ΣΊΣΥΦΟΣ ὈΔΥΣΣΕΎΣ",  # dotted capital I, final sigma
    "中文字符 と かな 😀 emoji👍🏽",
    "ctrl\x00chars\x01in\x1fthe\x7fmiddle",
    "lone \ud800 surrogate \udfff here",
    "tabs\tand\nnewlines\r\nmixed  \t  runs",
    "  leading and trailing whitespace  ",
    "under_score and-hyphen and (parens) [brackets] {braces}",
    "a b c d e f g h i j k l m n o p q r s t u v w x y z " * 8,
    "\ufeffbom at start",
    "zero\u200bwidth\u200cjoiners",
]

_ALPHABET = list("aZz09 ,.!-_'\t\n\r\x0b\x0c\x1c\x00\x7f\x85\xa0\u2028\u2029\u3000ﬁßＡé\u0301İΣς中😀\ufeff\u200b")
TEXTS = st.one_of(st.text(st.sampled_from(_ALPHABET), max_size=40), st.text(max_size=40))


def _check_against_reference(docs, mode, k, seed):
    sh = shingle_hashes(docs, TextConfig(shingle=mode, k=k), seed=seed)
    assert len(sh) == len(docs)
    for i, d in enumerate(docs):
        got = [int(x) for x in sh.doc(i)]
        want = R.shingles(d, mode, k, seed)
        assert got == want, f"shingles of doc {i} {d!r} (mode={mode}, k={k}, seed={seed}): got {got[:4]}..., want {want[:4]}..."
        assert int(sh.exact[i]) == R.exact_hash(d), f"exact hash of {d!r}"
        assert int(sh.lengths[i]) == R.folded_length(d), f"length of {d!r}: {int(sh.lengths[i])} vs {R.folded_length(d)}"
    # the fused path computes the same per-document counts, lengths and exact hashes
    buf, offsets = encode_batch(docs)
    _, counts, lengths, exact = sketch_oph_buffer(buf, offsets, TextConfig(shingle=mode, k=k), seed, 8)
    assert counts.tolist() == np.diff(sh.indptr).tolist()
    assert lengths.tolist() == sh.lengths.tolist()
    assert exact.tolist() == sh.exact.tolist()


# ----------------------------------------------------------------------------- oracle


@pytest.mark.parametrize("mode", ["word", "char"])
@pytest.mark.parametrize("k", [1, 2, 5, 9, 32])
def test_shingles_equal_reference_on_hostile_batch(mode, k):
    _check_against_reference(HOSTILE, mode, k, seed=1)


@pytest.mark.parametrize("mode", ["word", "char"])
def test_each_document_alone_equals_its_slot_in_a_batch(mode):
    cfg = TextConfig(shingle=mode, k=3)
    batch = shingle_hashes(HOSTILE, cfg, seed=3)
    for i, d in enumerate(HOSTILE):
        alone = shingle_hashes([d], cfg, seed=3)
        assert alone.doc(0).tolist() == batch.doc(i).tolist(), f"doc {i} {d!r} depends on its neighbours"


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(docs=st.lists(TEXTS, min_size=1, max_size=6), mode=st.sampled_from(["word", "char"]),
       k=st.integers(1, 6), seed=st.integers(0, 2**63 - 1))
def test_shingles_equal_reference_property(one_numba_thread, docs, mode, k, seed):
    _check_against_reference(docs, mode, k, seed)


def test_normalize_equals_reference():
    for d in HOSTILE:
        assert normalize(d) == R.normalize(d), repr(d)


# ----------------------------------------------------------------------------- semantics (independent of the reference)


@pytest.mark.parametrize(
    "variant, plain",
    [
        ("ﬁsh and ﬂour", "fish and flour"),
        ("Straße", "strasse"),
        ("STRASSE", "straße"),
        ("ＨＥＬＬＯ　ｗｏｒｌｄ", "hello world"),
        ("cafe\u0301 au lait", "café au lait"),
        ("first\u2028second\u2029third", "first second third"),
        ("nbsp\xa0space", "nbsp space"),
        ("Mixed CASE Words", "mixed case words"),
        ("  a\t\tb \n c  ", "a b c"),
    ],
)
@pytest.mark.parametrize("mode", ["word", "char"])
def test_normalization_equivalences(variant, plain, mode):
    cfg = TextConfig(shingle=mode, k=2)
    sh = shingle_hashes([variant, plain], cfg)
    assert sh.doc(0).tolist() == sh.doc(1).tolist(), f"{variant!r} and {plain!r} must shingle identically"
    assert sh.exact[0] == sh.exact[1], f"{variant!r} and {plain!r} must have one exact hash"
    assert sh.lengths[0] == sh.lengths[1]


def test_punctuation_separates_words_but_stays_in_exact_hash():
    sh = shingle_hashes(["hello, world", "hello world", "hello,world"], TextConfig(k=2))
    assert sh.doc(0).tolist() == sh.doc(1).tolist() == sh.doc(2).tolist()
    assert len({int(x) for x in sh.exact}) == 3, "punctuation must change the exact hash"


@pytest.mark.parametrize("doc", ["", " ", "\t\n\r ", "\u2028\u3000", "!?.,;:"])
def test_documents_without_words_have_no_shingles(doc):
    sh = shingle_hashes([doc, "a real document"], TextConfig(shingle="word", k=5))
    assert sh.doc(0).size == 0
    assert sh.doc(1).size == 1


@pytest.mark.parametrize("doc", ["", " \t\n", "\u2028\xa0\u3000"])
def test_whitespace_only_documents_are_empty_in_char_mode(doc):
    sh = shingle_hashes([doc], TextConfig(shingle="char", k=4))
    assert sh.doc(0).size == 0 and sh.lengths[0] == 0
    assert int(sh.exact[0]) == R.fmix64(R.FNV_OFFSET), "an empty document hashes the empty string"


@pytest.mark.parametrize("k", [2, 5, 9])
def test_short_document_has_exactly_one_shingle(k):
    docs = [" ".join(f"w{j}" for j in range(m)) for m in range(1, k + 2)]
    sh = shingle_hashes(docs, TextConfig(k=k))
    counts = np.diff(sh.indptr).tolist()
    assert counts == [1] * k + [2], f"k={k}: 1..k words -> 1 shingle, k+1 words -> 2; got {counts}"


def test_seed_changes_every_shingle_hash():
    docs = ["the quick brown fox jumps over the lazy dog again and again"]
    a = shingle_hashes(docs, seed=1).hashes
    b = shingle_hashes(docs, seed=2).hashes
    assert a.size == b.size > 0 and not np.any(a == b)


def test_word_order_matters():
    sh = shingle_hashes(["alpha beta", "beta alpha"], TextConfig(k=2))
    assert sh.doc(0).tolist() != sh.doc(1).tolist()


@pytest.mark.parametrize("bad, pos", [(["ok", 3], 1), (["ok", "fine", b"bytes"], 2), ([None], 0)])
def test_non_str_text_is_an_input_type_error_naming_the_position(bad, pos):
    with pytest.raises(InputTypeError, match=f"item {pos} is"):
        shingle_hashes(bad)


# ----------------------------------------------------------------------------- golden
# Pinned values of the hash scheme diversify-fnv1a-splitmix64-v1. They equal tests/reference.py;
# if the scheme changes on purpose (new HASH_SCHEME name), regenerate them with
#   python -c "import sys; sys.path.insert(0, 'tests'); import reference as R; \
#     print([hex(x) for x in R.shingles('the quick brown fox jumps over the lazy dog', 'word', 5, 1)][:3], \
#     hex(R.exact_hash('the quick brown fox jumps over the lazy dog')), hex(R.exact_hash('Straße')), \
#     hex(R.exact_hash('')), [hex(x) for x in R.shingles('abcdef', 'char', 4, 1)])"

GOLDEN_WORD5 = [0xB58A5CAF9DC18F19, 0x7B205846FEE2AEAF, 0xEE81B4DA7A0E9FF1]
GOLDEN_CHAR4 = [0x3C3AC3723DC79167, 0x6B89824D00042C8A, 0xBA300AB350CFB7E0]
GOLDEN_EXACT = {
    "the quick brown fox jumps over the lazy dog": 0xB56BAD441BEA0A79,
    "Straße": 0x79B927CA1302BAD5,
    "": 0xF52A15E9A9B5E89B,
}


def test_golden_shingle_hashes():
    word = shingle_hashes(["The quick brown fox jumps over the lazy dog"], TextConfig(k=5), seed=1)
    assert [int(x) for x in word.hashes[:3]] == GOLDEN_WORD5
    char = shingle_hashes(["abcdef"], TextConfig(shingle="char", k=4), seed=1)
    assert [int(x) for x in char.hashes] == GOLDEN_CHAR4


def test_golden_exact_hashes():
    docs = list(GOLDEN_EXACT)
    sh = shingle_hashes(docs)
    assert {d: int(h) for d, h in zip(docs, sh.exact)} == GOLDEN_EXACT


# ----------------------------------------------------------------------------- many blocks
# the kernels split a batch into blocks of 256 documents run in parallel: check every slot of a
# batch that spans several blocks (and mixes the ASCII fast path with the Unicode path)


def random_batch(rng, n: int) -> list[str]:
    pieces = ["alpha", "Beta", "gamma,", "delta.", "ﬁx", "Straße", "ＡＢ", "e\u0301", "中文", "!!", "  ", "\t", "\u2028"]
    return [" ".join(rng.choice(pieces, size=int(rng.integers(0, 14)))) for _ in range(n)]


@pytest.mark.parametrize("mode, k", [("word", 3), ("char", 5)])
def test_multi_block_batch_equals_reference(mode, k, rng):
    docs = random_batch(rng, 700)
    _check_against_reference(docs, mode, k, seed=21)


# --------------------------------------------------------------------------- NFKC piece by piece


@pytest.mark.slow  # 1.8M normalizations: ~10 s, ~21 s with the kernels run as Python
def test_nfkc_by_pieces_equals_unicodedata_at_every_code_point():
    """diversify.text.nfkc normalizes only around unstable characters; in every context that can
    compose, reorder or decompose across a piece's edge it equals unicodedata.normalize."""
    import unicodedata

    from diversify.text import nfkc
    from diversify.text.tables import UNSTABLE_TOP

    contexts = ("a{}", "{}b", "e{}\u0301", "\u1100{}\u1161", "\uac00{}\u11a8", "{}\u0301\u0327x", "\u0915{}\u093c",
                "x\u0301{}{}", "\u2026{}\uff1a")
    bad = []
    for cp in range(0x80, 0x110000 if os.environ.get("DIVERSIFY_NFKC_ALL") else UNSTABLE_TOP + 0x100):
        if 0xD800 <= cp < 0xE000:
            continue
        ch = chr(cp)
        for ctx in contexts:
            s = ctx.format(ch, ch)
            if nfkc(s) != unicodedata.normalize("NFKC", s):
                bad.append((hex(cp), ctx))
    assert not bad, bad[:10]


def test_nothing_at_or_above_the_unstable_top_changes_under_nfkc():
    import unicodedata

    from diversify.text.tables import UNSTABLE_TOP

    changed = [hex(cp) for cp in range(UNSTABLE_TOP, 0x110000)
               if unicodedata.combining(chr(cp)) or unicodedata.normalize("NFKC", chr(cp)) != chr(cp)]
    assert changed == []


_TRICKY = ("a", "e", " ", "\u0301", "\u0308", "\u0327", "\u0344", "\u1100", "\u1161", "\u11a8", "\uac00", "\u2026",
           "\uff1a", "\ufb01", "\u00bd", "\u0915", "\u093c", "\u0958", "\u0f73", "\u0b47", "\u0b3e", "\u212b", "\u1e9b",
           "\u0323", "\u3099", "\u304b", "\uff76", "\uff9e", "\U0001d400", "\u00a0", "\x00", "\ud800", "Å", "Ω")


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_TRICKY), max_size=24).map("".join))
def test_nfkc_by_pieces_equals_unicodedata_on_tricky_strings(s):
    import unicodedata

    from diversify.text import nfkc

    assert nfkc(s) == unicodedata.normalize("NFKC", s)
