"""`diversify tune`, text and --vectors alike: the fold-share warning, the all-positive baseline,
the edge-of-grid warning and the band settings of the stage the threshold is for."""

from __future__ import annotations

import json

import numpy as np
import pytest

from diversify.cli import main
from diversify.config import BuildConfig, SimHashConfig
from diversify.evaluate import DEFAULT_GRID, all_positive_baseline, best_threshold, pr_curve, tune_notes
from diversify.linking.keys import simhash_params


def _write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _vector_case(tmp_path, rng, *, n_family=20, n_other=10):
    """A corpus whose first ``n_family`` vectors point one way (and whose texts all differ), the
    rest at random; positives pair family members, negatives pair a member with another vector."""
    dim = 32
    centre = rng.standard_normal(dim)
    family = centre + 0.02 * rng.standard_normal((n_family, dim))
    others = rng.standard_normal((n_other, dim))
    np.save(tmp_path / "v.npy", np.vstack([family, others]))
    n = n_family + n_other
    words = [f"w{i}" for i in range(5000)]
    corpus = _write_jsonl(tmp_path / "c.jsonl", [{"id": f"d{i}", "text": " ".join(rng.choice(words, 40))}
                                                 for i in range(n)])
    pos = [{"id_a": f"d{i}", "id_b": f"d{i + 1}", "label": 1} for i in range(n_family - 1)]
    neg = [{"id_a": f"d{i}", "id_b": f"d{n_family + i % n_other}", "label": 0} for i in range(n_family)]
    pairs = _write_jsonl(tmp_path / "pairs.jsonl", pos + neg)
    return pairs, corpus, tmp_path / "v.npy"


def test_tune_vectors_warns_when_the_cosine_threshold_folds_most_of_the_corpus(tmp_path, capsys, rng):
    pairs, corpus, vecs = _vector_case(tmp_path, rng)
    assert main(["tune", "--pairs", str(pairs), "--corpus", str(corpus), "--vectors", str(vecs), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    # the 20 family members become one cluster: 19 of 30 documents folded
    assert out["corpus_folded_share"] == pytest.approx(19 / 30)
    assert any("--simhash-threshold" in n and "most of the corpus" in n for n in out["warnings"])
    # the same warning on the text output (stderr), as the text route gives it
    assert main(["tune", "--pairs", str(pairs), "--corpus", str(corpus), "--vectors", str(vecs)]) == 0
    cap = capsys.readouterr()
    assert "folds 63.3% of its documents" in cap.out and "most of the corpus would be hidden" in cap.err


def test_tune_vectors_reports_simhash_band_settings_not_minhash(tmp_path, capsys, rng):
    pairs, corpus, vecs = _vector_case(tmp_path, rng)
    assert main(["tune", "--pairs", str(pairs), "--corpus", str(corpus), "--vectors", str(vecs), "--json",
                 "--simhash-bits", "128", "--families", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    lsh = out["lsh"]
    t = round(out["best"]["threshold"], 2)
    want = simhash_params(BuildConfig(simhash=SimHashConfig(threshold=t, bits=128, families=2)))
    assert lsh["stage"] == "simhash" and "num_perm" not in lsh
    assert (lsh["bits"], lsh["families"], lsh["bands"], lsh["rows"]) == (128, 2, want.bands, want.rows)
    assert lsh["bands"] * lsh["rows"] <= 128
    assert main(["tune", "--pairs", str(pairs), "--corpus", str(corpus), "--vectors", str(vecs)]) == 0
    text = capsys.readouterr().out
    assert "implies SimHash bands=" in text and "num_perm" not in text
    d = SimHashConfig()
    assert f"--simhash-bits {d.bits} --families {d.families}" in text


def test_tune_text_keeps_minhash_band_settings(tmp_path, capsys):
    base = " ".join(f"w{i}" for i in range(50))
    rows = [{"text_a": base, "text_b": base + f" x{i}", "label": 1} for i in range(20)] + \
           [{"text_a": base, "text_b": " ".join(f"v{i}{j}" for j in range(50)), "label": 0} for i in range(20)]
    assert main(["tune", "--pairs", str(_write_jsonl(tmp_path / "p.jsonl", rows)), "--json"]) == 0
    lsh = json.loads(capsys.readouterr().out)["lsh"]
    assert lsh["stage"] == "minhash" and lsh["num_perm"] == 128 and lsh["bands"] * lsh["rows"] <= 128


@pytest.mark.parametrize("n_pos,n_neg", [(30, 10), (10, 30), (25, 25)])
def test_tune_reports_the_all_positive_baseline(tmp_path, capsys, n_pos, n_neg):
    base = " ".join(f"w{i}" for i in range(50))
    rows = [{"text_a": base, "text_b": base + f" x{i}", "label": 1} for i in range(n_pos)] + \
           [{"text_a": base, "text_b": " ".join(f"v{i}_{j}" for j in range(50)), "label": 0} for i in range(n_neg)]
    pairs = _write_jsonl(tmp_path / "p.jsonl", rows)
    assert main(["tune", "--pairs", str(pairs), "--json"]) == 0
    base_out = json.loads(capsys.readouterr().out)["baseline_all_positive"]
    p = n_pos / (n_pos + n_neg)
    assert base_out == pytest.approx({"precision": p, "recall": 1.0, "f1": 2 * p / (1 + p)})
    assert main(["tune", "--pairs", str(pairs)]) == 0
    assert f"baseline (every pair called a duplicate): precision {p:.4f}, recall 1.0000" in capsys.readouterr().out


def test_all_positive_baseline_oracle(rng):
    for _ in range(20):
        gold = rng.random(int(rng.integers(1, 200))) < rng.random()
        got = all_positive_baseline(gold)
        tp, fp = int(gold.sum()), int((~gold).sum())
        prec = tp / (tp + fp)
        assert got["precision"] == pytest.approx(prec) and got["recall"] == 1.0
        assert got["f1"] == pytest.approx(2 * prec / (1 + prec) if tp else 0.0)


def _notes(scores, labels):
    return tune_notes(best_threshold(pr_curve(scores, labels)), all_positive_baseline(labels), DEFAULT_GRID)


def test_edge_of_grid_warnings():
    labels = [True] * 10 + [False] * 10
    # positives identical (1.0), negatives at 0.985: only the top of the grid (0.99) separates them
    assert any("highest threshold tried (0.99)" in n for n in _notes([1.0] * 10 + [0.985] * 10, labels))
    # positives barely overlap (0.05), negatives at 0.03: only the bottom of the grid (0.05)
    assert any("lowest threshold tried (0.05)" in n for n in _notes([0.05] * 10 + [0.03] * 10, labels))
    # a best F1 inside the grid, or a plateau that merely reaches an edge: no edge warning
    for scores in ([0.9] * 10 + [0.3] * 10, [0.9] * 10 + [0.0] * 10, [1.0] * 10 + [0.5] * 10):
        assert not [n for n in _notes(scores, labels) if "threshold tried" in n], scores


def test_no_better_than_the_baseline_is_warned():
    labels = [True] * 30 + [False] * 10
    best = best_threshold(pr_curve([0.5] * 40, labels))  # the similarity says nothing about the labels
    notes = tune_notes(best, all_positive_baseline(labels), DEFAULT_GRID)
    assert any("no better than calling every pair a duplicate" in n for n in notes)


def test_tune_cli_warns_at_the_edge_of_the_grid(tmp_path, capsys):
    words = [f"w{i}" for i in range(800)]
    text = " ".join(words)
    near = " ".join(words[:400] + ["other"] + words[401:])  # word 5-shingles: Jaccard 791/801 = 0.9875
    rows = [{"text_a": text, "text_b": text, "label": 1}] * 20 + [{"text_a": text, "text_b": near, "label": 0}] * 20
    assert main(["tune", "--pairs", str(_write_jsonl(tmp_path / "p.jsonl", rows)), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["best"]["threshold"] == 0.99 and out["best"]["f1"] == 1.0
    assert any("highest threshold tried (0.99)" in n for n in out["warnings"])
    assert main(["tune", "--pairs", str(_write_jsonl(tmp_path / "p.jsonl", rows))]) == 0
    err = capsys.readouterr().err
    assert "highest threshold tried (0.99)" in err and err.startswith("diversify tune: ")
