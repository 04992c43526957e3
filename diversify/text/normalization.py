"""Normalization of the text rule: NFKC, case fold, Unicode spaces (:func:`normalize`).

NFKC piece by piece: a text that fails the quick check is normalized only around the characters
NFKC can change ("unstable": those NFKC maps to something else, the combining marks, and the
characters that compose with a preceding one; :func:`diversify.text.tables.unstable_table`), each
run of them together with the one character before it. That character is a starter NFKC leaves
alone, and no composition or reordering crosses such a starter, so the pieces normalize
independently (a test compares with unicodedata.normalize at every code point). A single ellipsis
or full-width colon makes a whole document fail the quick check, so normalizing whole documents
would be the cost of most real text; the pieces are found by one kernel scan of the UTF-8 bytes
against a code-point table.
"""

from __future__ import annotations

import unicodedata

import numpy as np

from .buffers import in_threads, segments
from .tables import SPACES, unstable_table

__all__ = ["SPLICE_FROM", "nfkc", "nfkc_utf8", "normalize", "prepare"]


def nfkc_utf8(raw: bytes) -> np.ndarray:
    """NFKC of the UTF-8 text ``raw`` (surrogates allowed), as a new writable uint8 array: each
    piece that :func:`diversify._kernels.utf8.unstable_pieces` finds is normalized and spliced in;
    the bytes between pieces are kept as they are.

    The pieces are normalized in one ``unicodedata.normalize`` call over their join by NUL. NUL is a
    starter that composes with nothing, so no decomposition, reordering or composition crosses it,
    and NFKC neither makes nor removes one: the normalized join splits back at its NULs into the
    normalized pieces. (A piece can hold a NUL only as its first byte, the document separator before
    a document that starts with a mark; that NUL is left out of the piece, which changes nothing
    for the same reason.) One call for the batch is far cheaper than one a piece (docs/building.md).
    """
    from .._kernels import utf8 as ku

    buf = np.frombuffer(raw, dtype=np.uint8)
    table = unstable_table()
    if buf.size < SPLICE_FROM:
        return _nfkc_small(raw, buf, table)

    def pieces(lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        seg = buf[lo:hi]
        room = seg.size // 256 + 1024  # real text: a piece every ~500 bytes; more, and the scan runs again
        while True:
            starts, ends = np.empty(room, dtype=np.int64), np.empty(room, dtype=np.int64)
            count = int(ku.unstable_pieces(seg, table, starts, ends))
            if count <= room:
                return starts[:count] + lo, ends[:count] + lo
            room = count

    found = in_threads(pieces, segments(buf))
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
    ku.splice_pieces(buf, starts, ends, new, new_starts[:starts.size], new_ends[:starts.size], out)
    return out


#: texts shorter than this (bytes) are normalized piece by piece in Python: for one document of a
#: query that is cheaper than the joined call, the threads and the splice kernel
SPLICE_FROM = 4096


def _nfkc_small(raw: bytes, buf: np.ndarray, table: np.ndarray) -> np.ndarray:
    """:func:`nfkc_utf8` of a short text: each piece decoded, normalized and spliced in by Python."""
    from .._kernels import utf8 as ku

    room = buf.size + 1  # at most one piece per byte: room enough (the text is short)
    starts, ends = np.empty(room, dtype=np.int64), np.empty(room, dtype=np.int64)
    count = int(ku.unstable_pieces(buf, table, starts, ends))
    out = []
    last = 0
    for a, b in zip(starts[:count].tolist(), ends[:count].tolist()):
        out.append(raw[last:a])
        out.append(unicodedata.normalize("NFKC", raw[a:b].decode("utf-8", "surrogatepass")).encode("utf-8", "surrogatepass"))
        last = b
    out.append(raw[last:])
    return np.frombuffer(bytearray(b"".join(out)), dtype=np.uint8)


def _nfkc_pieces(text: str) -> str:
    """NFKC of ``text`` (which fails the quick check), piece by piece (:func:`nfkc_utf8`)."""
    return nfkc_utf8(text.encode("utf-8", "surrogatepass")).tobytes().decode("utf-8", "surrogatepass")


def nfkc(text: str) -> str:
    """``unicodedata.normalize("NFKC", text)``, normalizing only around the characters it can change."""
    if unicodedata.is_normalized("NFKC", text):
        return text
    return _nfkc_pieces(text)


def _normalize_non_ascii(text: str) -> str:
    return SPACES.sub(" ", nfkc(text).casefold())


def normalize(text: str) -> str:
    """Normalize one document as the kernels see it (NFKC, casefold, Unicode spaces -> ' ').

    ASCII is returned lowercased. Whitespace runs are *not* folded here; the kernels fold them.
    """
    if text.isascii():
        return text.lower()
    return _normalize_non_ascii(text)


def prepare(text: str) -> str:
    # ASCII documents go through untouched: the kernel lowercases A-Z itself.
    if text.isascii():
        return text
    return _normalize_non_ascii(text)
