"""The CPython-string fast path: a batch read from the strings' own memory, not encoded by Python.

Everything of the text rule that reads a ``str`` object's memory lives here, behind checks that
fall back to ordinary encoding:

- :func:`ascii_bytes`: the bytes of an all-ASCII ``str`` in place (``PyUnicode_AsUTF8AndSize``);
- :func:`ascii_into`: an all-ASCII batch copied from its strings into a lent buffer;
- :func:`fold_batch`: a non-ASCII batch normalized from its strings' code units.

CPython stores a compact ``str`` as one array of fixed-width code units right after the object's
header (PEP 393), and the header's state word says the width. :func:`fold_batch` finds each
document's units that way and hands their addresses to the two passes of
:mod:`diversify._kernels.strings`, which fold, NFKC-normalize (around the characters NFKC can
change, in one ``unicodedata.normalize`` call for the batch) and write UTF-8 straight into the
batch buffer. The result is the bytes :func:`diversify.text.encode_batch` gives by its other paths
(tests compare them on every kind of string); what it saves is the Python ``str.encode`` of the
batch and the UTF-8 decoding in the fold (docs/building.md, "Text: normalization, words, shingles").

Where the layout cannot be confirmed (another interpreter, a header that does not read as
expected on probe strings), :func:`fold_batch` returns None and the caller encodes as before. A
string that is not compact (possible only through deprecated C APIs before Python 3.12) is
encoded to UTF-32 and read from that copy. Every address read lies inside a live ``str`` of the
batch (or the copy), which this module holds references to for the duration of the call.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import numpy as np

from .buffers import in_threads, readonly
from .fold import nfkc_fold_pieces
from .tables import FOLD_TOP, UNSTABLE_TOP, code_points, compact_tables, script_tables, unstable_table

__all__ = ["FOLD_FROM", "ascii_bytes", "ascii_into", "fold_batch"]

#: batches of fewer characters are encoded by Python (diversify.text.encode): below that the fixed
#: cost here is more than the encoding saves (docs/building.md)
FOLD_FROM = 2048
#: batches smaller than this (units) are folded in one piece, without threads
_THREADS_FROM = 1 << 20

_LAYOUT: list = []


def _probe_layout() -> tuple[int, int, int] | None:
    """(state word offset, units offset of an ASCII str, units offset of other compact strs), or None
    when CPython's compact layout does not read back exactly on strings of every kind."""
    if sys.implementation.name != "cpython":  # pragma: no cover - other interpreters encode
        return None
    import ctypes

    from .._kernels.strings import KIND_ASCII, str_layouts

    state_at = object.__basicsize__ + 2 * ctypes.sizeof(ctypes.c_ssize_t)  # after length and hash
    ascii_header = sys.getsizeof("") - 1
    compact_header = sys.getsizeof("\xe9") - 2
    if {sys.getsizeof("\u0100") - 4, sys.getsizeof("\U00010000") - 8} != {compact_header}:
        return None  # pragma: no cover - every compact kind has the one header
    # strings made at run time (not constants of this module), of every kind, with a lone surrogate
    samples = ["".join(map(chr, cps)) for cps in ([104, 105, 33] * 5, [104, 233, 0] * 5, [104, 0x100, 0xD800] * 5,
                                                  [104, 0x1F600, 0xDFFF] * 5)]
    ids = np.array([id(s) for s in samples], dtype=np.uint64).view(np.int64)
    addrs = np.zeros(len(samples), dtype=np.int64)
    kinds = np.zeros(len(samples), dtype=np.uint8)
    str_layouts(ids, np.int64(state_at), np.int64(ascii_header), np.int64(compact_header), addrs, kinds)
    codecs = {KIND_ASCII: "latin-1", 1: "latin-1", 2: "utf-16-le", 4: "utf-32-le"}
    for s, want, addr, kind in zip(samples, (KIND_ASCII, 1, 2, 4), addrs.tolist(), kinds.tolist()):
        if kind != want:
            return None  # pragma: no cover - a layout this module does not know
        width = 1 if kind == KIND_ASCII else kind
        if ctypes.string_at(addr, len(s) * width) != s.encode(codecs[kind], "surrogatepass"):
            return None  # pragma: no cover
    return state_at, ascii_header, compact_header


def _layout() -> tuple[int, int, int] | None:
    if not _LAYOUT:
        _LAYOUT.append(_probe_layout())
    return _LAYOUT[0]


_TABLES: list = []


def _tables() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(scan table, packed output bytes, fold table, script counts) of
    :mod:`diversify._kernels.strings`, from the tables of :mod:`diversify.text.tables` (the same NFKC and
    fold rule, and the same script rule, as its other paths)."""
    if not _TABLES:
        from .._kernels.strings import CHANGE, LENGTH, LONG, UNSTABLE

        change, fold, length = compact_tables()
        assert int(length.max()) <= LENGTH, "a fold longer than the scan table's length bits"
        cps = np.arange(UNSTABLE_TOP)
        own = np.where(cps < 0x80, 1, np.where(cps < 0x800, 2, np.where(cps < 0x10000, 3, 4)))
        table = own.astype(np.uint8)
        table[:FOLD_TOP][change] = length[change].astype(np.uint8) | CHANGE
        table[unstable_table()] |= UNSTABLE
        # each code point's output bytes, little-endian in a uint32: its fold where that is at most
        # four bytes (longer ones are marked LONG), else its own UTF-8 (surrogates as surrogatepass),
        # cut from Python's own encoding of every code point in a row
        utf8 = np.frombuffer(code_points(0, UNSTABLE_TOP).encode("utf-8", "surrogatepass"), dtype=np.uint8)
        starts = np.cumsum(own) - own
        own_bytes = np.zeros((UNSTABLE_TOP, 4), dtype=np.uint8)
        for k in range(4):
            has = own > k
            own_bytes[has, k] = utf8[starts[has] + k]
        long = np.zeros(UNSTABLE_TOP, dtype=bool)
        long[:FOLD_TOP] = change & (length > 4)
        short = np.zeros(UNSTABLE_TOP, dtype=bool)
        short[:FOLD_TOP] = change & (length <= 4)
        own_bytes[short] = fold[short[:FOLD_TOP], :4]
        table[long] |= LONG
        packed = own_bytes.view("<u4").reshape(-1).copy()
        # per code point, the letters (low nibble) and code points of unspaced scripts (high nibble)
        # of its output: its own, or those of its fold
        unspaced_all, letter_all = script_tables()
        script = (letter_all[:UNSTABLE_TOP].astype(np.uint8) | (unspaced_all[:UNSTABLE_TOP].astype(np.uint8) << 4))
        for cp in np.flatnonzero(change).tolist():
            out_cps = [ord(c) for c in fold[cp, : length[cp]].tobytes().decode("utf-8", "surrogatepass")]
            script[cp] = sum(map(letter_all.__getitem__, out_cps)) | (sum(map(unspaced_all.__getitem__, out_cps)) << 4)
        for t in (table, packed, script):
            t.flags.writeable = False
        _TABLES.extend((table, packed, fold, script))
    return _TABLES[0], _TABLES[1], _TABLES[2], _TABLES[3]


def _ranges(weights: np.ndarray, parts: int) -> list[tuple[int, int]]:
    """``(lo, hi)`` document ranges, in order, of about equal total ``weights``."""
    n = weights.size
    if parts <= 1 or n <= 1:
        return [(0, n)]
    ends = np.cumsum(weights)
    cuts = np.searchsorted(ends, ends[-1] * np.arange(1, parts) / parts, side="right")
    bounds = sorted({0, n, *(int(c) for c in cuts)})
    return list(zip(bounds[:-1], bounds[1:]))


def _units_of(texts: Sequence[str]) -> tuple[tuple, np.ndarray, np.ndarray] | None:
    """(our own references to ``texts``, the address of each one's code units (int64), their kind
    (uint8, ``KIND_*`` of :mod:`diversify._kernels.strings`)), or None where the layout is unknown
    or a document is not an exact ``str``. The caller holds the tuple while kernels read the
    addresses: the caller's list could change under another thread meanwhile, and a str it
    dropped would be freed under them."""
    layout = _layout()
    held = tuple(texts)
    if layout is None or set(map(type, held)) - {str}:
        return None
    from .._kernels import strings as ks

    n = len(held)
    ids = np.fromiter(map(id, held), dtype=np.uint64, count=n).view(np.int64)
    addrs = np.zeros(n, dtype=np.int64)
    kinds = np.zeros(n, dtype=np.uint8)
    state_at, ascii_header, compact_header = layout
    ks.str_layouts(ids, np.int64(state_at), np.int64(ascii_header), np.int64(compact_header), addrs, kinds)
    return held, addrs, kinds


def ascii_into(texts: Sequence[str], offsets: np.ndarray, out: np.ndarray) -> bool:
    """Write the all-ASCII batch ``texts`` (``offsets`` as :func:`diversify.text.encode_batch`
    gives them) into ``out`` (uint8, writable, at least ``offsets[-1]`` long), read from the
    strings' own bytes; False (``out`` unspecified) where the layout is unknown or a document is
    not an exact, compact ASCII ``str``: the caller joins them then."""
    units = _units_of(texts) if out.size >= int(offsets[-1]) else None
    if units is None:
        return False
    from .._kernels import strings as ks

    _held, addrs, kinds = units  # the strings' references, held until the copy is done
    if (kinds != ks.KIND_ASCII).any():
        return False
    ks.copy_ascii(addrs, offsets, out)
    return True


def fold_batch(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``encode_batch(texts)`` for a batch of exact ``str`` documents (some not ASCII), read from
    their code units: (read-only UTF-8 buffer, int64 offsets, :func:`diversify.text.unspaced_docs`
    of them, counted as they are written), or None where the layout is unknown or a document is a
    ``str`` subclass (the caller encodes then).

    A first kernel pass (:func:`_scan`) sizes each document and gathers the NFKC pieces; the
    pieces are normalized together (:func:`_normalize_pieces`); a second pass writes every
    document's bytes with the normalized pieces spliced in."""
    units = _units_of(texts)
    if units is None:
        return None
    texts, addrs, kinds = units  # our own references, held while the kernels read the strings
    from .._kernels import strings as ks
    from .._kernels._runtime import thread_count

    n = len(texts)
    lens = np.fromiter(map(len, texts), dtype=np.int64, count=n)
    held = _copy_unknown(texts, lens, addrs, kinds)  # the UTF-32 copy of documents that are not compact strings
    table, packed, fold, script = _tables()
    width = np.where(kinds == ks.KIND_ASCII, 1, kinds).astype(np.int64)
    weight = lens * width
    ranges = _ranges(weight, thread_count() if int(weight.sum()) >= _THREADS_FROM else 1)
    sizes = np.zeros(n, dtype=np.int64)
    found = in_threads(lambda lo, hi: _scan(addrs, kinds, lens, lo, hi, table, sizes), ranges)
    piece_doc = np.concatenate([f[0] for f in found])
    piece_lo = np.concatenate([f[1] for f in found])
    piece_hi = np.concatenate([f[2] for f in found])
    new, new_starts, new_ends, piece_unspaced, piece_letters = _normalize_pieces(found, piece_doc.size)
    np.add.at(sizes, piece_doc, new_ends - new_starts)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    out = np.empty(int(offsets[-1]), dtype=np.uint8)
    firsts = np.concatenate([[0], np.cumsum([f[0].size for f in found])]).tolist()
    unspaced_all, letter_all = script_tables()
    unspaced, letters = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    in_threads(lambda lo, hi, p: ks.fold_write(addrs, kinds, lens, lo, hi, table, packed, fold, script, unspaced_all,
                                               letter_all, offsets, piece_doc, piece_lo, piece_hi, np.int64(p), new,
                                               new_starts, new_ends, out, unspaced, letters),
               [(lo, hi, firsts[k]) for k, (lo, hi) in enumerate(ranges)])
    del held  # the kernels are done with the copy
    np.add.at(unspaced, piece_doc, piece_unspaced)
    np.add.at(letters, piece_doc, piece_letters)
    char = (unspaced > 0) & (2 * unspaced >= letters)  # the rule of text.unspaced_docs
    return readonly(out), offsets, char


def _copy_unknown(texts: tuple, lens: np.ndarray, addrs: np.ndarray, kinds: np.ndarray) -> np.ndarray | None:
    """The documents whose kind is unknown (not compact strings) encoded to UTF-32 in one array,
    which ``addrs`` and ``kinds`` then point at (as UCS-4); None when there are none. The caller
    holds the array while kernels read it."""
    from .._kernels import strings as ks

    unknown = np.flatnonzero(kinds == ks.KIND_UNKNOWN)
    if not unknown.size:
        return None
    held = np.frombuffer(b"".join([texts[i].encode("utf-32-le", "surrogatepass") for i in unknown.tolist()]),
                         dtype=np.uint32)
    starts = np.concatenate([[0], np.cumsum(lens[unknown])[:-1]]).astype(np.int64)
    addrs[unknown] = held.ctypes.data + 4 * starts
    kinds[unknown] = ks.KIND_UCS4
    return held


def _scan(addrs: np.ndarray, kinds: np.ndarray, lens: np.ndarray, lo: int, hi: int, table: np.ndarray,
          sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The first pass over documents ``lo .. hi - 1``: their output sizes into ``sizes`` (the NFKC
    pieces left out) and their pieces: (document, first unit, end unit, the pieces' UTF-8 bytes,
    each followed by a NUL)."""
    from .._kernels import strings as ks

    units = int(lens[lo:hi].sum())
    room, buf_room = units // 256 + 256, units // 64 + 4096  # real text: a piece every ~500 bytes
    while True:
        pd, pl, ph = (np.empty(room, dtype=np.int64) for _ in range(3))
        pb = np.empty(buf_room, dtype=np.uint8)
        count, used = ks.fold_scan(addrs, kinds, lens, lo, hi, table, sizes, pd, pl, ph, pb)
        if count <= room and used <= buf_room:
            return pd[:count], pl[:count], ph[:count], pb[:used]
        room, buf_room = max(room, int(count)), max(buf_room, int(used))


def _normalize_pieces(found: list, pieces: int
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The NFKC pieces :func:`_scan` found, normalized and folded together
    (:func:`diversify.text.fold.nfkc_fold_pieces`): (their bytes, start and end of each piece in
    them, the letters of unspaced scripts and all letters of each piece, counted as the writer
    counts the rest)."""
    empty = np.zeros(0, dtype=np.int64)
    if not pieces:
        return np.zeros(0, dtype=np.uint8), empty, empty, empty, empty
    from .._kernels.utf8 import count_scripts

    joined = b"".join([f[3].tobytes() for f in found])[:-1]
    new, new_starts, new_ends = nfkc_fold_pieces(joined, pieces)
    size = new.size
    piece_unspaced, piece_letters = np.empty(pieces, dtype=np.int64), np.empty(pieces, dtype=np.int64)
    count_scripts(new, np.append(new_starts, size), np.arange(pieces, dtype=np.int64), *script_tables(),
                  piece_unspaced, piece_letters)
    return new, new_starts, new_ends, piece_unspaced, piece_letters


def _ascii_view_of():
    """CPython's ``PyUnicode_AsUTF8AndSize`` through ctypes, or None elsewhere."""
    if sys.implementation.name != "cpython":  # pragma: no cover - other interpreters encode
        return None
    import ctypes

    f = ctypes.pythonapi.PyUnicode_AsUTF8AndSize
    f.argtypes, f.restype = [ctypes.py_object, ctypes.POINTER(ctypes.c_ssize_t)], ctypes.c_void_p
    return f


_AS_UTF8 = _ascii_view_of()


def ascii_bytes(joined: str) -> np.ndarray:
    """The bytes of an all-ASCII str as a read-only uint8 array, without copying them.

    A compact ASCII str holds its characters as bytes, and ``PyUnicode_AsUTF8AndSize`` (public C
    API) returns them in place; the array keeps the str alive. ``str.encode`` would copy the whole
    batch once more, with a page fault a page of the copy. Elsewhere than CPython the str is encoded.
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
    return readonly(np.frombuffer(memoryview(holder), dtype=np.uint8))
