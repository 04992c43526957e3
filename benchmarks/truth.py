"""Exact truth, the one module every suite scores against: all pairs with Jaccard ≥ t over shingle
sets (:func:`similarity_join`), all pairs with cosine ≥ t over vectors (:func:`cosine_pairs`), the
connected components of either, and a real corpus's cached truth (:class:`Truth`).

Jaccard, no O(n²) loop: documents' sets are ordered by a global token order (rarest first); a pair with
Jaccard ≥ t must share a token within both prefixes of length ``|x| - ceil(t·|x|) + 1`` (the
prefix-filtering principle), so candidates come from grouping prefix entries by token. Candidates
then pass a length filter and an exact intersection count (scipy sparse element-wise product).
The threshold is taken as a fraction (``0.8`` = 4/5) and every comparison is integer arithmetic.
Everything is numpy/scipy over flat arrays; nothing here imports the library.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from fractions import Fraction
from pathlib import Path

import numpy as np

from . import reference
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
    pairs, inter, union, stats = join_counts(indptr, hashes, threshold, chunk=chunk)
    return pairs, np.where(union > 0, inter / np.maximum(union, 1), 0.0), stats


def _fraction(threshold: float) -> tuple[int, int]:
    f = Fraction(threshold).limit_denominator(10_000)
    return f.numerator, f.denominator


def _prefix_candidates(ip, tok, n_tok: int, num: int, den: int, chunk: int) -> tuple[np.ndarray, int, int]:
    """Candidate pairs (lo * n + hi, sorted, unique): documents sharing a token within both prefixes."""
    n = ip.size - 1
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
    need = -(-num * sizes // den)  # ceil(t·|x|)
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
    later = np.repeat(gsize, gsize) - 1 - _ranges(gsize)
    n_raw = int(later.sum())
    entry = np.arange(pref_doc.size, dtype=np.int64)
    # Emit in slices of entries to bound memory on giant groups; skip entries with nothing after.
    has = later > 0
    entry, later = entry[has], later[has]
    cand_chunks = []
    for s in range(0, entry.size, max(1, chunk)):
        e, cnt = entry[s : s + chunk], later[s : s + chunk]
        if cnt.sum() == 0:
            continue
        left = np.repeat(e, cnt)
        right = left + 1 + _ranges(cnt)
        a, b = pref_doc[left], pref_doc[right]
        lo, hi = np.minimum(a, b), np.maximum(a, b)
        keep = lo != hi
        cand_chunks.append(_sorted_unique(lo[keep] * n + hi[keep]))
    cand = _sorted_unique(np.concatenate(cand_chunks)) if cand_chunks else np.zeros(0, dtype=np.int64)
    return cand, n_raw, int(pref_doc.size)


def join_counts(indptr: np.ndarray, hashes: np.ndarray, threshold: float, *, chunk: int = 20_000):
    """:func:`similarity_join` with the exact counts: (pairs, |A ∩ B|, |A ∪ B|, stats)."""
    n = indptr.size - 1
    num, den = _fraction(threshold)
    ip, tok, n_tok = dedupe_sets(indptr, hashes)
    sizes = np.diff(ip)
    cand, n_raw, n_prefix = _prefix_candidates(ip, tok, n_tok, num, den, chunk)
    ci, cj = cand // max(n, 1), cand % max(n, 1)
    # Length filter: J ≥ t needs t·|x| ≤ |y| ≤ |x|/t.
    si, sj = sizes[ci], sizes[cj]
    ok = den * np.minimum(si, sj) >= num * np.maximum(si, sj)
    ci, cj = ci[ok], cj[ok]
    inter = intersections(ip, tok, n_tok, ci, cj)
    union = sizes[ci] + sizes[cj] - inter
    hit = (den * inter >= num * union) & (union > 0)
    stats = dict(n_docs=int(n), n_tokens=int(n_tok), prefix_entries=n_prefix, raw_candidates=n_raw,
                 candidates=int(cand.size), after_length_filter=int(ci.size), pairs=int(hit.sum()))
    return np.stack([ci[hit], cj[hit]], axis=1), inter[hit], union[hit], stats


def intersections(ip, tok, n_tok, ci, cj, *, chunk: int = 20_000) -> np.ndarray:
    """Exact |set_i ∩ set_j| for each candidate pair, via sparse element-wise products."""
    n = ip.size - 1
    import scipy.sparse as sp  # (the harness lists the suites without scipy)

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
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components

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



def cosine_pairs(v: np.ndarray, t: float, margin: float = 1e-3) -> tuple[np.ndarray, np.ndarray]:
    """All pairs i<j with cosine ≥ t: FAISS flat range search at t - margin (float32), then the
    survivors' cosine recomputed in float64 and cut at t."""
    import faiss

    x = np.ascontiguousarray(v, dtype=np.float32)
    index = faiss.IndexFlatIP(x.shape[1])
    index.add(x)
    lims, _, ids = index.range_search(x, float(t - margin))
    q = np.repeat(np.arange(x.shape[0], dtype=np.int64), np.diff(lims).astype(np.int64))
    ids = ids.astype(np.int64)
    keep = q < ids
    a, b = q[keep], ids[keep]
    x64 = np.asarray(v, dtype=np.float64)
    x64 /= np.linalg.norm(x64, axis=1, keepdims=True)
    cos = np.einsum("ij,ij->i", x64[a], x64[b])
    ok = cos >= t
    return np.stack([a[ok], b[ok]], axis=1), cos[ok]


# --------------------------------------------------------------------------- a real corpus's truth
# Every pair of a JSONL corpus (``id``, ``text``) whose word 5-shingle sets have Jaccard >= t, on
# the reference rule's shingle digests: documents with identical sets are collapsed first (their
# pairs have J = 1; documents without words take part in no pair), the distinct sets go through
# :func:`join_counts`, and :func:`audit` re-checks sampled pairs on the shingle strings themselves.
# Cached in the suite's cache folder, keyed by the SHA-256 of the corpus file, t, k and RULE.

RULE = "textrule-v1"  # bump when reference.words or reference.shingle_digests change meaning


def file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_corpus(path: Path) -> tuple[list[str], list[str]]:
    ids, texts = [], []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            ids.append(rec["id"])
            texts.append(rec["text"])
    return ids, texts


class Truth:
    """Exact pairs of one corpus plus every document's shingle set (for later exact Jaccards)."""

    def __init__(self, data: dict):
        self.ids = list(data["ids"])
        self.indptr = data["indptr"]
        self.tokens = data["tokens"]  # per document: sorted distinct uint64 shingle digests
        self.pi, self.pj = data["pi"], data["pj"]  # i < j, sorted
        self.inter, self.union = data["inter"], data["union"]
        self.meta = json.loads(str(data["meta"]))
        self.sizes = np.diff(self.indptr)

    @property
    def n(self) -> int:
        return len(self.ids)

    def doc(self, i: int) -> np.ndarray:
        return self.tokens[self.indptr[i] : self.indptr[i + 1]]

    def jaccard(self, i: int, j: int) -> float:
        """Exact Jaccard of two documents' shingle sets (nan if both are empty)."""
        a, b = self.doc(i), self.doc(j)
        if a.size == 0 and b.size == 0:
            return float("nan")
        inter = np.intersect1d(a, b, assume_unique=True).size
        return inter / (a.size + b.size - inter)


def _distinct_pairs(docs: list[np.ndarray], t: float) -> tuple[dict, list[list[int]], dict]:
    """{(i, j): (inter, union)} over every pair with J >= t; the groups of identical sets; join stats."""
    groups: dict[bytes, list[int]] = {}
    for i, d in enumerate(docs):
        if d.size:
            groups.setdefault(d.tobytes(), []).append(i)
    members = list(groups.values())
    sets = [docs[g[0]] for g in members]
    pairs: dict[tuple[int, int], tuple[int, int]] = {}
    for g in members:  # identical sets: J = 1
        s = int(docs[g[0]].size)
        for a in range(len(g)):
            for b in range(a + 1, len(g)):
                pairs[(g[a], g[b])] = (s, s)
    indptr = np.zeros(len(sets) + 1, dtype=np.int64)
    np.cumsum([s.size for s in sets], out=indptr[1:])
    flat = np.concatenate(sets) if sets else np.empty(0, dtype=np.uint64)
    found, inter, union, stats = join_counts(indptr, flat, t)
    for (x, y), i_, u_ in zip(found.tolist(), inter.tolist(), union.tolist()):
        for a in members[x]:
            for b in members[y]:
                pairs[(min(a, b), max(a, b))] = (i_, u_)
    return pairs, members, stats


def compute(path: Path, t: float = 0.8, k: int = reference.K) -> dict:
    t0 = time.perf_counter()
    ids, texts = read_corpus(path)
    docs = [reference.shingle_digests(x, k) for x in texts]
    del texts
    t_tok = time.perf_counter() - t0
    n = len(docs)
    pairs, members, stats = _distinct_pairs(docs, t)
    keys = sorted(pairs)
    iu = np.array([pairs[p] for p in keys], dtype=np.int64).reshape(-1, 2)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum([d.size for d in docs], out=indptr[1:])
    num, den = _fraction(t)
    meta = {
        "corpus": str(path), "sha256": file_digest(path), "t": t, "t_fraction": f"{num}/{den}", "k": k, "rule": RULE,
        "docs": n, "empty_docs": sum(1 for d in docs if d.size == 0), "distinct_sets": len(members),
        "candidates_verified": stats["after_length_filter"], "pairs": len(keys),
        "pairs_identical_sets": sum(len(g) * (len(g) - 1) // 2 for g in members),
        "total_shingles": int(indptr[-1]), "tokenize_seconds": round(t_tok, 2),
        "seconds": round(time.perf_counter() - t0, 2),
    }
    return {"ids": np.array(ids, dtype=str), "indptr": indptr,
            "tokens": np.concatenate(docs) if n else np.empty(0, dtype=np.uint64),
            "pi": np.array([p[0] for p in keys], dtype=np.int64), "pj": np.array([p[1] for p in keys], dtype=np.int64),
            "inter": iu[:, 0], "union": iu[:, 1], "meta": json.dumps(meta)}


def load_or_compute(path: Path, t: float, k: int = reference.K, *, cache: Path) -> Truth:
    key = hashlib.sha256(f"{file_digest(path)}|{t}|{k}|{RULE}".encode()).hexdigest()[:24]
    f = cache / f"truth_{Path(path).stem}_{key}.npz"
    if f.exists():
        with np.load(f) as z:
            data = {name: z[name] for name in z.files}
        truth = Truth(data)
        truth.meta["cached"] = True
        return truth
    data = compute(path, t, k)
    tmp = f.with_name(f.name + ".tmp.npz")
    np.savez(tmp, **data)
    tmp.replace(f)
    truth = Truth(data)
    truth.meta["cached"] = False
    return truth


def audit(path: Path, truth: Truth, extra_pairs=(), sample: int = 1000, seed: int = 0) -> dict:
    """Recompute Jaccard on shingle *strings* for sampled truth pairs plus ``extra_pairs``."""
    rnd = random.Random(seed)
    chosen = rnd.sample(range(truth.pi.size), min(sample, truth.pi.size))
    todo = [(int(truth.pi[c]), int(truth.pj[c]), int(truth.inter[c]) / int(truth.union[c])) for c in chosen]
    todo += [(i, j, truth.jaccard(i, j)) for i, j in extra_pairs]
    need = {i for p in todo for i in p[:2]}
    sets = {}
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh):
            if n in need:
                sets[n] = reference.shingle_set(json.loads(line)["text"])
    bad = []
    for i, j, jh in todo:
        a, b = sets[i], sets[j]
        js = len(a & b) / len(a | b) if (a or b) else float("nan")
        if not (js == jh or (js != js and jh != jh)):
            bad.append({"i": i, "j": j, "hashed": jh, "strings": js})
    return {"pairs_checked": len(todo), "mismatches": bad}


def brute_force_check(truth: Truth, max_docs: int = 800) -> dict:
    """The join equals an all-pairs loop (on the first ``max_docs`` documents)."""
    n = min(truth.n, max_docs)
    t = Fraction(truth.meta["t_fraction"])
    want = set()
    for i in range(n):
        a = truth.doc(i)
        for j in range(i + 1, n):
            b = truth.doc(j)
            if a.size == 0 or b.size == 0:
                continue
            inter = np.intersect1d(a, b, assume_unique=True).size
            if t.denominator * inter >= t.numerator * (a.size + b.size - inter):
                want.add((i, j))
    keep = truth.pj < n
    got = set(zip(truth.pi[keep].tolist(), truth.pj[keep].tolist()))
    return {"docs": n, "pairs_brute_force": len(want), "pairs_join": len(got), "equal": want == got}
