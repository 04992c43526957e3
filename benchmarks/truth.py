"""Exact all-pairs Jaccard similarity join over shingle-hash sets (prefix filtering + exact check).

No O(n²) loop: documents' sets are ordered by a global token order (rarest first); a pair with
Jaccard ≥ t must share a token within both prefixes of length ``|x| - ceil(t·|x|) + 1`` (the
prefix-filtering principle), so candidates come from grouping prefix entries by token. Candidates
then pass a length filter and an exact intersection count (scipy sparse element-wise product).
Everything is numpy/scipy over flat arrays; nothing here imports the library.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from .reference import _ranges


def dedupe_sets(indptr: np.ndarray, hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Per-document sets as CSR over dense token ids: (indptr, token ids int64 sorted per row, T)."""
    n = indptr.size - 1
    doc = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    tok, n_tok = _dense_ids(hashes)
    key = _sorted_unique(doc * max(n_tok, 1) + tok)
    doc_u = key // max(n_tok, 1)
    tok_u = key - doc_u * max(n_tok, 1)
    new_indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(doc_u, minlength=n), out=new_indptr[1:])
    return new_indptr, tok_u, n_tok


def _sorted_unique(x: np.ndarray) -> np.ndarray:
    # Sort-based; numpy 2.x's hash-based np.unique is several times slower on 10⁸ uint64.
    x = np.sort(x)
    if x.size == 0:
        return x
    return x[np.r_[True, x[1:] != x[:-1]]]


def _dense_ids(values: np.ndarray) -> tuple[np.ndarray, int]:
    """Dense ids 0..T-1 in sorted value order, int64, and T."""
    if values.size == 0:
        return np.zeros(0, dtype=np.int64), 0
    order = np.argsort(values)
    v = values[order]
    new = np.r_[True, v[1:] != v[:-1]]
    ids_sorted = np.cumsum(new) - 1
    ids = np.empty(values.size, dtype=np.int64)
    ids[order] = ids_sorted
    return ids, int(ids_sorted[-1]) + 1


def similarity_join(indptr: np.ndarray, hashes: np.ndarray, threshold: float, *, chunk: int = 20_000):
    """All pairs with exact Jaccard ≥ ``threshold`` (0 < threshold ≤ 1).

    Returns
    -------
    pairs : int64 (m, 2), i < j, sorted
    jaccard : float64 (m,)
    stats : dict (candidates, set sizes, ...)
    """
    n = indptr.size - 1
    ip, tok, n_tok = dedupe_sets(indptr, hashes)
    sizes = np.diff(ip)
    doc = np.repeat(np.arange(n, dtype=np.int64), sizes)
    # Global order: rarest token first (ties by id) → short, selective prefixes.
    df = np.bincount(tok, minlength=n_tok)
    order = np.lexsort((np.arange(n_tok), df))
    rank = np.empty(n_tok, dtype=np.int64)
    rank[order] = np.arange(n_tok, dtype=np.int64)
    r = rank[tok]
    srt = np.argsort(doc * max(n_tok, 1) + r)  # by doc, then rank
    r_sorted = r[srt]
    pos = np.arange(tok.size, dtype=np.int64) - np.repeat(ip[:-1], sizes)
    # Prefix length; the epsilon guards float error in t·|x| for exact products.
    need = np.ceil(threshold * sizes - 1e-9).astype(np.int64)
    plen = np.where(sizes > 0, sizes - need + 1, 0)
    in_prefix = pos < np.repeat(plen, sizes)
    pref_doc = doc[in_prefix]  # doc is already sorted, and srt keeps doc order
    pref_tok = r_sorted[in_prefix]
    # Group prefix entries by token; every pair of documents in a group is a candidate.
    g = np.argsort(pref_tok * n + pref_doc)
    pref_doc, pref_tok = pref_doc[g], pref_tok[g]
    starts = np.flatnonzero(np.r_[True, pref_tok[1:] != pref_tok[:-1]])
    gsize = np.diff(np.r_[starts, pref_tok.size])
    # Entry at offset q of a group of size m pairs with the m-1-q entries after it.
    q = _ranges(gsize)
    later = np.repeat(gsize, gsize) - 1 - q
    n_raw = int(later.sum())
    cand_chunks = []
    entry = np.arange(pref_doc.size, dtype=np.int64)
    # Emit in slices of entries to bound memory on giant groups; skip entries with nothing after.
    has = later > 0
    entry, later = entry[has], later[has]
    step = max(1, chunk)
    for s in range(0, entry.size, step):
        e = entry[s : s + step]
        cnt = later[s : s + step]
        if cnt.sum() == 0:
            continue
        left = np.repeat(e, cnt)
        right = left + 1 + _ranges(cnt)
        a, b = pref_doc[left], pref_doc[right]
        lo, hi = np.minimum(a, b), np.maximum(a, b)
        keep = lo != hi
        cand_chunks.append(_sorted_unique(lo[keep] * n + hi[keep]))
    cand = _sorted_unique(np.concatenate(cand_chunks)) if cand_chunks else np.zeros(0, dtype=np.int64)
    ci, cj = cand // n, cand % n
    # Length filter: J ≥ t needs t·|x| ≤ |y| ≤ |x|/t.
    si, sj = sizes[ci], sizes[cj]
    ok = (np.minimum(si, sj) >= threshold * np.maximum(si, sj) - 1e-9)
    ci, cj = ci[ok], cj[ok]
    inter = intersections(ip, tok, n_tok, ci, cj)
    union = sizes[ci] + sizes[cj] - inter
    jac = np.where(union > 0, inter / np.maximum(union, 1), 0.0)
    hit = jac >= threshold - 1e-12
    pairs = np.stack([ci[hit], cj[hit]], axis=1)
    stats = dict(n_docs=int(n), n_tokens=int(n_tok), prefix_entries=int(pref_doc.size),
                 raw_candidates=n_raw, candidates=int(cand.size), after_length_filter=int(ci.size),
                 pairs=int(hit.sum()))
    return pairs, jac[hit], stats


def intersections(ip, tok, n_tok, ci, cj, *, chunk: int = 20_000) -> np.ndarray:
    """Exact |set_i ∩ set_j| for each candidate pair, via sparse element-wise products."""
    n = ip.size - 1
    a = sp.csr_matrix((np.ones(tok.size, dtype=np.int32), tok, ip), shape=(n, max(n_tok, 1)))
    a.has_sorted_indices = True
    out = np.empty(ci.size, dtype=np.int64)
    for s in range(0, ci.size, chunk):
        x = a[ci[s : s + chunk]]
        y = a[cj[s : s + chunk]]
        out[s : s + chunk] = np.asarray(x.multiply(y).sum(axis=1)).ravel()
    return out


def components(n: int, pairs: np.ndarray) -> np.ndarray:
    """Connected-component label per document (smallest member), int64 (n,)."""
    if pairs.size == 0:
        return np.arange(n, dtype=np.int64)
    g = sp.coo_matrix((np.ones(len(pairs), dtype=np.int8), (pairs[:, 0], pairs[:, 1])), shape=(n, n))
    _, lab = connected_components(g, directed=False)
    smallest = np.full(lab.max() + 1, n, dtype=np.int64)
    np.minimum.at(smallest, lab, np.arange(n, dtype=np.int64))
    return smallest[lab]


def brute_force(indptr, hashes, threshold):
    """O(n²) reference for tests of this module on tiny inputs."""
    sets = [set(hashes[indptr[i] : indptr[i + 1]].tolist()) for i in range(indptr.size - 1)]
    out = []
    for i in range(len(sets)):
        for j in range(i + 1, len(sets)):
            u = len(sets[i] | sets[j])
            if u and len(sets[i] & sets[j]) / u >= threshold - 1e-12:
                out.append((i, j))
    return out


_ = math
