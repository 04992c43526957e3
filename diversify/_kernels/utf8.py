"""Scans of UTF-8 text in one buffer, before it is shingled: the scripts of each document
(:func:`count_scripts`), the pieces NFKC may change (:func:`unstable_pieces`), the fused case fold
that leaves those pieces for Python to normalize (:func:`nfkc_fold_compact`), and the splicing of the
normalized pieces back (:func:`splice_pieces`, :func:`join_pieces`). The rules they serve live in
:mod:`diversify.text`; these compute only.
"""

from __future__ import annotations

import numba
import numpy as np

from ._common import kernel

__all__ = ["count_scripts", "unstable_pieces", "splice_pieces", "nfkc_fold_compact", "join_pieces"]


@kernel(inline="always")
def _utf8_at(raw, i, end):
    """(code point, width) of the UTF-8 sequence that starts at ``raw[i]``; a byte below 0xC0
    reads as itself, width 1. ``width`` is the sequence's own length even when it runs past ``end``
    (the caller decides what a cut sequence means); only bytes before ``end`` are read."""
    b = raw[i]
    if b < 0xC0:
        return np.int64(b), 1
    if b < 0xE0:
        width, cp = 2, np.int64(b & 0x1F)
    elif b < 0xF0:
        width, cp = 3, np.int64(b & 0x0F)
    else:
        width, cp = 4, np.int64(b & 0x07)
    for j in range(1, min(width, end - i)):
        cp = (cp << 6) | np.int64(raw[i + j] & 0x3F)
    return cp, width


@kernel(inline="always")
def _utf8_in(raw, i, n):
    """:func:`_utf8_at` with ``end = n``, the common widths unrolled: the byte scans of non-ASCII
    text spent most of their time in its loop over continuation bytes."""
    b = np.int64(raw[i])
    if b < 0xC0:
        return b, 1
    if b < 0xE0:
        if i + 1 < n:
            return ((b & 0x1F) << 6) | (np.int64(raw[i + 1]) & 0x3F), 2
    elif b < 0xF0:
        if i + 2 < n:
            return ((b & 0x0F) << 12) | ((np.int64(raw[i + 1]) & 0x3F) << 6) | (np.int64(raw[i + 2]) & 0x3F), 3
    elif i + 3 < n:
        return (((b & 0x07) << 18) | ((np.int64(raw[i + 1]) & 0x3F) << 12) | ((np.int64(raw[i + 2]) & 0x3F) << 6)
                | (np.int64(raw[i + 3]) & 0x3F)), 4
    return _utf8_at(raw, i, n)


@kernel(parallel=True)
def count_scripts(buf, offsets, docs, unspaced_table, letter_table, unspaced, letters):
    """For each document ``docs[t]`` of the encoded batch: its code points marked in
    ``unspaced_table`` and in ``letter_table`` (bool, one entry per code point), decoded from the
    UTF-8 bytes in one pass (the batch is valid UTF-8, surrogates included, as ``encode_batch``
    writes it).

    unspaced, letters : int64 (len(docs),)  out
    """
    top = unspaced_table.size
    for t in numba.prange(docs.size):
        d = docs[t]
        i = offsets[d]
        end = offsets[d + 1]
        nu = 0
        nl = 0
        while i < end:
            cp, width = _utf8_in(buf, i, end)
            if i + width > end:
                break
            if cp < top:
                if unspaced_table[cp]:
                    nu += 1
                if letter_table[cp]:
                    nl += 1
            i += width
        unspaced[t] = nu
        letters[t] = nl


@kernel
def unstable_pieces(raw, unstable, starts, ends):
    """The pieces NFKC is applied to in the UTF-8 text ``raw``: each maximal run of code points
    marked in ``unstable`` (bool over code points; those at or above its size are stable), together
    with the code point before it. Writes piece k's byte range to ``starts[k]:ends[k]`` while there
    is room, and returns the number of pieces (call again with larger arrays when it exceeds them).
    """
    top = unstable.size
    n = raw.size
    count = 0
    i = 0
    prev = -1  # start of the code point before i (-1: none)
    run_start = -1  # start of the current piece (-1: not in a run)
    while i < n:
        if raw[i] < 0x80:  # ASCII: stable (the table marks none), and no decoding
            cp, width = np.int64(raw[i]), 1
        else:
            cp, width = _utf8_in(raw, i, n)
            if i + width > n:
                width = n - i
        if cp < top and unstable[cp]:
            if run_start < 0:
                run_start = prev if prev >= 0 else i
        elif run_start >= 0:
            if count < starts.size:
                starts[count] = run_start
                ends[count] = i
            count += 1
            run_start = -1
        prev = i
        i += width
    if run_start >= 0:
        if count < starts.size:
            starts[count] = run_start
            ends[count] = n
        count += 1
    return count


@kernel
def splice_pieces(raw, starts, ends, new, new_starts, new_ends, out):
    """``raw`` with each byte range ``starts[k]:ends[k]`` (ascending, disjoint) replaced by
    ``new[new_starts[k]:new_ends[k]]``, written to ``out`` (sized by the caller); returns its size."""
    w = 0
    last = 0
    for k in range(starts.size):
        s = starts[k]
        out[w: w + s - last] = raw[last:s]
        w += s - last
        m = new_ends[k] - new_starts[k]
        out[w: w + m] = new[new_starts[k]: new_ends[k]]
        w += m
        last = ends[k]
    out[w: w + raw.size - last] = raw[last:]
    return w + raw.size - last


@kernel(inline="always")
def _close_piece(pstarts, pends, p, start, end, write):
    """Record piece ``p`` as ``start:end`` (when writing): p + 1, or -1 when the arrays are full."""
    if write:
        if p >= pstarts.size:
            return -1
        pstarts[p] = start
        pends[p] = end
    return p + 1


@kernel
def nfkc_fold_compact(raw, unstable, change, fold, fold_len, out, seps, pstarts, pends, write):
    """Case-fold UTF-8 ``raw`` (documents separated by NUL) into ``out`` in one pass, without the
    separators, leaving the pieces NFKC is applied to as they are: each code point below
    ``change.size`` marked in ``change`` becomes its fold ``fold[cp, :fold_len[cp]]`` (shorter, as
    long or longer than itself), every other byte is copied, and the output position of the k-th
    NUL goes to ``seps[k]``. A piece is a maximal run of code points marked in ``unstable`` with
    the code point before it, unless that is a separator (the pieces :func:`unstable_pieces`
    finds); it is copied unfolded and its output byte range goes to ``pstarts[k]:pends[k]``, for
    the caller to normalize, fold and splice in. An empty ``unstable`` makes this the plain fold.

    Returns (output size, NULs, pieces); with ``write`` False only counts them. Returns (-1, 0, 0)
    for a sequence cut short at the end of ``raw``, and (-2, 0, 0) when ``out``, ``seps`` or the
    piece arrays are too small (the caller counts first then). A byte below 0xC0 that is not ASCII
    (a continuation byte with no lead, which ``str.encode`` never writes) is copied as it is.

    Long on purpose: one loop over every byte of a batch, specialized for speed; the fold, the
    separators and the pieces share its state (input and output positions), which helpers would
    have to pass back and forth per code point.
    """
    top_u = unstable.size
    top = change.size
    n = raw.size
    w = 0
    k = 0
    p = 0
    i = 0
    prev_in = -1  # where the code point before i starts (-1: none, or a separator)
    prev_out = 0  # where its output starts
    piece_out = -1  # output start of the open piece (-1: none)
    while i < n:
        b = raw[i]
        if b < 0xC0:  # ASCII (stable, folds as itself: the kernel lowercases A-Z later), or a stray byte
            if piece_out >= 0:
                p = _close_piece(pstarts, pends, p, piece_out, w, write)
                if p < 0:
                    return -2, 0, 0
                piece_out = -1
            if b == 0:
                if write:
                    if k >= seps.size:
                        return -2, 0, 0
                    seps[k] = w
                k += 1
                prev_in = -1
            else:
                if write:
                    if w >= out.size:
                        return -2, 0, 0
                    out[w] = b
                prev_in = i
                prev_out = w
                w += 1
            i += 1
            continue
        cp, width = _utf8_in(raw, i, n)
        if i + width > n:
            return -1, 0, 0
        if cp < top_u and unstable[cp]:
            if piece_out < 0:  # a piece opens: with the code point before it, unfolded
                if prev_in >= 0:
                    w = prev_out
                    if write:
                        m = i - prev_in
                        if w + m > out.size:
                            return -2, 0, 0
                        for j in range(m):
                            out[w + j] = raw[prev_in + j]
                    w += i - prev_in
                piece_out = prev_out if prev_in >= 0 else w
            if write:
                if w + width > out.size:
                    return -2, 0, 0
                for j in range(width):
                    out[w + j] = raw[i + j]
            prev_in = i
            prev_out = w
            w += width
            i += width
            continue
        if piece_out >= 0:
            p = _close_piece(pstarts, pends, p, piece_out, w, write)
            if p < 0:
                return -2, 0, 0
            piece_out = -1
        prev_in = i
        prev_out = w
        if cp < top and change[cp]:
            m = fold_len[cp]
            if write:
                if w + m > out.size:
                    return -2, 0, 0
                for j in range(m):
                    out[w + j] = fold[cp, j]
            w += m
        else:
            if write:
                if w + width > out.size:
                    return -2, 0, 0
                out[w] = b
                out[w + 1] = raw[i + 1]
                if width > 2:
                    out[w + 2] = raw[i + 2]
                    if width > 3:
                        out[w + 3] = raw[i + 3]
            w += width
        i += width
    if piece_out >= 0:
        p = _close_piece(pstarts, pends, p, piece_out, w, write)
        if p < 0:
            return -2, 0, 0
    return w, k, p


@kernel
def join_pieces(raw, starts, ends, out, at):
    """Copy each byte range ``raw[starts[k]:ends[k]]`` to ``out`` from ``at`` on, each followed by a
    NUL; returns the position after the last NUL."""
    for k in range(starts.size):
        m = ends[k] - starts[k]
        out[at: at + m] = raw[starts[k]: ends[k]]
        out[at + m] = 0
        at += m + 1
    return at
