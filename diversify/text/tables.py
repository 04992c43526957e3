"""The tables of the text rule, built from Python's own Unicode data.

Byte tables of the kernels' :class:`~diversify._kernels.text.TextRule` (:data:`LOWER`,
:data:`CLASSES`), the whitespace that becomes a space (:data:`UNICODE_SPACES`), and the code-point
tables built once per process on first use: what NFKC can change (:func:`unstable_table`), the case
fold on UTF-8 bytes (:func:`fold_tables`, :func:`grow_tables`, :func:`compact_tables`) and the
scripts of ``shingle="auto"`` (:func:`script_tables`). Every table is derived from
``unicodedata``, ``str.casefold`` or a regex over the string of all code points, so it agrees
with them by construction (tests check the bounds).
"""

from __future__ import annotations

import re
import string
import sys
import unicodedata

import numpy as np

__all__ = ["LOWER", "CLASSES", "UNICODE_SPACES", "SPACES", "UNSPACED", "LETTER", "UNSTABLE_TOP", "FOLD_TOP",
           "code_points", "unstable_table", "fold_tables", "grow_tables", "compact_tables", "script_tables"]


LOWER = np.arange(256, dtype=np.uint8)
LOWER[ord("A") : ord("Z") + 1] += 32

# byte classes of the kernels' TextRule: 0 WORD_BYTE, 1 FOLDED (whitespace/control: a separator, runs fold
# to one space), 2 PUNCT (ASCII punctuation: a separator, kept in the exact hash)
CLASSES = np.zeros(256, dtype=np.uint8)
CLASSES[:33] = 1
CLASSES[127] = 1
for _ch in string.punctuation:
    CLASSES[ord(_ch)] = 2

# Unicode whitespace that NFKC leaves alone (e.g. U+2028) becomes a plain space.
# (the non-ASCII code points for which str.isspace() is true; a test checks the list is complete)
UNICODE_SPACES = (0x85, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x2028, 0x2029, 0x202F, 0x205F, 0x3000)
# (a regex, not str.translate: translate looks every character up in a dict, where the regex scans
# and returns the string itself when nothing matches, an order of magnitude faster)
SPACES = re.compile("[" + "".join(map(chr, UNICODE_SPACES)) + "]")


def code_points(lo: int, hi: int, sep: str = "") -> str:
    """The str of the code points ``lo .. hi - 1`` in order, lone surrogates included, ``sep``
    (one character or none) between them: decoded from UTF-32 in one call, where a join of one
    ``chr`` per code point is far slower for all of Unicode (the tables below start from it)."""
    cps = np.arange(lo, hi, dtype="<u4")
    if sep:
        spaced = np.full(max(2 * cps.size - 1, 0), ord(sep), dtype="<u4")
        spaced[0::2] = cps
        cps = spaced
    return cps.tobytes().decode("utf-32-le", "surrogatepass")


UNSTABLE_TOP = 0x30000  # every code point NFKC changes is below (a test checks it)
_UNSTABLE: list[np.ndarray] = []


def unstable_table() -> np.ndarray:
    """bool over code points below ``UNSTABLE_TOP``: the characters NFKC can change (see
    :mod:`diversify.text.normalization`)."""
    if not _UNSTABLE:
        table = np.zeros(UNSTABLE_TOP, dtype=bool)
        for cp in range(0x80, UNSTABLE_TOP):
            if 0xD800 <= cp < 0xE000:
                continue
            ch = chr(cp)
            if unicodedata.combining(ch) or unicodedata.normalize("NFKC", ch) != ch:
                table[cp] = True
            else:
                d = unicodedata.decomposition(ch)
                if d and not d.startswith("<") and len(d.split()) == 2:  # a canonical pair: its second composes
                    table[int(d.split()[1], 16)] = True
        table[0x1161:0x1176] = True  # Hangul vowel jamo (compose with a leading consonant)
        table[0x11A8:0x11C3] = True  # Hangul trailing consonants (compose with an LV syllable)
        _UNSTABLE.append(table)
    return _UNSTABLE[0]


# Case folding and the space rule on UTF-8 bytes. Every code point with a UTF-8 form of L bytes
# (L = 2, 3, 4) whose casefold (or space rule) is at most L bytes long is rewritten in place,
# padded with NULs that are dropped afterwards; code points whose fold is longer (e.g. U+0130,
# U+0149, U+1F80: a few hundred, none in the common scripts) are folded as str first.
FOLD_TOP = 0x20000  # no code point at or above changes under casefold (a test checks it)
_fold: list[np.ndarray] = []


def fold_tables() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(change, bytes, grows, pairs): over code points < FOLD_TOP, the fold differs from the code
    point; its UTF-8 bytes padded with NUL to 4; it is longer than the code point's own UTF-8 form;
    and over the 65,536 pairs of first two bytes, some sequence starting with them changes."""
    if not _fold:
        top = FOLD_TOP
        folded = ["\x00"] + code_points(1, top, sep="\x00").casefold().split("\x00")
        for cp in UNICODE_SPACES:
            folded[cp] = " "
        change = np.zeros(top, dtype=bool)
        out = np.zeros((top, 4), dtype=np.uint8)
        grows = np.zeros(top, dtype=bool)
        pairs = np.zeros(1 << 16, dtype=bool)
        for cp in range(128, top):
            f = folded[cp]
            if f != chr(cp):
                change[cp] = True
                own = chr(cp).encode("utf-8", "surrogatepass")
                pairs[own[0] << 8 | own[1]] = True
                b = f.encode("utf-8", "surrogatepass")
                if len(b) > len(own):
                    grows[cp] = True
                else:
                    out[cp, : len(b)] = np.frombuffer(b, dtype=np.uint8)
        _fold.extend((change, out, grows, pairs))
    return _fold[0], _fold[1], _fold[2], _fold[3]


_GROWS: list[np.ndarray] = []


def grow_tables() -> tuple[np.ndarray, np.ndarray]:
    """(fold, length) over code points < FOLD_TOP: the UTF-8 bytes of the casefold of each code
    point whose fold is longer than itself (``fold_tables()[2]``), NUL-padded; its byte count."""
    if not _GROWS:
        grows = fold_tables()[2]
        folds = {cp: chr(cp).casefold().encode("utf-8") for cp in np.flatnonzero(grows).tolist()}
        width = max(map(len, folds.values()), default=1)
        fold = np.zeros((FOLD_TOP, width), dtype=np.uint8)
        length = np.zeros(FOLD_TOP, dtype=np.int64)
        for cp, b in folds.items():
            fold[cp, : len(b)] = np.frombuffer(b, dtype=np.uint8)
            length[cp] = len(b)
        _GROWS.extend((fold, length))
    return _GROWS[0], _GROWS[1]


_COMPACT: list[np.ndarray] = []


def compact_tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(change, fold, length) over code points < FOLD_TOP for :func:`diversify.text.fold.fold_dense`:
    whether the fold (or the space rule) changes the code point, its UTF-8 bytes (NUL-padded to the longest),
    their count. The same folds as :func:`fold_tables` and :func:`grow_tables`."""
    if not _COMPACT:
        change, short, grows, _ = fold_tables()
        grow_fold, grow_len = grow_tables()
        width = max(4, grow_fold.shape[1])
        fold = np.zeros((FOLD_TOP, width), dtype=np.uint8)
        fold[:, :4] = short
        length = np.count_nonzero(short, axis=1).astype(np.int64)  # fold bytes are never NUL
        fold[grows, :] = 0
        fold[grows, : grow_fold.shape[1]] = grow_fold[grows]
        length[grows] = grow_len[grows]
        _COMPACT.extend((change, fold, length))
    return _COMPACT[0], _COMPACT[1], _COMPACT[2]


# Scripts written without spaces between words: Thai, Lao, Myanmar, Khmer, kana, CJK ideographs
UNSPACED = re.compile("[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff"
                       "\uf900-\ufaff\U00020000-\U0002fa1f]")
LETTER = re.compile(r"[^\W\d_]")


_SCRIPTS: list[np.ndarray] = []


def script_tables() -> tuple[np.ndarray, np.ndarray]:
    """bool tables over every code point: matches ``UNSPACED``, matches ``LETTER``.

    Built once per process, the first time a batch holds non-ASCII text, by running the two
    regexes over the string of all code points, so they agree with the regexes by construction.
    """
    if not _SCRIPTS:
        every = code_points(0, sys.maxunicode + 1)
        for pattern in (UNSPACED, LETTER):
            marked = pattern.sub("\x01", every).encode("utf-32-le", "surrogatepass")
            table = np.frombuffer(marked, dtype=np.uint32) == 1
            table[1] = False  # U+0001 itself is neither
            _SCRIPTS.append(table)
    return _SCRIPTS[0], _SCRIPTS[1]
