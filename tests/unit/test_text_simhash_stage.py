"""The Charikar SimHash text stage: its clusters are exactly the components of 'Hamming <= max_hamming'."""

from __future__ import annotations

import numpy as np
import pytest

import diversify
from diversify.config import BuildConfig, TextSimHashConfig
from diversify.sketches.simhash import text_simhash


def _components(n, pairs):
    parent = list(range(n))

    def find(x):
        while parent[x] != x:
            x = parent[x]
        return x

    for a, b in pairs:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return [find(i) for i in range(n)]


@pytest.mark.parametrize("max_hamming", [0, 3, 6])
def test_stage_equals_bruteforce_hamming_graph(max_hamming):
    rng = np.random.default_rng(max_hamming)
    vocab = [f"w{i}" for i in range(300)]
    base = [" ".join(rng.choice(vocab, 40)) for _ in range(30)]
    texts = []
    for t in base:
        words = t.split()
        texts.append(t)
        for _ in range(2):
            w = list(words)
            w[int(rng.integers(len(w)))] = str(rng.choice(vocab))
            texts.append(" ".join(w))
    fp = text_simhash(texts)
    n = len(texts)
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n) if bin(int(fp[i]) ^ int(fp[j])).count("1") <= max_hamming]
    want = _components(n, pairs)
    cfg = BuildConfig(minhash=None, exact=False, text_simhash=TextSimHashConfig(max_hamming=max_hamming),
                      clustering="components")
    res = diversify.build(texts, config=cfg)
    assert res.cluster_ids.tolist() == want
    joined = res.cluster_ids != np.arange(n)
    assert ((res.doc_stages & 8) > 0)[joined].all()
    if max_hamming >= 3:
        assert len(pairs) > 0, "the check above must see some near-duplicates"


def test_text_simhash_composes_with_minhash_and_add():
    t = "the quick brown fox jumps over the lazy dog near the river bank today and tomorrow again with friends"
    cfg = BuildConfig(text_simhash=TextSimHashConfig())
    res = diversify.build([t, "something else entirely about query planners"], config=cfg)
    assert "text_simhash" in res.cluster_map.extras
    res2 = diversify.add(res.cluster_map, [t + " x"])
    assert res2.cluster_ids.tolist() == [0, 1, 0]


def test_max_hamming_is_validated():
    with pytest.raises(diversify.ConfigError, match="max_hamming"):
        TextSimHashConfig(max_hamming=40)

