"""Honest tuning and reporting: degenerate labels refused, plateaus reported, outcomes warned.

Kinds: hostile labels (all positive, all negative), golden curves (a plateau whose middle is
known), CLI output of `tune`, `eval` and `stats`, and the build's outcome warnings.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from diversify import build
from diversify.cli import main
from diversify.errors import DiversifyWarning, InputError
from diversify.evaluate import DEFAULT_GRID, best_threshold, check_labels, pr_curve


def test_labels_without_positives_or_negatives_are_refused():
    for labels in ([True] * 60, [False] * 60):
        with pytest.raises(InputError, match="both positives and negatives"):
            check_labels(labels)


def test_thin_labels_warn():
    notes = check_labels([True] * 5 + [False] * 20)
    assert any("only 25 labeled pairs" in n for n in notes) and any("only 5 positive" in n for n in notes)
    assert check_labels([True] * 40 + [False] * 40) == []


def test_grid_reaches_099():
    assert DEFAULT_GRID[-1] == 0.99 and DEFAULT_GRID[0] == 0.05


def test_plateau_choice_is_its_middle_not_its_edge():
    # positives at 0.9+, negatives at 0.3-: every threshold in (0.3, 0.9] separates them perfectly
    scores = np.array([0.95, 0.92, 0.91, 0.3, 0.2, 0.1])
    labels = [True, True, True, False, False, False]
    best = best_threshold(pr_curve(scores, labels))
    assert best["f1"] == 1.0
    assert best["plateau"] == [0.31, 0.91]
    assert best["threshold"] == pytest.approx(0.61)


def _pairs_file(tmp_path, rows):
    p = tmp_path / "pairs.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return p


def test_tune_cli_refuses_degenerate_labels(tmp_path, capsys):
    p = _pairs_file(tmp_path, [{"text_a": "a b c d e f", "text_b": "a b c d e f", "label": 1}] * 30)
    assert main(["tune", "--pairs", str(p)]) == 2
    assert "both positives and negatives" in capsys.readouterr().err


def test_tune_cli_reports_the_plateau_and_warns_on_few_pairs(tmp_path, capsys):
    base = " ".join(f"w{i}" for i in range(50))
    rows = [{"text_a": base, "text_b": base + " x", "label": 1}] * 4 + \
           [{"text_a": base, "text_b": " ".join(f"v{i}" for i in range(50)), "label": 0}] * 4
    assert main(["tune", "--pairs", str(_pairs_file(tmp_path, rows)), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["best"]["plateau"][0] < out["best"]["threshold"] < out["best"]["plateau"][1]
    assert any("F1 is flat" in n for n in out["warnings"]) and any("only 8 labeled pairs" in n for n in out["warnings"])


def test_tune_with_a_corpus_warns_when_the_threshold_would_fold_most_of_it(tmp_path, capsys):
    base = " ".join(f"w{i}" for i in range(40))
    docs = [{"id": f"d{i}", "text": base + f" extra{i} more{i}"} for i in range(30)]
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in docs))
    rows = [{"id_a": f"d{i}", "id_b": f"d{i + 1}", "label": 1} for i in range(0, 20, 2)] + \
           [{"id_a": f"d{i}", "id_b": f"d{i + 1}", "label": 0} for i in range(1, 20, 2)]
    assert main(["tune", "--pairs", str(_pairs_file(tmp_path, rows)), "--corpus", str(corpus), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["corpus_folded_share"] > 0.5
    assert any("folds" in n and "most of the corpus" in n for n in out["warnings"])


def test_tune_cosine_with_vectors(tmp_path, capsys, rng):
    centres = rng.standard_normal((10, 16))
    vecs = np.repeat(centres, 2, axis=0) + 0.01 * rng.standard_normal((20, 16))
    np.save(tmp_path / "v.npy", vecs)
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"d{i}", "text": f"doc {i}"}) + "\n" for i in range(20)))
    rows = [{"id_a": f"d{2 * i}", "id_b": f"d{2 * i + 1}", "label": 1} for i in range(10)] + \
           [{"id_a": f"d{2 * i}", "id_b": f"d{2 * i + 2}", "label": 0} for i in range(9)]
    assert main(["tune", "--pairs", str(_pairs_file(tmp_path, rows)), "--corpus", str(corpus),
                 "--vectors", str(tmp_path / "v.npy")]) == 0
    out = capsys.readouterr().out
    assert "cosine of the vectors" in out and "--simhash-threshold" in out


def test_build_warns_when_one_cluster_takes_over(rng):
    base = " ".join(f"w{i}" for i in range(60))
    texts = [base + f" tail{i % 3}" for i in range(300)] + [" ".join(rng.choice(list("abcdefghij"), 80)) for _ in range(10)]
    with pytest.warns(DiversifyWarning, match="of the corpus"):
        res = build(texts)
    assert any("of the corpus" in w for w in res.warnings)
    assert res.report["largest_share"] > 0.01
    assert res.report["member_similarity"]["min"] >= 0.8 - 4 * np.sqrt(0.16 / 128)


def test_no_warning_on_an_ordinary_corpus(rng):
    texts = [" ".join(rng.choice([f"w{i}" for i in range(3000)], 60)) for _ in range(300)]
    with warnings.catch_warnings():
        warnings.simplefilter("error", DiversifyWarning)
        res = build(texts)
    assert res.warnings == []


def test_stats_and_eval_say_what_the_clusters_are(tmp_path, capsys):
    base = " ".join(f"w{i}" for i in range(60))
    docs = [{"id": f"d{i}", "text": base + f" t{i}"} for i in range(5)] + [{"id": "x", "text": "unrelated words here"}]
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in docs))
    art = tmp_path / "c.dvf"
    assert main(["build", str(corpus), "-o", str(art), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["stats", str(art)]) == 0
    out = capsys.readouterr().out
    assert "clustering       clique  (every two members of a cluster verified similar)" in out
    assert "similarity       folded documents" in out
    assert "pairwise purity  100.0% of 10 sampled member pairs verified similar (of 10 pairs inside clusters)" in out
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps({"id": d["id"], "label": "x" if d["id"] == "x" else "b"}) + "\n" for d in docs))
    assert main(["eval", str(art), "--labels", str(labels), "--corpus", str(corpus), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["fold_fidelity"] == 1.0 and rep["folded_checked"] == 4 and rep["fold_min_similarity"] >= 0.8
