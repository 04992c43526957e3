"""retrieval: Cranfield nDCG@10 before/after diversification, and STS-B correlation / pair
precision-recall of shingle Jaccard and of diversify's clusters.

Cranfield (1,400 abstracts, 225 queries, graded qrels): document text = ``.W``; BM25 (k1=1.2,
b=0.75, idf = ln(1 + (N - df + 0.5) / (df + 0.5))), tokens = lowercase runs of ``[a-z0-9]``, each
distinct query term counted once, ties by doc id; clusters from ``diversify.build``; per query
the BM25 top-50 go through ``diversify.select(hits, cluster_map.lookup(ids), k=10)``. nDCG@10:
gain = 5 - code for cranqrel codes 1..4, code -1 or unjudged -> 0; discount 1/log2(rank+1);
ideal DCG from all judged gains of the query; a binary variant too. redundancy@10: hits in the
top 10 that share a cluster with a higher-ranked hit.

STS-B (test split): exact Jaccard of word and character 5-shingles (``jaccard_pairs``), Spearman
vs the 0-5 score; pair P/R/F1 of "Jaccard >= t" and of "both sentences in one diversify cluster"
against "score >= 4".
"""

from __future__ import annotations

import re

import numpy as np

from . import Suite

SUITE = Suite(
    name="retrieval",
    summary="Cranfield BM25 nDCG@10 and redundancy@10 before/after select; STS-B Spearman and P/R/F1 of "
            "shingle Jaccard and of diversify clusters vs score ≥ 4",
    results=("retrieval.json",), render="benchmarks.report.retrieval:retrieval_section",
    data=("cranfield", "stsb"), quick={}, takes="~1 min")

STS_POSITIVE_MIN = 4.0
JACCARD_THRESHOLDS = (0.5, 0.8)
TEXT_REPR = {"word5": "TextConfig()", "char5": 'TextConfig(shingle="char", k=5)'}
# diversify's word rule (diversify/text.py): runs of characters that are neither whitespace nor ASCII punctuation
_DIV_WORD = re.compile(r"[^\s!-/:-@\[-`{-~]+")


def add_arguments(p) -> None:
    p.add_argument("--datasets", nargs="+", default=["cranfield", "stsb"], choices=("cranfield", "stsb"))


def _pm(pred, gold) -> dict:
    from .. import lib

    d = lib.evaluate("pair_metrics")(np.asarray(pred, bool), np.asarray(gold, bool)).as_dict()
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in d.items()}


def _stsb_jaccard(s1, s2, score, gold, shingles) -> dict:
    from scipy.stats import spearmanr

    from .. import lib

    out = {}
    for name, tc in shingles.items():
        j = lib.evaluate("jaccard_pairs")(s1, s2, tc)
        rho, p = spearmanr(j, score)
        out[name] = {"spearman": round(float(rho), 4), "p_value": float(p),
                     "mean_positive": round(float(j[gold].mean()), 4), "mean_negative": round(float(j[~gold].mean()), 4),
                     "rules": {str(t): _pm(j >= t, gold) for t in JACCARD_THRESHOLDS}}
    return out


def _stsb_clusters(s1, s2, gold, shingles) -> tuple[list, int]:
    import diversify

    uniq = sorted(set(s1) | set(s2))
    pos = {s: i for i, s in enumerate(uniq)}
    ia = np.array([pos[s] for s in s1])
    ib = np.array([pos[s] for s in s2])
    out = []
    for name, tc in shingles.items():
        for thr in (0.8, 0.5):
            cfg = diversify.BuildConfig(text=tc, minhash=diversify.MinHashConfig(threshold=thr))
            res = diversify.build(uniq, config=cfg)
            same = res.cluster_ids[ia] == res.cluster_ids[ib]
            out.append({"shingle": name, "threshold": thr,
                        "config": f"BuildConfig(text={TEXT_REPR[name]}, minhash=MinHashConfig(threshold={thr}))",
                        "n_sentences": len(uniq), "n_clusters": int(res.n_clusters),
                        "n_duplicates": int(res.n_duplicates), "metrics": _pm(same, gold)})
    return out, len(uniq)


def run_stsb() -> dict:
    import diversify

    from .. import data

    s1, s2, score = data.stsb("test")
    gold = score >= STS_POSITIVE_MIN
    shingles = {"word5": diversify.TextConfig(), "char5": diversify.TextConfig(shingle="char", k=5)}
    short = sum(1 for a, b in zip(s1, s2) if min(len(_DIV_WORD.findall(a)), len(_DIV_WORD.findall(b))) < 5)
    clusters, n_unique = _stsb_clusters(s1, s2, gold, shingles)
    return {"pairs": len(s1), "positives": int(gold.sum()), "positive_rule": f"score >= {STS_POSITIVE_MIN}",
            "short_pairs_word5": int(short), "jaccard": _stsb_jaccard(s1, s2, score, gold, shingles),
            "clusters": clusters, "unique_sentences": n_unique}


def run(args, ctx) -> list:
    from .. import data
    from ..env import environment
    from ..paths import log, now, shown, write_json
    from ..tools.minhash import warm_up
    from ._cranfield import run_cranfield

    warm_up("diversify")  # JIT first: build_seconds below are the builds themselves
    results = {"command": ctx.command, "measured_at": now(), "environment": environment()}
    for name, fn in (("cranfield", run_cranfield), ("stsb", run_stsb)):
        if name not in args.datasets:
            continue
        log(f"retrieval: {name} ...")
        try:
            results[name] = fn()
        except data.DataMissing as e:
            log(f"  skipped: {e}")
            results[name] = {"skipped": str(e)}
    path = write_json(ctx.results / "retrieval.json", results)
    log(f"wrote {shown(path)}")
    return [path]
