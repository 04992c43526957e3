"""The cut into clusters on the Dask workers against the local build, on a real LocalCluster with
two worker processes.

Oracle: ``diversify.build`` on the same texts. Under every clustering (clique, star, components)
and every verification the Dask engine runs (auto, estimate), the workers' cut must give the same
labels, representatives, stage bits, fold similarities, fold counters and sampled purity (drawn
on the workers with the local build's draws), whatever the number of input partitions. Hypothesis
draws small corpora of edited copies; fixed corpora hold boilerplate families (more member pairs
than the purity samples) and real text.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

distributed = pytest.importorskip("distributed")
pytest.importorskip("dask.dataframe")

from shared_data import twitter_sentences  # noqa: E402

from diversify import build as local_build  # noqa: E402
from diversify.config import BuildConfig, MinHashConfig, TextConfig  # noqa: E402
from diversify.corpus.datagen import generate_corpus  # noqa: E402
from diversify.engines.dask import build_dask  # noqa: E402

MODES = [(c, v) for c in ("clique", "star", "components") for v in ("auto", "estimate")]


def assert_same_cut(dask_res, local_res, what: str) -> None:
    a, b = dask_res.cluster_ids, local_res.cluster_ids
    diff = np.flatnonzero(a != b)
    assert diff.size == 0, f"{what}: {diff.size} labels differ, e.g. docs {diff[:5].tolist()}: dask " \
                           f"{a[diff[:5]].tolist()} vs local {b[diff[:5]].tolist()}"
    assert np.array_equal(dask_res.is_representative, local_res.is_representative), f"{what}: representatives differ"
    assert np.array_equal(dask_res.doc_stages, local_res.doc_stages), f"{what}: stage bits differ"
    bd, bl = dask_res.cluster_map.build_info, local_res.cluster_map.build_info
    for key in ("n_clusters", "fold", "purity", "merged"):
        assert bd.get(key) == bl.get(key), f"{what}: build_info[{key!r}] differ: {bd.get(key)} vs {bl.get(key)}"
    ed, el = dask_res.cluster_map.extras, local_res.cluster_map.extras
    assert sorted(ed) == sorted(el), f"{what}: extras differ"
    for k in el:
        assert np.array_equal(np.asarray(ed[k]), np.asarray(el[k]), equal_nan=True), f"{what}: extra {k!r} differs"
    assert dask_res.report == local_res.report, f"{what}: reports differ"


def _walks(seed: int, families: int, copies: int, edits: int, words: int) -> list:
    """Families of chained edit walks (a copy's edits accumulate): components that must be cut."""
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(300)]
    texts = []
    for _ in range(families):
        doc = list(rng.choice(vocab, words))
        for _ in range(copies):
            texts.append(" ".join(doc))
            for j in rng.choice(words, edits, replace=False):
                doc[j] = str(rng.choice(vocab))
    order = rng.permutation(len(texts))
    return [texts[i] for i in order] + ["", texts[0]]  # an empty document and an exact copy


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**31), families=st.integers(1, 5), copies=st.integers(2, 14), edits=st.integers(1, 4),
       mode=st.sampled_from(MODES), rep=st.sampled_from(["longest", "first"]), nparts=st.integers(1, 4),
       threshold=st.sampled_from([0.5, 0.6, 0.8]))
def test_the_workers_cut_gives_the_local_clusters(client, seed, families, copies, edits, mode, rep, nparts, threshold):
    clustering, verify = mode
    texts = _walks(seed, families, copies, edits, 60)
    cfg = BuildConfig(clustering=clustering, representative=rep,
                      minhash=MinHashConfig(threshold=threshold, verify=verify))
    local = local_build(texts, config=cfg)
    res = build_dask(texts, config=cfg, client=client, npartitions=min(nparts, len(texts)))
    assert_same_cut(res, local, f"{mode}, representative={rep}, {nparts} partitions")


@pytest.mark.parametrize("clustering, verify", MODES)
def test_boilerplate_families_and_a_purity_sample_smaller_than_the_pairs(client, clustering, verify):
    """Large families (thousands of member pairs): the purity sample draws 1,000 of them, on the workers."""
    c = generate_corpus(1200, words_per_doc=60, dup_fraction=0.3, boilerplate_fraction=0.25, n_templates=2, seed=3)
    texts = list(c.texts)
    cfg = BuildConfig(clustering=clustering, minhash=MinHashConfig(verify=verify))
    local = local_build(texts, config=cfg)
    purity = local.cluster_map.build_info["purity"]
    assert purity["pairs_in_clusters"] > purity["pairs_sampled"] == 1000, purity
    res = build_dask(texts, config=cfg, client=client, npartitions=3)
    assert_same_cut(res, local, f"boilerplate, {clustering}, {verify}")
    assert res.stats["dask"]["cut_partitions"] >= 2 and res.stats["dask"]["cut_members"] > 0


def test_representative_by_key_is_chosen_on_the_workers(client):
    texts = _walks(7, 4, 10, 2, 50)
    keys = np.random.default_rng(1).integers(0, 5, len(texts)).astype(np.float64)
    cfg = BuildConfig(representative="key", minhash=MinHashConfig(threshold=0.6))
    local = local_build(texts, keys=keys, config=cfg)
    res = build_dask(texts, keys=keys, config=cfg, client=client, npartitions=3)
    assert_same_cut(res, local, "representative='key'")


@pytest.mark.parametrize("clustering", ["clique", "star", "components"])
def test_real_tweets_are_cut_as_the_local_build_cuts_them(client, clustering):
    texts = twitter_sentences()
    cfg = BuildConfig(clustering=clustering, text=TextConfig(shingle="char", k=5),
                      minhash=MinHashConfig(threshold=0.7))
    local = local_build(texts, config=cfg)
    assert local.n_duplicates > 100
    res = build_dask(texts, config=cfg, client=client, npartitions=4)
    assert_same_cut(res, local, f"Twitter URL corpus, {clustering}")


def _boilerplate(seed: int) -> list:
    """Two giant families (1,500 and 400 copies of one page: exact copies and one-word edits, so
    the larger one takes the local cut's large-family path), small families and unique pages."""
    rng = np.random.default_rng(seed)
    vocab = [f"v{i}" for i in range(3000)]
    texts: list = []
    for copies in (1500, 400):
        page = list(rng.choice(vocab, 200))
        exact = " ".join(page)
        for j in range(copies):
            if j % 5 < 2:
                texts.append(exact)
            else:
                edited = list(page)
                edited[int(rng.integers(200))] = str(rng.choice(vocab))
                texts.append(" ".join(edited))
    texts += _walks(seed, 6, 8, 3, 60)
    texts += [" ".join(rng.choice(vocab, 80)) for _ in range(300)]
    return [texts[i] for i in rng.permutation(len(texts))]


@pytest.mark.parametrize("clustering, verify", [("clique", "auto"), ("star", "estimate"), ("components", "auto")])
def test_giant_components_are_cut_each_in_its_own_task(client, monkeypatch, clustering, verify):
    """Components over the giant bound (lowered here) are found on the workers and cut alone: the
    local clusters, one cut partition per giant."""
    from diversify.engines.dask import cut

    monkeypatch.setattr(cut, "GIANT_MEMBERS", 300)
    texts = _boilerplate(5)
    cfg = BuildConfig(clustering=clustering, minhash=MinHashConfig(verify=verify))
    local = local_build(texts, config=cfg)
    res = build_dask(texts, config=cfg, client=client, npartitions=3)
    assert_same_cut(res, local, f"giants, {clustering}, {verify}")
    info = res.stats["dask"]
    assert info["cut_giants"] == 2, info
    assert info["cut_largest_giant"] >= 1500, info
    sizes = np.bincount(local.cluster_ids)
    assert sizes.max() >= 600 and res.n_clusters == local.n_clusters


def test_a_member_rows_piece_carries_each_distinct_text_once():
    """Exact copies in an input partition (equal after normalization: here also in another case)
    travel as one text; each row indexes it."""
    from diversify.engines.dask.cut import cut_partition, member_rows
    from diversify.engines.dask.inputs import Part
    from diversify.engines.dask.sketch import sketch_part
    from diversify.engines.dask.texts import KeptTexts

    page = " ".join(f"w{i}" for i in range(80))
    texts = [page] * 40 + [page.upper()] * 10 + [page + " extra words here"] * 10 + ["something else entirely"]
    cfg = BuildConfig()
    skp = sketch_part(Part(texts, None, None), cfg.model_dump(mode="json"))
    docs = np.arange(60, dtype=np.int64)
    label_piece = (docs, np.zeros(60, dtype=np.int64))
    what = {"minhash": True, "keys": False, "n_exact": 0, "giants": np.array([0])}
    pieces = member_rows(skp, KeptTexts(texts, len(texts)), 0, 2, what, 1, label_piece)
    assert len(pieces) == 3 and pieces[0]["doc"].size == pieces[1]["doc"].size == 0
    giant = pieces[2]
    assert len(giant["texts"]) == 2 and page in giant["texts"] and page + " extra words here" in giant["texts"]
    sent = [giant["texts"][j] for j in giant["text_of"]]
    assert sent == [page] * 50 + [page + " extra words here"] * 10
    res = cut_partition(cfg.model_dump(mode="json"), *pieces)
    assert res["source"].texts == sent
    assert res["docs"].tolist() == list(range(60))
