"""Retrieval quality on real labeled data: Cranfield nDCG@10 before/after diversification, and
STS-B correlation / pair precision-recall of shingle Jaccard and of diversify's clusters.

``python -m benchmarks.retrieval`` writes ``benchmarks/results/retrieval.json``;
:func:`render_markdown` turns that dict into a RESULTS.md section (``--markdown`` prints it).

Data: ``../shared/data/{cranfield,stsb}`` next to the repository (or ``$DIVERSIFY_DATA``); it is
not part of the repository. Nothing is downloaded.

Cranfield (1,400 abstracts, 225 queries, graded qrels):

* document text = the ``.W`` field (it repeats the title); query number = position in
  ``cran.qry`` (1..225), as ``cranqrel`` uses (the ``.I`` numbers in ``cran.qry`` are not).
* BM25 (k1=1.2, b=0.75, idf = ln(1 + (N - df + 0.5) / (df + 0.5))), tokens = lowercase runs of
  ``[a-z0-9]``, each distinct query term counted once; ties broken by doc id.
* clusters: ``diversify.build(texts, ids=doc_ids, config=...)``; per query the BM25 top-50 go through
  ``diversify.online.select(hits, cluster_map.lookup(ids), k=10)``.
* nDCG@10: gain = 5 - code for cranqrel codes 1..4 (1 = complete answer -> gain 4, 4 = minimum
  interest -> gain 1), code -1 or unjudged -> 0; discount 1/log2(rank+1); ideal DCG from all judged
  gains of the query. A binary variant (codes 1..4 relevant) is reported too.
* redundancy@10: hits in the top 10 that share a cluster with a higher-ranked hit.

STS-B (test split, 1,379 pairs, read with ``csv.QUOTE_NONE``): exact Jaccard of word 5-shingles
(``diversify.evaluate.jaccard_pairs``) and character 5-shingles; Spearman vs the 0-5 score; pair
P/R/F1 of "Jaccard >= t" and of "both sentences in one diversify cluster" against "score >= 4".
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "retrieval.json"
COMMAND = "python -m benchmarks.retrieval"

K1, B = 1.2, 0.75
TOP_N = 50
K = 10
STS_POSITIVE_MIN = 4.0
JACCARD_THRESHOLDS = (0.5, 0.8)
CRAN_THRESHOLDS = (0.8, 0.5)  # 0.8 = default BuildConfig
TEXT_REPR = {"word5": "TextConfig()", "char5": 'TextConfig(shingle="char", k=5)'}


def data_dir() -> Path:
    env = os.environ.get("DIVERSIFY_DATA")
    return Path(env) if env else ROOT.parent / "shared" / "data"


# ----------------------------------------------------------------------------------------- Cranfield

def _parse_fields(path: Path) -> list[tuple[str, dict]]:
    """Split a SMART-style file into records: (.I value, {field letter: text})."""
    records = []
    cur_id, cur, field = None, None, None
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith(".I "):
            if cur is not None:
                records.append((cur_id, cur))
            cur_id, cur, field = line[3:].strip(), {}, None
        elif len(line) == 2 and line[0] == "." and line[1].isalpha():
            field = line[1]
            cur.setdefault(field, [])
        elif field is not None:
            cur[field].append(line)
    if cur is not None:
        records.append((cur_id, cur))
    return [(i, {f: " ".join(v).strip() for f, v in rec.items()}) for i, rec in records]


def load_cranfield(root: Path):
    docs = _parse_fields(root / "cran.all.1400")
    doc_ids = [int(i) for i, _ in docs]
    if doc_ids != list(range(1, len(docs) + 1)):
        raise RuntimeError("cran.all.1400: .I numbers are not 1..n in order")
    texts = [rec.get("W", "") or rec.get("T", "") for _, rec in docs]
    queries = [rec.get("W", "") for _, rec in _parse_fields(root / "cran.qry")]
    qrels: dict[int, dict[int, int]] = {}
    for line in (root / "cranqrel").read_text().splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        q, d, code = int(parts[0]), int(parts[1]), int(parts[2])
        qrels.setdefault(q, {})[d] = code
    return doc_ids, texts, queries, qrels


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
        avgdl = lengths.mean()
        norm = k1 * (1.0 - b + b * lengths / avgdl)  # per document
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


def run_cranfield(root: Path) -> dict:
    import diversify
    from diversify import BuildConfig, MinHashConfig
    from diversify.online import Hit, select

    doc_ids, texts, queries, qrels = load_cranfield(root)
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
    out = {
        "docs": len(texts),
        "queries_in_file": len(queries),
        "queries_evaluated": len(qnos),
        "qrels_rows": sum(len(v) for v in qrels.values()),
        "bm25": {"k1": K1, "b": B, "vocab": len(bm25.vocab), "index_seconds": round(t_index, 3)},
        "top_n": TOP_N, "k": K,
        "runs": [],
    }
    for thr in CRAN_THRESHOLDS:
        cfg = BuildConfig(minhash=MinHashConfig(threshold=thr))
        t0 = time.perf_counter()
        res = diversify.build(texts, ids=doc_ids, config=cfg)
        t_build = time.perf_counter() - t0
        cm = res.cluster_map
        sizes = np.bincount(np.unique(res.cluster_ids, return_inverse=True)[1])
        multi = [[doc_ids[i] for i in np.flatnonzero(res.cluster_ids == c)]
                 for c in np.unique(res.cluster_ids) if (res.cluster_ids == c).sum() > 1]
        g_after, b_after, red_before, red_after, changed, omitted = [], [], [], [], 0, 0
        per_q = {}
        for q in range(1, len(queries) + 1):
            ids, sc = tops[q - 1]
            cids = cm.lookup(ids)
            r = select([Hit(i, s) for i, s in zip(ids, sc)], cids, k=K)
            kept = [h.hit.id for h in r.hits]
            cid_of = dict(zip(ids, (int(c) for c in cids)))
            red_before.append(redundancy(cid_of[i] for i in ids[:K]))
            red_after.append(redundancy(cid_of[i] for i in kept))
            omitted += r.omitted
            if kept != ids[:K]:
                changed += 1
                judged = qrels.get(q, {})
                per_q[q] = {"before": ids[:K], "after": kept,
                            "removed": [[d, judged.get(d)] for d in ids[:K] if d not in kept],
                            # the higher kept hit of the removed one's cluster, and its code
                            "kept_twin": [[t, judged.get(t)] for d in ids[:K] if d not in kept
                                          for t in kept if cid_of[t] == cid_of[d]][:1],
                            "added": [[d, judged.get(d)] for d in kept if d not in ids[:K]],
                            "ndcg10_graded": [ndcg(ids[:K], judged) if judged else None,
                                              ndcg(kept, judged) if judged else None]}
        for q in qnos:
            ids, _ = tops[q - 1]
            kept = per_q.get(q, {"after": ids[:K]})["after"]
            g_after.append(ndcg(kept, qrels[q]))
            b_after.append(ndcg(kept, qrels[q], binary=True))
        delta = np.asarray(g_after) - np.asarray(base_graded)
        out["runs"].append({
            "config": f"BuildConfig(minhash=MinHashConfig(threshold={thr}))" + (" (default)" if thr == 0.8 else ""),
            "threshold": thr,
            "build_seconds": round(t_build, 3),
            "n_clusters": int(cm.n_clusters),
            "n_duplicates": int(cm.n_duplicates),
            "largest_cluster": int(sizes.max()),
            "multi_member_clusters": multi,
            "ndcg10_graded": {"before": float(np.mean(base_graded)), "after": float(np.mean(g_after))},
            "ndcg10_binary": {"before": float(np.mean(base_binary)), "after": float(np.mean(b_after))},
            "queries_ndcg_up": int((delta > 1e-12).sum()),
            "queries_ndcg_down": int((delta < -1e-12).sum()),
            "queries_top10_changed": changed,
            "hits_omitted_total": int(omitted),
            "redundancy10": {"before_total": int(sum(red_before)), "after_total": int(sum(red_after)),
                             "before_mean": float(np.mean(red_before)), "after_mean": float(np.mean(red_after)),
                             "queries_with_any_before": int(sum(1 for x in red_before if x))},
            "changed_queries": {str(q): v for q, v in per_q.items()},
        })
    return out


# -------------------------------------------------------------------------------------------- STS-B

def load_stsb(path: Path):
    s1, s2, score = [], [], []
    with path.open(encoding="utf-8") as f:
        for row in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
            if len(row) < 7:
                continue
            score.append(float(row[4]))
            s1.append(row[5])
            s2.append(row[6])
    return s1, s2, np.asarray(score)


# diversify's word rule (diversify/text.py): runs of characters that are neither whitespace nor ASCII punctuation
_DIV_WORD = re.compile(r"[^\s!-/:-@\[-`{-~]+")


def _pm(pred, gold) -> dict:
    from diversify.evaluate import pair_metrics

    d = pair_metrics(np.asarray(pred, bool), np.asarray(gold, bool)).as_dict()
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in d.items()}


def run_stsb(root: Path) -> dict:
    import diversify
    from diversify import BuildConfig, MinHashConfig, TextConfig
    from diversify.evaluate import jaccard_pairs
    from scipy.stats import spearmanr

    s1, s2, score = load_stsb(root / "sts-test.csv")
    gold = score >= STS_POSITIVE_MIN
    shingles = {"word5": TextConfig(), "char5": TextConfig(shingle="char", k=5)}
    out = {"pairs": len(s1), "positives": int(gold.sum()), "positive_rule": f"score >= {STS_POSITIVE_MIN}",
           "short_pairs_word5": int(sum(1 for a, b in zip(s1, s2) if min(len(_DIV_WORD.findall(a)), len(_DIV_WORD.findall(b))) < 5)),
           "jaccard": {}, "clusters": []}
    for name, tc in shingles.items():
        j = jaccard_pairs(s1, s2, tc)
        rho, p = spearmanr(j, score)
        out["jaccard"][name] = {
            "spearman": round(float(rho), 4), "p_value": float(p),
            "mean_positive": round(float(j[gold].mean()), 4), "mean_negative": round(float(j[~gold].mean()), 4),
            "rules": {str(t): _pm(j >= t, gold) for t in JACCARD_THRESHOLDS},
        }
    uniq = sorted(set(s1) | set(s2))
    pos = {s: i for i, s in enumerate(uniq)}
    ia = np.array([pos[s] for s in s1])
    ib = np.array([pos[s] for s in s2])
    for name, tc in shingles.items():
        for thr in (0.8, 0.5):
            cfg = BuildConfig(text=tc, minhash=MinHashConfig(threshold=thr))
            res = diversify.build(uniq, config=cfg)
            same = res.cluster_ids[ia] == res.cluster_ids[ib]
            out["clusters"].append({
                "shingle": name, "threshold": thr,
                "config": f"BuildConfig(text={TEXT_REPR[name]}, minhash=MinHashConfig(threshold={thr}))",
                "n_sentences": len(uniq), "n_clusters": int(res.n_clusters), "n_duplicates": int(res.n_duplicates),
                "metrics": _pm(same, gold),
            })
    out["unique_sentences"] = len(uniq)
    return out


# --------------------------------------------------------------------------------------------- main

def run() -> dict:
    root = data_dir()
    if not (root / "cranfield").is_dir() or not (root / "stsb").is_dir():
        raise SystemExit(f"data folder not found: {root} (set DIVERSIFY_DATA to the folder holding "
                         "cranfield/ and stsb/)")
    try:
        from .env import environment
        env = environment()
    except Exception as e:  # pragma: no cover - informational only
        env = {"error": repr(e)}
    return {
        "command": COMMAND,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "environment": env,
        "cranfield": run_cranfield(root / "cranfield"),
        "stsb": run_stsb(root / "stsb"),
    }


def _f(x, nd=4):
    return f"{x:.{nd}f}"


def render_markdown(results: dict) -> str:
    """A RESULTS.md section from the dict :func:`run` returns (or ``retrieval.json``)."""
    c = results["cranfield"]
    s = results["stsb"]
    env = results.get("environment", {})
    L = ["## Retrieval quality on real labeled data (Cranfield, STS-B)", ""]
    L.append(f"Command: `{results.get('command', COMMAND)}` (data from `../shared/data`, not in the repository). "
             f"Measured {results.get('measured_at')}"
             + (f", diversify at {env.get('diversify_commit') or env.get('git_commit')}" if isinstance(env, dict) else "")
             + ".")
    L.append("")
    L.append(f"### Cranfield: nDCG@{c['k']} before / after `select` (BM25 top-{c['top_n']} → k={c['k']})")
    L.append("")
    L.append(f"{c['docs']:,} abstracts (`.W`), {c['queries_evaluated']} of {c['queries_in_file']} queries with at "
             f"least one judged-relevant document, {c['qrels_rows']:,} qrels rows. BM25 k1={c['bm25']['k1']}, "
             f"b={c['bm25']['b']}, lowercase `[a-z0-9]+` tokens, distinct query terms. Graded gain = 5 − code "
             "(code 1 'complete answer' → 4, code 4 'minimum interest' → 1; −1 and unjudged → 0), discount "
             "1/log2(rank+1), ideal DCG from all judged gains of the query. Binary: codes 1–4 relevant. "
             "Query numbers by position in `cran.qry`.")
    L.append("")
    L.append("| clustering | clusters | duplicates | nDCG@10 graded before → after | binary before → after | "
             "queries up / down | top-10 changed | redundancy@10 before → after (total) |")
    L.append("|---|---:|---:|---|---|---|---:|---|")
    for r in c["runs"]:
        g, bn, rd = r["ndcg10_graded"], r["ndcg10_binary"], r["redundancy10"]
        L.append(f"| `{r['config']}` | {r['n_clusters']:,} | {r['n_duplicates']} | {_f(g['before'])} → {_f(g['after'])} | "
                 f"{_f(bn['before'])} → {_f(bn['after'])} | {r['queries_ndcg_up']} / {r['queries_ndcg_down']} | "
                 f"{r['queries_top10_changed']} | {rd['before_total']} → {rd['after_total']} |")
    L.append("")
    for r in c["runs"]:
        if r["multi_member_clusters"]:
            L.append(f"- threshold {r['threshold']}: multi-member clusters (doc ids) "
                     + ", ".join("{" + ", ".join(map(str, m)) + "}" for m in r["multi_member_clusters"]) + ".")
        else:
            L.append(f"- threshold {r['threshold']}: no multi-member clusters.")
    for r in c["runs"]:
        if not r["changed_queries"]:
            continue
        L.append(f"- threshold {r['threshold']}, every query whose top 10 changed "
                 "(query: removed doc (code) → backfilled doc (code), graded nDCG@10 before → after; "
                 "'–' = unjudged):")
        code = lambda x: "–" if x is None else str(x)
        for q, v in r["changed_queries"].items():
            rem = ", ".join(f"{d} ({code(cd)})" for d, cd in v["removed"])
            rem += "".join(f" [twin {t} ({code(ct)}) kept]" for t, ct in v.get("kept_twin", []))
            add = ", ".join(f"{d} ({code(cd)})" for d, cd in v["added"])
            nb, na = v["ndcg10_graded"]
            L.append(f"  - q{q}: {rem} → {add}; {_f(nb)} → {_f(na)}")
    L.append("- Where nDCG drops, the removed hit was judged relevant and its kept twin was unjudged or judged "
             "equally (Cranfield judges papers, so two distinct papers with a shared title and overlapping "
             "abstract can both be relevant); at the default threshold 0.8 nothing is merged and nothing changes.")
    L.append("- Cranfield has almost no near-duplicates, so this checks that diversification does no harm; it cannot "
             "show a gain. `select` only removes a hit when a higher one shares its cluster and backfills from the "
             "top-50.")
    L.append("")
    L.append(f"### STS-B test: shingle Jaccard vs human similarity ({s['pairs']:,} pairs, positives = "
             f"{s['positive_rule']}: {s['positives']})")
    L.append("")
    L.append(f"Read with `csv.QUOTE_NONE`, tab-separated. {s['short_pairs_word5']} pairs have a sentence of fewer "
             "than 5 words; such a sentence is one shingle made of all its words (diversify's short-document "
             "rule), so its word-5 Jaccard is 0 unless the other sentence normalizes to the same words.")
    L.append("")
    L.append("| similarity | Spearman ρ vs score | mean J (pos / neg) | rule | P | R | F1 |")
    L.append("|---|---:|---|---|---:|---:|---:|")
    for name, j in s["jaccard"].items():
        for t, m in j["rules"].items():
            L.append(f"| exact {name} Jaccard | {_f(j['spearman'])} | {_f(j['mean_positive'], 3)} / "
                     f"{_f(j['mean_negative'], 3)} | J ≥ {t} | {_f(m['precision'])} | {_f(m['recall'])} | {_f(m['f1'])} |")
    L.append("")
    L.append(f"diversify clusters over the {s['unique_sentences']:,} unique sentences (a pair is predicted same when "
             "both sentences share a cluster):")
    L.append("")
    L.append("| config | clusters | duplicates | TP / FP / FN | P | R | F1 |")
    L.append("|---|---:|---:|---|---:|---:|---:|")
    for r in s["clusters"]:
        m = r["metrics"]
        L.append(f"| `{r['config']}` | {r['n_clusters']:,} | {r['n_duplicates']} | {m['tp']} / {m['fp']} / {m['fn']} | "
                 f"{_f(m['precision'])} | {_f(m['recall'])} | {_f(m['f1'])} |")
    L.append("")
    L.append("- STS-B scores semantic similarity, not copying: most 'score ≥ 4' pairs are paraphrases with different "
             "wording, so shingle Jaccard (and diversify's MinHash clusters) has low recall by design; precision "
             "is the number that matters for a near-duplicate filter.")
    L.append("")
    return "\n".join(L)


def write(results: dict, path: Path = RESULTS) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1, sort_keys=False) + "\n")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog=COMMAND, description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--markdown", action="store_true", help="print the RESULTS.md section")
    a = p.parse_args(argv)
    res = run()
    write(res, a.out)
    print(f"wrote {a.out}", file=sys.stderr)
    if a.markdown:
        print(render_markdown(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
