"""Reference tokenization and shingle hashing in plain Python/numpy, independent of the library.

The rule (the library's, written out again here so truth does not depend on its kernels): text →
Unicode NFKC → casefold; a word is a maximal run of characters that are neither whitespace nor
ASCII punctuation (``string.punctuation``) nor an ASCII control character; word k-shingles are all windows of k consecutive words;
a document with 1..k-1 words has one shingle (all its words); no words → no shingles.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import string
import unicodedata
from collections.abc import Iterable, Iterator

import numpy as np

K = 5
# ASCII control characters separate words too (diversify.text documents this; the rule is
# silent on them).
_SPLIT = re.compile("[\\s\x00-\x1f\x7f" + re.escape(string.punctuation) + "]+")
_MASK = np.uint64(0xFFFFFFFFFFFFFFFF)
_K1 = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def words(text: str) -> list[str]:
    """Normalized words of one text."""
    return [w for w in _SPLIT.split(unicodedata.normalize("NFKC", text).casefold()) if w]


def shingle_strings(text: str, k: int = K) -> list[str]:
    """Word k-shingles of one text as space-joined strings (how peers are normally fed)."""
    w = words(text)
    if len(w) <= k:
        return [" ".join(w)] if w else []
    return [" ".join(w[i : i + k]) for i in range(len(w) - k + 1)]


def shingle_set(text: str, k: int = K) -> set[str]:
    """The document's set of distinct word k-shingles (each as its words joined by ' ': words never
    contain a space, so the join is unambiguous)."""
    return set(shingle_strings(text, k))


def shingle_digests(text: str, k: int = K) -> np.ndarray:
    """Sorted distinct uint64 digests (BLAKE2b, 64 bits) of the document's shingles: the real-corpus
    truth's representation (a collision among N distinct shingles has probability about N²/2**65)."""
    sh = shingle_set(text, k)
    if not sh:
        return np.empty(0, dtype=np.uint64)
    raw = b"".join(hashlib.blake2b(s.encode("utf-8", "surrogatepass"), digest_size=8).digest() for s in sh)
    return np.unique(np.frombuffer(raw, dtype="<u8").astype(np.uint64))


def _mix(x: np.ndarray) -> np.ndarray:
    # splitmix64 finalizer; numpy uint64 array arithmetic wraps modulo 2**64.
    x = x ^ (x >> np.uint64(30))
    x = x * _M1
    x = x ^ (x >> np.uint64(27))
    x = x * _M2
    return x ^ (x >> np.uint64(31))


class ShingleHasher:
    """64-bit shingle hashes for many texts: word → blake2b-64 once, then a numpy window mix.

    The hash of a shingle is a function of its words' strings only, so two documents share a
    shingle hash iff they share the shingle (up to 64-bit collisions, ~n²/2**65).
    """

    def __init__(self, k: int = K):
        self.k = k
        self._ids: dict[str, int] = {}
        self._word_hash: list[int] = []

    def _word_ids(self, ws: list[str]) -> list[int]:
        ids = self._ids
        n0 = len(ids)
        get = ids.setdefault
        out = [get(w, len(ids)) for w in ws]
        if len(ids) > n0:
            # dicts keep insertion order: the newest keys, reversed, are exactly the new words.
            new = list(itertools.islice(reversed(ids), len(ids) - n0))[::-1]
            self._word_hash.extend(
                int.from_bytes(hashlib.blake2b(w.encode("utf-8"), digest_size=8).digest(), "little")
                for w in new
            )
        return out

    def hash_many(self, texts: Iterable[str]) -> tuple[np.ndarray, np.ndarray]:
        """CSR (indptr int64 (n+1,), hashes uint64) of each text's shingle hash multiset."""
        word_ids: list[int] = []
        counts: list[int] = []
        for t in texts:
            ws = words(t)
            counts.append(len(ws))
            word_ids.extend(self._word_ids(ws))
        wh = np.array(self._word_hash, dtype=np.uint64)[np.array(word_ids, dtype=np.int64)]
        counts_a = np.array(counts, dtype=np.int64)
        n = counts_a.size
        ends = np.cumsum(counts_a)
        starts = ends - counts_a
        k = self.k
        # Full windows: a window starting at p is valid if p + k <= end of its document.
        total = wh.size
        n_sh = np.where(counts_a >= k, counts_a - k + 1, np.minimum(counts_a, 1))
        if total >= k:
            x = wh[: total - k + 1].copy()
            for j in range(1, k):
                x = _mix(x * _K1 + wh[j : total - k + 1 + j])
        else:
            x = np.zeros(0, dtype=np.uint64)
        long_docs = counts_a >= k
        # Start positions of valid windows, in document order.
        win_starts = np.repeat(starts[long_docs], n_sh[long_docs]) + _ranges(n_sh[long_docs])
        long_hashes = x[win_starts] if win_starts.size else np.zeros(0, dtype=np.uint64)
        # Short documents (1..k-1 words): one shingle over all words; a distinct tag per length.
        short = np.flatnonzero((counts_a > 0) & (counts_a < k))
        short_hashes = np.empty(short.size, dtype=np.uint64)
        for s_i, d in enumerate(short):
            h = wh[starts[d] : starts[d] + 1].copy()
            for j in range(1, counts_a[d]):
                h = _mix(h * _K1 + wh[starts[d] + j : starts[d] + j + 1])
            # A distinct tag per length keeps a 3-word document apart from any 5-word shingle.
            short_hashes[s_i] = _mix(h ^ np.uint64(0xA5A5 + int(counts_a[d])))[0]
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(n_sh, out=indptr[1:])
        hashes = np.empty(int(indptr[-1]), dtype=np.uint64)
        is_long_slot = np.repeat(long_docs, n_sh)
        hashes[is_long_slot] = long_hashes
        hashes[~is_long_slot] = short_hashes
        return indptr, hashes


def _ranges(lengths: np.ndarray) -> np.ndarray:
    """Concatenation of arange(l) for each l in lengths."""
    lengths = np.asarray(lengths, dtype=np.int64)
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.cumsum(lengths) - lengths
    return np.arange(total, dtype=np.int64) - np.repeat(starts, lengths)


def iter_chunks(seq, size: int) -> Iterator:
    for i in range(0, len(seq), size):
        yield seq[i : i + size]
