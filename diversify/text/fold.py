"""The case fold and the space rule on UTF-8 bytes, alone or fused with NFKC.

Every code point with a UTF-8 form of L bytes whose fold (or space rule) is at most L bytes long
is rewritten in place by the tables of :mod:`diversify.text.tables`; a batch dense in non-ASCII
code points, or holding a fold that grows, is folded by one kernel pass per segment instead
(:func:`fold_dense`, :func:`nfkc_fold_dense`). Every path gives the bytes of ``str.casefold`` and
the space rule applied to each document (tests compare them).
"""

from __future__ import annotations

import unicodedata

import numpy as np

from .buffers import in_threads, readonly, segments
from .tables import FOLD_TOP, compact_tables, fold_tables, unstable_table

__all__ = ["DENSE_FUSED", "SPARSE_LEADS", "fold_pass", "fold_dense", "nfkc_fold_dense", "nfkc_fold_pieces",
           "fold_bytes"]


_NO_TABLE = np.zeros(0, dtype=bool)  # no code point opens an NFKC piece: the plain fold
_NO_PIECES = np.zeros(0, dtype=np.int64)


def fold_pass(raw: np.ndarray, out: np.ndarray, seps: np.ndarray, write: bool) -> tuple[int, int]:
    """The case fold and space rule of UTF-8 ``raw`` into ``out``, the NULs dropped (their output
    positions into ``seps``): :func:`diversify._kernels.utf8.nfkc_fold_compact` with no NFKC
    pieces. Returns (size, NULs) as that kernel does."""
    from .._kernels.utf8 import nfkc_fold_compact

    change, fold, length = compact_tables()
    size, nuls, _ = nfkc_fold_compact(raw, _NO_TABLE, change, fold, length, out, seps, _NO_PIECES, _NO_PIECES, write)
    return int(size), int(nuls)


def fold_dense(raw: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Case-fold the NUL-joined batch ``raw`` of ``n`` documents and drop the NULs, in one kernel
    pass per segment (:func:`fold_pass`, in threads): (buffer, offsets),
    or None for a cut sequence. For text dense in non-ASCII code points; the same bytes as
    :func:`fold_bytes` followed by dropping the NULs, and folds that grow too.

    Each segment writes into room for its own size plus a quarter (folds that grow are rare, and
    the NULs and shrinking folds give room back); a segment that needs more is counted, then
    written again into exactly its size.
    """
    def one(lo: int, hi: int) -> tuple[np.ndarray, np.ndarray] | None:
        seg = raw[lo:hi]
        out, seps = np.empty(seg.size + seg.size // 4 + 64, dtype=np.uint8), np.empty(n, dtype=np.int64)
        size, nuls = fold_pass(seg, out, seps, True)
        if size == -2:  # out of room: count, then write into exactly the room needed
            size, nuls = fold_pass(seg, out[:0], seps[:0], False)
            out, seps = np.empty(max(size, 0), dtype=np.uint8), np.empty(max(nuls, 0), dtype=np.int64)
            if size >= 0:
                size, nuls = fold_pass(seg, out, seps, True)
        if size < 0:
            return None
        return out[:size], seps[:nuls]

    parts = in_threads(one, segments(raw))
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
    return readonly(out), offsets


def nfkc_fold_dense(raw: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray] | None:
    """NFKC, case fold and the space rule of the NUL-joined batch ``raw`` of ``n`` documents, the
    NULs dropped: (buffer, offsets), or None for a cut sequence or a NUL inside a document. The
    same bytes as :func:`~diversify.text.normalization.nfkc_utf8` followed by :func:`fold_dense`,
    in one kernel pass per segment instead of two passes and a splice over the whole batch.

    The pass (:func:`diversify._kernels.utf8.nfkc_fold_compact`, in threads) folds every code point
    outside the NFKC pieces (found as :func:`~diversify.text.normalization.nfkc_utf8` finds them)
    and copies the pieces unchanged; the pieces of all segments are then normalized and folded together
    (:func:`nfkc_fold_pieces`) and spliced into the output, each segment into its place in the
    result. Folding a piece after NFKC is what the two-pass path does to the same code points.
    """
    from .._kernels.utf8 import join_pieces, splice_pieces

    tables = (unstable_table(), *compact_tables())
    parts = in_threads(lambda lo, hi: _nfkc_fold_segment(raw[lo:hi], n, tables), segments(raw))
    if any(p is None for p in parts):
        return None
    done = [p for p in parts if p is not None]
    if sum(seps.size for _, seps, _, _ in done) != n - 1:  # a NUL inside a document: not this path
        return None
    npieces = sum(ps.size for _, _, ps, _ in done)
    gathered = np.empty(sum(int((pe - ps).sum()) for _, _, ps, pe in done) + npieces, dtype=np.uint8)
    at = 0
    for out, _, ps, pe in done:
        at = join_pieces(readonly(out), ps, pe, gathered, at)
    joined = gathered[:-1].tobytes() if npieces else b""  # the last piece's NUL dropped
    new, new_starts, new_ends = nfkc_fold_pieces(joined, npieces)
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
        jobs.append((readonly(out), ps, pe, new_starts[first:first + ps.size], new_ends[first:first + ps.size],
                     result[base[k]:base[k + 1]]))
        first += ps.size
    in_threads(lambda o, ps, pe, ns, ne, dst: splice_pieces(o, ps, pe, new, ns, ne, dst), jobs)
    offsets = np.empty(n + 1, dtype=np.int64)
    offsets[0] = 0
    offsets[1:n] = np.concatenate([seps + base[k] for k, seps in enumerate(shifts)])
    offsets[n] = result.size
    return readonly(result), offsets


def _nfkc_fold_segment(seg: np.ndarray, n: int, tables: tuple
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """One segment of :func:`nfkc_fold_dense`: (its bytes folded outside the NFKC pieces, the
    output positions of its NULs, start and end of each piece in the output), or None for a cut
    sequence. ``tables``: :func:`unstable_table` and :func:`compact_tables`."""
    from .._kernels.utf8 import nfkc_fold_compact

    unstable, change, fold, length = tables
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


def nfkc_fold_pieces(joined: bytes, pieces: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """NFKC, the case fold and the space rule of ``pieces`` pieces of UTF-8 joined by NUL: (their
    bytes, read-only, NULs dropped; start and end of each piece in them).

    One ``unicodedata.normalize`` call for all of them: NUL is a starter that composes with
    nothing, and NFKC neither makes nor removes one, so the normalized join splits back at its
    NULs. The fold is :func:`fold_pass` with the tables of the rest of the batch (ASCII capitals
    are left for the sketch kernel, as the other paths leave them).
    """
    nfkc = unicodedata.normalize("NFKC", joined.decode("utf-8", "surrogatepass")).encode("utf-8", "surrogatepass")
    raw_new = readonly(np.frombuffer(nfkc, dtype=np.uint8))
    new = np.empty(raw_new.size + raw_new.size // 4 + 64, dtype=np.uint8)
    nuls = np.empty(max(pieces - 1, 0), dtype=np.int64)
    size, count = fold_pass(raw_new, new, nuls, True)
    if size == -2:  # folds that grow past the room: count, then write into exactly the room
        size, count = fold_pass(raw_new, new[:0], nuls[:0], False)
        new = np.empty(max(size, 0), dtype=np.uint8)
        size, count = fold_pass(raw_new, new, nuls, True)
    assert size >= 0 and count == nuls.size, "NFKC made or removed a NUL"
    starts = np.concatenate([[0], nuls]).astype(np.int64)[:pieces]
    ends = np.concatenate([nuls, [size]]).astype(np.int64)[:pieces]
    return readonly(new[:size]), starts, ends


#: from this share of non-ASCII code points on (estimated from the character and byte counts), a
#: batch that fails the NFKC quick check takes :func:`nfkc_fold_dense`
DENSE_FUSED = 1 / 64


def _code_points(raw: np.ndarray, lead: np.ndarray, width: int) -> np.ndarray:
    """Code points of the ``width``-byte UTF-8 sequences starting at ``lead``."""
    masks = {2: 0x1F, 3: 0x0F, 4: 0x07}
    cp = (raw[lead].astype(np.int64) & masks[width])
    for j in range(1, width):
        cp = (cp << 6) | (raw[lead + j] & 0x3F)
    return cp


#: below this share of lead bytes, the numpy scan of lead bytes beats the kernel's byte-by-byte scan
SPARSE_LEADS = 1 / 64


def fold_bytes(raw: np.ndarray) -> bool:
    """Case-fold ``raw`` (UTF-8, writable, mostly ASCII) in place with the tables; False (nothing
    written) when it holds a code point whose fold is longer than itself.

    numpy looks at the lead bytes only, and the first two bytes of each index a 64 KiB table of
    "a sequence starting so may change", which leaves a few candidates (capitals, spaces) to
    decode and rewrite. Text dense in non-ASCII code points (or with a fold that grows) takes
    :func:`fold_dense` instead.
    """
    change, out, grows, pairs = fold_tables()
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
        inside = cp < FOLD_TOP
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
