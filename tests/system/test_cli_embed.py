"""`diversify build --embed MODEL` and the lines of `stats` about cosine folds, run as users run them,
with a tiny model2vec model the test saves to disk (no network)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from test_embedding import make_model

from diversify.cli import main

DOCS = [("a", "the cat sat on the mat"),
        ("b", "on the mat the cat sat"),  # same words, another order: cosine 1, few shared shingles
        ("c", "a dog ran in the park"),
        ("d", "a big red ball in the house"),
        ("e", "A DOG RAN IN THE PARK")]  # an exact duplicate of c after normalization


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in DOCS), encoding="utf-8")
    return path


def _run(*args, cwd=None):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.getcwd()] + sys.path))
    return subprocess.run([sys.executable, "-m", "diversify", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=300)


def test_build_embed_records_the_model_and_stats_separates_cosine_folds(tmp_path, corpus):
    model = make_model(tmp_path / "model")
    out = tmp_path / "out.dvf"
    r = _run("build", str(corpus), "-o", str(out), "--embed", model, "--simhash-threshold", "0.95")
    assert r.returncode == 0, r.stderr
    assert "embedded         5 texts with" in r.stdout and "0 from the cache" in r.stdout
    assert (tmp_path / "out.dvf.embed-cache.npz").exists()
    import diversify

    cm = diversify.load(str(out))
    emb = cm.build_info["embedding"]
    assert emb["model"] == model and emb["dim"] == 24 and emb["library"].startswith("model2vec ")
    assert len(emb["model_sha256"]) == 64
    assert cm.cluster_of("a") == cm.cluster_of("b")  # joined by cosine only
    assert cm.cluster_of("c") == cm.cluster_of("e")
    s = _run("stats", str(out))
    assert s.returncode == 0, s.stderr
    assert "folded by stage  exact 1; Jaccard 0 (threshold 0.8); cosine 1 (threshold 0.95) of 2 folded" in s.stdout
    assert f"embedding        {model} (model2vec" in s.stdout and "24-d" in s.stdout
    j = json.loads(_run("stats", str(out), "--json").stdout)
    assert j["folded_by_stage"] == {"folded": 2, "exact": 1, "jaccard": 0, "cosine": 1}
    assert j["cosine_threshold"] == 0.95 and j["embedding"]["dim"] == 24
    again = _run("build", str(corpus), "-o", str(out), "--embed", model, "--simhash-threshold", "0.95")
    assert again.returncode == 0 and "embedded         0 texts" in again.stdout and "5 from the cache" in again.stdout


def test_stats_without_vectors_says_cosine_is_off(tmp_path, corpus):
    out = tmp_path / "text.dvf"
    assert main(["build", str(corpus), "-o", str(out), "--no-progress"]) == 0
    s = _run("stats", str(out))
    assert "cosine 0 (threshold off: no vectors)" in s.stdout and "embedding " not in s.stdout


def test_low_cosine_threshold_warns_of_paraphrases(tmp_path, corpus):
    model = make_model(tmp_path / "model")
    out = tmp_path / "low.dvf"
    assert main(["build", str(corpus), "-o", str(out), "--embed", model, "--simhash-threshold", "0.7",
                 "--no-progress"]) == 0
    s = _run("stats", str(out))
    assert "cosine threshold 0.7 < 0.85 folds paraphrases and topic neighbours" in s.stdout


@pytest.mark.parametrize("extra, message", [
    (["--vectors", "v.npy"], "does not combine with --vectors"),
    (["--stream"], "does not combine with --stream"),
    (["--engine", "dask"], "does not combine with --engine dask"),
])
def test_embed_refuses_options_it_cannot_combine_with(tmp_path, corpus, extra, message):
    r = _run("build", str(corpus), "-o", str(tmp_path / "x.dvf"), "--embed", "m", *extra)
    assert r.returncode != 0 and message in r.stderr and "Traceback" not in r.stderr


def test_embed_with_a_missing_model_is_one_clear_error(tmp_path, corpus):
    r = _run("build", str(corpus), "-o", str(tmp_path / "x.dvf"), "--embed", str(tmp_path / "nope"))
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "`model`" in r.stderr and "was not found" in r.stderr and "Nothing is downloaded" in r.stderr
    assert not (tmp_path / "x.dvf").exists()


def test_embed_batch_size_needs_embed(tmp_path, corpus):
    r = _run("build", str(corpus), "-o", str(tmp_path / "x.dvf"), "--embed-batch-size", "8")
    assert r.returncode != 0 and "`--embed-batch-size` applies with --embed" in r.stderr
