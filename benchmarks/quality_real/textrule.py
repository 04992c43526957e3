"""The documented text rule, written again from its description, in plain Python.

docs/artifact-format.md ("Hash scheme") and the diversify/text.py docstring:

1. normalize: Unicode NFKC, then ``str.casefold``; every Unicode whitespace character -> ' ';
2. words: maximal runs of characters that are neither whitespace / ASCII control (< 33, 127) nor
   ASCII punctuation (``string.punctuation``);
3. word k-shingles (k = 5): every window of k consecutive words; a document with 1..k-1 words has
   one shingle made of all its words; a document without words has none ("empty").

Nothing here imports diversify. The truth (truth.py) and the peers (peers.py) both use this one
tokenizer, so every tool is compared on the same shingle sets.

A shingle is represented as its words joined by one space (words never contain a space, so the
join is unambiguous); the truth works on 64-bit BLAKE2b digests of those strings (see truth.py).
"""

from __future__ import annotations

import hashlib
import re
import string
import sys
import unicodedata

import numpy as np

K = 5

# Every code point that separates words: whitespace (str.isspace), ASCII control, ASCII punctuation.
_SEP = sorted(
    {c for c in range(sys.maxunicode + 1) if chr(c).isspace()}
    | set(range(33))
    | {127}
    | {ord(ch) for ch in string.punctuation}
)


def _char_class(codepoints: list[int]) -> str:
    """A regex character class body for a sorted list of code points (merged into ranges)."""
    parts = []
    start = prev = codepoints[0]
    for c in codepoints[1:] + [-2]:
        if c == prev + 1:
            prev = c
            continue
        parts.append(re.escape(chr(start)) if start == prev else f"{re.escape(chr(start))}-{re.escape(chr(prev))}")
        start = prev = c
    return "".join(parts)


_WORD_RE = re.compile(f"[^{_char_class(_SEP)}]+")


def normalize(text: str) -> str:
    """NFKC + casefold; Unicode whitespace is then a separator anyway (step 2), so it needs no mapping."""
    if text.isascii():
        return text.lower()  # NFKC is the identity on ASCII and casefold equals lower there
    return unicodedata.normalize("NFKC", text).casefold()


def words(text: str) -> list[str]:
    return _WORD_RE.findall(normalize(text))


def shingle_strings(text: str, k: int = K) -> set[str]:
    """The document's set of distinct word k-shingles (each as its words joined by ' ')."""
    w = words(text)
    n = len(w)
    if n == 0:
        return set()
    if n < k:
        return {" ".join(w)}
    return {" ".join(w[i : i + k]) for i in range(n - k + 1)}


def digest64(s: str) -> int:
    return int.from_bytes(hashlib.blake2b(s.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little")


def shingle_digests(text: str, k: int = K) -> np.ndarray:
    """Sorted distinct uint64 digests of the document's shingles."""
    sh = shingle_strings(text, k)
    if not sh:
        return np.empty(0, dtype=np.uint64)
    raw = b"".join(hashlib.blake2b(s.encode("utf-8", "surrogatepass"), digest_size=8).digest() for s in sh)
    return np.unique(np.frombuffer(raw, dtype="<u8").astype(np.uint64))
