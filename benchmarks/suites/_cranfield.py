"""Cranfield for the retrieval suite: BM25 top-50, nDCG@10 and redundancy before/after ``select``."""

from __future__ import annotations

import re
import time

import numpy as np

# BM25 parameters, candidates per query, cut-off of nDCG/redundancy, diversify.build thresholds
K1, B = 1.2, 0.75
TOP_N = 50
K = 10
CRAN_THRESHOLDS = (0.8, 0.5)  # 0.8 = default BuildConfig

_TOKEN = re.compile(r"[a-z0-9]+")


def tokenize(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


class BM25:
    def __init__(self, texts, k1: float = K1, b: float = B):
        from scipy import sparse

        vocab: dict[str, int] = {}
        rows, cols, vals = [], [], []
        lengths = np.zeros(len(texts), dtype=np.float64)
        for i, t in enumerate(texts):
            toks = tokenize(t)
            lengths[i] = len(toks)
            counts: dict[int, int] = {}
            for w in toks:
                j = vocab.setdefault(w, len(vocab))
                counts[j] = counts.get(j, 0) + 1
            rows.extend([i] * len(counts))
            cols.extend(counts.keys())
            vals.extend(counts.values())
        tf = sparse.csr_matrix((np.asarray(vals, np.float64), (rows, cols)), shape=(len(texts), len(vocab)))
        n = len(texts)
        df = np.bincount(tf.indices, minlength=len(vocab)).astype(np.float64)
        idf = np.log1p((n - df + 0.5) / (df + 0.5))
        norm = k1 * (1.0 - b + b * lengths / lengths.mean())  # per document
        tf = tf.tocoo()
        w = idf[tf.col] * tf.data * (k1 + 1.0) / (tf.data + norm[tf.row])
        self.weights = sparse.csc_matrix((w, (tf.row, tf.col)), shape=tf.shape)
        self.vocab = vocab
        self.n = n

    def scores(self, query: str) -> np.ndarray:
        cols = sorted({self.vocab[w] for w in tokenize(query) if w in self.vocab})
        if not cols:
            return np.zeros(self.n)
        return np.asarray(self.weights[:, cols].sum(axis=1)).ravel()

    def top(self, query: str, n: int):
        s = self.scores(query)
        order = np.lexsort((np.arange(self.n), -s))[:n]  # score desc, then index asc
        return order, s[order]


def gain(code: int) -> float:
    return float(5 - code) if 1 <= code <= 4 else 0.0


def ndcg(ranked_ids, judged: dict[int, int], k: int = K, binary: bool = False) -> float:
    g = (lambda c: 1.0 if 1 <= c <= 4 else 0.0) if binary else gain
    disc = 1.0 / np.log2(np.arange(2, k + 2))
    dcg = sum(g(judged.get(d, 0)) * disc[i] for i, d in enumerate(ranked_ids[:k]))
    ideal = sorted((g(c) for c in judged.values()), reverse=True)[:k]
    idcg = sum(x * disc[i] for i, x in enumerate(ideal))
    return dcg / idcg if idcg > 0 else float("nan")


def redundancy(cluster_ids) -> int:
    seen, red = set(), 0
    for c in cluster_ids:
        if c in seen:
            red += 1
        seen.add(c)
    return red


def _changed(ids, kept, cid_of, judged) -> dict:
    top = ids[:K]
    return {"before": top, "after": kept,
            "removed": [[d, judged.get(d)] for d in top if d not in kept],
            # the higher kept hit of the removed one's cluster, and its code
            "kept_twin": [[t, judged.get(t)] for d in top if d not in kept for t in kept if cid_of[t] == cid_of[d]][:1],
            "added": [[d, judged.get(d)] for d in kept if d not in top],
            "ndcg10_graded": [ndcg(top, judged) if judged else None, ndcg(kept, judged) if judged else None]}


def _select_all(cm, tops, qrels) -> tuple[dict, list, list, int]:
    """select() on every query's top-50: changed queries, redundancy@10 before/after, hits omitted."""
    from diversify import Hit, select

    per_q, red_before, red_after, omitted = {}, [], [], 0
    for q, (ids, sc) in enumerate(tops, start=1):
        cids = cm.lookup(ids)
        r = select([Hit(i, s) for i, s in zip(ids, sc)], cids, k=K)
        kept = [h.hit.id for h in r.hits]
        cid_of = dict(zip(ids, (int(c) for c in cids)))
        red_before.append(redundancy(cid_of[i] for i in ids[:K]))
        red_after.append(redundancy(cid_of[i] for i in kept))
        omitted += r.omitted
        if kept != ids[:K]:
            per_q[q] = _changed(ids, kept, cid_of, qrels.get(q, {}))
    return per_q, red_before, red_after, omitted


def _threshold_run(thr, doc_ids, texts, tops, qrels, qnos, base_graded, base_binary) -> dict:
    import diversify

    t0 = time.perf_counter()
    res = diversify.build(texts, ids=doc_ids, config=diversify.BuildConfig(minhash=diversify.MinHashConfig(threshold=thr)))
    t_build = time.perf_counter() - t0
    cm = res.cluster_map
    sizes = np.bincount(np.unique(res.cluster_ids, return_inverse=True)[1])
    multi = [[doc_ids[i] for i in np.flatnonzero(res.cluster_ids == c)]
             for c in np.unique(res.cluster_ids) if (res.cluster_ids == c).sum() > 1]
    per_q, red_before, red_after, omitted = _select_all(cm, tops, qrels)
    kept_of = {q: per_q.get(q, {"after": tops[q - 1][0][:K]})["after"] for q in qnos}
    g_after = [ndcg(kept_of[q], qrels[q]) for q in qnos]
    b_after = [ndcg(kept_of[q], qrels[q], binary=True) for q in qnos]
    delta = np.asarray(g_after) - np.asarray(base_graded)
    return {
        "config": f"BuildConfig(minhash=MinHashConfig(threshold={thr}))" + (" (default)" if thr == 0.8 else ""),
        "threshold": thr, "build_seconds": round(t_build, 3), "n_clusters": int(cm.n_clusters),
        "n_duplicates": int(cm.n_duplicates), "largest_cluster": int(sizes.max()), "multi_member_clusters": multi,
        "ndcg10_graded": {"before": float(np.mean(base_graded)), "after": float(np.mean(g_after))},
        "ndcg10_binary": {"before": float(np.mean(base_binary)), "after": float(np.mean(b_after))},
        "queries_ndcg_up": int((delta > 1e-12).sum()), "queries_ndcg_down": int((delta < -1e-12).sum()),
        "queries_top10_changed": len(per_q), "hits_omitted_total": int(omitted),
        "redundancy10": {"before_total": int(sum(red_before)), "after_total": int(sum(red_after)),
                         "before_mean": float(np.mean(red_before)), "after_mean": float(np.mean(red_after)),
                         "queries_with_any_before": int(sum(1 for x in red_before if x))},
        "changed_queries": {str(q): v for q, v in per_q.items()},
    }


def run_cranfield() -> dict:
    from .. import data

    doc_ids, texts, queries, qrels = data.cranfield()
    t0 = time.perf_counter()
    bm25 = BM25(texts)
    t_index = time.perf_counter() - t0
    tops = []
    for q in queries:
        idx, sc = bm25.top(q, TOP_N)
        tops.append(([doc_ids[i] for i in idx], [float(x) for x in sc]))
    qnos = [q for q in range(1, len(queries) + 1) if any(1 <= c <= 4 for c in qrels.get(q, {}).values())]
    base_graded = [ndcg(tops[q - 1][0], qrels[q]) for q in qnos]
    base_binary = [ndcg(tops[q - 1][0], qrels[q], binary=True) for q in qnos]
    return {
        "docs": len(texts), "queries_in_file": len(queries), "queries_evaluated": len(qnos),
        "qrels_rows": sum(len(v) for v in qrels.values()),
        "bm25": {"k1": K1, "b": B, "vocab": len(bm25.vocab), "index_seconds": round(t_index, 3)},
        "top_n": TOP_N, "k": K,
        "runs": [_threshold_run(thr, doc_ids, texts, tops, qrels, qnos, base_graded, base_binary)
                 for thr in CRAN_THRESHOLDS],
    }
