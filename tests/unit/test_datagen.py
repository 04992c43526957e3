"""Tests for the synthetic corpus generator (fast; numpy only)."""

from __future__ import annotations

import re
import string
import sys
import unicodedata

import numpy as np
import pytest

from diversify.corpus.datagen import Corpus, generate_corpus, generate_vectors

_SPLIT = re.compile("[\\s" + re.escape(string.punctuation) + "]+")


def _words(text: str) -> list[str]:
    """The library's tokenization rule, written out plainly (NFKC, casefold, split)."""
    return [w for w in _SPLIT.split(unicodedata.normalize("NFKC", text).casefold()) if w]


def _shingles(text: str, k: int = 5) -> set[tuple[str, ...]]:
    w = _words(text)
    if not w:
        return set()
    if len(w) < k:
        return {tuple(w)}
    return {tuple(w[i : i + k]) for i in range(len(w) - k + 1)}


def _jaccard(a: str, b: str) -> float:
    sa, sb = _shingles(a), _shingles(b)
    return len(sa & sb) / len(sa | sb)


@pytest.fixture
def seed() -> int:
    return 12345


def test_shapes_and_types(seed):
    c = generate_corpus(500, words_per_doc=60, dup_fraction=0.2, seed=seed)
    n = 500
    assert isinstance(c, Corpus) and len(c) == n
    assert len(c.ids) == n and len(set(c.ids)) == n and all(isinstance(i, str) for i in c.ids)
    assert len(c.texts) == n and all(isinstance(t, str) and t for t in c.texts)
    for name in ("source", "topics"):
        arr = getattr(c, name)
        assert arr.dtype == np.int64 and arr.shape == (n,), name
    assert c.edit_rates.dtype == np.float64 and c.edit_rates.shape == (n,)
    assert ((c.source >= 0) & (c.source < n)).all()
    # A source is always an original (points to itself).
    assert (c.source[c.source] == c.source).all()


def test_deterministic_for_a_seed(seed):
    kwargs = dict(words_per_doc=40, dup_fraction=0.3, edit_rate=(0.0, 0.1), boilerplate_fraction=0.1)
    a = generate_corpus(300, seed=seed, **kwargs)
    b = generate_corpus(300, seed=seed, **kwargs)
    c = generate_corpus(300, seed=seed + 1, **kwargs)
    assert a.texts == b.texts
    np.testing.assert_array_equal(a.source, b.source)
    np.testing.assert_array_equal(a.edit_rates, b.edit_rates)
    assert a.texts != c.texts
    va, vb = generate_vectors(a, seed=seed), generate_vectors(b, seed=seed)
    assert va.tobytes() == vb.tobytes()


def test_duplicate_fraction_and_counts(seed):
    n, frac = 2000, 0.25
    c = generate_corpus(n, words_per_doc=30, dup_fraction=frac, seed=seed)
    n_copies = int((c.source != np.arange(n)).sum())
    assert n_copies == round(frac * n), f"expected {round(frac * n)} copies, got {n_copies}"
    assert (c.edit_rates[c.source == np.arange(n)] == 0).all()


def test_planted_pairs_and_clusters_agree(seed):
    c = generate_corpus(400, words_per_doc=30, dup_fraction=0.4, seed=seed)
    labels = c.planted_clusters()
    pairs = c.planted_pairs()
    assert pairs.dtype == np.int64 and pairs.ndim == 2 and pairs.shape[1] == 2
    assert (pairs[:, 0] < pairs[:, 1]).all()
    assert (labels[pairs[:, 0]] == labels[pairs[:, 1]]).all()
    sizes = np.bincount(labels)
    expected = int((sizes * (sizes - 1) // 2).sum())
    assert len(pairs) == expected, f"{len(pairs)} pairs vs {expected} from cluster sizes"
    # Canonical labels: the smallest member of each group.
    for lab in np.unique(labels):
        assert lab == np.flatnonzero(labels == lab).min()


def test_copies_are_near_and_originals_are_not(seed):
    c = generate_corpus(300, words_per_doc=300, dup_fraction=0.3, edit_rate=0.02, seed=seed)
    copies = np.flatnonzero(c.source != np.arange(len(c)))
    js = [_jaccard(c.texts[i], c.texts[c.source[i]]) for i in copies[:40]]
    # A 2% word edit rate leaves about (1 - 0.02) ** 5 ≈ 0.90 of 5-shingles: J ≈ 0.82.
    assert min(js) > 0.65 and np.mean(js) > 0.75, f"copy Jaccard min={min(js):.3f} mean={np.mean(js):.3f}"
    originals = np.flatnonzero(c.source == np.arange(len(c)))
    unrelated = [_jaccard(c.texts[a], c.texts[b]) for a, b in zip(originals[:40], originals[40:80])]
    assert max(unrelated) < 0.05, f"unrelated originals share shingles: max J={max(unrelated):.3f}"


def test_edit_rate_zero_gives_identical_token_streams(seed):
    c = generate_corpus(100, words_per_doc=50, dup_fraction=0.5, edit_rate=0.0, noise=0.3, seed=seed)
    copies = np.flatnonzero(c.source != np.arange(len(c)))
    assert copies.size
    for i in copies:
        assert _words(c.texts[i]) == _words(c.texts[c.source[i]])
    # ... while surface noise makes the raw strings differ for most copies.
    differ = sum(c.texts[i] != c.texts[c.source[i]] for i in copies)
    assert differ > copies.size // 2, f"only {differ}/{copies.size} copies differ on the surface"


def test_edit_rate_range(seed):
    c = generate_corpus(1000, words_per_doc=20, dup_fraction=0.5, edit_rate=(0.01, 0.07), seed=seed)
    rates = c.edit_rates[c.source != np.arange(len(c))]
    assert rates.min() >= 0.01 and rates.max() <= 0.07 and rates.std() > 0.01


def test_boilerplate_pages_are_near_identical(seed):
    c = generate_corpus(600, words_per_doc=200, dup_fraction=0.0, boilerplate_fraction=0.5, seed=seed)
    bp = np.flatnonzero(c.is_boilerplate)
    assert bp.size == 300
    groups = c.source[bp]
    assert np.unique(groups).size <= 2
    same = bp[groups == groups[0]]  # two pages of one boilerplate group, whichever pages come first
    assert same.size >= 2
    a, b = same[:2]
    assert _jaccard(c.texts[a], c.texts[b]) > 0.8


def test_lengths_and_vocabulary(seed):
    c = generate_corpus(200, words_per_doc=100, dup_fraction=0.0, seed=seed, length_jitter=0.1)
    lengths = np.array([len(_words(t)) for t in c.texts])
    assert lengths.min() >= 90 and lengths.max() <= 110, (lengths.min(), lengths.max())
    vocab = {w for t in c.texts for w in _words(t)}
    assert all(w.isascii() and w.isalpha() for w in vocab)


def test_topics_in_range(seed):
    c = generate_corpus(300, words_per_doc=20, topics=7, seed=seed)
    assert c.topics.min() >= 0 and c.topics.max() < 7
    assert (c.topics == c.topics[c.source]).all()


@pytest.mark.parametrize(
    "kwargs",
    [dict(n_docs=-1), dict(n_docs=10, words_per_doc=0), dict(n_docs=10, dup_fraction=1.5),
     dict(n_docs=10, edit_rate=(0.5, 0.1)), dict(n_docs=10, edit_rate="x"),
     dict(n_docs=10, dup_fraction=0.7, boilerplate_fraction=0.5), dict(n_docs=10, topics=0)],
)
def test_bad_arguments_raise_value_error(kwargs):
    n = kwargs.pop("n_docs")
    with pytest.raises(ValueError):
        generate_corpus(n, **kwargs)


def test_empty_and_tiny(seed):
    assert len(generate_corpus(0, seed=seed)) == 0
    c = generate_corpus(1, dup_fraction=0.5, seed=seed)
    assert len(c) == 1 and c.source.tolist() == [0]


def test_vectors_copies_near_others_far(seed):
    c = generate_corpus(1500, words_per_doc=20, dup_fraction=0.3, edit_rate=(0.0, 0.05), seed=seed)
    v = generate_vectors(c, dim=64, seed=seed)
    assert v.dtype == np.float32 and v.shape == (1500, 64)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    pairs = c.planted_pairs()
    cos = np.einsum("ij,ij->i", v[pairs[:, 0]], v[pairs[:, 1]])
    # Two copies of one original are each ~0.98 from it, so ~0.96 from each other.
    direct = c.source[pairs[:, 1]] == pairs[:, 0]
    direct |= c.source[pairs[:, 0]] == pairs[:, 1]
    assert cos[direct].min() >= 0.96, f"min cosine copy-original {cos[direct].min():.4f}"
    rng = np.random.default_rng(seed)
    a, b = rng.integers(0, 1500, size=(2, 5000))
    labels = c.planted_clusters()
    keep = labels[a] != labels[b]
    other = np.einsum("ij,ij->i", v[a[keep]], v[b[keep]])
    assert other.max() < 0.8, f"unrelated cosine up to {other.max():.3f}"


def test_vectors_from_count(seed):
    v = generate_vectors(50, dim=8, seed=seed)
    assert v.shape == (50, 8) and v.dtype == np.float32
    with pytest.raises(ValueError):
        generate_vectors(10, dim=1)
    with pytest.raises(ValueError):
        generate_vectors(-3)


def test_no_numba_import():
    assert "diversify.corpus.datagen" in sys.modules
    import diversify.corpus.datagen as dg

    assert "numba" not in dg.__dict__
    src = open(dg.__file__, encoding="utf-8").read()
    assert not re.search(r"^\s*(import|from)\s+numba", src, flags=re.M)
