"""``clustering="star"``: every folded document is verified threshold-similar to its representative.

Kinds: oracle (a slow, obvious greedy over exact Jaccard of Python shingle sets, run on the
components of the same build), property (hypothesis: chaining corpora of random edit walks),
incremental (add keeps ids and the guarantee), and the `components` option.
"""

from __future__ import annotations

import numpy as np
import pytest
import reference as R
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diversify import BuildConfig, MinHashConfig, add, build

T = 0.6
EXACT = BuildConfig(minhash=MinHashConfig(threshold=T, verify="exact"), clustering="star")


def _walk(rng, n_steps: int, length: int = 120, swaps: int = 2) -> list[str]:
    """A chain of documents, each a few word substitutions away from the previous one: neighbours
    are similar, the ends are not (exactly what connected components fold together)."""
    vocab = [f"w{i}" for i in range(400)]
    doc = list(rng.choice(vocab, length))
    out = []
    for _ in range(n_steps):
        out.append(" ".join(doc))
        doc = list(doc)
        for j in rng.choice(length, swaps, replace=False):
            doc[j] = str(rng.choice(vocab))
    return out


def _jaccard(a: str, b: str) -> float:
    sa, sb = set(R.shingles(a)), set(R.shingles(b))
    return 1.0 if not sa and not sb else len(sa & sb) / len(sa | sb)


def _oracle(texts: list[str], components: np.ndarray) -> list[int]:
    """Labels of the greedy, brute force: in each component, in 'longest, then first' order, the
    first unassigned document takes every unassigned document at exact Jaccard >= T."""
    lengths = [R.folded_length(t) for t in texts]
    labels = list(range(len(texts)))
    for c in np.unique(components):
        members = sorted(np.flatnonzero(components == c).tolist(), key=lambda i: (-lengths[i], i))
        todo = members
        while todo:
            r, rest = todo[0], todo[1:]
            group = [r] + [m for m in rest if _jaccard(texts[r], texts[m]) >= T]
            for m in group:
                labels[m] = min(group)
            todo = [m for m in rest if m not in group]
    return labels


def _check_guarantee(texts, res):
    cids, rep = res.cluster_ids, res.is_representative
    rep_of = {int(cids[i]): i for i in np.flatnonzero(rep)}
    assert len(rep_of) == len(np.unique(cids)), "one representative per cluster"
    worst = min((_jaccard(texts[rep_of[int(c)]], texts[i]) for i, c in enumerate(cids) if not rep[i]), default=1.0)
    assert worst >= T, f"a folded document is only {worst:.3f} similar to its representative (threshold {T})"


def test_chained_walk_is_cut_into_clusters_that_keep_the_promise(rng):
    texts = _walk(rng, 30)
    comp = build(texts, config=EXACT.model_copy(update={"clustering": "components"}))
    res = build(texts, config=EXACT)
    assert np.unique(comp.cluster_ids).size < np.unique(res.cluster_ids).size, "the walk should chain"
    ends = [_jaccard(texts[0], texts[-1])]
    assert ends[0] < T
    _check_guarantee(texts, res)
    assert res.cluster_ids.tolist() == _oracle(texts, comp.cluster_ids)
    assert res.cluster_map.build_info["fold"]["components_cut"] >= 1


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), walks=st.integers(1, 4), steps=st.integers(2, 12), swaps=st.integers(1, 4))
def test_property_guarantee_and_oracle_on_random_walks(seed, walks, steps, swaps):
    rng = np.random.default_rng(seed)
    texts = [t for _ in range(walks) for t in _walk(rng, steps, swaps=swaps)]
    comp = build(texts, config=EXACT.model_copy(update={"clustering": "components"}))
    res = build(texts, config=EXACT)
    _check_guarantee(texts, res)
    assert res.cluster_ids.tolist() == _oracle(texts, comp.cluster_ids)
    # cutting never joins what the components kept apart
    for c in np.unique(res.cluster_ids):
        assert np.unique(comp.cluster_ids[res.cluster_ids == c]).size == 1


@pytest.mark.parametrize("verify", ["estimate", "auto", "exact"])
def test_guarantee_under_every_verify_mode_within_the_estimate_error(verify, rng):
    texts = [t for _ in range(4) for t in _walk(rng, 15, swaps=2)]
    res = build(texts, config=BuildConfig(minhash=MinHashConfig(threshold=T, verify=verify), clustering="star"))
    cids, rep = res.cluster_ids, res.is_representative
    rep_of = {int(cids[i]): i for i in np.flatnonzero(rep)}
    sims = [_jaccard(texts[rep_of[int(c)]], texts[i]) for i, c in enumerate(cids) if not rep[i]]
    # the estimate decides some pairs: allow 4 standard errors of a 128-slot estimate at T
    slack = 0.0 if verify == "exact" else 4 * np.sqrt(T * (1 - T) / 128)
    assert min(sims, default=1.0) >= T - slack, (verify, min(sims))


def test_add_keeps_ids_and_the_guarantee(rng):
    texts = _walk(rng, 24, swaps=2)
    ids = [f"d{i}" for i in range(len(texts))]
    old = build(texts[::2], ids=ids[::2], config=EXACT)
    new = add(old.cluster_map, texts[1::2], ids=ids[1::2])
    assert new.cluster_ids[: old.n_docs].tolist() == old.cluster_ids.tolist(), "existing documents keep their ids"
    assert new.is_representative[: old.n_docs].tolist() == old.is_representative.tolist()
    order = texts[::2] + texts[1::2]
    _check_guarantee(order, new)


def test_add_of_documents_in_representative_order_equals_one_build(rng):
    cfg = EXACT.model_copy(update={"representative": "first"})
    texts = [t for _ in range(3) for t in _walk(rng, 10, swaps=2)]
    whole = build(texts, config=cfg)
    part = add(build(texts[:15], config=cfg).cluster_map, texts[15:])
    assert part.cluster_ids.tolist() == whole.cluster_ids.tolist()
    assert part.is_representative.tolist() == whole.is_representative.tolist()


def test_components_option_keeps_transitive_clusters(rng):
    texts = _walk(rng, 30)
    comp = build(texts, config=EXACT.model_copy(update={"clustering": "components"}))
    assert "fold" not in comp.cluster_map.build_info
    assert comp.cluster_map.config["clustering"] == "components"


def test_composite_representative_keys_in_priority_order():
    base = " ".join(f"word{i}" for i in range(60))
    texts = [base, base + " x", base + " x y", base + " z"]
    keys = np.array([[2, 10], [3, 5], [3, 7], [1, 99]], dtype=float)  # authority, then updated_at
    res = build(texts, keys=keys, config=BuildConfig(representative="key", clustering="star"))
    assert res.cluster_ids.tolist() == [0, 0, 0, 0]
    assert res.is_representative.tolist() == [False, False, True, False]
    # a tie on every key column goes to the longest text
    res = build(texts, keys=np.array([[1, 1]] * 4, dtype=float),
                config=BuildConfig(representative="key", clustering="star"))
    assert res.is_representative.tolist() == [False, False, True, False]


def test_per_source_thresholds_apply_the_stricter_of_a_pair(rng):
    base = [f"w{i}" for i in range(100)]
    near = base[:88] + [f"x{i}" for i in range(12)]  # Jaccard ~0.72 with base
    texts = [" ".join(base), " ".join(near), " ".join(base), " ".join(near)]
    sources = ["loose", "loose", "strict", "strict"]
    ja = _jaccard(texts[0], texts[1])
    assert 0.6 < ja < 0.8, ja
    cfg = BuildConfig(minhash=MinHashConfig(threshold=0.85, verify="exact"),
                      source_thresholds={"loose": 0.6, "strict": 0.9}, clustering="star")
    res = build(texts, sources=sources, config=cfg)
    # 0 and 2 are identical (fold whatever the sources); 1 is loose and ~0.72 from the loose
    # representative 0 (folds at 0.6); 3 is strict and stays apart (0.72 < 0.9)
    assert res.cluster_ids.tolist() == [0, 0, 0, 3]
    loose = build(texts[:2], sources=sources[:2], config=cfg)
    assert loose.cluster_ids.tolist() == [0, 0], "two loose documents fold at 0.6"
    with pytest.raises(ValueError, match="needs `sources`"):
        build(texts, config=cfg)
    with pytest.raises(ValueError, match="clustering='clique' or 'star'"):
        BuildConfig(clustering="components", source_thresholds={"a": 0.5})


def test_exact_copies_share_one_shingle_set_in_the_cut(monkeypatch):
    """The batched cut (``run_batches``, the clique cut's) shingles one document per distinct text of
    a batch (its copies read its set): the same clusters, representatives, stage bits, fold
    similarities and counters as shingling every copy (the former rule, patched back in), with far
    fewer documents re-shingled."""
    import diversify.sketches.source as source
    from diversify.clusters import guarantee

    rng = np.random.default_rng(8)
    vocab = [f"b{i}" for i in range(2000)]
    page = list(rng.choice(vocab, 150))
    texts = []
    for j in range(1300):  # one family past DENSE_MAX: the large-family path
        if j % 3:
            texts.append(" ".join(page))
        else:
            e = list(page)
            e[int(rng.integers(150))] = str(rng.choice(vocab))
            texts.append(" ".join(e))
    for _ in range(5):  # small families: the dense path, with exact copies inside
        texts += _walk(rng, 6, length=60, swaps=3) * 2
    texts = [texts[i] for i in rng.permutation(len(texts))]
    cfg = BuildConfig(clustering="clique", minhash=MinHashConfig(threshold=0.8))
    shingled: list = []
    real = source.reshingled

    def counting(src, batches, config):
        for out in real(src, batches, config):
            shingled.append(out[0].size)
            yield out

    monkeypatch.setattr(source, "reshingled", counting)
    now = build(texts, config=cfg)
    n_now = sum(shingled)
    shingled.clear()
    monkeypatch.setattr(guarantee, "_distinct_texts", lambda exact, docs: (np.arange(docs.size), np.arange(docs.size)))
    before = build(texts, config=cfg)
    n_before = sum(shingled)
    assert np.array_equal(now.cluster_ids, before.cluster_ids)
    assert np.array_equal(now.is_representative, before.is_representative)
    assert np.array_equal(now.doc_stages, before.doc_stages)
    assert np.array_equal(now.cluster_map.extras["fold_similarity"], before.cluster_map.extras["fold_similarity"],
                          equal_nan=True)
    assert now.cluster_map.build_info["fold"] == before.cluster_map.build_info["fold"]
    assert n_before > 1300 and n_now < n_before // 2, (n_now, n_before)
