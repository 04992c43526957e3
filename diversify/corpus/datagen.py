"""Seeded synthetic corpora with planted near-duplicates, for the demo, tests and benchmarks.

A corpus is made of *originals* (documents drawn independently from a Zipf-like vocabulary of
pseudo-words, with a per-topic word preference) and *planted copies*, each made from one original
by word-level edits (substitute / insert / delete at a given rate) plus optional surface noise
(case, punctuation, whitespace) that normalization removes. Optionally a share of the corpus is
*boilerplate*: many pages rendered from a few templates with a small variable slot.

Everything is vectorized with numpy: word indices are drawn as arrays and each document's text is
built with a single ``str.join`` over an object array, so 200,000 documents of 550 words take
seconds, not minutes. Output is a pure function of the arguments and ``seed``.

This module imports numpy only (no numba), so ``diversify demo`` stays light.

Examples
--------
>>> from diversify.corpus.datagen import generate_corpus
>>> corpus = generate_corpus(1_000, words_per_doc=100, dup_fraction=0.2, seed=7)
>>> len(corpus), corpus.planted_pairs().shape[1]
(1000, 2)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Union

import numpy as np

from .planted import Corpus
from .vectors import generate_vectors

__all__ = ["Corpus", "generate_corpus", "generate_vectors"]

EditRate = Union[float, tuple[float, float]]

# Surface variants of a pseudo-word. All of them tokenize to the same word under the library's rule
# (NFKC, casefold, split on whitespace and ASCII punctuation), so noise never changes shingles.
_VARIANTS = ("{w}", "{W}", "{U}", "{w},", "{w}.", "{w}\n", "({w})", "{w};")
_N_VARIANTS = len(_VARIANTS)
_TABLE_BITS = 20
# Variant probabilities in clean text: mostly plain, some sentence punctuation and capitals.
_CLEAN_VARIANT_P = np.array([0.86, 0.04, 0.0, 0.05, 0.04, 0.01, 0.0, 0.0])

_CONSONANTS = list("bcdfghjklmnprstvwz") + ["ch", "sh", "th", "qu", "st", "tr"]
_VOWELS = list("aeiou") + ["ai", "ea", "ou", "io"]

# Docs per generation chunk: bounds temporaries at ~chunk * words_per_doc * 2 ints. Fixed so that
# the output does not depend on anything but the arguments.
_CHUNK = 8192


def _check_rate(name: str, value: EditRate) -> tuple[float, float]:
    if isinstance(value, (int, float)):
        lo = hi = float(value)
    else:
        try:
            lo, hi = (float(v) for v in value)
        except (TypeError, ValueError):
            raise ValueError(
                f"`{name}` must be a float or a (low, high) pair; got {value!r}. "
                f"Use e.g. {name}=0.03 or {name}=(0.0, 0.05)."
            ) from None
    if not (0.0 <= lo <= hi <= 1.0) or math.isnan(lo) or math.isnan(hi):
        raise ValueError(
            f"`{name}` must satisfy 0 <= low <= high <= 1; got {value!r}. Use e.g. {name}=(0.0, 0.05)."
        )
    return lo, hi


def _make_vocabulary(rng: np.random.Generator, size: int) -> list[str]:
    """``size`` distinct lowercase pseudo-words of 1-4 syllables (ASCII)."""
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < size:
        n = 2 * (size - len(words)) + 16
        n_syll = rng.choice(np.array([1, 1, 2, 2, 2, 3, 3, 4]), size=n)
        cons = rng.integers(0, len(_CONSONANTS), size=(n, 4))
        vows = rng.integers(0, len(_VOWELS), size=(n, 4))
        for k in range(n):
            w = "".join(_CONSONANTS[cons[k, s]] + _VOWELS[vows[k, s]] for s in range(n_syll[k]))
            if w not in seen:
                seen.add(w)
                words.append(w)
                if len(words) == size:
                    break
    # Frequent ranks get short words, as in natural language (and it keeps texts compact).
    words.sort(key=len)
    return words


def _surface_table(words: list[str]) -> np.ndarray:
    """Object array (V * n_variants,): code ``v * V + w`` → surface form of word w in variant v."""
    table: list[str] = []
    for template in _VARIANTS:
        table.extend(template.format(w=w, W=w.capitalize(), U=w.upper()) for w in words)
    return np.array(table, dtype=object)


class _Sampler:
    """Zipf-like word draws with a per-topic preference, all vectorized."""

    def __init__(self, rng: np.random.Generator, vocab_size: int, n_topics: int, zipf_s: float):
        ranks = np.arange(1, vocab_size + 1, dtype=np.float64)
        p = ranks**-zipf_s
        # Inverse-CDF lookup table: a uniform integer in [0, 2**20) indexes the rank directly, which
        # is several times faster than a binary search per draw (ranks rarer than 2**-20 are lost).
        self.table = _inverse_cdf_table(p, _TABLE_BITS)
        self.vocab_size = vocab_size
        # Each topic ranks the vocabulary differently, so topic documents share preferred words.
        self.topic_perm = np.stack([rng.permutation(vocab_size) for _ in range(max(n_topics, 1))])
        self.topic_perm = self.topic_perm.astype(np.int32)

    def uniformish(self, rng: np.random.Generator, shape) -> np.ndarray:
        """Zipf-distributed word indices int32 of the given shape (global ranking)."""
        return self.table[rng.integers(0, 1 << _TABLE_BITS, size=shape, dtype=np.int32)]

    def draw(self, rng: np.random.Generator, topics: np.ndarray, length: int, topic_share: float):
        """Word indices int32 (len(topics), length); ``topic_share`` of them in topic ranking."""
        n = topics.size
        rank = self.uniformish(rng, (n, length))
        if topic_share <= 0:
            return rank
        use_topic = rng.random((n, length)) < topic_share
        return np.where(use_topic, self.topic_perm[topics[:, None], rank], rank)


def _inverse_cdf_table(p: np.ndarray, bits: int) -> np.ndarray:
    cdf = np.cumsum(p / p.sum())
    grid = (np.arange(1 << bits, dtype=np.float64) + 0.5) / (1 << bits)
    return np.minimum(np.searchsorted(cdf, grid, side="right"), p.size - 1).astype(np.int32)


_VARIANT_TABLE = _inverse_cdf_table(_CLEAN_VARIANT_P, 10)


def _clean_variants(rng: np.random.Generator, shape) -> np.ndarray:
    return _VARIANT_TABLE[rng.integers(0, 1 << 10, size=shape, dtype=np.int32)]


def _render(table: np.ndarray, vocab_size: int, words, variants, lengths) -> list[str]:
    """One ``' '.join`` per document over an object array of surface forms."""
    codes = variants.astype(np.int64) * vocab_size + words
    surfaces = table[codes]
    ends = np.cumsum(lengths)
    starts = ends - lengths
    join = " ".join
    return [join(surfaces[s:e]) for s, e in zip(starts.tolist(), ends.tolist())]


def generate_corpus(
    n_docs: int,
    *,
    words_per_doc: int = 550,
    dup_fraction: float = 0.2,
    edit_rate: EditRate = 0.03,
    boilerplate_fraction: float = 0.0,
    topics: int = 20,
    noise: float = 0.02,
    vocab_size: int = 8000,
    zipf_s: float = 1.0,
    length_jitter: float = 0.1,
    n_templates: int | None = None,
    seed: int = 0,
) -> Corpus:
    """Generate a corpus with planted near-duplicates.

    Parameters
    ----------
    n_docs : int
        Number of documents (>= 0).
    words_per_doc : int
        Mean words per original document (>= 1); lengths vary by ``± length_jitter``.
    dup_fraction : float
        Share of documents (outside boilerplate) that are planted copies of an original. Each copy
        picks its original uniformly, so some originals get several copies.
    edit_rate : float or (low, high)
        Word edit rate of a copy (substitute / delete / insert, one third each). A pair gives each
        copy a rate drawn uniformly in ``[low, high]``. With word 5-shingles a rate r leaves about
        ``(1 - r) ** 5`` of the shingles intact (r = 0.03 → Jaccard ≈ 0.75).
    boilerplate_fraction : float
        Share of documents rendered from a few templates (``n_templates``, default one per 2,000
        boilerplate pages) with a small variable slot and a 0.5% edit rate: near-identical pages.
    topics : int
        Number of topics (>= 1); each document's words lean to its topic's preferred words.
    noise : float
        Probability that a copy's word changes surface form (case, punctuation, a newline). The
        library's normalization removes it, so it never changes shingles.
    vocab_size, zipf_s : int, float
        Vocabulary size and Zipf exponent of word frequencies.
    length_jitter : float
        Relative spread of original lengths (uniform).
    n_templates : int, optional
        Number of boilerplate templates.
    seed : int
        Seed; the output is a pure function of the arguments.

    Returns
    -------
    Corpus
    """
    rate_lo, rate_hi = _check_corpus_args(n_docs, words_per_doc, dup_fraction, boilerplate_fraction, noise,
                                          length_jitter, topics, edit_rate)
    n_docs = int(n_docs)
    params = dict(n_docs=n_docs, words_per_doc=int(words_per_doc), dup_fraction=float(dup_fraction),
                  edit_rate=edit_rate if isinstance(edit_rate, (int, float)) else list(edit_rate),
                  boilerplate_fraction=float(boilerplate_fraction), topics=int(topics), noise=float(noise),
                  vocab_size=int(vocab_size), zipf_s=float(zipf_s), length_jitter=float(length_jitter),
                  n_templates=n_templates, seed=int(seed))

    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x5D1F]))
    vocab = _make_vocabulary(rng, vocab_size)
    writer = _Writer(_surface_table(vocab), vocab_size, _Sampler(rng, vocab_size, topics, zipf_s), int(seed))

    n_orig, n_copies, n_bp, n_templates = _counts(n_docs, dup_fraction, boilerplate_fraction, n_templates)

    # Layout before shuffling: [originals | copies | boilerplate (templates first)].
    orig_topics = rng.integers(0, topics, size=n_orig)
    lo, hi = max(1, int(words_per_doc * (1 - length_jitter))), int(words_per_doc * (1 + length_jitter))
    orig_len = rng.integers(lo, max(hi, lo) + 1, size=n_orig)
    copy_src = rng.integers(0, n_orig, size=n_copies) if n_orig else np.zeros(0, dtype=np.int64)
    copy_rates = rng.uniform(rate_lo, rate_hi, size=n_copies) if rate_hi > rate_lo else np.full(n_copies, rate_lo)

    texts, orig_words, orig_vars = _originals(writer, orig_topics, orig_len)
    texts += _copies(writer, orig_words, orig_vars, orig_len, copy_src, copy_rates, noise)
    del orig_words, orig_vars
    bp_texts, bp_template, bp_rates = _boilerplate(writer, n_bp, n_templates, words_per_doc)
    texts += bp_texts

    return _shuffled(writer, texts, params, orig_topics, copy_src, copy_rates, bp_template, bp_rates)


def _counts(n_docs: int, dup_fraction: float, boilerplate_fraction: float,
            n_templates: int | None) -> tuple[int, int, int, int]:
    """(originals, copies, boilerplate pages, templates) of a corpus of ``n_docs``."""
    n_bp = int(round(boilerplate_fraction * n_docs))
    n_rest = n_docs - n_bp
    n_copies = min(int(round(dup_fraction * n_docs)), max(n_rest - 1, 0))
    if n_bp and n_templates is None:
        n_templates = max(1, n_bp // 2000)
    return n_rest - n_copies, n_copies, n_bp, min(int(n_templates or 0), n_bp)


def _check_corpus_args(n_docs, words_per_doc, dup_fraction, boilerplate_fraction, noise, length_jitter, topics,
                       edit_rate) -> tuple[float, float]:
    """Validate :func:`generate_corpus`'s arguments; return the (low, high) edit rate."""
    if not isinstance(n_docs, (int, np.integer)) or n_docs < 0:
        raise ValueError(f"`n_docs` must be an integer >= 0; got {n_docs!r}.")
    if not isinstance(words_per_doc, (int, np.integer)) or words_per_doc < 1:
        raise ValueError(f"`words_per_doc` must be an integer >= 1; got {words_per_doc!r}.")
    for name, value in (("dup_fraction", dup_fraction), ("boilerplate_fraction", boilerplate_fraction),
                        ("noise", noise), ("length_jitter", length_jitter)):
        if not (0.0 <= float(value) <= 1.0):
            raise ValueError(f"`{name}` must be in [0, 1]; got {value!r}.")
    if dup_fraction + boilerplate_fraction > 1.0:
        raise ValueError(
            f"`dup_fraction + boilerplate_fraction` must be <= 1; got {dup_fraction} + "
            f"{boilerplate_fraction}. Lower one of them."
        )
    if not isinstance(topics, (int, np.integer)) or topics < 1:
        raise ValueError(f"`topics` must be an integer >= 1; got {topics!r}.")
    return _check_rate("edit_rate", edit_rate)


@dataclass(frozen=True)
class _Writer:
    """What every rendering step shares: the surface table, the word sampler and the seed."""

    table: np.ndarray
    vocab_size: int
    sampler: _Sampler
    seed: int

    def rng(self, stream: int, start: int | None = None) -> np.random.Generator:
        """The generator of one stream (and chunk): independent of every other draw."""
        key = [self.seed, stream] if start is None else [self.seed, stream, start]
        return np.random.default_rng(np.random.SeedSequence(key))

    def render(self, words, variants, lengths) -> list[str]:
        return _render(self.table, self.vocab_size, words, variants, lengths)


def _originals(writer: _Writer, topics: np.ndarray, lengths: np.ndarray) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The originals' texts, chunk by chunk, and their words and variants (flat: copies need them)."""
    texts: list[str] = []
    words: list[np.ndarray] = []
    variants: list[np.ndarray] = []
    for start in range(0, lengths.size, _CHUNK):
        stop = min(start + _CHUNK, lengths.size)
        chunk_rng = writer.rng(1, start)
        lens = lengths[start:stop]
        full = writer.sampler.draw(chunk_rng, topics[start:stop], int(lens.max()), topic_share=0.5)
        var = _clean_variants(chunk_rng, full.shape)
        mask = np.arange(full.shape[1])[None, :] < lens[:, None]
        w, v = full[mask], var[mask]
        words.append(w)
        variants.append(v)
        texts.extend(writer.render(w, v, lens))
    flat_words = np.concatenate(words) if words else np.zeros(0, np.int32)
    flat_vars = np.concatenate(variants) if variants else np.zeros(0, np.int32)
    return texts, flat_words, flat_vars


def _copies(writer: _Writer, orig_words: np.ndarray, orig_vars: np.ndarray, orig_len: np.ndarray,
            copy_src: np.ndarray, copy_rates: np.ndarray, noise: float) -> list[str]:
    """The planted copies' texts: rows padded to the chunk's longest source; the edit drops the padding."""
    orig_offsets = np.zeros(orig_len.size + 1, dtype=np.int64)
    np.cumsum(orig_len, out=orig_offsets[1:])
    texts: list[str] = []
    for start in range(0, copy_src.size, _CHUNK):
        stop = min(start + _CHUNK, copy_src.size)
        chunk_rng = writer.rng(2, start)
        src = copy_src[start:stop]
        lens = orig_len[src]
        cols = np.arange(int(lens.max()))[None, :]
        valid = cols < lens[:, None]
        idx = np.where(valid, orig_offsets[src][:, None] + cols, 0)
        fw, fv, flen = _edit_padded(chunk_rng, writer.sampler, orig_words[idx], orig_vars[idx], valid,
                                    copy_rates[start:stop], noise)
        texts.extend(writer.render(fw, fv, flen))
    return texts


def _boilerplate(writer: _Writer, n_bp: int, n_templates: int, words_per_doc: int
                 ) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Boilerplate pages: long shared templates with a short variable slot (title, product).

    Returns (texts, template of each page, edit rate of each page); a template's first page is
    rendered verbatim.
    """
    if not n_bp:
        return [], np.zeros(0, dtype=np.int64), np.zeros(0)
    brng = writer.rng(3)
    sampler = writer.sampler
    tmpl_words = sampler.draw(brng, np.zeros(n_templates, dtype=np.int64), words_per_doc, 0.0)
    tmpl_vars = _clean_variants(brng, tmpl_words.shape)
    page_tmpl = np.concatenate([np.arange(n_templates), brng.integers(0, n_templates, size=n_bp - n_templates)])
    slot = max(3, words_per_doc // 50)
    texts: list[str] = []
    for start in range(0, n_bp, _CHUNK):
        stop = min(start + _CHUNK, n_bp)
        chunk_rng = writer.rng(4, start)
        t = page_tmpl[start:stop]
        w = tmpl_words[t].copy()
        v = tmpl_vars[t].copy()
        # Pages other than the template's first rendering get their own slot words + tiny edits.
        first = np.arange(start, stop) < n_templates
        slot_words = sampler.uniformish(chunk_rng, (stop - start, min(slot, words_per_doc)))
        w[~first, : slot_words.shape[1]] = slot_words[~first]
        rates = np.where(first, 0.0, 0.005)
        valid = np.ones(w.shape, dtype=bool)
        fw, fv, flen = _edit_padded(chunk_rng, sampler, w, v, valid, rates, 0.0)
        texts.extend(writer.render(fw, fv, flen))
    return texts, page_tmpl, np.where(np.arange(n_bp) < n_templates, 0.0, 0.005)


def _shuffled(writer: _Writer, texts: list[str], params: dict, orig_topics: np.ndarray, copy_src: np.ndarray,
              copy_rates: np.ndarray, bp_template: np.ndarray, bp_rates: np.ndarray) -> Corpus:
    """The corpus in a seeded random order, so copies are not all at the end.

    ``texts`` are in the layout [originals | copies | boilerplate (templates first)]; sources are
    remapped to the shuffled positions.
    """
    n_orig, n_copies, n_bp = orig_topics.size, copy_src.size, bp_template.size
    n_docs = n_orig + n_copies + n_bp
    source = np.concatenate([
        np.arange(n_orig, dtype=np.int64),
        copy_src.astype(np.int64),
        n_orig + n_copies + bp_template.astype(np.int64),
    ])
    rates_all = np.concatenate([np.zeros(n_orig), copy_rates, bp_rates]).astype(np.float64)
    topics_all = np.concatenate([
        orig_topics, orig_topics[copy_src], np.full(n_bp, 0, dtype=np.int64)
    ]).astype(np.int64)
    is_bp = np.zeros(n_docs, dtype=bool)
    is_bp[n_orig + n_copies :] = True
    perm = writer.rng(5).permutation(n_docs)
    inv = np.empty(n_docs, dtype=np.int64)
    inv[perm] = np.arange(n_docs, dtype=np.int64)
    return Corpus(
        ids=[f"doc-{i:07d}" for i in range(n_docs)],
        texts=[texts[k] for k in perm.tolist()],
        source=inv[source[perm]],
        edit_rates=rates_all[perm],
        topics=topics_all[perm],
        is_boilerplate=is_bp[perm],
        params=params,
    )


def _edit_padded(rng, sampler, words, variants, valid, rates, noise):
    """Apply word edits row-wise to rows padded past their length (``valid`` marks real words).

    Each real position is substituted, deleted, or followed by an inserted word, each with
    probability ``rate / 3``. Rows are interleaved with an insertion slot after every word so that
    all rows are edited at once with masks; kept entries are then compacted row-major. Returns flat
    (words, variants) and per-row lengths.
    """
    n, length = words.shape
    rates = np.asarray(rates, dtype=np.float64)
    u = rng.random((n, length))
    third = (rates / 3.0)[:, None]
    substitute = u < third
    delete = ((u >= third) & (u < 2 * third)) | ~valid
    insert = (u >= 2 * third) & (u < 3 * third) & valid

    words = np.where(substitute, sampler.uniformish(rng, (n, length)), words)
    slot_words = np.empty((n, 2 * length), dtype=np.int32)
    slot_words[:, 0::2] = words
    slot_words[:, 1::2] = sampler.uniformish(rng, (n, length))
    slot_vars = np.empty((n, 2 * length), dtype=np.int32)
    slot_vars[:, 0::2] = variants
    slot_vars[:, 1::2] = _clean_variants(rng, (n, length))
    keep = np.empty((n, 2 * length), dtype=bool)
    keep[:, 0::2] = ~delete
    keep[:, 1::2] = insert
    if noise > 0:
        flip = rng.random((n, 2 * length)) < noise
        slot_vars = np.where(flip, rng.integers(0, _N_VARIANTS, size=(n, 2 * length)), slot_vars)
    lengths = keep.sum(axis=1)
    return slot_words[keep], slot_vars[keep].astype(np.int32, copy=False), lengths
