"""``clustering="clique"`` (the default): every two members of a cluster are verified similar.

Kinds: oracle (a slow, obvious greedy clique cover over exact Jaccard of Python shingle sets, run on
the components of the same build), property (hypothesis: chains and families; every pair of
members >= t, also through the large-family path with the metric bound), the bound's cost on a
large family, add, per-source thresholds, vectors, and the earlier name of "star".
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import reference as R
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import diversify.clusters.clique as clique_mod
from diversify import BuildConfig, MinHashConfig, SimHashConfig, add, build
from diversify.config import fingerprint

T = 0.6
EXACT = BuildConfig(minhash=MinHashConfig(threshold=T, verify="exact"))
VOCAB = [f"w{i}" for i in range(400)]


def _walk(rng, n_steps: int, length: int = 120, swaps: int = 2) -> list[str]:
    """A chain: each document a few substitutions from the previous one (the ends are far apart)."""
    doc = list(rng.choice(VOCAB, length))
    out = []
    for _ in range(n_steps):
        out.append(" ".join(doc))
        doc = list(doc)
        for j in rng.choice(length, swaps, replace=False):
            doc[j] = str(rng.choice(VOCAB))
    return out


def _family(rng, n: int, length: int = 150, edits: int = 3) -> list[str]:
    """A page and ``n - 1`` copies, each a few substitutions from the page (not from each other)."""
    page = list(rng.choice(VOCAB, length))
    out = [" ".join(page)]
    for _ in range(n - 1):
        doc = list(page)
        for j in rng.choice(length, edits, replace=False):
            doc[j] = f"e{rng.integers(10**9)}"
        out.append(" ".join(doc))
    return out


def _sets(texts):
    return [set(R.shingles(t)) for t in texts]


def _j(a: set, b: set) -> float:
    return 1.0 if not a and not b else len(a & b) / len(a | b)


def _worst_pair(texts, cids) -> float:
    sets = _sets(texts)
    worst = 1.0
    for c in np.unique(cids):
        members = np.flatnonzero(cids == c).tolist()
        for a, b in itertools.combinations(members, 2):
            worst = min(worst, _j(sets[a], sets[b]))
    return worst


def _oracle(texts: list[str], components: np.ndarray, t: float = T) -> list[int]:
    """Labels of the greedy clique cover, brute force: in each component, repeat: the unassigned
    member with the most unassigned neighbours at exact Jaccard >= t (ties: longest, then first) is
    a center; its neighbours, most neighbours first, join when similar to every member taken."""
    sets = _sets(texts)
    lengths = [R.folded_length(x) for x in texts]
    labels = list(range(len(texts)))
    for c in np.unique(components):
        todo = sorted(np.flatnonzero(components == c).tolist(), key=lambda i: (-lengths[i], i))
        pos = {d: k for k, d in enumerate(todo)}
        adj = {a: {b for b in todo if b != a and _j(sets[a], sets[b]) >= t} for a in todo}
        while todo:
            deg = {a: len(adj[a] & set(todo)) for a in todo}
            center = min(todo, key=lambda a: (-deg[a], pos[a]))
            group = [center]
            for x in sorted(adj[center] & set(todo), key=lambda a: (-deg[a], pos[a])):
                if all(x in adj[y] for y in group):
                    group.append(x)
            for m in group:
                labels[m] = min(group)
            todo = [m for m in todo if m not in group]
    return labels


def test_default_is_clique_and_the_earlier_name_reads_as_star():
    assert BuildConfig().clustering == "clique"
    assert BuildConfig(clustering="guaranteed").clustering == "star"
    # artifacts written under the earlier name keep their fingerprints
    legacy = BuildConfig(clustering="star")
    import hashlib

    from diversify.config import canonical_json
    from diversify.hashing import HASH_SCHEME

    payload = canonical_json(legacy).replace('"clustering":"star"', '"clustering":"guaranteed"')
    assert fingerprint(legacy) == hashlib.sha256((HASH_SCHEME + "|" + payload).encode()).hexdigest()
    assert fingerprint(BuildConfig(clustering="clique")) != fingerprint(legacy)


def test_a_chain_is_cut_into_cliques_and_matches_the_oracle(rng):
    texts = _walk(rng, 30, swaps=3)
    comp = build(texts, config=EXACT.model_copy(update={"clustering": "components"}))
    star = build(texts, config=EXACT.model_copy(update={"clustering": "star"}))
    res = build(texts, config=EXACT)
    assert _worst_pair(texts, comp.cluster_ids) < T, "the walk should chain"
    assert _worst_pair(texts, res.cluster_ids) >= T
    assert res.cluster_ids.tolist() == _oracle(texts, comp.cluster_ids)
    assert res.cluster_map.config["clustering"] == "clique"
    # a star around the longest member may hold two members below the threshold; a clique never
    assert _worst_pair(texts, star.cluster_ids) >= 2 * T - 1


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), walks=st.integers(1, 4), steps=st.integers(2, 14), swaps=st.integers(1, 4))
def test_property_every_pair_similar_and_oracle_on_random_walks(seed, walks, steps, swaps):
    rng = np.random.default_rng(seed)
    texts = [t for _ in range(walks) for t in _walk(rng, steps, swaps=swaps)]
    comp = build(texts, config=EXACT.model_copy(update={"clustering": "components"}))
    res = build(texts, config=EXACT)
    assert _worst_pair(texts, res.cluster_ids) >= T
    assert res.cluster_ids.tolist() == _oracle(texts, comp.cluster_ids)
    for c in np.unique(res.cluster_ids):  # cutting never joins what the components kept apart
        assert np.unique(comp.cluster_ids[res.cluster_ids == c]).size == 1
    # one representative per cluster, the first member by the rule (longest, then first)
    lengths = np.array([R.folded_length(t) for t in texts])
    for c in np.unique(res.cluster_ids):
        members = np.flatnonzero(res.cluster_ids == c)
        reps = members[res.is_representative[members]]
        assert reps.tolist() == [min(members.tolist(), key=lambda i: (-lengths[i], i))]


@pytest.mark.parametrize("verify", ["auto", "exact"])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), dense=st.sampled_from([2, 3, 5]), edits=st.integers(1, 12))
def test_property_large_family_path_never_admits_a_pair_below_t(monkeypatch, verify, seed, dense, edits):
    """The metric bound and the round budget, forced onto small components: every pair of members
    of every cluster still has exact Jaccard >= t (auto and exact verify check every pair that
    reaches the band exactly, so the bound stands for exact Jaccard)."""
    monkeypatch.setattr(clique_mod, "DENSE_MAX", dense)
    monkeypatch.setattr(clique_mod, "SAMPLE", 4)
    rng = np.random.default_rng(seed)
    texts = _family(rng, 12, edits=edits) + _walk(rng, 8, swaps=3)
    res = build(texts, config=BuildConfig(minhash=MinHashConfig(threshold=T, verify=verify)))
    assert _worst_pair(texts, res.cluster_ids) >= T
    again = build(texts, config=BuildConfig(minhash=MinHashConfig(threshold=T, verify=verify)))
    assert again.cluster_ids.tolist() == res.cluster_ids.tolist(), "deterministic"
    assert again.is_representative.tolist() == res.is_representative.tolist()


def test_a_large_family_costs_linear_checks_not_quadratic(rng, monkeypatch):
    """800 copies within Jaccard distance 0.1 of their page at t = 0.8, cut by the large-family path
    (components above DENSE_MAX members; lowered here so the test stays small): one cluster, every
    pair >= 0.8 (checked here on a sample), at a few checks per member instead of n^2 / 2."""
    monkeypatch.setattr(clique_mod, "DENSE_MAX", 256)
    texts = _family(rng, 800, length=300, edits=2)
    sets = _sets(texts)
    assert min(_j(sets[0], s) for s in sets[1:]) >= 0.9, "the copies must really be near the page"
    res = build(texts, config=BuildConfig(minhash=MinHashConfig(threshold=0.8)))
    assert np.unique(res.cluster_ids).size == 1
    fold = res.cluster_map.build_info["fold"]
    n = len(texts)
    assert fold["pairs_checked"] <= 4 * n + clique_mod.SAMPLE ** 2, fold
    assert fold["pairs_certified"] > n * (n - 1) // 4, fold
    pick = rng.choice(n, size=(2000, 2))
    assert min(_j(sets[a], sets[b]) for a, b in pick if a != b) >= 0.8


def test_add_joins_a_stored_cluster_only_when_similar_to_every_member(rng):
    base = list(rng.choice(VOCAB, 100))
    a = " ".join(base)
    b = " ".join(base[:84] + [f"b{i}" for i in range(16)])  # 0.71 with a
    c = " ".join([f"c{i}" for i in range(16)] + base[16:])  # 0.71 with a, 0.5 with b
    sets = _sets([a, b, c])
    assert _j(sets[0], sets[1]) >= T and _j(sets[0], sets[2]) >= T and _j(sets[1], sets[2]) < T
    old = build([a, b], ids=["a", "b"], config=EXACT)
    assert old.cluster_ids.tolist() == [0, 0]
    new = add(old.cluster_map, [c], ids=["c"])
    assert new.cluster_ids[:2].tolist() == [0, 0], "stored documents keep their clusters"
    assert new.cluster_ids[2] != 0, "c is similar to a but not to b: it may not join their cluster"
    # the same three in one build: a clique of a and one of b/c
    one = build([a, b, c], config=EXACT)
    assert _worst_pair([a, b, c], one.cluster_ids) >= T


def test_per_source_thresholds_hold_for_every_pair(rng):
    base = [f"w{i}" for i in range(100)]
    near = base[:88] + [f"x{i}" for i in range(12)]  # ~0.72 with base
    texts = [" ".join(base), " ".join(near), " ".join(base), " ".join(near)]
    sources = ["loose", "loose", "strict", "strict"]
    cfg = BuildConfig(minhash=MinHashConfig(threshold=0.85, verify="exact"),
                      source_thresholds={"loose": 0.6, "strict": 0.9})
    res = build(texts, sources=sources, config=cfg)
    # 0 = 2 and 1 = 3 as texts; 0-1 is 0.72 (a loose pair: similar), 2-1 and 0-3 are strict pairs
    # (not similar). Degrees 2, 2, 1, 1: 0 is the center and takes 1; 2 and 3 are not similar
    assert res.cluster_ids.tolist() == [0, 0, 2, 3]
    star = build(texts, sources=sources, config=cfg.model_copy(update={"clustering": "star"}))
    assert star.cluster_ids.tolist() == [0, 0, 0, 3], "the star around 0 holds 1 and 2, a strict pair at 0.72"


def test_vectors_every_pair_above_the_cosine_threshold(rng):
    """Exact cosine verification: every two members of a cluster are >= t (a chain of vectors whose
    neighbours are similar and whose ends are not)."""
    d, t = 32, 0.95
    walk = [rng.normal(size=d)]
    for _ in range(40):
        walk.append(walk[-1] + 0.18 * rng.normal(size=d) * np.linalg.norm(walk[-1]) / np.sqrt(d))
    v = np.array(walk)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    cfg = BuildConfig(minhash=None, simhash=SimHashConfig(threshold=t, verify="exact"))
    res = build(vectors=v.astype(np.float32), config=cfg)
    comp = build(vectors=v.astype(np.float32), config=cfg.model_copy(update={"clustering": "components"}))
    cos = v @ v.T
    cids = res.cluster_ids
    same = cids[:, None] == cids[None, :]
    assert cos[same].min() >= t - 1e-6
    assert (comp.cluster_ids[:, None] == comp.cluster_ids[None, :])[~same].any() or cos.min() >= t
    assert np.unique(cids).size < v.shape[0], "near neighbours still cluster"


@pytest.mark.parametrize("given,stored", [([], "clique"), (["--clustering", "star"], "star"),
                                          (["--clustering", "guaranteed"], "star")])
def test_the_command_line_default_is_clique_and_takes_the_earlier_name(tmp_path, rng, given, stored):
    import json

    from diversify import load
    from diversify.cli.main import main

    texts = _walk(rng, 12, swaps=3)
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(texts)))
    art = tmp_path / "c.dvf"
    assert main(["build", str(corpus), "-o", str(art), "--no-progress", *given]) == 0
    cm = load(art)
    assert cm.config["clustering"] == stored
    assert cm.build_info["purity"]["promise"].startswith("every")
