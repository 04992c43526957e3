"""Shingles of an encoded batch: the word or character rule per document, hashed by the kernels."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..config import TextConfig
from ..errors import InputError
from ..hashing import seed_hash
from .buffers import subset
from .encode import encode_batch
from .tables import CLASSES, LOWER, script_tables

if TYPE_CHECKING:  # the kernels import numba; only their record types are named here
    from .._kernels.text import DocStats, TextRule

__all__ = ["Shingles", "shingle_hashes", "shingle_buffer", "unspaced_docs", "auto_split", "text_rule", "doc_stats",
           "shingle_room", "check_texts"]


@dataclass(frozen=True)
class Shingles:
    """Shingle hashes of a batch of documents in CSR form.

    Attributes
    ----------
    indptr : int64 (n+1,)   document i's shingles are ``hashes[indptr[i]:indptr[i+1]]``
    hashes : uint64 (nnz,)  in text order, duplicates kept (a multiset)
    lengths : uint32 (n,)   normalized, whitespace-folded length in bytes
    exact : uint64 (n,)     hash of the normalized, whitespace-folded text
    """

    indptr: np.ndarray
    hashes: np.ndarray
    lengths: np.ndarray
    exact: np.ndarray

    def __len__(self) -> int:
        return self.indptr.size - 1

    def doc(self, i: int) -> np.ndarray:
        return self.hashes[self.indptr[i] : self.indptr[i + 1]]


def unspaced_docs(buf: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """bool (n,): documents of an encoded batch that ``shingle="auto"`` shingles by character.

    The rule: at least half of the document's letters are in a script written without spaces
    between words (Thai, Lao, Myanmar, Khmer, Hiragana/Katakana, CJK ideographs). Documents without
    a 3- or 4-byte UTF-8 character are skipped without decoding; the others are decoded and counted
    against two code-point tables by one kernel pass over their bytes.
    """
    n = offsets.size - 1
    out = np.zeros(n, dtype=bool)
    if n == 0 or buf.size == 0:
        return out
    nonempty = np.flatnonzero(np.diff(offsets) > 0)
    top = np.zeros(n, dtype=np.uint8)
    if nonempty.size:
        top[nonempty] = np.maximum.reduceat(buf[: offsets[-1]], offsets[nonempty])
    # every script of the rule is at U+0E00 or above: 3- and 4-byte UTF-8, lead byte >= 0xE0; a document
    # whose bytes are all below (ASCII, Latin, Greek, Cyrillic, Arabic, Hebrew ...) has none of them
    todo = np.flatnonzero(top >= 0xE0)
    if todo.size == 0:
        return out
    from .._kernels.utf8 import count_scripts

    unspaced_table, letter_table = script_tables()
    unspaced = np.empty(todo.size, dtype=np.int64)
    letters = np.empty(todo.size, dtype=np.int64)
    count_scripts(buf, offsets, todo, unspaced_table, letter_table, unspaced, letters)
    out[todo] = (unspaced > 0) & (2 * unspaced >= letters)
    return out


def auto_split(buf: np.ndarray, offsets: np.ndarray, config: TextConfig, char_docs: np.ndarray | None = None):
    """For ``shingle="auto"``: [(document indices, their batch, their word/char config)], one entry
    when every document takes the same rule. ``char_docs``: :func:`unspaced_docs` of the batch,
    when the caller has it already."""
    word = TextConfig(shingle="word", k=config.k)
    if config.shingle != "auto":
        return None
    char = unspaced_docs(buf, offsets) if char_docs is None else char_docs
    if not char.any():
        return [(None, buf, offsets, word)]
    chars = TextConfig(shingle="char", k=config.char_k)
    if char.all():
        return [(None, buf, offsets, chars)]
    out = []
    for mask, cfg in ((~char, word), (char, chars)):
        idx = np.flatnonzero(mask)
        b, o = subset(buf, offsets, idx)
        out.append((idx, b, o, cfg))
    return out


def text_rule(config: TextConfig, seed: int) -> TextRule:
    """The kernels' description of ``config`` under ``seed`` (its tables are this module's)."""
    from .._kernels import text as kt

    mode = kt.CHAR if config.shingle == "char" else kt.WORD  # "auto" reaches here per part, as word or char
    return kt.TextRule(mode=mode, k=int(config.k), seed_h=seed_hash(seed), lower=LOWER, classes=CLASSES)


def doc_stats(n: int) -> DocStats:
    from .._kernels import text as kt

    return kt.DocStats(n_shingles=np.empty(n, dtype=np.int64), lengths=np.empty(n, dtype=np.uint32),
                       exact=np.empty(n, dtype=np.uint64))


def shingle_buffer(buf: np.ndarray, offsets: np.ndarray, config: TextConfig, seed: int,
                   char_docs: np.ndarray | None = None) -> Shingles:
    """Shingle an already encoded batch (see :func:`encode_batch`); ``char_docs`` as :func:`auto_split` takes it."""
    parts = auto_split(buf, offsets, config, char_docs)
    if parts is not None:
        if len(parts) == 1:
            return _shingle_one(parts[0][1], parts[0][2], parts[0][3], seed)
        return _merge_shingles(offsets.size - 1, [(idx, _shingle_one(b, o, c, seed)) for idx, b, o, c in parts])
    return _shingle_one(buf, offsets, config, seed)


def _merge_shingles(n: int, parts: list) -> Shingles:
    counts = np.zeros(n, dtype=np.int64)
    lengths = np.zeros(n, dtype=np.uint32)
    exact = np.zeros(n, dtype=np.uint64)
    for idx, sh in parts:
        counts[idx] = np.diff(sh.indptr)
        lengths[idx], exact[idx] = sh.lengths, sh.exact
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    hashes = np.empty(int(indptr[-1]), dtype=np.uint64)
    for idx, sh in parts:
        seg = np.diff(sh.indptr)
        dest = np.repeat(indptr[idx] - sh.indptr[:-1], seg) + np.arange(sh.hashes.size, dtype=np.int64)
        hashes[dest] = sh.hashes
    return Shingles(indptr=indptr, hashes=hashes, lengths=lengths, exact=exact)


def _shingle_one(buf: np.ndarray, offsets: np.ndarray, config: TextConfig, seed: int) -> Shingles:
    from .._kernels import text as kt

    rule = text_rule(config, seed)
    stats = doc_stats(offsets.size - 1)
    kt.scan_docs(buf, offsets, rule, stats)
    indptr = np.zeros(offsets.size, dtype=np.int64)
    np.cumsum(stats.n_shingles, out=indptr[1:])
    hashes = np.empty(int(indptr[-1]), dtype=np.uint64)
    kt.fill_shingles(buf, offsets, rule, indptr, hashes)
    return Shingles(indptr=indptr, hashes=hashes, lengths=stats.lengths, exact=stats.exact)


def shingle_room(offsets: np.ndarray, rule) -> np.ndarray:
    """int64 (n+1,): where each document's shingles start in a buffer with room for all of them
    (a document of b bytes has at most max(b, 1) shingles by code point, b // 2 + 1 by word: words
    need a separator)."""
    from .._kernels import text as kt

    room = np.maximum(np.diff(offsets), 1) if rule.mode == kt.CHAR else np.diff(offsets) // 2 + 1
    starts = np.zeros(offsets.size, dtype=np.int64)
    np.cumsum(room, out=starts[1:])
    return starts


def check_texts(texts) -> list:
    if isinstance(texts, (str, bytes)):
        raise InputError("`texts` must be an iterable of documents, not one str. Wrap it: [text].")
    return list(texts)


def shingle_hashes(texts: Sequence[str], text_config: TextConfig | None = None, seed: int = 1) -> Shingles:
    """Shingle hashes of many documents (see the module docstring for the exact rule).

    Parameters
    ----------
    texts : sequence of str
    text_config : TextConfig, default word 5-shingles
    seed : int, the build seed (changes every shingle hash)
    """
    config = text_config or TextConfig()
    texts = check_texts(texts)
    buf, offsets = encode_batch(texts)
    return shingle_buffer(buf, offsets, config, seed)
