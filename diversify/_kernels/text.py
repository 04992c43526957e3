"""Tokenization and shingle hashing over one UTF-8 buffer of many documents.

Input is ``buf`` (uint8, the concatenated UTF-8 of already NFKC+casefolded documents) and
``offsets`` (int64, n+1). How bytes become shingles is a :class:`TextRule`: each byte goes through
its ``lower`` table (ASCII A-Z -> a-z) and is classified by its ``classes`` table as a word byte
(``WORD_BYTE``), whitespace/control (``FOLDED``: runs fold to one space) or ASCII punctuation
(``PUNCT``: separates words, kept in the exact hash).

Hash scheme ``diversify-fnv1a-splitmix64-v1`` (documented in docs/artifact-format.md; its constants
live in :mod:`diversify.hashing`):
- unit hash    u = fmix64(FNV-1a-64 over the unit's bytes)        (a word, or one code point)
- shingle hash   = fmix64(seed_h + sum_j u_j * B**(m-1-j))  over its m units (m = k, or fewer
                   for a short document), arithmetic mod 2**64, B = 0x100000001B3 * 2 + 1
- exact hash     = fmix64(FNV-1a-64 over the whitespace-folded, trimmed normalized bytes)

One pass over a document's bytes computes its exact hash, its length and every shingle. The last
k unit hashes sit in a :class:`Window`, the rolling state is a :class:`Roll`, and each shingle goes
to a :class:`Sink`: counted only, written to a CSR array, or folded into a one-permutation MinHash
signature (the fused fast path of the builder). The records are named tuples, which Numba passes
as plain structs.

Two Numba traps shape the code (keep them in mind when editing):

- Inside a ``prange`` body, a store into an array reached through a named tuple's attribute
  (``stats.exact[i] = ...``) is silently dropped by the parallel backend (numba/numba#7135,
  #5872). The parallel kernels unpack their output records into locals before the loop; jitted
  callees are compiled on their own and may write through records.
- A jitted helper that takes a record of arrays increfs and decrefs those arrays (atomics) on
  every call unless LLVM can pair the operations up, which it did only when the helper uses the
  record on every path from its entry block. Hence ``_slide`` unpacks its window first thing,
  ``_emit`` reads ``sink.kind`` first thing, and the passes call ``_emit`` themselves (a "push and
  maybe emit" helper brought the counting back): their hot loops carry no reference counting.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from .. import hashing
from . import _runtime
from ._common import FNV_OFFSET, FNV_PRIME, MASK32, S32, fmix64, kernel, sort_unique_run
from ._common import high_halves as high_halves  # at home with the sorted hash runs; named here for callers
from .minhash import EMPTY, _oph_row, densify
from .utf8 import count_scripts as count_scripts  # the UTF-8 scans: at home in .utf8, named here for callers
from .utf8 import join_pieces as join_pieces
from .utf8 import nfkc_fold_compact as nfkc_fold_compact
from .utf8 import splice_pieces as splice_pieces
from .utf8 import unstable_pieces as unstable_pieces

#: unit modes of a :class:`TextRule`
WORD = 0
CHAR = 1
#: byte classes of a :class:`TextRule`'s ``classes`` table
WORD_BYTE = 0
FOLDED = 1
PUNCT = 2
#: kinds of :class:`Sink`
SINK_COUNT = 0
SINK_CSR = 1
SINK_OPH = 2

_BLOCK = 256  # documents per parallel task
_SORT_SCRATCH = 1 << 16  # shingles of a document sorted by buckets (longer ones: heapsort, no scratch)
#: the first output slot of a pass that writes nowhere (a typed int64, not the literal 0: a literal
#: argument would compile a second copy of every pass, seconds on a fresh install)
_AT0 = np.int64(0)
_SPACE = np.uint64(32)
ROLL_BASE = np.uint64(hashing.SHINGLE_BASE)
#: unit hash of the folded space between two code points (character mode)
_SPACE_UNIT = np.uint64(hashing.fmix64(((hashing.FNV_OFFSET ^ 32) * hashing.FNV_PRIME) & hashing.MASK64))


class TextRule(NamedTuple):
    """How a kernel turns bytes into shingle hashes (built by :mod:`diversify.text`)."""

    mode: int  # WORD or CHAR
    k: int  # shingle length in units
    seed_h: np.uint64  # shingle-hash seed, added to every rolling hash before the final mix
    lower: np.ndarray  # uint8 (256,): byte -> byte with ASCII A-Z lowercased
    classes: np.ndarray  # uint8 (256,): byte -> WORD_BYTE, FOLDED or PUNCT (A-Z and a-z alike)


class DocStats(NamedTuple):
    """Per-document outputs of a scan, each of shape (n,)."""

    n_shingles: np.ndarray  # int64: max(units - k + 1, 1) if the document has units, else 0
    lengths: np.ndarray  # uint32: whitespace-folded, trimmed normalized length in bytes
    exact: np.ndarray  # uint64: exact hash


class Sink(NamedTuple):
    """Where a pass sends each shingle hash."""

    kind: int  # SINK_COUNT (drop it), SINK_CSR (write it to ``out``), SINK_OPH (fold it into ``sig``)
    out: np.ndarray  # uint64: SINK_CSR writes a document's t-th shingle at out[at + t]
    sig: np.ndarray  # uint32 (num_perm,): SINK_OPH's signature being filled
    filled: np.ndarray  # bool (num_perm,): SINK_OPH's bins that hold a value
    mh_seed: np.uint64  # SINK_OPH's mixed MinHash seed


class Window(NamedTuple):
    """Scratch of a pass: the last k unit hashes, as a ring."""

    units: np.ndarray  # uint64 (k,)
    oldest_weight: np.uint64  # B**(k-1): the weight of the unit that leaves the window


class Roll(NamedTuple):
    """Rolling state of one document's pass; each step returns a new one.

    Once the window is full every unit completes one shingle, so the shingles emitted so far are
    ``max(n_units - k + 1, 0)`` and the t-th one goes to ``out[at + t]``: no separate counter.
    """

    slot: int  # ring slot of the next unit (= n_units % k)
    n_units: int  # units seen
    poly: np.uint64  # sum_j u_j * B**(m-1-j) over the last m = min(n_units, k) units, mod 2**64


@kernel
def _new_window(k):
    """A window of ``k`` units; its contents are written before they are read."""
    weight = np.uint64(1)
    for _ in range(k - 1):
        weight = weight * ROLL_BASE
    return Window(np.empty(k, dtype=np.uint64), weight)


@kernel
def _count_sink():
    """A sink that only counts (a pass returns the count)."""
    return Sink(SINK_COUNT, np.empty(0, dtype=np.uint64), np.empty(1, dtype=np.uint32), np.empty(1, dtype=np.bool_),
                np.uint64(0))


@kernel
def _csr_sink(out):
    """A sink that writes each shingle hash into ``out`` (uint64)."""
    return Sink(SINK_CSR, out, np.empty(1, dtype=np.uint32), np.empty(1, dtype=np.bool_), np.uint64(0))


@kernel
def _emit(sink, at, shingle):
    """Send one shingle hash to ``sink``; ``at`` is its index in a CSR output."""
    if sink.kind == SINK_CSR:
        sink.out[at] = shingle
    elif sink.kind == SINK_OPH:
        v = fmix64(shingle ^ sink.mh_seed)
        b = ((v >> S32) * np.uint64(sink.sig.shape[0])) >> S32
        # the bin keeps the smaller value, without a branch: about half of a document's shingles
        # lower their bin, a coin flip the branch predictor lost every other word. An empty bin
        # holds EMPTY (the largest uint32), so the first value lands as the branch had it.
        sink.sig[b] = min(np.uint32(v & MASK32), sink.sig[b])
        sink.filled[b] = True


@kernel
def _slide(roll, unit, window):
    """Slide the window over one more unit hash (the caller emits the shingle once it is full)."""
    units, oldest_weight = window
    slot, n_units, poly = roll
    k = units.shape[0]
    if n_units >= k:
        poly = poly - units[slot] * oldest_weight
    poly = poly * ROLL_BASE + unit
    units[slot] = unit
    slot += 1
    if slot == k:
        slot = 0
    return Roll(slot, n_units + 1, poly)


@kernel
def _finish(roll, k, seed_h, sink, at):
    """End a document: emit the one shingle of a short document (1..k-1 units); return its shingle count."""
    if roll.n_units >= k:
        return roll.n_units - k + 1
    if roll.n_units > 0:
        _emit(sink, at, fmix64(roll.poly + seed_h))
        return 1
    return 0


@kernel
def _word_pass(buf, start, end, rule, window, sink, at):
    """Word-mode pass over ``buf[start:end]``: returns (n_shingles, folded_length, exact_hash).

    The hot path of the builder, written flat for speed. ``classes`` is indexed by the raw byte
    (A-Z and a-z share a class), so the class lookup does not wait for the lowercasing lookup.
    """
    _, k, seed_h, lower, classes = rule
    exact_h = FNV_OFFSET
    length = 0
    pending_space = False
    word_h = FNV_OFFSET
    in_word = False
    roll = Roll(0, 0, np.uint64(0))
    for p in range(start, end):
        b = buf[p]
        cls = classes[b]
        c = np.uint64(lower[b])
        if cls == WORD_BYTE:
            if pending_space:
                exact_h = (exact_h ^ _SPACE) * FNV_PRIME
                length += 1
                pending_space = False
            exact_h = (exact_h ^ c) * FNV_PRIME
            length += 1
            word_h = (word_h ^ c) * FNV_PRIME
            in_word = True
            continue
        if in_word:
            roll = _slide(roll, fmix64(word_h), window)
            if roll.n_units >= k:
                _emit(sink, at + roll.n_units - k, fmix64(roll.poly + seed_h))
            word_h = FNV_OFFSET
            in_word = False
        if cls == FOLDED:
            if length > 0:
                pending_space = True
        else:
            if pending_space:
                exact_h = (exact_h ^ _SPACE) * FNV_PRIME
                length += 1
                pending_space = False
            exact_h = (exact_h ^ c) * FNV_PRIME
            length += 1
    if in_word:
        roll = _slide(roll, fmix64(word_h), window)
        if roll.n_units >= k:
            _emit(sink, at + roll.n_units - k, fmix64(roll.poly + seed_h))
    return _finish(roll, k, seed_h, sink, at), length, fmix64(exact_h)


@kernel
def _char_pass(buf, start, end, rule, window, sink, at):
    """Character-mode pass over ``buf[start:end]``: returns (n_shingles, folded_length, exact_hash).

    A unit is one code point (a lead byte and its continuation bytes). A folded run between two code
    points is one space unit, pushed right after the code point before it; leading and trailing
    runs are dropped, as in the exact hash. Written flat for speed, like :func:`_word_pass`.
    """
    _, k, seed_h, lower, classes = rule
    exact_h = FNV_OFFSET
    length = 0
    pending_space = False
    unit_h = FNV_OFFSET
    in_unit = False
    roll = Roll(0, 0, np.uint64(0))
    for p in range(start, end):
        c = lower[buf[p]]
        if classes[c] == FOLDED:
            if length > 0:
                pending_space = True
            continue
        if pending_space:
            exact_h = (exact_h ^ _SPACE) * FNV_PRIME
            length += 1
        exact_h = (exact_h ^ np.uint64(c)) * FNV_PRIME
        length += 1
        if (c & 0xC0) != 0x80:  # a lead byte: the code point before it is complete
            if in_unit:
                roll = _slide(roll, fmix64(unit_h), window)
                if roll.n_units >= k:
                    _emit(sink, at + roll.n_units - k, fmix64(roll.poly + seed_h))
            if pending_space:
                roll = _slide(roll, _SPACE_UNIT, window)
                if roll.n_units >= k:
                    _emit(sink, at + roll.n_units - k, fmix64(roll.poly + seed_h))
            unit_h = FNV_OFFSET
            in_unit = True
        if in_unit:
            unit_h = (unit_h ^ np.uint64(c)) * FNV_PRIME
        pending_space = False
    if in_unit:
        roll = _slide(roll, fmix64(unit_h), window)
        if roll.n_units >= k:
            _emit(sink, at + roll.n_units - k, fmix64(roll.poly + seed_h))
    return _finish(roll, k, seed_h, sink, at), length, fmix64(exact_h)


@kernel
def _pass(buf, start, end, rule, window, sink, at):
    """One document's pass in the rule's mode: (n_shingles, folded_length, exact_hash)."""
    if rule.mode == WORD:
        return _word_pass(buf, start, end, rule, window, sink, at)
    return _char_pass(buf, start, end, rule, window, sink, at)


@kernel(parallel=True)
def scan_docs(buf, offsets, rule, stats):
    """Pass 1 of the CSR path: each document's shingle count, folded byte length and exact hash.

    Parameters
    ----------
    buf : uint8 (nbytes,)    concatenated UTF-8
    offsets : int64 (n+1,)   document boundaries in ``buf``
    rule : TextRule
    stats : DocStats         out: one entry per document
    """
    n = offsets.size - 1
    n_shingles, lengths, exact = stats  # locals: see the module docstring on prange
    nblocks = (n + _BLOCK - 1) // _BLOCK
    for blk in numba.prange(nblocks):
        window = _new_window(rule.k)
        sink = _count_sink()
        for i in range(blk * _BLOCK, min(n, (blk + 1) * _BLOCK)):
            n_shingles[i], lengths[i], exact[i] = _pass(buf, offsets[i], offsets[i + 1], rule, window, sink, _AT0)


@kernel(parallel=True)
def fill_shingles(buf, offsets, rule, indptr, out):
    """Pass 2 of the CSR path: write document i's shingles into ``out[indptr[i]:indptr[i+1]]``.

    indptr : int64 (n+1,)   from the counts of :func:`scan_docs`
    out : uint64 (nnz,)     out: shingle hashes in text order
    """
    n = offsets.size - 1
    nblocks = (n + _BLOCK - 1) // _BLOCK
    for blk in numba.prange(nblocks):
        window = _new_window(rule.k)
        sink = _csr_sink(out)
        for i in range(blk * _BLOCK, min(n, (blk + 1) * _BLOCK)):
            _pass(buf, offsets[i], offsets[i + 1], rule, window, sink, indptr[i])


@kernel
def _sketch_oph_docs(buf, offsets, rule, char_rule, char_docs, mh_seed, stats, sigs, lo, hi):
    """Fused fast path: one pass per document ``lo .. hi`` straight from bytes to a densified OPH signature.

    char_rule, char_docs         documents marked in ``char_docs`` (bool (n,), or empty: none) take
                                 ``char_rule``, the others ``rule``: shingle="auto" sketches a batch
                                 of both kinds in one call, each document as a call on its kind alone
    mh_seed : uint64             mixed MinHash seed
    stats : DocStats             out, as in :func:`scan_docs`
    sigs : uint32 (n, num_perm)  out; equal to ``fill_minhash_oph`` over the CSR shingles
    """
    num_perm = sigs.shape[1]
    n_shingles, lengths, exact = stats
    window = _new_window(rule.k)
    char_window = _new_window(char_rule.k)
    mixed = char_docs.size > 0
    no_csr = np.empty(0, dtype=np.uint64)
    filled = np.empty(num_perm, dtype=np.bool_)
    for i in range(lo, hi):
        sig = sigs[i]
        for j in range(num_perm):
            sig[j] = EMPTY
            filled[j] = False
        sink = Sink(SINK_OPH, no_csr, sig, filled, mh_seed)
        if mixed and char_docs[i]:
            n_shingles[i], lengths[i], exact[i] = _pass(buf, offsets[i], offsets[i + 1], char_rule, char_window, sink,
                                                        _AT0)
        else:
            n_shingles[i], lengths[i], exact[i] = _pass(buf, offsets[i], offsets[i + 1], rule, window, sink, _AT0)
        if n_shingles[i] > 0:
            densify(sig, filled, mh_seed)


#: ``char_docs`` of a batch with one rule for every document
NO_CHAR_DOCS = np.zeros(0, dtype=np.bool_)


def sketch_oph(buf, offsets, rule, mh_seed, stats, sigs, char_rule=None, char_docs=NO_CHAR_DOCS):
    """:func:`_sketch_oph_docs` over every document, in blocks, in threads (see
    :func:`diversify._kernels._runtime.in_blocks`); ``char_rule`` for the documents marked in
    ``char_docs``."""
    _runtime.in_blocks(_sketch_oph_docs, (buf, offsets, rule, rule if char_rule is None else char_rule, char_docs,
                                          mh_seed, stats, sigs), offsets.size - 1, _BLOCK)


sketch_oph.dispatcher = _sketch_oph_docs  # type: ignore[attr-defined]


@kernel
def _fill_sorted_unique_docs(buf, offsets, rule, starts, out, counts, lo, hi):
    """One pass per document ``lo .. hi``: its shingles, sorted and deduplicated, at
    ``out[starts[i]:starts[i]+counts[i]]``.

    Each document is shingled and sorted in a scratch buffer with room for any document of the
    block (b bytes: at most max(b, 1) shingles by code point, b // 2 + 1 by word), then its
    distinct shingles are copied to ``out``: the room ``starts`` gives may be just the document's
    shingle count. A document whose distinct shingles do not fit its room gets ``counts[i] = -1``
    and nothing written (the caller sizes the room again). Used for exact Jaccard checks of a few
    documents without the two-pass CSR layout.

    starts : int64 (n+1,)   room of document i: ``out[starts[i]:starts[i+1]]``
    out : uint64            out
    counts : int64 (n,)     out: distinct shingles of each document, or -1 (no room)
    """
    window = _new_window(rule.k)
    need = 1
    for i in range(lo, hi):
        b = offsets[i + 1] - offsets[i]
        room = b if rule.mode == CHAR else b // 2 + 1
        if room > need:
            need = room
    shingles = np.empty(need, dtype=np.uint64)
    sink = _csr_sink(shingles)
    scratch = np.empty(_SORT_SCRATCH, dtype=np.uint64)
    heads = np.empty(_SORT_SCRATCH // 2 + 1, dtype=np.int64)
    for i in range(lo, hi):
        m = _pass(buf, offsets[i], offsets[i + 1], rule, window, sink, _AT0)[0]
        c = sort_unique_run(shingles, _AT0, _AT0 + m, scratch, heads)
        first = starts[i]
        if c > starts[i + 1] - first:
            counts[i] = -1
            continue
        for t in range(c):
            out[first + t] = shingles[t]
        counts[i] = c


def fill_sorted_unique(buf, offsets, rule, starts, out, counts):
    """:func:`_fill_sorted_unique_docs` over every document, in blocks, in threads."""
    _runtime.in_blocks(_fill_sorted_unique_docs, (buf, offsets, rule, starts, out, counts), offsets.size - 1, _BLOCK)


fill_sorted_unique.dispatcher = _fill_sorted_unique_docs  # type: ignore[attr-defined]


@kernel
def _sketch_oph_sets_docs(buf, offsets, rule, mh_seed, stats, sigs, starts, out, counts, lo, hi):
    """:func:`_sketch_oph_docs` and :func:`_fill_sorted_unique_docs` in one pass per document
    ``lo .. hi``, for the live index, which stores both: the shingles are written, sorted and
    deduplicated as there, then the signature is folded from the distinct ones. A bin keeps the
    minimum of what falls into it, which depends neither on order nor on repeats: the signature of
    the fused pass, bit for bit (a test compares them).

    Arguments as in those two kernels.
    """
    num_perm = sigs.shape[1]
    n_shingles, lengths, exact = stats
    window = _new_window(rule.k)
    sink = _csr_sink(out)
    scratch = np.empty(_SORT_SCRATCH, dtype=np.uint64)
    heads = np.empty(_SORT_SCRATCH // 2 + 1, dtype=np.int64)
    filled = np.empty(num_perm, dtype=np.bool_)
    for i in range(lo, hi):
        first = starts[i]
        n_shingles[i], lengths[i], exact[i] = _pass(buf, offsets[i], offsets[i + 1], rule, window, sink, first)
        c = sort_unique_run(out, first, first + n_shingles[i], scratch, heads)
        counts[i] = c
        _oph_row(out, first, first + c, mh_seed, num_perm, sigs[i], filled)


def sketch_oph_sets(buf, offsets, rule, mh_seed, stats, sigs, starts, out, counts):
    """:func:`_sketch_oph_sets_docs` over every document, in blocks, in threads."""
    _runtime.in_blocks(_sketch_oph_sets_docs, (buf, offsets, rule, mh_seed, stats, sigs, starts, out, counts),
                       offsets.size - 1, _BLOCK)


sketch_oph_sets.dispatcher = _sketch_oph_sets_docs  # type: ignore[attr-defined]


@kernel(parallel=True)
def fill_unit_simhash(buf, offsets, lower, classes, out):
    """Charikar SimHash (64 bits) of each document over its word features, weight = count.

    Each word occurrence adds +1 to the bit counters where its unit hash has a 1 and -1 where it
    has a 0; the fingerprint bit is 1 where the counter is > 0.

    lower, classes : uint8 (256,)   the tables of a :class:`TextRule`
    out : uint64 (n,)               out: fingerprints
    """
    n = offsets.size - 1
    nblocks = (n + _BLOCK - 1) // _BLOCK
    for blk in numba.prange(nblocks):
        votes = np.empty(64, dtype=np.int64)
        for i in range(blk * _BLOCK, min(n, (blk + 1) * _BLOCK)):
            votes[:] = 0
            word_h = FNV_OFFSET
            in_word = False
            for p in range(offsets[i], offsets[i + 1] + 1):
                is_word = False
                c = np.uint8(0)
                if p < offsets[i + 1]:
                    c = lower[buf[p]]
                    is_word = classes[c] == WORD_BYTE
                if is_word:
                    if not in_word:
                        word_h = FNV_OFFSET
                        in_word = True
                    word_h = (word_h ^ np.uint64(c)) * FNV_PRIME
                elif in_word:
                    h = fmix64(word_h)
                    for bit in range(64):
                        if (h >> np.uint64(bit)) & np.uint64(1):
                            votes[bit] += 1
                        else:
                            votes[bit] -= 1
                    in_word = False
            fp = np.uint64(0)
            for bit in range(64):
                if votes[bit] > 0:
                    fp |= np.uint64(1) << np.uint64(bit)
            out[i] = fp
