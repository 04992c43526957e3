"""Text normalization, tokenization and shingle hashing.

The rule, fixed and documented (docs/artifact-format.md, "Hash scheme"):

1. Normalize: Unicode NFKC, then ``str.casefold``; every Unicode whitespace character becomes a
   space. Pure-ASCII documents skip NFKC (it is the identity on ASCII) and are lowercased in the
   kernel. Lone surrogates are encoded with ``surrogatepass`` instead of raising.
2. Words are maximal runs of characters that are neither whitespace (or ASCII control) nor ASCII
   punctuation (``string.punctuation``). Non-ASCII characters belong to words.
3. Word k-shingles: every window of k consecutive words. A document with 1..k-1 words has exactly
   one shingle made of all its words; a document with no words has no shingles (it is "empty").
   Character k-grams: every window of k code points of the text with whitespace runs folded to one
   space and trimmed; the same short-document rule applies.
4. Hashes are 64-bit (FNV-1a over UTF-8 bytes, finalized with the splitmix64 mixer) and do not
   depend on the platform, the process or the thread count.

Everything is computed in Numba over one UTF-8 buffer of many documents plus offsets.
"""

from __future__ import annotations

import functools
import re
import string
import sys
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .config import TextConfig
from .errors import InputError, InputTypeError
from .hashing import minhash_seed, seed_hash

if TYPE_CHECKING:  # the kernels import numba; only their record types are named here
    from ._kernels.text import DocStats, TextRule

__all__ = ["normalize", "encode_batch", "encode_batch_scripts", "Shingles", "shingle_hashes", "shingle_buffer", "sketch_oph_buffer",
           "sorted_unique_shingles", "shingle_sets32", "exact_jaccard", "text_simhash", "text_simhash_buffer"]

_LOWER = np.arange(256, dtype=np.uint8)
_LOWER[ord("A") : ord("Z") + 1] += 32

# byte classes of the kernels' TextRule: 0 WORD_BYTE, 1 FOLDED (whitespace/control: a separator, runs fold
# to one space), 2 PUNCT (ASCII punctuation: a separator, kept in the exact hash)
_CLASSES = np.zeros(256, dtype=np.uint8)
_CLASSES[:33] = 1
_CLASSES[127] = 1
for _ch in string.punctuation:
    _CLASSES[ord(_ch)] = 2

# Unicode whitespace that NFKC leaves alone (e.g. U+2028) becomes a plain space.
# (the non-ASCII code points for which str.isspace() is true; a test checks the list is complete)
_UNICODE_SPACES = (0x85, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x2028, 0x2029, 0x202F, 0x205F, 0x3000)
# (a regex, not str.translate: translate looks every character up in a dict, ~14 MB/s of accented
# text, where the regex scans at ~190 MB/s and returns the string itself when nothing matches)
_SPACES = re.compile("[" + "".join(map(chr, _UNICODE_SPACES)) + "]")


# The byte scans of non-ASCII batches (NFKC pieces, case folds) are serial kernels that release the
# GIL; a large batch is cut into segments at ASCII bytes (a code point boundary that starts no NFKC
# piece and sits inside no fold) and the segments are scanned in threads, one per numba thread.
# The results are put together in segment order: the same bytes as one scan.
_SEGMENT_FROM = 1 << 20  # bytes: smaller buffers are scanned in one piece


def _segments(raw: np.ndarray) -> list[tuple[int, int]]:
    """``(start, end)`` byte ranges covering ``raw`` in order, each inner cut at an ASCII byte."""
    from ._kernels._runtime import thread_count

    n = raw.size
    parts = min(thread_count(), max(1, n // _SEGMENT_FROM))
    cuts = [0]
    for k in range(1, parts):
        at = n * k // parts
        ascii_at = np.flatnonzero(raw[at: at + (1 << 16)] < 0x80)  # a document's NUL separator at least
        if ascii_at.size and at + int(ascii_at[0]) > cuts[-1]:
            cuts.append(at + int(ascii_at[0]))
    cuts.append(n)
    return list(zip(cuts[:-1], cuts[1:]))


def _in_threads(fn, jobs: list) -> list:
    """``[fn(*job) for job in jobs]``, the jobs after the first in threads (``fn`` releases the GIL)."""
    if len(jobs) == 1:
        return [fn(*jobs[0])]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=len(jobs) - 1, thread_name_prefix="diversify-scan") as pool:
        rest = [pool.submit(fn, *job) for job in jobs[1:]]
        first = fn(*jobs[0])
        return [first] + [f.result() for f in rest]


# NFKC piece by piece: a text that fails the quick check is normalized only around the characters
# NFKC can change ("unstable": those NFKC maps to something else, the combining marks, and the
# characters that compose with a preceding one), each run of them together with the one character
# before it. That character is a starter NFKC leaves alone, and no composition or reordering crosses
# such a starter, so the pieces normalize independently (a test compares with unicodedata.normalize
# at every code point). unicodedata.normalize runs at ~12 MB/s on real text that fails the quick
# check (a single ellipsis or full-width colon makes a whole document fail it); the pieces are found
# by one kernel scan of the UTF-8 bytes against a code-point table (a regex over the str: 38 M
# characters/s, a third of a multilingual build's time).
_UNSTABLE_TOP = 0x30000  # every code point NFKC changes is below (a test checks it)
_UNSTABLE: list[np.ndarray] = []


def _unstable_table() -> np.ndarray:
    """bool over code points below ``_UNSTABLE_TOP``: the characters NFKC can change (see above)."""
    if not _UNSTABLE:
        table = np.zeros(_UNSTABLE_TOP, dtype=bool)
        for cp in range(0x80, _UNSTABLE_TOP):
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


def _nfkc_utf8(raw: bytes) -> np.ndarray:
    """NFKC of the UTF-8 text ``raw`` (surrogates allowed), as a new writable uint8 array: each
    piece that :func:`diversify._kernels.text.unstable_pieces` finds is normalized and spliced in;
    the bytes between pieces are kept as they are.

    The pieces are normalized in one ``unicodedata.normalize`` call over their join by NUL. NUL is a
    starter that composes with nothing, so no decomposition, reordering or composition crosses it,
    and NFKC neither makes nor removes one: the normalized join splits back at its NULs into the
    normalized pieces. (A piece can hold a NUL only as its first byte, the document separator before
    a document that starts with a mark; that NUL is left out of the piece, which changes nothing
    for the same reason.) 92,000 pieces of a multilingual corpus took 0.23 s one call each, 0.02 s
    in one.
    """
    from ._kernels import text as kt

    buf = np.frombuffer(raw, dtype=np.uint8)
    table = _unstable_table()
    if buf.size < _SPLICE_FROM:
        return _nfkc_small(raw, buf, table)

    def pieces(lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        seg = buf[lo:hi]
        room = seg.size // 256 + 1024  # real text: a piece every ~500 bytes; more, and the scan runs again
        while True:
            starts, ends = np.empty(room, dtype=np.int64), np.empty(room, dtype=np.int64)
            count = int(kt.unstable_pieces(seg, table, starts, ends))
            if count <= room:
                return starts[:count] + lo, ends[:count] + lo
            room = count

    found = _in_threads(pieces, _segments(buf))
    starts = np.concatenate([f[0] for f in found])
    ends = np.concatenate([f[1] for f in found])
    if starts.size:
        starts += buf[starts] == 0  # a leading NUL stays outside its piece (see above)
    lo, hi = starts.tolist(), ends.tolist()
    joined = b"\x00".join([raw[a:b] for a, b in zip(lo, hi)]).decode("utf-8", "surrogatepass")
    new = np.frombuffer(unicodedata.normalize("NFKC", joined).encode("utf-8", "surrogatepass"), dtype=np.uint8)
    seps = np.flatnonzero(new == 0)
    assert seps.size == max(starts.size - 1, 0), "NFKC made or removed a NUL"
    new_starts = np.concatenate([[0], seps + 1]).astype(np.int64)
    new_ends = np.concatenate([seps, [new.size]]).astype(np.int64)
    size = buf.size - int((ends - starts).sum()) + int((new_ends - new_starts).sum()) if starts.size else buf.size
    out = np.empty(size, dtype=np.uint8)
    kt.splice_pieces(buf, starts, ends, new, new_starts[:starts.size], new_ends[:starts.size], out)
    return out


#: texts shorter than this (bytes) are normalized piece by piece in Python: one document of a
#: query costs ~25 us so, against ~85 us through the joined call, the threads and the splice kernel
_SPLICE_FROM = 4096


def _nfkc_small(raw: bytes, buf: np.ndarray, table: np.ndarray) -> np.ndarray:
    """:func:`_nfkc_utf8` of a short text: each piece decoded, normalized and spliced in by Python."""
    from ._kernels import text as kt

    room = buf.size + 1  # at most one piece per byte: room enough (the text is short)
    starts, ends = np.empty(room, dtype=np.int64), np.empty(room, dtype=np.int64)
    count = int(kt.unstable_pieces(buf, table, starts, ends))
    out = []
    last = 0
    for a, b in zip(starts[:count].tolist(), ends[:count].tolist()):
        out.append(raw[last:a])
        out.append(unicodedata.normalize("NFKC", raw[a:b].decode("utf-8", "surrogatepass")).encode("utf-8", "surrogatepass"))
        last = b
    out.append(raw[last:])
    return np.frombuffer(bytearray(b"".join(out)), dtype=np.uint8)


def _nfkc_pieces(text: str) -> str:
    """NFKC of ``text`` (which fails the quick check), piece by piece (:func:`_nfkc_utf8`)."""
    return _nfkc_utf8(text.encode("utf-8", "surrogatepass")).tobytes().decode("utf-8", "surrogatepass")


def nfkc(text: str) -> str:
    """``unicodedata.normalize("NFKC", text)``, normalizing only around the characters it can change."""
    if unicodedata.is_normalized("NFKC", text):
        return text
    return _nfkc_pieces(text)


def _normalize_non_ascii(text: str) -> str:
    return _SPACES.sub(" ", nfkc(text).casefold())


def normalize(text: str) -> str:
    """Normalize one document as the kernels see it (NFKC, casefold, Unicode spaces -> ' ').

    ASCII is returned lowercased. Whitespace runs are *not* folded here; the kernels fold them.
    """
    if text.isascii():
        return text.lower()
    return _normalize_non_ascii(text)


def _prepare(text: str) -> str:
    # ASCII documents go through untouched: the kernel lowercases A-Z itself.
    if text.isascii():
        return text
    return _normalize_non_ascii(text)


def _check_str(texts: Sequence, start_index: int) -> None:
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise InputTypeError(
                f"`texts` must hold str; item {start_index + i} is {type(t).__name__} ({t!r:.60}). "
                "Decode bytes first (e.g. b.decode('utf-8', errors='replace')) or pass str(x)."
            )


def code_points(lo: int, hi: int, sep: str = "") -> str:
    """The str of the code points ``lo .. hi - 1`` in order, lone surrogates included, ``sep``
    (one character or none) between them: decoded from UTF-32 in one call, where a join of one
    ``chr`` per code point took ~0.1 s for all of Unicode (the tables below start from it)."""
    cps = np.arange(lo, hi, dtype="<u4")
    if sep:
        spaced = np.full(max(2 * cps.size - 1, 0), ord(sep), dtype="<u4")
        spaced[0::2] = cps
        cps = spaced
    return cps.tobytes().decode("utf-32-le", "surrogatepass")


# Case folding and the space rule on UTF-8 bytes. Every code point with a UTF-8 form of L bytes
# (L = 2, 3, 4) whose casefold (or space rule) is at most L bytes long is rewritten in place,
# padded with NULs that are dropped afterwards; code points whose fold is longer (e.g. U+0130,
# U+0149, U+1F80: a few hundred, none in the common scripts) are folded as str first.
_FOLD_TOP = 0x20000  # no code point at or above changes under casefold (a test checks it)
_fold: list[np.ndarray] = []


def _fold_tables() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(change, bytes, grows, pairs): over code points < _FOLD_TOP, the fold differs from the code
    point; its UTF-8 bytes padded with NUL to 4; it is longer than the code point's own UTF-8 form;
    and over the 65,536 pairs of first two bytes, some sequence starting with them changes."""
    if not _fold:
        top = _FOLD_TOP
        folded = ["\x00"] + code_points(1, top, sep="\x00").casefold().split("\x00")
        for cp in _UNICODE_SPACES:
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


def _grow_tables() -> tuple[np.ndarray, np.ndarray]:
    """(fold, length) over code points < _FOLD_TOP: the UTF-8 bytes of the casefold of each code
    point whose fold is longer than itself (``_fold_tables()[2]``), NUL-padded; its byte count."""
    if not _GROWS:
        grows = _fold_tables()[2]
        folds = {cp: chr(cp).casefold().encode("utf-8") for cp in np.flatnonzero(grows).tolist()}
        width = max(map(len, folds.values()), default=1)
        fold = np.zeros((_FOLD_TOP, width), dtype=np.uint8)
        length = np.zeros(_FOLD_TOP, dtype=np.int64)
        for cp, b in folds.items():
            fold[cp, : len(b)] = np.frombuffer(b, dtype=np.uint8)
            length[cp] = len(b)
        _GROWS.extend((fold, length))
    return _GROWS[0], _GROWS[1]


_COMPACT: list[np.ndarray] = []


def _compact_tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(change, fold, length) over code points < _FOLD_TOP for :func:`_fold_dense`: whether the
    fold (or the space rule) changes the code point, its UTF-8 bytes (NUL-padded to the longest),
    their count. The same folds as :func:`_fold_tables` and :func:`_grow_tables`."""
    if not _COMPACT:
        change, short, grows, _ = _fold_tables()
        grow_fold, grow_len = _grow_tables()
        width = max(4, grow_fold.shape[1])
        fold = np.zeros((_FOLD_TOP, width), dtype=np.uint8)
        fold[:, :4] = short
        length = np.count_nonzero(short, axis=1).astype(np.int64)  # fold bytes are never NUL
        fold[grows, :] = 0
        fold[grows, : grow_fold.shape[1]] = grow_fold[grows]
        length[grows] = grow_len[grows]
        _COMPACT.extend((change, fold, length))
    return _COMPACT[0], _COMPACT[1], _COMPACT[2]


_NO_TABLE = np.zeros(0, dtype=bool)  # no code point opens an NFKC piece: the plain fold
_NO_PIECES = np.zeros(0, dtype=np.int64)


def _fold_pass(raw: np.ndarray, out: np.ndarray, seps: np.ndarray, write: bool) -> tuple[int, int]:
    """The case fold and space rule of UTF-8 ``raw`` into ``out``, the NULs dropped (their output
    positions into ``seps``): :func:`diversify._kernels.text.nfkc_fold_compact` with no NFKC
    pieces. Returns (size, NULs) as that kernel does."""
    from ._kernels.text import nfkc_fold_compact

    change, fold, length = _compact_tables()
    size, nuls, _ = nfkc_fold_compact(raw, _NO_TABLE, change, fold, length, out, seps, _NO_PIECES, _NO_PIECES, write)
    return int(size), int(nuls)


def _fold_dense(raw: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Case-fold the NUL-joined batch ``raw`` of ``n`` documents and drop the NULs, in one kernel
    pass per segment (:func:`_fold_pass`, in threads): (buffer, offsets),
    or None for a cut sequence. For text dense in non-ASCII code points; the same bytes as
    :func:`_fold_bytes` followed by dropping the NULs, and folds that grow too.

    Each segment writes into room for its own size plus a quarter (folds that grow are rare, and
    the NULs and shrinking folds give room back); a segment that needs more is counted, then
    written again into exactly its size.
    """
    def one(lo: int, hi: int) -> tuple[np.ndarray, np.ndarray] | None:
        seg = raw[lo:hi]
        out, seps = np.empty(seg.size + seg.size // 4 + 64, dtype=np.uint8), np.empty(n, dtype=np.int64)
        size, nuls = _fold_pass(seg, out, seps, True)
        if size == -2:  # out of room: count, then write into exactly the room needed
            size, nuls = _fold_pass(seg, out[:0], seps[:0], False)
            out, seps = np.empty(max(size, 0), dtype=np.uint8), np.empty(max(nuls, 0), dtype=np.int64)
            if size >= 0:
                size, nuls = _fold_pass(seg, out, seps, True)
        if size < 0:
            return None
        return out[:size], seps[:nuls]

    segments = _segments(raw)
    parts = _in_threads(one, segments)
    if any(p is None for p in parts):
        return None
    done = [p for p in parts if p is not None]
    sizes = [out.size for out, _ in done]
    if sum(seps.size for _, seps in done) != n - 1:  # a NUL inside a document: not this path
        return None
    base = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    out = done[0][0] if len(done) == 1 else np.concatenate([o for o, _ in done])
    offsets = np.empty(n + 1, dtype=np.int64)
    offsets[0] = 0
    offsets[1:n] = np.concatenate([seps + base[k] for k, (_, seps) in enumerate(done)])
    offsets[n] = out.size
    return _readonly(out), offsets


def _nfkc_fold_dense(raw: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray] | None:
    """NFKC, case fold and the space rule of the NUL-joined batch ``raw`` of ``n`` documents, the
    NULs dropped: (buffer, offsets), or None for a cut sequence or a NUL inside a document. The
    same bytes as :func:`_nfkc_utf8` followed by :func:`_fold_dense`, in one kernel pass per
    segment instead of two passes and a splice over the whole batch.

    The pass (:func:`diversify._kernels.text.nfkc_fold_compact`, in threads) folds every code point
    outside the NFKC pieces (found as :func:`_nfkc_utf8` finds them) and copies the pieces
    unchanged; the pieces of all segments are then normalized in one ``unicodedata.normalize`` call
    over their join by NUL, folded by :func:`_fold_pass` with the same
    tables, and spliced into the output, each segment into its place in the result. Folding a piece
    after NFKC is what the two-pass path does to the same code points.
    """
    from ._kernels.text import join_pieces, nfkc_fold_compact, splice_pieces

    unstable = _unstable_table()
    change, fold, length = _compact_tables()

    def one(lo: int, hi: int):
        seg = raw[lo:hi]
        out, seps = np.empty(seg.size + seg.size // 4 + 64, dtype=np.uint8), np.empty(n, dtype=np.int64)
        room = seg.size // 256 + 1024  # real text: a piece every ~500 bytes; more, and the pass runs again
        ps, pe = np.empty(room, dtype=np.int64), np.empty(room, dtype=np.int64)
        size, nuls, pieces = nfkc_fold_compact(seg, unstable, change, fold, length, out, seps, ps, pe, True)
        if size == -2:  # out of room: count, then write into exactly the room needed
            size, nuls, pieces = nfkc_fold_compact(seg, unstable, change, fold, length, out[:0], seps[:0], ps[:0],
                                                   pe[:0], False)
            if size >= 0:
                out, seps = np.empty(size, dtype=np.uint8), np.empty(nuls, dtype=np.int64)
                ps, pe = np.empty(pieces, dtype=np.int64), np.empty(pieces, dtype=np.int64)
                size, nuls, pieces = nfkc_fold_compact(seg, unstable, change, fold, length, out, seps, ps, pe, True)
        if size < 0:
            return None
        return out[:size], seps[:nuls], ps[:pieces], pe[:pieces]

    parts = _in_threads(one, _segments(raw))
    if any(p is None for p in parts):
        return None
    done = [p for p in parts if p is not None]
    if sum(seps.size for _, seps, _, _ in done) != n - 1:  # a NUL inside a document: not this path
        return None
    npieces = sum(ps.size for _, _, ps, _ in done)
    gathered = np.empty(sum(int((pe - ps).sum()) for _, _, ps, pe in done) + npieces, dtype=np.uint8)
    at = 0
    for out, _, ps, pe in done:
        at = join_pieces(_readonly(out), ps, pe, gathered, at)
    joined = gathered[:-1].tobytes() if npieces else b""  # the last piece's NUL dropped
    nfkc = unicodedata.normalize("NFKC", joined.decode("utf-8", "surrogatepass")).encode("utf-8", "surrogatepass")
    # folded by the same tables and kernel as the rest (ASCII capitals left for the sketch kernel, as
    # the other paths leave them); the NULs between pieces come back as their output positions
    raw_new = _readonly(np.frombuffer(nfkc, dtype=np.uint8))
    new = np.empty(raw_new.size + raw_new.size // 4 + 64, dtype=np.uint8)
    nuls = np.empty(max(npieces - 1, 0), dtype=np.int64)
    size, count = _fold_pass(raw_new, new, nuls, True)
    if size == -2:
        size, count = _fold_pass(raw_new, new[:0], nuls[:0], False)
        new = np.empty(max(size, 0), dtype=np.uint8)
        size, count = _fold_pass(raw_new, new, nuls, True)
    assert size >= 0 and count == nuls.size, "NFKC made or removed a NUL"
    new = new[:size]
    new_starts = np.concatenate([[0], nuls]).astype(np.int64)[:npieces]
    new_ends = np.concatenate([nuls, [new.size]]).astype(np.int64)[:npieces]
    sizes, shifts, first = [], [], 0
    for out, seps, ps, pe in done:
        grow = (new_ends[first:first + ps.size] - new_starts[first:first + ps.size]) - (pe - ps)
        sizes.append(out.size + int(grow.sum()))
        shift = np.concatenate([[0], np.cumsum(grow)]).astype(np.int64)
        shifts.append(seps + shift[np.searchsorted(pe, seps, side="right")])  # pieces ending at or before each NUL
        first += ps.size
    base = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    result = np.empty(int(base[-1]), dtype=np.uint8)
    jobs, first = [], 0
    for k, (out, _, ps, pe) in enumerate(done):
        jobs.append((_readonly(out), ps, pe, new_starts[first:first + ps.size], new_ends[first:first + ps.size],
                     result[base[k]:base[k + 1]]))
        first += ps.size
    _readonly(new)
    _in_threads(lambda o, ps, pe, ns, ne, dst: splice_pieces(o, ps, pe, new, ns, ne, dst), jobs)
    offsets = np.empty(n + 1, dtype=np.int64)
    offsets[0] = 0
    offsets[1:n] = np.concatenate([seps + base[k] for k, seps in enumerate(shifts)])
    offsets[n] = result.size
    return _readonly(result), offsets


#: from this share of non-ASCII code points on (estimated from the character and byte counts), a
#: batch that fails the NFKC quick check takes :func:`_nfkc_fold_dense`
_DENSE_FUSED = 1 / 64


def _code_points(raw: np.ndarray, lead: np.ndarray, width: int) -> np.ndarray:
    """Code points of the ``width``-byte UTF-8 sequences starting at ``lead``."""
    masks = {2: 0x1F, 3: 0x0F, 4: 0x07}
    cp = (raw[lead].astype(np.int64) & masks[width])
    for j in range(1, width):
        cp = (cp << 6) | (raw[lead + j] & 0x3F)
    return cp


#: below this share of lead bytes, the numpy scan of lead bytes beats the kernel's byte-by-byte scan
_SPARSE_LEADS = 1 / 64


def _fold_bytes(raw: np.ndarray) -> bool:
    """Case-fold ``raw`` (UTF-8, writable, mostly ASCII) in place with the tables; False (nothing
    written) when it holds a code point whose fold is longer than itself.

    numpy looks at the lead bytes only, and the first two bytes of each index a 64 KiB table of
    "a sequence starting so may change", which leaves a few candidates (capitals, spaces) to
    decode and rewrite. Text dense in non-ASCII code points (or with a fold that grows) takes
    :func:`_fold_dense` instead.
    """
    change, out, grows, pairs = _fold_tables()
    if raw.size < 2:
        return True
    is_lead = raw[:-1] >= 0xC0
    if not is_lead.any():
        return True
    lead = np.flatnonzero(is_lead)
    at = lead[pairs[(raw[lead].astype(np.uint16) << 8) | raw[lead + 1]]]
    if at.size == 0:
        return True
    first = raw[at]
    plans = []
    for width, lo, hi in ((2, 0xC0, 0xE0), (3, 0xE0, 0xF0), (4, 0xF0, 0x100)):
        w_at = at[(first >= lo) & (first < hi)]
        if w_at.size == 0:
            continue
        if w_at[-1] + width > raw.size:  # a truncated sequence cannot come out of str.encode
            return False
        cp = _code_points(raw, w_at, width)
        inside = cp < _FOLD_TOP
        w_at, cp = w_at[inside], cp[inside]
        hit = change[cp]
        w_at, cp = w_at[hit], cp[hit]
        if grows[cp].any():
            return False
        plans.append((width, w_at, cp))
    for width, w_at, cp in plans:
        for j in range(width):
            raw[w_at + j] = out[cp, j]
    return True


_IS_NFKC = functools.partial(unicodedata.is_normalized, "NFKC")


def _encode_joined(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray] | None:
    """Normalize and encode a batch as one string (documents separated by NUL), or None when a
    document holds a NUL itself (the caller then goes document by document).

    The batch is normalized as one string: NFKC is the same on the joined string as on each
    document, because NUL is a starter that composes with nothing (no composition or reordering
    crosses it); casefold and the space rule map one character at a time, and are applied to the
    UTF-8 bytes through tables built from ``str.casefold`` itself. ASCII letters are left to the
    kernel, which lowercases A-Z.
    """
    n = len(texts)
    # each document encoded on its own, then the bytes joined: 30% faster than encoding the joined
    # str, which is as wide as the widest document's characters (a single CJK document makes every
    # Latin-1 one two bytes per character before it is encoded back to one)
    encoded = b"\x00".join([t.encode("utf-8", "surrogatepass") for t in texts])
    extra = len(encoded) - (n - 1) - sum(map(len, texts))  # UTF-8 bytes beyond one per character
    if len(encoded) >= _SPLICE_FROM and extra / 2 >= _DENSE_FUSED * len(encoded):
        # dense non-ASCII text: NFKC and the fold in one pass (the same bytes as the passes below;
        # a text NFKC leaves alone has no piece it changes), which also counts the NULs (None: a
        # document holds one)
        return _nfkc_fold_dense(_readonly(np.frombuffer(encoded, dtype=np.uint8)), n)
    normalized = all(map(_IS_NFKC, texts))
    if encoded.count(0) != n - 1:  # UTF-8 has a NUL byte only for U+0000
        return None
    if not normalized:
        # NFKC of the joined string is the join of each document's NFKC (see above), normalized only
        # around the characters it can change (see nfkc; NUL is a starter NFKC leaves alone)
        raw = _nfkc_utf8(encoded)
    else:
        raw = np.frombuffer(encoded, dtype=np.uint8)
    sparse = bool(raw.size < 2 or np.count_nonzero(raw[:-1] >= 0xC0) < _SPARSE_LEADS * raw.size)
    if sparse:  # mostly ASCII: fold in place with numpy (below)
        if not raw.flags.writeable:
            raw = raw.copy()
        seps = np.flatnonzero(raw == 0)  # before the fold pads shrinking folds with NULs
        sparse = _fold_bytes(raw)  # False: a fold that grows, and nothing written
    if not sparse:
        # dense non-ASCII text, or a fold that grows: fold and drop the NULs in one kernel pass,
        # into a new buffer (read-only input either way: one kernel specialization)
        return _fold_dense(_readonly(raw.view()), n)
    # drop the separators and the NUL padding of folds that shrank; a document's offset is its start
    # less the NULs before it
    zeros = np.flatnonzero(raw == 0)
    offsets = np.empty(n + 1, dtype=np.int64)
    offsets[0] = 0
    offsets[1:n] = seps - np.searchsorted(zeros, seps)
    offsets[n] = raw.size - zeros.size
    return _readonly(raw[raw != 0] if zeros.size else raw), offsets


def encode_batch(texts: Sequence[str], *, start_index: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Normalize and encode many documents into one UTF-8 buffer plus int64 offsets (n+1)."""
    buf, offsets, _ = encode_batch_scripts(texts, start_index=start_index)
    return buf, offsets


def encode_batch_scripts(texts: Sequence[str], *, start_index: int = 0,
                         into: Callable[[int], np.ndarray] | None = None
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """:func:`encode_batch` and :func:`unspaced_docs` of its result where that came for free: an
    ASCII batch has no document of an unspaced script, and one read from the strings' code units
    is counted while it is written (a pass saved). None where it was not counted.

    ``into(size)``, if given, lends a writable uint8 buffer of at least ``size`` bytes for an
    all-ASCII batch, which is then copied there from the strings' own bytes instead of joined
    into a new str (the result is a read-only view of it, valid while the lender does not lend
    that buffer again). A joined batch of 16,384 documents is ~54 MB of fresh memory each time
    (glibc maps allocations that large afresh); ``diversify.build()`` of 1M documents, whose
    allocator the console script does not tune, spent ~6 s of system time faulting them in.
    """
    n = len(texts)
    try:
        if all(map(str.isascii, texts)):
            offsets = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=n), out=offsets[1:])
            if into is not None and n:
                from . import strview

                out = into(int(offsets[-1]))
                if strview.ascii_into(texts, offsets, out):
                    return _readonly(out[: int(offsets[-1])]), offsets, np.zeros(n, dtype=bool)
            return _ascii_bytes("".join(texts)), offsets, np.zeros(n, dtype=bool)
    except TypeError:
        pass  # a non-str somewhere; found and reported below
    _check_str(texts, start_index)
    from . import strview

    if sum(map(len, texts)) >= strview.FOLD_FROM:
        folded = strview.fold_batch(texts)  # read from the strings' own code units (CPython), not encoded
        if folded is not None:
            return folded
    buf, offsets = _encode_python(texts)
    return buf, offsets, None


def _encode_python(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """:func:`encode_batch` where the strings' code units cannot be read in place: encoded by Python."""
    n = len(texts)
    encoded = _encode_joined(texts)
    if encoded is not None:
        return encoded
    # a document holds a NUL (the batch separator): those documents one by one, the others as a batch
    lone = [i for i, t in enumerate(texts) if "\x00" in t]
    if 0 < len(lone) < n:
        rest = [t for t in texts if "\x00" not in t]
        joined = _encode_joined(rest)
        if joined is not None:
            buf, offs = joined
            pieces: list = [None] * n
            for i in lone:
                pieces[i] = np.frombuffer(_prepare(texts[i]).encode("utf-8", "surrogatepass"), dtype=np.uint8)
            j = 0
            for i in range(n):
                if pieces[i] is None:
                    pieces[i] = buf[offs[j]: offs[j + 1]]
                    j += 1
            offsets = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(np.fromiter((p.size for p in pieces), dtype=np.int64, count=n), out=offsets[1:])
            return _readonly(np.concatenate(pieces)), offsets
    parts = [_prepare(t).encode("utf-8", "surrogatepass") for t in texts]
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, parts), dtype=np.int64, count=n), out=offsets[1:])
    buf = np.frombuffer(b"".join(parts), dtype=np.uint8)  # read-only, as bytes are
    return buf, offsets


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


# Scripts written without spaces between words: Thai, Lao, Myanmar, Khmer, kana, CJK ideographs
_UNSPACED = re.compile("[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff"
                       "\uf900-\ufaff\U00020000-\U0002fa1f]")
_LETTER = re.compile(r"[^\W\d_]")


_tables: list[np.ndarray] = []


def _script_tables() -> tuple[np.ndarray, np.ndarray]:
    """bool tables over every code point: matches ``_UNSPACED``, matches ``_LETTER``.

    Built once per process, the first time a batch holds non-ASCII text (~0.2 s), by running the two
    regexes over the string of all code points, so they agree with the regexes by construction.
    """
    if not _tables:
        every = code_points(0, sys.maxunicode + 1)
        for pattern in (_UNSPACED, _LETTER):
            marked = pattern.sub("\x01", every).encode("utf-32-le", "surrogatepass")
            table = np.frombuffer(marked, dtype=np.uint32) == 1
            table[1] = False  # U+0001 itself is neither
            _tables.append(table)
    return _tables[0], _tables[1]


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
    from ._kernels import text as kt

    unspaced_table, letter_table = _script_tables()
    unspaced = np.empty(todo.size, dtype=np.int64)
    letters = np.empty(todo.size, dtype=np.int64)
    kt.count_scripts(buf, offsets, todo, unspaced_table, letter_table, unspaced, letters)
    out[todo] = (unspaced > 0) & (2 * unspaced >= letters)
    return out


def _subset(buf: np.ndarray, offsets: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The encoded batch of documents ``idx`` only."""
    lens = offsets[idx + 1] - offsets[idx]
    sub = np.zeros(idx.size + 1, dtype=np.int64)
    np.cumsum(lens, out=sub[1:])
    parts = [buf[a:b] for a, b in zip(offsets[idx].tolist(), offsets[idx + 1].tolist())]
    return _readonly(np.concatenate(parts) if parts else buf[:0].copy()), sub


def _ascii_view_of():
    """CPython's ``PyUnicode_AsUTF8AndSize`` through ctypes, or None elsewhere."""
    if sys.implementation.name != "cpython":  # pragma: no cover - other interpreters encode
        return None
    import ctypes

    f = ctypes.pythonapi.PyUnicode_AsUTF8AndSize
    f.argtypes, f.restype = [ctypes.py_object, ctypes.POINTER(ctypes.c_ssize_t)], ctypes.c_void_p
    return f


_AS_UTF8 = _ascii_view_of()


def _ascii_bytes(joined: str) -> np.ndarray:
    """The bytes of an all-ASCII str as a read-only uint8 array, without copying them.

    A compact ASCII str holds its characters as bytes, and ``PyUnicode_AsUTF8AndSize`` (public C
    API) returns them in place; the array keeps the str alive. ``str.encode`` would copy the whole
    batch once more: for 100,000 documents (330 MB) one copy and 80,000 page faults, 0.3-0.4 s of
    the encode stage. Elsewhere than CPython the str is encoded.
    """
    if _AS_UTF8 is None or not joined:
        return np.frombuffer(joined.encode("ascii"), dtype=np.uint8)
    import ctypes

    size = ctypes.c_ssize_t()
    ptr = _AS_UTF8(joined, ctypes.byref(size))
    if not ptr or size.value != len(joined):  # pragma: no cover - an ASCII str's UTF-8 is its characters
        return np.frombuffer(joined.encode("ascii"), dtype=np.uint8)
    holder = (ctypes.c_uint8 * size.value).from_address(ptr)
    holder._str = joined  # type: ignore[attr-defined]  # the bytes live as long as the str
    return _readonly(np.frombuffer(memoryview(holder), dtype=np.uint8))


def _readonly(buf: np.ndarray) -> np.ndarray:
    """``buf`` marked read-only: every buffer the kernels get has the one type Numba compiles
    them for (a writable buffer would be a second specialization, seconds on a fresh install)."""
    buf.flags.writeable = False
    return buf


def _auto_split(buf: np.ndarray, offsets: np.ndarray, config: TextConfig, char_docs: np.ndarray | None = None):
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
        b, o = _subset(buf, offsets, idx)
        out.append((idx, b, o, cfg))
    return out


def _text_rule(config: TextConfig, seed: int) -> TextRule:
    """The kernels' description of ``config`` under ``seed`` (its tables are this module's)."""
    from ._kernels import text as kt

    mode = kt.CHAR if config.shingle == "char" else kt.WORD  # "auto" reaches here per part, as word or char
    return kt.TextRule(mode=mode, k=int(config.k), seed_h=seed_hash(seed), lower=_LOWER, classes=_CLASSES)


def _doc_stats(n: int) -> DocStats:
    from ._kernels import text as kt

    return kt.DocStats(n_shingles=np.empty(n, dtype=np.int64), lengths=np.empty(n, dtype=np.uint32),
                       exact=np.empty(n, dtype=np.uint64))


def shingle_buffer(buf: np.ndarray, offsets: np.ndarray, config: TextConfig, seed: int,
                   char_docs: np.ndarray | None = None) -> Shingles:
    """Shingle an already encoded batch (see :func:`encode_batch`); ``char_docs`` as :func:`_auto_split` takes it."""
    parts = _auto_split(buf, offsets, config, char_docs)
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
    from ._kernels import text as kt

    rule = _text_rule(config, seed)
    stats = _doc_stats(offsets.size - 1)
    kt.scan_docs(buf, offsets, rule, stats)
    indptr = np.zeros(offsets.size, dtype=np.int64)
    np.cumsum(stats.n_shingles, out=indptr[1:])
    hashes = np.empty(int(indptr[-1]), dtype=np.uint64)
    kt.fill_shingles(buf, offsets, rule, indptr, hashes)
    return Shingles(indptr=indptr, hashes=hashes, lengths=stats.lengths, exact=stats.exact)


def sketch_oph_buffer(buf: np.ndarray, offsets: np.ndarray, config: TextConfig, seed: int,
                      num_perm: int, char_docs: np.ndarray | None = None
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Fused path: bytes -> one-permutation MinHash signatures, without materializing shingles.

    Returns (signatures uint32 (n, num_perm), n_shingles int64, lengths uint32, exact uint64).
    Bit-identical to ``minhash_signatures(shingle_buffer(...), method="oph")``. ``char_docs`` as
    :func:`_auto_split` takes it.
    """
    from ._kernels import text as kt

    rule, char_rule, char = _text_rule(config, seed), None, kt.NO_CHAR_DOCS
    if config.shingle == "auto":
        # one call for both kinds of documents, each with its own rule (no batch copied per kind)
        char = unspaced_docs(buf, offsets) if char_docs is None else char_docs
        rule = _text_rule(TextConfig(shingle="word", k=config.k), seed)
        char_rule = _text_rule(TextConfig(shingle="char", k=config.char_k), seed)
        if char.size and char.all():
            rule, char_rule, char = char_rule, None, kt.NO_CHAR_DOCS
        elif not char.any():
            char = kt.NO_CHAR_DOCS
    n = offsets.size - 1
    stats = _doc_stats(n)
    sigs = np.empty((n, num_perm), dtype=np.uint32)
    kt.sketch_oph(buf, offsets, rule, minhash_seed(seed), stats, sigs, char_rule, char)
    return sigs, stats.n_shingles, stats.lengths, stats.exact


def sketch_oph_sets_buffer(buf: np.ndarray, offsets: np.ndarray, config: TextConfig, seed: int, num_perm: int,
                           char_docs: np.ndarray | None = None
                           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`sketch_oph_buffer` and :func:`shingle_sets32` of the same batch in one pass over
    its bytes (the live index stores both): (signatures, n_shingles, lengths, exact, sets indptr,
    sets values), each equal to what those two functions return. ``char_docs`` as
    :func:`_auto_split` takes it."""
    from ._kernels import text as kt

    n = offsets.size - 1
    parts = _auto_split(buf, offsets, config, char_docs)
    if parts is None or len(parts) == 1:
        b, o, c = (buf, offsets, config) if parts is None else parts[0][1:]
        sigs, n_sh, lengths, exact, starts, counts, hashes = _sketch_oph_sets_one(b, o, c, seed, num_perm)
    else:
        sigs = np.empty((n, num_perm), dtype=np.uint32)
        n_sh, lengths, exact = np.empty(n, np.int64), np.empty(n, np.uint32), np.empty(n, np.uint64)
        starts, counts = np.zeros(n, np.int64), np.zeros(n, np.int64)
        chunks, base = [], 0
        for idx, b, o, c in parts:
            sigs[idx], n_sh[idx], lengths[idx], exact[idx], s_, counts[idx], h_ = _sketch_oph_sets_one(b, o, c, seed,
                                                                                                      num_perm)
            starts[idx] = s_ + base
            chunks.append(h_)
            base += h_.size
        hashes = np.concatenate(chunks)
    indptr = np.empty(n + 1, dtype=np.int64)
    values = np.empty(int(counts.sum()), dtype=np.uint32)
    kt.high_halves(starts, counts, hashes, indptr, values)
    return sigs, n_sh, lengths, exact, indptr, values[: int(indptr[-1])]


def _sketch_oph_sets_one(buf: np.ndarray, offsets: np.ndarray, config: TextConfig, seed: int, num_perm: int):
    from ._kernels import text as kt

    n = offsets.size - 1
    rule = _text_rule(config, seed)
    starts = _shingle_room(offsets, rule)
    hashes = np.empty(int(starts[-1]), dtype=np.uint64)
    counts = np.empty(n, dtype=np.int64)
    stats = _doc_stats(n)
    sigs = np.empty((n, num_perm), dtype=np.uint32)
    kt.sketch_oph_sets(buf, offsets, rule, minhash_seed(seed), stats, sigs, starts, hashes, counts)
    return sigs, stats.n_shingles, stats.lengths, stats.exact, starts[:-1], counts, hashes


def _shingle_room(offsets: np.ndarray, rule) -> np.ndarray:
    """int64 (n+1,): where each document's shingles start in a buffer with room for all of them
    (a document of b bytes has at most max(b, 1) shingles by code point, b // 2 + 1 by word: words
    need a separator)."""
    from ._kernels import text as kt

    room = np.maximum(np.diff(offsets), 1) if rule.mode == kt.CHAR else np.diff(offsets) // 2 + 1
    starts = np.zeros(offsets.size, dtype=np.int64)
    np.cumsum(room, out=starts[1:])
    return starts


def sorted_unique_shingles(texts: Sequence[str], config: TextConfig, seed: int,
                           room: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each document's distinct shingle hashes, sorted, in one pass: (starts, counts, hashes).

    Document i's set is ``hashes[starts[i]:starts[i] + counts[i]]``. ``room`` as
    :func:`sorted_unique_of_buffer` takes it.
    """
    buf, offsets = encode_batch(texts)
    return sorted_unique_of_buffer(buf, offsets, config, seed, room)


def sorted_unique_of_buffer(buf: np.ndarray, offsets: np.ndarray, config: TextConfig, seed: int,
                            room: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`sorted_unique_shingles` of an already encoded batch (see :func:`encode_batch`).

    ``room`` (one count per document, optional): each document's shingle count as the sketching
    pass found it (:attr:`diversify.sketches.Sketches.text_shingles`), to size the output to the
    shingles themselves instead of the most a document of its length could have: about 3x less
    fresh memory to fault in, the cost that dominated these calls (see :func:`_sorted_unique_one`).
    """
    parts = _auto_split(buf, offsets, config)
    if parts is not None and len(parts) == 1:
        return _sorted_unique_one(parts[0][1], parts[0][2], parts[0][3], seed, room)
    if parts is not None:
        n = offsets.size - 1
        starts, counts = np.zeros(n, np.int64), np.zeros(n, np.int64)
        chunks, base = [], 0
        for idx, b, o, c in parts:
            s_, c_, h_ = _sorted_unique_one(b, o, c, seed, None if room is None else room[idx])
            starts[idx], counts[idx] = s_ + base, c_
            chunks.append(h_)
            base += h_.size
        return starts, counts, np.concatenate(chunks)
    return _sorted_unique_one(buf, offsets, config, seed, room)


def _sorted_unique_one(buf: np.ndarray, offsets: np.ndarray, config: TextConfig, seed: int,
                       room: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One rule's batch. Output room: ``room`` where given (at least 1 a document), else the most
    shingles a document of its length can have (4 bytes of room a byte of word-shingled text,
    ~3x what it uses): a batch of exact checks at 1M documents was mostly page faults on that
    fresh memory (on a 2-core VM, 60 of 70 us a document), as the same kernel into memory already
    touched ran at 9.5 us. A document that does not fit a given room (a count that is not this
    rule's) takes the bound instead, so the result never depends on ``room``."""
    from ._kernels import text as kt

    n = offsets.size - 1
    rule = _text_rule(config, seed)
    if room is None:
        starts = _shingle_room(offsets, rule)
    else:
        starts = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.maximum(room, 1), out=starts[1:])
    hashes = np.empty(int(starts[-1]), dtype=np.uint64)
    counts = np.empty(n, dtype=np.int64)
    kt.fill_sorted_unique(buf, offsets, rule, starts, hashes, counts)
    short = np.flatnonzero(counts < 0)
    if short.size:  # not this rule's counts: those documents again, each with room for any text of its length
        b, o = _subset(buf, offsets, short)
        s_, c_, h_ = _sorted_unique_one(b, o, config, seed)
        starts[short], counts[short] = s_ + hashes.size, c_
        hashes = np.concatenate([hashes, h_])
    return starts[:-1], counts, hashes


def shingle_sets32(texts: Sequence[str], config: TextConfig, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Each document's distinct shingle hashes cut to their high 32 bits, sorted and distinct, as
    CSR ``(indptr int64 (n+1,), values uint32)``: what the live index stores for exact checks.

    The high bits of sorted 64-bit hashes are already sorted, so only equal neighbours (two
    shingles whose hashes share their high 32 bits, about one pair in 10^4 documents) are merged.
    Jaccard of these sets differs from Jaccard of the 64-bit sets only by such merges.
    """
    from ._kernels import text as kt

    starts, counts, hashes = sorted_unique_shingles(texts, config, seed)
    indptr = np.empty(counts.size + 1, dtype=np.int64)
    values = np.empty(int(counts.sum()), dtype=np.uint32)
    kt.high_halves(starts, counts, hashes, indptr, values)
    return indptr, values[: int(indptr[-1])]


def exact_jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """Exact Jaccard similarity of two shingle sets given as sorted, duplicate-free uint64 arrays.

    Two empty sets count as identical (1.0), as in the builder's exact check. Pass the rows of
    :func:`sorted_unique_shingles` (or ``np.unique`` of a :class:`Shingles` row).
    """
    inter = np.intersect1d(a, b, assume_unique=True).size
    union = a.size + b.size - inter
    return inter / union if union else 1.0


def _check_texts(texts) -> list:
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
    texts = _check_texts(texts)
    buf, offsets = encode_batch(texts)
    return shingle_buffer(buf, offsets, config, seed)


def text_simhash(texts: Sequence[str]) -> np.ndarray:
    """64-bit Charikar SimHash of each document over its words (weight = occurrence count).

    Returns uint64 (n,). Near-identical texts differ in few bits; estimate cosine similarity of
    the word-count vectors with ``cos(pi * hamming / 64)`` (rough: 64 bits is a small sample).
    """

    texts = _check_texts(texts)
    buf, offsets = encode_batch(texts)
    return text_simhash_buffer(buf, offsets)


def text_simhash_buffer(buf: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """:func:`text_simhash` of an already encoded batch (see :func:`encode_batch`): uint64 (n,)."""
    from ._kernels import text as kt

    out = np.empty(offsets.size - 1, dtype=np.uint64)
    kt.fill_unit_simhash(buf, offsets, _LOWER, _CLASSES, out)
    return out
