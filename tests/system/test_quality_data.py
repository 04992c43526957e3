"""Quality on real labelled data from ../shared/data (skipped when the folder is absent).

- Clough & Stevenson (2011) plagiarised short answers: 5 Wikipedia source texts and 95 answers
  labelled cut / light / heavy / non against the source of their task.
- MRPC (Dolan & Brockett 2005): pair precision/recall of "same cluster" against the truth
  "exact Jaccard of the shingle sets >= threshold" computed by brute force on the MRPC pairs.

Numbers are printed (run with ``pytest -m data -s tests/system/test_quality_data.py``); the assertions
are loose sanity bounds that a broken build would fail.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from diversify import build
from diversify.config import BuildConfig, MinHashConfig, TextConfig
from diversify.text import shingle_hashes

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
CS = DATA / "clough_stevenson_plagiarism"
MRPC = DATA / "mrpc"

pytestmark = pytest.mark.data


def _need(path: Path) -> None:
    if not path.is_dir():
        pytest.skip(f"real-data test: {path} is absent (it lives in ../shared/data next to the repository; "
                    "see that folder's README.md). Nothing is wrong with the code.")


# ----------------------------------------------------------------------------- Clough & Stevenson


def _load_cs():
    _need(CS)
    rows = list(csv.DictReader((CS / "file_information.csv").open(encoding="utf-8")))
    have = {r["File"] for r in rows}
    rows += [{"File": f"orig_task{t}.txt", "Task": t, "Category": "orig"} for t in "abcde"
             if f"orig_task{t}.txt" not in have]
    names = [r["File"] for r in rows]
    texts = [(CS / f).read_text(encoding="utf-8", errors="replace") for f in names]
    cats = [r["Category"] for r in rows]
    tasks = [r["Task"] for r in rows]
    src = {t: i for i, (t, c) in enumerate(zip(tasks, cats)) if c == "orig"}
    assert len(rows) == 100 and len(src) == 5
    return names, texts, cats, tasks, src


def _cs_outcome(cfg: BuildConfig):
    names, texts, cats, tasks, src = _load_cs()
    res = build(texts=texts, ids=names, config=cfg)
    cid = res.cluster_ids
    with_source = {c: [names[i] for i in range(len(names)) if cats[i] == c and cid[i] == cid[src[tasks[i]]]]
                   for c in ("cut", "light", "heavy", "non")}
    totals = {c: cats.count(c) for c in with_source}
    return with_source, totals


def _overlap_with_source(name: str, k: int) -> int:
    names, texts, cats, tasks, src = _load_cs()
    i = names.index(name)
    sh = shingle_hashes([texts[i], texts[src[tasks[i]]]], TextConfig(k=k))
    return len(set(sh.doc(0).tolist()) & set(sh.doc(1).tolist()))


# The answers are short (100-340 words) and the sources 240-540 words, so even a verbatim cut
# answer has a low Jaccard similarity with its whole source (median 0.28 for word 5-shingles):
# the default threshold 0.8 puts only 2 of 19 cut answers with their source. Thresholds 0.05-0.2
# separate cut from non on this corpus (every non answer has Jaccard <= 0.03 with its source).
# One cut answer, g2pE_taskc.txt, was cut from a different Wikipedia article (information retrieval,
# not the vector space model of orig_taskc.txt): it shares no shingle with its source and cannot join.
# At 0.1 the answers of one task chain through each other to their source; these oracles describe
# that graph, so they ask for transitive components (under the default fold guarantee an answer
# joins only when it is itself >= 0.1 similar to the cluster's representative).
CS_CONFIGS = {
    "word5@0.1": BuildConfig(minhash=MinHashConfig(threshold=0.1), clustering="components"),
    "word5@0.1-exact": BuildConfig(minhash=MinHashConfig(threshold=0.1, verify="exact"), clustering="components"),
    "word3@0.1": BuildConfig(text=TextConfig(k=3), minhash=MinHashConfig(threshold=0.1), clustering="components"),
}


@pytest.mark.parametrize("name", list(CS_CONFIGS))
def test_clough_stevenson_cut_joins_source_and_non_does_not(name):
    cfg = CS_CONFIGS[name]
    with_source, totals = _cs_outcome(cfg)
    rates = {c: f"{len(v)}/{totals[c]}" for c, v in with_source.items()}
    print(f"\nClough & Stevenson [{name}] answers in their source's cluster: {rates}")
    assert with_source["non"] == [], f"non answers joined their source: {with_source['non']}"
    names, _, cats, _, _ = _load_cs()
    missed = sorted(set(n for n, c in zip(names, cats) if c == "cut") - set(with_source["cut"]))
    for m in missed:  # only a cut answer with no text in common with its source may stay apart
        assert _overlap_with_source(m, cfg.text.k) == 0, f"cut answer {m} shares text with its source but did not join"
    assert len(missed) <= 1, f"cut answers apart from their source: {missed}"
    # graded: the lighter the rewrite, the more often it joins
    frac = {c: len(v) / totals[c] for c, v in with_source.items()}
    assert frac["cut"] >= frac["light"] >= frac["heavy"] >= frac["non"], rates


def test_clough_stevenson_default_threshold_is_too_strict_for_short_answers():
    with_source, totals = _cs_outcome(BuildConfig())
    rates = {c: f"{len(v)}/{totals[c]}" for c, v in with_source.items()}
    print(f"\nClough & Stevenson [default word5@0.8] answers in their source's cluster: {rates}")
    assert with_source["non"] == []
    assert len(with_source["cut"]) <= totals["cut"] // 2, "document the default's behaviour; update the comment if it changes"


# ----------------------------------------------------------------------------- MRPC


def _load_mrpc():
    _need(MRPC)
    pairs = []
    for f in ("msr_paraphrase_train.txt", "msr_paraphrase_test.txt"):
        for line in (MRPC / f).read_text(encoding="utf-8-sig").splitlines():
            cols = line.split("\t")
            if len(cols) == 5:
                pairs.append((int(cols[0]), cols[3], cols[4]))
    assert len(pairs) > 5000
    sents = sorted({s for _, a, b in pairs for s in (a, b)})
    return pairs, sents


@pytest.mark.parametrize(
    "label, text, threshold, min_precision, min_recall",
    [
        ("word5@0.8 (default)", TextConfig(), 0.8, 0.75, 0.75),
        ("word3@0.5", TextConfig(k=3), 0.5, 0.85, 0.9),
        ("char5@0.5", TextConfig(shingle="char", k=5), 0.5, 0.85, 0.9),
    ],
)
def test_mrpc_pair_precision_recall_vs_exact_jaccard(label, text, threshold, min_precision, min_recall):
    pairs, sents = _load_mrpc()
    index = {s: i for i, s in enumerate(sents)}
    cfg = BuildConfig(text=text, minhash=MinHashConfig(threshold=threshold))
    res = build(texts=sents, config=cfg)
    sh = shingle_hashes(sents, text, seed=cfg.seed)  # the shingler itself is oracle-tested in test_text.py
    sets = [set(sh.doc(i).tolist()) for i in range(len(sents))]
    tp = fp = fn = para_pred = 0
    for lab, a, b in pairs:
        i, j = index[a], index[b]
        union = len(sets[i] | sets[j])
        truth = sh.exact[i] == sh.exact[j] or (union > 0 and len(sets[i] & sets[j]) / union >= threshold)
        pred = res.cluster_ids[i] == res.cluster_ids[j]
        tp += bool(truth and pred)
        fp += bool(pred and not truth)
        fn += bool(truth and not pred)
        para_pred += bool(pred and lab == 1)
    precision = tp / max(1, tp + fp)
    recall = tp / max(1, tp + fn)
    label_precision = para_pred / max(1, tp + fp)
    print(f"\nMRPC [{label}] {len(pairs)} pairs, {len(sents)} sentences: truth pairs {tp + fn}, predicted {tp + fp}, "
          f"precision {precision:.3f}, recall {recall:.3f}; predicted pairs labelled paraphrase {label_precision:.3f}")
    assert tp + fn >= 10, "too few true pairs to measure anything"
    # precision < 1 comes from clusters being connected components (chains of passing pairs)
    assert precision >= min_precision, f"precision {precision:.3f} < {min_precision}"
    assert recall >= min_recall, f"recall {recall:.3f} < {min_recall}"
    # lexical near-duplicates are mostly paraphrases: above MRPC's 67.5% base rate
    assert label_precision >= 0.7, f"only {label_precision:.3f} of predicted pairs are labelled paraphrases"
