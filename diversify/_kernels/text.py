"""Tokenization and shingle hashing over one UTF-8 buffer of many documents.

Input is ``buf`` (uint8, the concatenated UTF-8 of already NFKC+casefolded documents) and
``offsets`` (int64, n+1). Bytes go through ``lower`` (ASCII A-Z -> a-z) and are classified by
``classes``: 0 word byte, 1 whitespace/control (folded), 2 ASCII punctuation.

Hash scheme ``diversify-fnv1a-splitmix64-v1`` (documented in docs/artifact-format.md):
- unit hash  = fmix64(FNV-1a-64 over the unit's bytes)        (a word, or one code point)
- shingle    = fold of fmix64(h ^ unit) over k consecutive units, starting at h = fmix64(seed)
- exact hash = fmix64(FNV-1a-64 over the whitespace-folded, trimmed normalized bytes)
"""

from __future__ import annotations

import numba
import numpy as np

from ._common import FNV_OFFSET, FNV_PRIME, fmix64, kernel

WORD = 0
CHAR = 1
_SPACE = np.uint64(32)
_BLOCK = 256


@kernel
def _scan_one(buf, start, end, mode, lower, classes):
    """Return (units, folded_length, exact_hash) of one document."""
    h = FNV_OFFSET
    length = 0
    units = 0
    pending_space = False
    in_word = False
    for p in range(start, end):
        c = lower[buf[p]]
        cls = classes[c]
        if cls == 1:
            if length > 0:
                pending_space = True
            in_word = False
            continue
        if pending_space:
            h = (h ^ _SPACE) * FNV_PRIME
            length += 1
            pending_space = False
            if mode == CHAR:
                units += 1
        h = (h ^ np.uint64(c)) * FNV_PRIME
        length += 1
        if mode == WORD:
            if cls == 0:
                if not in_word:
                    units += 1
                    in_word = True
            else:
                in_word = False
        else:
            if (c & 0xC0) != 0x80:
                units += 1
    return units, length, fmix64(h)


@kernel(parallel=True)
def scan_docs(buf, offsets, mode, k, lower, classes, n_shingles, lengths, exact):
    """Pass 1: per document the shingle count, folded byte length and exact hash.

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
    for i in numba.prange(n):
        units, length, eh = _scan_one(buf, offsets[i], offsets[i + 1], mode, lower, classes)
        if units >= k:
            n_shingles[i] = units - k + 1
        elif units > 0:
            n_shingles[i] = 1
        else:
            n_shingles[i] = 0
        lengths[i] = length
        exact[i] = eh


@kernel
def _emit(ring, count, k, seed_h, out, pos):
    """Write the shingle of the last min(count, k) units held in ``ring`` at out[pos]."""
    m = k if count >= k else count
    h = np.uint64(seed_h)
    for j in range(m):
        h = fmix64(h ^ ring[(count - m + j) % k])
    out[pos] = h


@kernel
def _shingle_one(buf, start, end, mode, k, seed_h, lower, classes, ring, out, pos):
    count = 0
    cur = FNV_OFFSET
    have = False
    pending_space = False
    started = False
    for p in range(start, end):
        c = lower[buf[p]]
        cls = classes[c]
        if mode == WORD:
            if cls == 0:
                if not have:
                    cur = FNV_OFFSET
                    have = True
                cur = (cur ^ np.uint64(c)) * FNV_PRIME
            elif have:
                ring[count % k] = fmix64(cur)
                count += 1
                have = False
                if count >= k:
                    _emit(ring, count, k, seed_h, out, pos)
                    pos += 1
        else:
            if cls == 1:
                if started:
                    pending_space = True
                continue
            if (c & 0xC0) != 0x80:
                if have:
                    ring[count % k] = fmix64(cur)
                    count += 1
                    if count >= k:
                        _emit(ring, count, k, seed_h, out, pos)
                        pos += 1
                if pending_space:
                    ring[count % k] = fmix64((FNV_OFFSET ^ _SPACE) * FNV_PRIME)
                    count += 1
                    if count >= k:
                        _emit(ring, count, k, seed_h, out, pos)
                        pos += 1
                    pending_space = False
                cur = FNV_OFFSET
                have = True
                started = True
            cur = (cur ^ np.uint64(c)) * FNV_PRIME
    if have:
        ring[count % k] = fmix64(cur)
        count += 1
        if count >= k:
            _emit(ring, count, k, seed_h, out, pos)
            pos += 1
    if 0 < count < k:
        _emit(ring, count, k, seed_h, out, pos)
        pos += 1
    return pos


@kernel(parallel=True)
def fill_shingles(buf, offsets, mode, k, seed_h, lower, classes, indptr, out):
    """Pass 2: write every document's shingle hashes into ``out[indptr[i]:indptr[i+1]]``."""
    n = offsets.size - 1
    nblocks = (n + _BLOCK - 1) // _BLOCK
    for b in numba.prange(nblocks):
        ring = np.empty(k, dtype=np.uint64)
        lo = b * _BLOCK
        hi = min(n, lo + _BLOCK)
        for i in range(lo, hi):
            _shingle_one(buf, offsets[i], offsets[i + 1], mode, k, seed_h, lower, classes, ring, out, indptr[i])


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
        lo = b * _BLOCK
        hi = min(n, lo + _BLOCK)
        for i in range(lo, hi):
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
