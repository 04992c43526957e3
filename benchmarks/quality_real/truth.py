"""Exact truth: every pair of documents whose word 5-shingle sets have Jaccard >= t (all pairs).

Independent of the library: the shingles come from textrule.py (the documented rule, written
again), and the join is a plain-Python/numpy All-Pairs with prefix filtering:

1. documents with identical shingle sets are collapsed (their pairs have J = 1); documents with
   no words have an empty set and take part in no pair (Jaccard is undefined for them);
2. tokens (shingle digests) are ordered by ascending document frequency; a set A's prefix is its
   first |A| - ceil(t|A|) + 1 tokens in that order: every pair with J >= t shares a prefix token;
3. sets are visited by ascending size; candidates come from an inverted index of earlier prefixes,
   kept only if they pass the size filter |B| >= t|A|;
4. every candidate is verified by its exact intersection and union (integer arithmetic:
   J >= t  <=>  den * |A & B| >= num * |A | B| for t = num/den).

Shingles are represented by 64-bit BLAKE2b digests of their text; a collision anywhere in a
corpus of N distinct shingles has probability about N^2 / 2^65 (< 1e-5 for the 10^7 shingles of
the man pages), and `audit` re-checks sampled pairs on the shingle strings themselves.

Results are cached in the cache folder, keyed by the SHA-256 of the corpus file, t, k and RULE.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import random
import time
from fractions import Fraction
from pathlib import Path

import numpy as np

from . import textrule
from .assemble import DEFAULT_CACHE

RULE = "textrule-v1"  # bump when textrule.py changes meaning


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


def _all_pairs(sets: list[np.ndarray], t: Fraction) -> tuple[list[int], list[int], list[int], list[int], int]:
    """Prefix-filtered exact join over distinct, non-empty sets. Returns (x, y, inter, union, candidates)."""
    m = len(sets)
    if m == 0:
        return [], [], [], [], 0
    sizes = np.fromiter((s.size for s in sets), dtype=np.int64, count=m)
    allt = np.concatenate(sets)
    uniq, inverse, df = np.unique(allt, return_inverse=True, return_counts=True)
    order = np.lexsort((uniq, df))  # ascending document frequency, ties by digest
    rank = np.empty(uniq.size, dtype=np.int64)
    rank[order] = np.arange(uniq.size)
    ranked = rank[inverse]
    starts = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(sizes, out=starts[1:])
    ranked_sets = [np.sort(ranked[starts[x] : starts[x + 1]]) for x in range(m)]
    num, den = t.numerator, t.denominator
    index: dict[int, list[int]] = {}
    out_x, out_y, out_i, out_u = [], [], [], []
    n_cand = 0
    for x in np.argsort(sizes, kind="stable").tolist():
        nx = int(sizes[x])
        ceil_t = -(-num * nx // den)
        prefix = ranked_sets[x][: nx - ceil_t + 1].tolist()
        cands = set()
        for r in prefix:
            post = index.get(r)
            if post is None:
                index[r] = [x]
                continue
            for y in post:
                if den * int(sizes[y]) >= num * nx:  # size filter (y was visited earlier: |y| <= |x|)
                    cands.add(y)
            post.append(x)
        n_cand += len(cands)
        sx = ranked_sets[x]
        for y in cands:
            inter = np.intersect1d(sx, ranked_sets[y], assume_unique=True).size
            union = nx + int(sizes[y]) - inter
            if den * inter >= num * union:
                out_x.append(min(x, y))
                out_y.append(max(x, y))
                out_i.append(inter)
                out_u.append(union)
    return out_x, out_y, out_i, out_u, n_cand


def compute(path: Path, t: float = 0.8, k: int = textrule.K) -> dict:
    t0 = time.perf_counter()
    ids, texts = read_corpus(path)
    docs = [textrule.shingle_digests(x, k) for x in texts]
    del texts
    t_tok = time.perf_counter() - t0
    n = len(docs)
    # 1. collapse identical sets
    groups: dict[bytes, list[int]] = {}
    empty = []
    for i, d in enumerate(docs):
        if d.size == 0:
            empty.append(i)
        else:
            groups.setdefault(d.tobytes(), []).append(i)
    members = list(groups.values())
    sets = [docs[g[0]] for g in members]
    # 2-4. exact join of the distinct sets
    tf = Fraction(t).limit_denominator(10_000)
    gx, gy, gi, gu, n_cand = _all_pairs(sets, tf)
    pairs: dict[tuple[int, int], tuple[int, int]] = {}
    for g in members:  # identical sets: J = 1
        s = int(docs[g[0]].size)
        for a in range(len(g)):
            for b in range(a + 1, len(g)):
                pairs[(g[a], g[b])] = (s, s)
    for x, y, inter, union in zip(gx, gy, gi, gu):
        for a in members[x]:
            for b in members[y]:
                pairs[(min(a, b), max(a, b))] = (inter, union)
    keys = sorted(pairs)
    pi = np.array([p[0] for p in keys], dtype=np.int64)
    pj = np.array([p[1] for p in keys], dtype=np.int64)
    iu = np.array([pairs[p] for p in keys], dtype=np.int64).reshape(-1, 2)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum([d.size for d in docs], out=indptr[1:])
    tokens = np.concatenate(docs) if n else np.empty(0, dtype=np.uint64)
    meta = {
        "corpus": str(path), "sha256": file_digest(path), "t": t, "t_fraction": str(tf), "k": k, "rule": RULE,
        "docs": n, "empty_docs": len(empty), "distinct_sets": len(sets), "candidates_verified": n_cand,
        "pairs": len(keys), "pairs_identical_sets": sum(len(g) * (len(g) - 1) // 2 for g in members),
        "total_shingles": int(indptr[-1]), "tokenize_seconds": round(t_tok, 2),
        "seconds": round(time.perf_counter() - t0, 2),
    }
    return {"ids": np.array(ids, dtype=str), "indptr": indptr, "tokens": tokens, "pi": pi, "pj": pj,
            "inter": iu[:, 0], "union": iu[:, 1], "meta": json.dumps(meta)}


def load_or_compute(path: Path, t: float = 0.8, k: int = textrule.K, cache: Path = DEFAULT_CACHE) -> Truth:
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
    """Recompute Jaccard on shingle *strings* for sampled truth pairs plus `extra_pairs`."""
    rnd = random.Random(seed)
    idx = list(range(truth.pi.size))
    chosen = rnd.sample(idx, min(sample, len(idx)))
    todo = [(int(truth.pi[c]), int(truth.pj[c]), int(truth.inter[c]) / int(truth.union[c])) for c in chosen]
    todo += [(i, j, truth.jaccard(i, j)) for i, j in extra_pairs]
    need = {i for p in todo for i in p[:2]}
    texts = {}
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh):
            if n in need:
                texts[n] = json.loads(line)["text"]
    cache: dict[int, set] = {}

    def sset(i):
        if i not in cache:
            cache[i] = textrule.shingle_strings(texts[i])
        return cache[i]

    bad = []
    for i, j, jh in todo:
        a, b = sset(i), sset(j)
        js = len(a & b) / len(a | b) if (a or b) else float("nan")
        if not (js == jh or (js != js and jh != jh)):
            bad.append({"i": i, "j": j, "hashed": jh, "strings": js})
    return {"pairs_checked": len(todo), "mismatches": bad}


def check_rule(path: Path, sample: int = 300, seed: int = 0) -> dict:
    """textrule.words agrees with the project's plain-Python reference (tests/reference.py) on a
    sample of documents and on a few hand-made Unicode cases."""
    ref_path = Path(__file__).resolve().parents[2] / "tests" / "reference.py"
    if not ref_path.exists():
        return {"skipped": f"{ref_path} not found"}
    spec = importlib.util.spec_from_file_location("_quality_real_reference", ref_path)
    ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref)
    _, texts = read_corpus(path)
    rnd = random.Random(seed)
    docs = rnd.sample(texts, min(sample, len(texts)))
    docs += ["Straße ＦＵＬＬ\u2028width\u00a0nbsp\u3000ideo x\x85y", "ﬁne café\u0301 İstanbul", "a-b_c.d/e", "", "!!!",
             "\x00\x1f\x7f\x80\x9fword"]
    bad = [d[:80] for d in docs if textrule.words(d) != ref.words(d)]
    return {"docs_compared": len(docs), "disagreements": len(bad), "examples": bad[:3]}


def brute_force_check(truth: Truth, max_docs: int = 800) -> dict:
    """The prefix-filtered join equals an all-pairs loop (on the first max_docs documents)."""
    n = min(truth.n, max_docs)
    t = Fraction(truth.meta["t_fraction"])
    want = set()
    for i in range(n):
        a = truth.doc(i)
        if a.size == 0:
            continue
        for j in range(i + 1, n):
            b = truth.doc(j)
            if b.size == 0:
                continue
            inter = np.intersect1d(a, b, assume_unique=True).size
            if t.denominator * inter >= t.numerator * (a.size + b.size - inter):
                want.add((i, j))
    keep = truth.pj < n
    got = set(zip(truth.pi[keep].tolist(), truth.pj[keep].tolist()))
    return {"docs": n, "pairs_brute_force": len(want), "pairs_join": len(got), "equal": want == got}


def main(argv=None) -> None:
    import argparse

    ap = argparse.ArgumentParser(description="exact Jaccard >= t pairs of a JSONL corpus")
    ap.add_argument("corpus", type=Path)
    ap.add_argument("--threshold", type=float, default=0.8)
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    args = ap.parse_args(argv)
    truth = load_or_compute(args.corpus, args.threshold, cache=args.cache)
    print(json.dumps(truth.meta, indent=1))


if __name__ == "__main__":
    main()
