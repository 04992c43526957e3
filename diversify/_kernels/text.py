"""Tokenization and shingle hashing over one UTF-8 buffer of many documents.

Input is ``buf`` (uint8, the concatenated UTF-8 of already NFKC+casefolded documents) and
``offsets`` (int64, n+1). Bytes go through ``lower`` (ASCII A-Z -> a-z) and are classified by
``classes``: 0 word byte, 1 whitespace/control (folded), 2 ASCII punctuation.

Hash scheme ``diversify-fnv1a-splitmix64-v1`` (documented in docs/artifact-format.md):
- unit hash    u = fmix64(FNV-1a-64 over the unit's bytes)        (a word, or one code point)
- shingle hash   = fmix64(seed_h + sum_j u_j * B**(m-1-j))  over its m units (m = k, or fewer
                   for a short document), arithmetic mod 2**64, B = 0x100000001B3 * 2 + 1
- exact hash     = fmix64(FNV-1a-64 over the whitespace-folded, trimmed normalized bytes)

One pass over the bytes computes the exact hash, the length and every shingle; the shingle
goes to a "sink": counted only, written to a CSR array, or folded into a one-permutation
MinHash signature (the fused fast path of the builder).
"""

from __future__ import annotations

import numba
import numpy as np

from ._common import FNV_OFFSET, FNV_PRIME, MASK32, S32, fmix64, kernel
from .minhash import densify

WORD = 0
CHAR = 1
SINK_COUNT = 0
SINK_CSR = 1
SINK_OPH = 2
_SPACE = np.uint64(32)
_BLOCK = 256
ROLL_BASE = np.uint64(0x100000001B3 * 2 + 1)
_SPACE_UNIT_RAW = np.uint64(((0xCBF29CE484222325 ^ 32) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF)


@kernel
def _sink(s, sink, out, pos, sig, filled, mh_seed, num_perm):
    if sink == SINK_CSR:
        out[pos] = s
    elif sink == SINK_OPH:
        v = fmix64(s ^ mh_seed)
        b = ((v >> S32) * np.uint64(num_perm)) >> S32
        val = np.uint32(v & MASK32)
        if not filled[b] or val < sig[b]:
            sig[b] = val
            filled[b] = True


@kernel
def _doc_pass(buf, start, end, mode, k, seed_h, lower, classes, ring, bk1, sink, out, pos, sig, filled, mh_seed):
    """Scan one document. Returns (n_shingles, folded_length, exact_hash)."""
    num_perm = sig.shape[0]
    hx = FNV_OFFSET  # exact hash state
    length = 0
    pending_space = False
    cur = FNV_OFFSET  # current unit's FNV state
    have = False
    count = 0  # units seen
    H = np.uint64(0)  # rolling polynomial over the last min(count, k) units
    emitted = 0
    for p in range(start, end + 1):
        at_end = p == end
        c = np.uint8(32)
        cls = 1
        if not at_end:
            c = lower[buf[p]]
            cls = classes[c]
        # ---- exact hash over whitespace-folded bytes
        if cls == 1:
            if length > 0:
                pending_space = True
        else:
            if pending_space:
                hx = (hx ^ _SPACE) * FNV_PRIME
                length += 1
            hx = (hx ^ np.uint64(c)) * FNV_PRIME
            length += 1
        # ---- units
        unit_done = False
        u = np.uint64(0)
        space_unit = False
        if mode == WORD:
            if cls == 0 and not at_end:
                if not have:
                    cur = FNV_OFFSET
                    have = True
                cur = (cur ^ np.uint64(c)) * FNV_PRIME
            elif have:
                u = fmix64(cur)
                unit_done = True
                have = False
        else:
            if at_end or (cls != 1 and (c & 0xC0) != 0x80):
                if have:
                    u = fmix64(cur)
                    unit_done = True
                    have = False
                if not at_end:
                    space_unit = pending_space
                    cur = FNV_OFFSET
                    have = True
            if have and cls != 1:
                cur = (cur ^ np.uint64(c)) * FNV_PRIME
        if cls != 1:
            pending_space = False
        # push the finished unit, then (char mode) the folded space that precedes the new one
        for step in range(2):
            if step == 0:
                if not unit_done:
                    continue
            else:
                if not space_unit:
                    continue
                u = fmix64(_SPACE_UNIT_RAW)
            if count >= k:
                H = H - ring[count % k] * bk1
            H = H * ROLL_BASE + u
            ring[count % k] = u
            count += 1
            if count >= k:
                _sink(fmix64(H + seed_h), sink, out, pos + emitted, sig, filled, mh_seed, num_perm)
                emitted += 1
    if 0 < count < k:
        _sink(fmix64(H + seed_h), sink, out, pos + emitted, sig, filled, mh_seed, num_perm)
        emitted += 1
    return emitted, length, fmix64(hx)


@kernel
def _push_word(u, ring, ri, count, H, k, bk1, seed_h, sink, out, pos, emitted, sig, filled, mh_seed, num_perm):
    if count >= k:
        H = H - ring[ri] * bk1
    H = H * ROLL_BASE + u
    ring[ri] = u
    ri += 1
    if ri == k:
        ri = 0
    count += 1
    if count >= k:
        _sink(fmix64(H + seed_h), sink, out, pos + emitted, sig, filled, mh_seed, num_perm)
        emitted += 1
    return ri, count, H, emitted


@kernel
def _word_pass(buf, start, end, k, seed_h, lower, classes, ring, bk1, sink, out, pos, sig, filled, mh_seed):
    """Word-mode specialization of :func:`_doc_pass` (same results; the hot path).

    ``classes`` is indexed by the raw byte (A-Z and a-z share a class), so the class lookup does
    not wait for the lowercasing lookup.
    """
    num_perm = sig.shape[0]
    hx = FNV_OFFSET
    length = 0
    pending_space = False
    cur = FNV_OFFSET
    in_word = False
    count = 0
    ri = 0
    H = np.uint64(0)
    emitted = 0
    for p in range(start, end):
        b = buf[p]
        cls = classes[b]
        c = np.uint64(lower[b])
        if cls == 0:
            if pending_space:
                hx = (hx ^ _SPACE) * FNV_PRIME
                length += 1
                pending_space = False
            hx = (hx ^ c) * FNV_PRIME
            length += 1
            cur = (cur ^ c) * FNV_PRIME
            in_word = True
            continue
        if in_word:
            ri, count, H, emitted = _push_word(fmix64(cur), ring, ri, count, H, k, bk1, seed_h, sink, out, pos,
                                               emitted, sig, filled, mh_seed, num_perm)
            cur = FNV_OFFSET
            in_word = False
        if cls == 1:
            if length > 0:
                pending_space = True
        else:
            if pending_space:
                hx = (hx ^ _SPACE) * FNV_PRIME
                length += 1
                pending_space = False
            hx = (hx ^ c) * FNV_PRIME
            length += 1
    if in_word:
        ri, count, H, emitted = _push_word(fmix64(cur), ring, ri, count, H, k, bk1, seed_h, sink, out, pos,
                                           emitted, sig, filled, mh_seed, num_perm)
    if 0 < count < k:
        _sink(fmix64(H + seed_h), sink, out, pos + emitted, sig, filled, mh_seed, num_perm)
        emitted += 1
    return emitted, length, fmix64(hx)


@kernel
def _pass(buf, start, end, mode, k, seed_h, lower, classes, ring, bk1, sink, out, pos, sig, filled, mh_seed):
    if mode == WORD:
        return _word_pass(buf, start, end, k, seed_h, lower, classes, ring, bk1, sink, out, pos, sig, filled, mh_seed)
    return _doc_pass(buf, start, end, mode, k, seed_h, lower, classes, ring, bk1, sink, out, pos, sig, filled, mh_seed)


@kernel(parallel=True)
def scan_docs(buf, offsets, mode, k, seed_h, lower, classes, n_shingles, lengths, exact):
    """Pass 1 of the CSR path: per document the shingle count, folded byte length and exact hash.

    Parameters
    ----------
    buf : uint8[:]            concatenated UTF-8
    offsets : int64[n+1]      document boundaries in ``buf``
    mode : int                0 words, 1 characters
    k : int                   shingle length in units
    n_shingles : int64[n]     out: max(units-k+1, 1) if units else 0
    lengths : uint32[n]       out: folded normalized length in bytes
    exact : uint64[n]         out: exact hash
    """
    n = offsets.size - 1
    bk1 = _pow(ROLL_BASE, k)
    nblocks = (n + _BLOCK - 1) // _BLOCK
    for blk in numba.prange(nblocks):
        ring = np.empty(k, dtype=np.uint64)
        dummy_out = np.empty(0, dtype=np.uint64)
        sig = np.empty(1, dtype=np.uint32)
        filled = np.empty(1, dtype=np.bool_)
        for i in range(blk * _BLOCK, min(n, (blk + 1) * _BLOCK)):
            e, ln, ex = _pass(buf, offsets[i], offsets[i + 1], mode, k, seed_h, lower, classes, ring, bk1,
                                  SINK_COUNT, dummy_out, 0, sig, filled, np.uint64(0))
            n_shingles[i] = e
            lengths[i] = ln
            exact[i] = ex


@kernel
def _pow(b, e):
    r = np.uint64(1)
    for _ in range(e - 1):
        r = r * b
    return r


@kernel(parallel=True)
def fill_shingles(buf, offsets, mode, k, seed_h, lower, classes, indptr, out):
    """Pass 2 of the CSR path: write document i's shingles into ``out[indptr[i]:indptr[i+1]]``."""
    n = offsets.size - 1
    bk1 = _pow(ROLL_BASE, k)
    nblocks = (n + _BLOCK - 1) // _BLOCK
    for blk in numba.prange(nblocks):
        ring = np.empty(k, dtype=np.uint64)
        sig = np.empty(1, dtype=np.uint32)
        filled = np.empty(1, dtype=np.bool_)
        for i in range(blk * _BLOCK, min(n, (blk + 1) * _BLOCK)):
            _pass(buf, offsets[i], offsets[i + 1], mode, k, seed_h, lower, classes, ring, bk1,
                      SINK_CSR, out, indptr[i], sig, filled, np.uint64(0))


@kernel(parallel=True)
def sketch_oph(buf, offsets, mode, k, seed_h, lower, classes, mh_seed, n_shingles, lengths, exact, sigs):
    """Fused fast path: one pass per document straight from bytes to a densified OPH signature.

    sigs : uint32 (n, num_perm) out; equal to ``fill_minhash_oph`` over the CSR shingles.
    """
    n = offsets.size - 1
    num_perm = sigs.shape[1]
    bk1 = _pow(ROLL_BASE, k)
    nblocks = (n + _BLOCK - 1) // _BLOCK
    for blk in numba.prange(nblocks):
        ring = np.empty(k, dtype=np.uint64)
        dummy_out = np.empty(0, dtype=np.uint64)
        filled = np.empty(num_perm, dtype=np.bool_)
        for i in range(blk * _BLOCK, min(n, (blk + 1) * _BLOCK)):
            sig = sigs[i]
            for j in range(num_perm):
                sig[j] = np.uint32(0xFFFFFFFF)
                filled[j] = False
            e, ln, ex = _pass(buf, offsets[i], offsets[i + 1], mode, k, seed_h, lower, classes, ring, bk1,
                                  SINK_OPH, dummy_out, 0, sig, filled, mh_seed)
            n_shingles[i] = e
            lengths[i] = ln
            exact[i] = ex
            if e > 0:
                densify(sig, filled, mh_seed)


@kernel(parallel=True)
def fill_unit_simhash(buf, offsets, lower, classes, out):
    """Charikar SimHash (64 bits) of each document over its word features, weight = count.

    Each word occurrence adds +1 to the bit counters where its unit hash has a 1 and -1 where it
    has a 0; the fingerprint bit is 1 where the counter is > 0.
    """
    n = offsets.size - 1
    nblocks = (n + _BLOCK - 1) // _BLOCK
    for b in numba.prange(nblocks):
        acc = np.empty(64, dtype=np.int64)
        for i in range(b * _BLOCK, min(n, (b + 1) * _BLOCK)):
            acc[:] = 0
            cur = FNV_OFFSET
            have = False
            for p in range(offsets[i], offsets[i + 1] + 1):
                is_word = False
                c = np.uint8(0)
                if p < offsets[i + 1]:
                    c = lower[buf[p]]
                    is_word = classes[c] == 0
                if is_word:
                    if not have:
                        cur = FNV_OFFSET
                        have = True
                    cur = (cur ^ np.uint64(c)) * FNV_PRIME
                elif have:
                    h = fmix64(cur)
                    for bit in range(64):
                        if (h >> np.uint64(bit)) & np.uint64(1):
                            acc[bit] += 1
                        else:
                            acc[bit] -= 1
                    have = False
            fp = np.uint64(0)
            for bit in range(64):
                if acc[bit] > 0:
                    fp |= np.uint64(1) << np.uint64(bit)
            out[i] = fp


@kernel(parallel=True)
def fill_sorted_unique(buf, offsets, mode, k, seed_h, lower, classes, starts, out, counts):
    """One pass per document: its shingles, sorted and deduplicated, at ``out[starts[i]:starts[i]+counts[i]]``.

    ``starts`` must leave room for every shingle (a document of b bytes has at most b shingles).
    Used for exact Jaccard checks of a few documents without the two-pass CSR layout.
    """
    n = offsets.size - 1
    bk1 = _pow(ROLL_BASE, k)
    nblocks = (n + _BLOCK - 1) // _BLOCK
    for blk in numba.prange(nblocks):
        ring = np.empty(k, dtype=np.uint64)
        sig = np.empty(1, dtype=np.uint32)
        filled = np.empty(1, dtype=np.bool_)
        for i in range(blk * _BLOCK, min(n, (blk + 1) * _BLOCK)):
            lo = starts[i]
            e, _, _ = _pass(buf, offsets[i], offsets[i + 1], mode, k, seed_h, lower, classes, ring, bk1,
                            SINK_CSR, out, lo, sig, filled, np.uint64(0))
            if e == 0:
                counts[i] = 0
                continue
            out[lo : lo + e] = np.sort(out[lo : lo + e])
            w = lo + 1
            for t in range(lo + 1, lo + e):
                if out[t] != out[w - 1]:
                    out[w] = out[t]
                    w += 1
            counts[i] = w - lo
