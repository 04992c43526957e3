"""The one-pass sorted-unique shingle kernel (used for exact borderline checks) equals the CSR path."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diversify.config import TextConfig
from diversify.text import Shingles, exact_jaccard, shingle_hashes, sorted_unique_shingles, unique_shingles

TEXTS = ["", "  ", "a", "a b", "one two three four five six seven", "x, y. z! x y z x y z x y z",
         "Straße ﬁne  ÄÖ", "w " * 300, "abc" * 50]


@pytest.mark.parametrize("cfg", [TextConfig(), TextConfig(k=1), TextConfig(shingle="char", k=3), TextConfig(shingle="char", k=1)])
def test_sorted_unique_equals_csr_unique(cfg):
    sh = shingle_hashes(TEXTS, cfg, 7)
    starts, counts, hashes = sorted_unique_shingles(TEXTS, cfg, 7)
    for i in range(len(TEXTS)):
        got = hashes[starts[i] : starts[i] + counts[i]]
        assert np.array_equal(got, np.unique(sh.doc(i))), (TEXTS[i][:20], cfg)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(st.integers(0, 40), max_size=30), max_size=12))
def test_unique_shingles_is_np_unique_of_each_document(docs):
    """The CSR of distinct hashes (verify="exact" keeps it) is np.unique of every row, empty rows
    and repeats included; the input is left as it was."""
    counts = np.array([len(d) for d in docs], dtype=np.int64)
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    hashes = np.array([np.uint64(v * 0x9E3779B97F4A7C15 % 2**64) for d in docs for v in d], dtype=np.uint64)
    sh = Shingles(indptr=indptr, hashes=hashes, lengths=np.zeros(len(docs), np.uint32),
                  exact=np.zeros(len(docs), np.uint64))
    before = hashes.copy()
    got_ptr, got = unique_shingles(sh)
    assert got_ptr[0] == 0 and got_ptr.size == len(docs) + 1 and got.dtype == np.uint64
    for i in range(len(docs)):
        assert np.array_equal(got[got_ptr[i]:got_ptr[i + 1]], np.unique(sh.doc(i))), docs[i]
    assert np.array_equal(hashes, before)


def test_exact_jaccard_equals_python_sets_of_the_sorted_unique_rows():
    cfg = TextConfig(k=2)
    starts, counts, hashes = sorted_unique_shingles(TEXTS, cfg, 3)
    rows = [hashes[s : s + c] for s, c in zip(starts, counts)]
    for i, a in enumerate(rows):
        for j, b in enumerate(rows):
            sa, sb = set(a.tolist()), set(b.tolist())
            want = len(sa & sb) / len(sa | sb) if sa | sb else 1.0
            assert exact_jaccard(a, b) == want, (TEXTS[i][:20], TEXTS[j][:20])
    empty = np.zeros(0, np.uint64)
    assert exact_jaccard(empty, empty) == 1.0, "two empty sets are identical, as in the builder's exact check"
    assert exact_jaccard(empty, rows[4]) == 0.0


@pytest.mark.parametrize("cfg", [TextConfig(), TextConfig(shingle="char", k=3), TextConfig(shingle="auto")])
def test_shingle_sets32_are_the_distinct_high_halves_of_each_document(cfg):
    """The live index's stored sets: per document, np.unique of the 64-bit hashes' high 32 bits."""
    from diversify.text import shingle_sets32

    mixed = TEXTS + ["東京都の天気は晴れです", "Ελληνικά κείμενα εδώ"]  # "auto": word and char documents in one call
    sh = shingle_hashes(mixed, cfg, 5)
    indptr, values = shingle_sets32(mixed, cfg, 5)
    assert values.dtype == np.uint32 and indptr.shape == (len(mixed) + 1,) and indptr[-1] == values.size
    for i in range(len(mixed)):
        want = np.unique((sh.doc(i) >> np.uint64(32)).astype(np.uint32))
        assert np.array_equal(values[indptr[i]: indptr[i + 1]], want), mixed[i][:20]
    empty_ptr, empty_vals = shingle_sets32([], cfg, 5)
    assert empty_ptr.tolist() == [0] and empty_vals.size == 0


def test_shingle_sets32_merges_two_shingles_sharing_their_high_half():
    """Collisions of the high halves (rare at 550 words) merge: the set stays sorted and distinct.
    The two words were found by a birthday search over 200,000 words (seed 1, word 1-shingles)."""
    from diversify.text import shingle_sets32

    cfg = TextConfig(k=1)
    text = "w85569 w129265 w7"
    sh = shingle_hashes([text], cfg, 1)
    full = np.unique(sh.doc(0))
    hi = (full >> np.uint64(32)).astype(np.uint32)
    assert full.size == 3 and np.unique(hi).size == 2, "the two words' hashes must share their high half"
    indptr, values = shingle_sets32([text, text + " w8"], cfg, 1)
    assert np.array_equal(values[indptr[0]: indptr[1]], np.unique(hi))
    assert indptr.tolist()[:2] == [0, 2] and indptr[2] - indptr[1] == 3


MIXED = TEXTS + ["東京都の天気は晴れです", "Ελληνικά κείμενα εδώ", "Привет, мир! Привет", "ｆｕｌｌ　ｗｉｄｔｈ ﬁ"]


@pytest.mark.parametrize("cfg", [TextConfig(shingle="word"), TextConfig(shingle="word", k=1), TextConfig(shingle="char", k=3),
                                 TextConfig(shingle="auto"), TextConfig(shingle="auto", k=2)])
@pytest.mark.parametrize("num_perm", [1, 64, 128])
def test_one_pass_signatures_and_sets_equal_the_two_passes(cfg, num_perm):
    """The live index's one pass (signature folded from the distinct shingles, plus the 32-bit
    sets) gives the fused sketch's signatures and stats and shingle_sets32's sets, bit for bit."""
    from diversify.sketches.minhash import sketch_oph_buffer, sketch_oph_sets_buffer
    from diversify.text import encode_batch, shingle_sets32

    buf, offsets = encode_batch(MIXED)
    sigs, n_sh, lengths, exact = sketch_oph_buffer(buf, offsets, cfg, 11, num_perm)
    got = sketch_oph_sets_buffer(buf, offsets, cfg, 11, num_perm)
    indptr, values = shingle_sets32(MIXED, cfg, 11)
    for name, want, have in zip(["signatures", "n_shingles", "lengths", "exact", "indptr", "values"],
                                [sigs, n_sh, lengths, exact, indptr, values], got):
        assert have.dtype == want.dtype and np.array_equal(have, want), name


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from(list("ab cdé,Ж日\u0301\u00a0ﬁA")), max_size=40), max_size=12))
def test_one_pass_equals_two_passes_on_any_text(texts):
    from diversify.sketches.minhash import sketch_oph_buffer, sketch_oph_sets_buffer
    from diversify.text import encode_batch, shingle_sets32

    cfg = TextConfig(shingle="auto", k=2)
    buf, offsets = encode_batch(texts)
    want = sketch_oph_buffer(buf, offsets, cfg, 3, 16) + shingle_sets32(texts, cfg, 3)
    got = sketch_oph_sets_buffer(buf, offsets, cfg, 3, 16)
    assert all(np.array_equal(a, b) for a, b in zip(want, got))


def test_index_batches_sketch_their_sets_in_the_one_pass(tmp_path, monkeypatch):
    """The index's add does not shingle its texts a second time for the stored sets."""
    import diversify
    from diversify.index import payload

    def second_pass(*a, **k):
        raise AssertionError("with_sets ran: the sets were not taken from the sketch pass")

    monkeypatch.setattr(payload, "with_sets", second_pass)
    monkeypatch.setattr("diversify.index.core.with_sets", second_pass)
    idx = diversify.Index(f"sqlite:///{tmp_path / 'i.db'}")
    base = "the quick brown fox jumps over the lazy dog near the river bank today "
    first = idx.add([base * 3, "something else entirely " * 5], ids=["a", "b"])
    again = idx.add([base * 3 + "extra"], ids=["c"])
    assert not first[0].joined and again[0].joined and again[0].cluster == first[0].cluster
    assert idx.query([base * 3])[0].joined
    idx.close()


MIXED = TEXTS + ["東京都の天気は晴れです", "Ελληνικά κείμενα εδώ", "Привет, мир! Привет", "ｆｕｌｌ　ｗｉｄｔｈ ﬁ"]


def _rows(result) -> list:
    starts, counts, hashes = result
    return [hashes[s: s + c].tolist() for s, c in zip(starts.tolist(), counts.tolist())]


@pytest.mark.parametrize("cfg", [TextConfig(), TextConfig(k=1), TextConfig(shingle="char", k=3), TextConfig(shingle="auto")])
def test_room_from_the_sketch_counts_gives_the_same_sets(cfg):
    """The output sized by the sketching pass's shingle counts (what a build re-shingles with)
    holds the same sets as the output sized by the length bound, in less memory."""
    from diversify.sketches.minhash import sketch_oph_buffer
    from diversify.text import encode_batch, sorted_unique_of_buffer

    buf, offsets = encode_batch(MIXED)
    n_shingles = sketch_oph_buffer(buf, offsets, cfg, 7, 16)[1]
    bound = sorted_unique_of_buffer(buf, offsets, cfg, 7)
    sized = sorted_unique_of_buffer(buf, offsets, cfg, 7, n_shingles.astype(np.uint32))
    assert _rows(sized) == _rows(bound)
    assert sized[2].size == int(np.maximum(n_shingles, 1).sum()) < bound[2].size


@settings(max_examples=80, deadline=None)
@given(texts=st.lists(st.text(alphabet=st.sampled_from(list("ab cdé,Ж日\u0301\u00a0ﬁA")), max_size=60), max_size=10),
       room=st.lists(st.integers(0, 40), min_size=10, max_size=10), shingle=st.sampled_from(["word", "char", "auto"]))
def test_any_room_gives_the_same_sets(texts, room, shingle):
    """A room too small for a document (a count that is not its rule's) is never overrun: that
    document is shingled again with the bound, and the sets do not depend on the room given."""
    from diversify.text import encode_batch, sorted_unique_of_buffer

    cfg = TextConfig(shingle=shingle, k=2)
    buf, offsets = encode_batch(texts)
    given_room = np.array(room[: len(texts)], dtype=np.uint32)
    assert _rows(sorted_unique_of_buffer(buf, offsets, cfg, 3, given_room)) == _rows(sorted_unique_of_buffer(buf, offsets, cfg, 3))
