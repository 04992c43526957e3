"""Normalization kernels that read Python strings where they are, without encoding them first.

A CPython ``str`` keeps its characters as one array of fixed-width code units (PEP 393): one byte
each when every character is below U+0100, two below U+10000, four otherwise; a lone surrogate is
one unit like any other character. :mod:`diversify.text.strview` finds each document's array and its
width; the kernels here take those addresses and read the code points directly, so a non-ASCII
batch is never encoded to UTF-8 by Python and then decoded again by the fold.

The rule is the one of :func:`diversify.text.fold.nfkc_fold_dense` (NFKC only around the characters it
can change, case fold and the space rule by tables, ASCII capitals left for the sketch kernel), in
two passes over each document's units:

1. :func:`fold_scan` sizes each document's output outside its NFKC pieces and writes the pieces
   themselves as UTF-8, each followed by a NUL, for one ``unicodedata.normalize`` call;
2. :func:`fold_write` writes each document's UTF-8 into its place in the batch buffer, the
   normalized and folded pieces spliced in.

Both run over a range of documents and release the GIL, so the caller runs ranges in threads.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from numba.core import types
from numba.extending import intrinsic

from ._common import kernel

_config: Any = numba.config  # DISABLE_JIT, which numba's stubs do not declare

#: bits of the scan table (uint8 per code point below its size): the output length outside a piece
#: (the fold's UTF-8 length where the fold or the space rule changes the code point, else its own)
LENGTH = 0x0F
#: the code point is one NFKC can change (or one that composes with the one before it)
UNSTABLE = 0x10
#: the fold (or the space rule) changes the code point
CHANGE = 0x20
#: ... into more than four bytes: the writer takes them from the fold table
LONG = 0x40

#: unit kinds of a document, as :func:`str_layouts` writes them
KIND_UNKNOWN = 0  # not a compact str: the caller encodes it (UTF-32) and sets kind 4
KIND_LATIN1 = 1
KIND_UCS2 = 2
KIND_UCS4 = 4
KIND_ASCII = 9  # one byte per unit, every one below 0x80


def _pointer_to(unit):
    """A function from an address to a pointer to ``unit`` values, for ``numba.carray``: an LLVM
    ``inttoptr`` in compiled code; a ctypes pointer where the kernels run as Python
    (``NUMBA_DISABLE_JIT=1``, the line-coverage run), which ``numba.carray`` takes there too."""
    if _config.DISABLE_JIT:
        import ctypes

        ctype = {types.uint8: ctypes.c_uint8, types.uint16: ctypes.c_uint16, types.uint32: ctypes.c_uint32}[unit]

        def as_ctypes_pointer(address):
            return ctypes.cast(int(address), ctypes.POINTER(ctype))

        return as_ctypes_pointer
    ptr_type = types.CPointer(unit)

    @intrinsic
    def as_pointer(typingctx, address):
        if not isinstance(address, types.Integer):
            return None

        def codegen(context, builder, signature, args):
            return builder.inttoptr(args[0], context.get_value_type(ptr_type))

        return ptr_type(types.int64), codegen

    return as_pointer


_u8_at = _pointer_to(types.uint8)
_u16_at = _pointer_to(types.uint16)
_u32_at = _pointer_to(types.uint32)


@kernel
def str_layouts(ids, state_at, ascii_header, compact_header, addrs, kinds):
    """For each object address ``ids[d]`` of an exact ``str``: where its code units start and their
    kind (``KIND_*``), read from the object's state word at ``ids[d] + state_at`` (bits 2-4 the
    kind, bit 5 compact, bit 6 ASCII; the caller checked the layout on strings of every kind).
    A string that is not compact (its units live elsewhere) gets ``KIND_UNKNOWN``."""
    for d in range(ids.size):
        state = numba.carray(_u32_at(ids[d] + state_at), 1)[0]
        kind = (state >> 2) & 7
        if (state >> 5) & 1 == 0 or not (kind == 1 or kind == 2 or kind == 4):
            kinds[d] = KIND_UNKNOWN
            continue
        if (state >> 6) & 1:
            addrs[d] = ids[d] + ascii_header
            kinds[d] = KIND_ASCII
        else:
            addrs[d] = ids[d] + compact_header
            kinds[d] = kind


@kernel
def copy_ascii(addrs, offsets, out):
    """Copy each ASCII document's units (one byte each, at ``addrs[d]``) to
    ``out[offsets[d]:offsets[d + 1]]``: the batch's bytes without joining its strings."""
    for d in range(addrs.size):
        lo = offsets[d]
        n = offsets[d + 1] - lo
        out[lo: lo + n] = numba.carray(_u8_at(addrs[d]), n)  # a slice copy: faster than a loop of byte stores


@kernel(inline="always")
def _put_utf8(out, w, cp):
    """Write code point ``cp`` (surrogates too, as ``surrogatepass`` does) as UTF-8 at ``out[w]``;
    returns the position after it."""
    if cp < 0x80:
        out[w] = cp
        return w + 1
    if cp < 0x800:
        out[w] = 0xC0 | (cp >> 6)
        out[w + 1] = 0x80 | (cp & 0x3F)
        return w + 2
    if cp < 0x10000:
        out[w] = 0xE0 | (cp >> 12)
        out[w + 1] = 0x80 | ((cp >> 6) & 0x3F)
        out[w + 2] = 0x80 | (cp & 0x3F)
        return w + 3
    out[w] = 0xF0 | (cp >> 18)
    out[w + 1] = 0x80 | ((cp >> 12) & 0x3F)
    out[w + 2] = 0x80 | ((cp >> 6) & 0x3F)
    out[w + 3] = 0x80 | (cp & 0x3F)
    return w + 4


@kernel(inline="always")
def _scan_units(units, d, table, piece_doc, piece_lo, piece_hi, piece_buf, p, at):
    """:func:`fold_scan` of one document's code units: (output bytes outside pieces, pieces, piece
    bytes written so far)."""
    top = table.size
    size = np.int64(0)  # int64, not the table's uint8, also where the kernels run as Python
    prev = -1  # unit index of the code point before i (-1: none, or a NUL)
    prev_len = np.int64(0)  # its output length outside a piece
    run = -1  # first unit of the open piece (-1: none)
    n = units.size
    for i in range(n):
        cp = np.int64(units[i])
        t = table[cp] if cp < top else np.uint8(4)
        if t & UNSTABLE:
            if run < 0:
                if prev >= 0:
                    run = prev
                    size -= prev_len
                else:
                    run = i
        else:
            if run >= 0:
                p, at = _close(units, d, run, i, piece_doc, piece_lo, piece_hi, piece_buf, p, at)
                run = -1
            size += np.int64(t & LENGTH)
        prev = i if cp != 0 else -1
        prev_len = np.int64(t & LENGTH)
    if run >= 0:
        p, at = _close(units, d, run, n, piece_doc, piece_lo, piece_hi, piece_buf, p, at)
    return size, p, at


@kernel(inline="always")
def _close(units, d, lo, hi, piece_doc, piece_lo, piece_hi, piece_buf, p, at):
    """Record piece ``p`` (units ``lo:hi`` of document ``d``), and its UTF-8 plus a NUL at
    ``piece_buf[at]`` when it surely fits (4 bytes a unit); returns (p + 1, where the next piece
    goes). A piece that does not fit counts its 4 bytes a unit, which takes the position past the
    end of ``piece_buf`` for good: nothing more is written, and the caller's rerun with that much
    room fits every piece."""
    if p < piece_doc.size:
        piece_doc[p] = d
        piece_lo[p] = lo
        piece_hi[p] = hi
    room = 4 * (hi - lo) + 1
    if at + room > piece_buf.size:
        return p + 1, at + room
    w = at
    for i in range(lo, hi):
        w = _put_utf8(piece_buf, w, np.int64(units[i]))
    piece_buf[w] = 0
    return p + 1, w + 1


@kernel
def fold_scan(addrs, kinds, lens, lo, hi, table, sizes, piece_doc, piece_lo, piece_hi, piece_buf):
    """Documents ``lo .. hi``: ``sizes[d]`` = the UTF-8 bytes of document ``d`` outside its NFKC
    pieces, after the fold; each piece (a maximal run of code points marked ``UNSTABLE`` in
    ``table``, with the code point before it unless that is a NUL or the run starts the document)
    goes to ``piece_doc/piece_lo/piece_hi`` (its document and unit range) and its UTF-8, followed by
    a NUL, to ``piece_buf``, while there is room. Returns (pieces, piece bytes): the caller runs
    the range again with room for them when they exceed the arrays.

    ``table``: uint8 per code point below its size (``LENGTH | UNSTABLE | CHANGE`` bits); code
    points at or above it are stable and unchanged (4 bytes). An ASCII document has no piece and
    is its own length.
    """
    p = 0
    at = 0
    for d in range(lo, hi):
        kind = kinds[d]
        n = lens[d]
        if kind == KIND_ASCII:
            sizes[d] = n
            continue
        if kind == KIND_LATIN1:
            size, p, at = _scan_units(numba.carray(_u8_at(addrs[d]), n), d, table, piece_doc, piece_lo, piece_hi,
                                      piece_buf, p, at)
        elif kind == KIND_UCS2:
            size, p, at = _scan_units(numba.carray(_u16_at(addrs[d]), n), d, table, piece_doc, piece_lo, piece_hi,
                                      piece_buf, p, at)
        else:
            size, p, at = _scan_units(numba.carray(_u32_at(addrs[d]), n), d, table, piece_doc, piece_lo, piece_hi,
                                      piece_buf, p, at)
        sizes[d] = size
    return p, at


@kernel(inline="always")
def _write_units(units, w, end, stop_at, i, table, packed, fold, script, unspaced_all, letter_all, out, tally):
    """Fold and write units ``i .. stop_at`` (none in a piece) at ``out[w]``, the document's output
    ending at ``end``; returns the position after them.

    Each code point's output (its fold, or its own UTF-8) is ``packed[cp]``'s low ``table[cp] &
    LENGTH`` bytes, stored as four bytes whatever the length while four fit before ``end``: the
    bytes past the length are overwritten by what comes next, and no branch depends on the text.
    Folds longer than four bytes (``LONG``) come from ``fold``.

    ``tally`` gains the letters of the output plus 2**32 times its code points of scripts written
    without spaces: ``script[cp]`` holds the two counts of code point ``cp``'s output (low and
    high nibble); code points at or above the table's size are looked up in ``letter_all`` and
    ``unspaced_all`` (bool over every code point).
    """
    top = table.size
    for j in range(i, stop_at):
        cp = np.int64(units[j])
        if cp >= top:
            w = _put_utf8(out, w, cp)
            tally += np.int64(letter_all[cp]) + (np.int64(unspaced_all[cp]) << 32)
            continue
        sc = np.int64(script[cp])
        tally += (sc & 15) + ((sc >> 4) << 32)
        t = table[cp]
        if t & LONG:
            for b in range(t & LENGTH):
                out[w + b] = fold[cp, b]
            w += t & LENGTH
            continue
        e = packed[cp]
        if w + 4 <= end:
            out[w] = e & 0xFF
            out[w + 1] = (e >> 8) & 0xFF
            out[w + 2] = (e >> 16) & 0xFF
            out[w + 3] = e >> 24
        else:
            for b in range(t & LENGTH):
                out[w + b] = (e >> (8 * b)) & 0xFF
        w += t & LENGTH
    return w, tally


@kernel(inline="always")
def _write_doc(units, d, w, end, p, table, packed, fold, script, unspaced_all, letter_all, piece_doc, piece_lo,
               piece_hi, new, new_starts, new_ends, out):
    """:func:`fold_write` of one document: (output position after it, next piece, its tally)."""
    n = units.size
    i = 0
    tally = np.int64(0)
    while i < n:
        if p < piece_doc.size and piece_doc[p] == d:
            stop_at = piece_lo[p]
        else:
            stop_at = n
        w, tally = _write_units(units, w, end, stop_at, i, table, packed, fold, script, unspaced_all, letter_all, out,
                                 tally)
        i = stop_at
        if i < n:
            for k in range(new_starts[p], new_ends[p]):
                out[w] = new[k]
                w += 1
            i = piece_hi[p]
            p += 1
    return w, p, tally


@kernel
def fold_write(addrs, kinds, lens, lo, hi, table, packed, fold, script, unspaced_all, letter_all, offsets, piece_doc,
               piece_lo, piece_hi, p, new, new_starts, new_ends, out, unspaced, letters):
    """Documents ``lo .. hi``: write each one's folded UTF-8 at ``out[offsets[d]:offsets[d + 1]]``
    (sized by the caller from :func:`fold_scan`), piece ``k`` (from ``p``, the first piece of the
    range, on) replaced by ``new[new_starts[k]:new_ends[k]]``. ``packed[cp]``: the output bytes of
    code point ``cp`` (little-endian, ``table[cp] & LENGTH`` of them); ``fold[cp]``: those of the
    folds marked ``LONG``. ``unspaced[d]`` and ``letters[d]`` get the counts of
    :func:`diversify._kernels.utf8.count_scripts` over the output outside the pieces (see
    :func:`_write_units`)."""
    for d in range(lo, hi):
        kind = kinds[d]
        n = lens[d]
        w = offsets[d]
        end = offsets[d + 1]
        tally = np.int64(0)
        if kind == KIND_ASCII:
            units8 = numba.carray(_u8_at(addrs[d]), n)
            for j in range(n):  # no letter of an unspaced script: tally 0
                out[w + j] = units8[j]
        elif kind == KIND_LATIN1:
            w, p, tally = _write_doc(numba.carray(_u8_at(addrs[d]), n), d, w, end, p, table, packed, fold, script,
                                     unspaced_all, letter_all, piece_doc, piece_lo, piece_hi, new, new_starts, new_ends,
                                     out)
        elif kind == KIND_UCS2:
            w, p, tally = _write_doc(numba.carray(_u16_at(addrs[d]), n), d, w, end, p, table, packed, fold, script,
                                     unspaced_all, letter_all, piece_doc, piece_lo, piece_hi, new, new_starts, new_ends,
                                     out)
        else:
            w, p, tally = _write_doc(numba.carray(_u32_at(addrs[d]), n), d, w, end, p, table, packed, fold, script,
                                     unspaced_all, letter_all, piece_doc, piece_lo, piece_hi, new, new_starts, new_ends,
                                     out)
        unspaced[d] = tally >> 32
        letters[d] = tally & 0xFFFFFFFF
