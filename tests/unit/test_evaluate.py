"""`eval` and `tune`: metrics against brute-force oracles, and the commands on small team-written fixtures."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diversify.cli import main
from diversify.evaluate import best_threshold, clustering_metrics, jaccard_pairs, pair_metrics, pr_curve


def _brute(gold, pred):
    tp = fp = fn = tn = 0
    for i, j in itertools.combinations(range(len(gold)), 2):
        g, p = gold[i] == gold[j], pred[i] == pred[j]
        tp += g and p
        fp += p and not g
        fn += g and not p
        tn += not g and not p
    return tp, fp, fn, tn


def _ari_brute(gold, pred):
    # Hubert & Arabie's ARI written out from the pair counts
    tp, fp, fn, tn = _brute(gold, pred)
    n2 = tp + fp + fn + tn
    if n2 == 0:
        return 1.0
    expected = (tp + fn) * (tp + fp) / n2
    mx = ((tp + fn) + (tp + fp)) / 2
    return 1.0 if mx == expected else (tp - expected) / (mx - expected)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), min_size=2, max_size=30))
def test_clustering_metrics_match_pair_oracle(labels):
    gold = [g for g, _ in labels]
    pred = [p for _, p in labels]
    m = clustering_metrics(np.array(gold), np.array(pred))
    tp, fp, fn, tn = _brute(gold, pred)
    assert (m["tp"], m["fp"], m["fn"], m["tn"]) == (tp, fp, fn, tn)
    assert m["ari"] == pytest.approx(_ari_brute(gold, pred), abs=1e-12)


def test_perfect_and_worst_clusterings():
    gold = np.array([0, 0, 1, 1, 2])
    assert clustering_metrics(gold, gold)["ari"] == pytest.approx(1.0)
    assert clustering_metrics(gold, gold)["f1"] == pytest.approx(1.0)
    everything = clustering_metrics(gold, np.zeros(5))
    assert everything["recall"] == 1.0 and everything["precision"] == pytest.approx(2 / 10)


def test_pair_metrics_counts():
    m = pair_metrics([True, True, False, False], [True, False, True, False])
    assert (m.tp, m.fp, m.fn, m.tn) == (1, 1, 1, 1)
    assert m.precision == m.recall == m.f1 == 0.5


def test_pr_curve_and_best_threshold():
    scores = [0.95, 0.9, 0.85, 0.6, 0.5, 0.2]
    labels = [1, 1, 1, 0, 1, 0]
    curve = pr_curve(scores, labels, thresholds=[0.3, 0.55, 0.8])
    by_t = {r["threshold"]: r for r in curve}
    assert by_t[0.8]["precision"] == 1.0 and by_t[0.8]["recall"] == 0.75
    assert by_t[0.3]["recall"] == 1.0 and by_t[0.3]["precision"] == pytest.approx(4 / 5)
    best = best_threshold(curve)
    assert best["threshold"] == 0.3  # F1 0.889 beats 0.857 (t=0.8) and 0.857 (t=0.55)


def test_jaccard_pairs_exact():
    a = "one two three four five six"
    j = jaccard_pairs([a, a, a], [a, "one two three four five seven", "x y"])
    # 2 shingles each; one shared of 3 distinct -> 1/3
    assert j.tolist() == pytest.approx([1.0, 1 / 3, 0.0])


BASE = "the quick brown fox jumps over the lazy dog near the river bank today"


@pytest.fixture
def labeled(tmp_path):
    docs = {
        "a": BASE, "b": BASE + " again", "c": BASE + " and then again",
        "d": "databases use query planners to pick join orders for every query",
        "e": "databases use query planners to pick join orders for each query",
        "f": "something unrelated about sailing boats in stormy weather at sea",
    }
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": k, "text": v}) + "\n" for k, v in docs.items()))
    gold = {"a": 1, "b": 1, "c": 1, "d": 2, "e": 2, "f": 3}
    labels = tmp_path / "labels.csv"
    labels.write_text("id,label\n" + "".join(f"{k},{v}\n" for k, v in gold.items()))
    pairs = tmp_path / "pairs.csv"
    rows = [(x, y, int(gold[x] == gold[y])) for x, y in itertools.combinations(sorted(docs), 2)]
    pairs.write_text("id_a,id_b,label\n" + "".join(f"{x},{y},{lab}\n" for x, y, lab in rows))
    tpairs = tmp_path / "tpairs.jsonl"
    tpairs.write_text("".join(json.dumps({"text_a": docs[x], "text_b": docs[y], "label": lab}) + "\n" for x, y, lab in rows))
    return corpus, labels, pairs, tpairs


def test_eval_command_pairs_and_labels(tmp_path, labeled, capsys):
    corpus, labels, pairs, _ = labeled
    art = tmp_path / "a.dvf"
    assert main(["build", str(corpus), "-o", str(art), "--no-progress", "--threshold", "0.5"]) == 0
    capsys.readouterr()
    assert main(["eval", str(art), "--labels", str(labels), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    # a, b, c cluster (shared 5-shingles); d/e differ in one word of 11 -> Jaccard 4/10 < 0.5: missed
    assert rep["tp"] == 3 and rep["fp"] == 0 and rep["fn"] == 1
    assert rep["precision"] == 1.0 and rep["recall"] == pytest.approx(0.75)
    assert main(["eval", str(art), "--pairs", str(pairs), "--json"]) == 0
    rep2 = json.loads(capsys.readouterr().out)
    assert (rep2["tp"], rep2["fp"], rep2["fn"]) == (3, 0, 1) and rep2["tn"] == 15 - 4
    # building from --corpus in memory gives the same answer
    assert main(["eval", "--corpus", str(corpus), "--labels", str(labels), "--threshold", "0.5", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["f1"] == pytest.approx(rep["f1"])


def test_tune_command_picks_f1_max(labeled, capsys, tmp_path):
    *_, tpairs = labeled
    assert main(["tune", "--pairs", str(tpairs), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    best = out["best"]
    assert best["f1"] == max(r["f1"] for r in out["curve"])
    assert 0.05 <= best["threshold"] <= 0.95
    assert out["lsh"]["bands"] * out["lsh"]["rows"] <= 128
    # text output names the threshold and the build command
    assert main(["tune", "--pairs", str(tpairs)]) == 0
    text = capsys.readouterr().out
    assert "best threshold" in text and "diversify build" in text


def test_tune_plot(labeled, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    *_, tpairs = labeled
    png = tmp_path / "pr.png"
    assert main(["tune", "--pairs", str(tpairs), "--plot", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_eval_needs_one_label_source(tmp_path, labeled, capsys):
    corpus, labels, pairs, _ = labeled
    assert main(["eval", "--corpus", str(corpus)]) == 2
    assert "exactly one of --pairs" in capsys.readouterr().err
