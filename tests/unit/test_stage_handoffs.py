"""The hand-offs between the build's stages are explicit: the linking returns its forest, stage
bits, counts and exact-check memo (:class:`diversify.linking.link.Linked`) instead of filling
arguments or the sketches, so that the same sketches linked twice give the same result and are
left as they were; the cut into clusters takes the per-document thresholds and the memo as
arguments; sketching returns the texts at hand beside the sketches, and the linking and the cut
take them as an argument of their own."""

from __future__ import annotations

import dataclasses

import numpy as np

from diversify.clusters.guarantee import guaranteed_clusters, priority_rank
from diversify.clusters.labels import component_roots
from diversify.config import BuildConfig, MinHashConfig
from diversify.linking.link import Linked, link
from diversify.sketches.batch import Sketched, Sketches
from diversify.sketches.memo import ExactMemo
from diversify.staging import linking_config, sketch_inputs

WORDS = [f"w{i}" for i in range(60)]


def _near_pairs(n: int, seed: int = 3) -> list[str]:
    """``n`` texts in pairs, each pair one word apart: borderline pairs for the exact check."""
    rng = np.random.default_rng(seed)
    out: list[str] = []
    while len(out) < n:
        words = list(rng.choice(WORDS, 40))
        out.append(" ".join(words))
        words[int(rng.integers(0, len(words)))] = "zz"
        out.append(" ".join(words))
    return out[:n]


def _sketched(texts: list[str], cfg: BuildConfig) -> Sketched:
    return sketch_inputs(texts, None, None, None, cfg, progress=False, chunk_size=64, timings={})


def _sketches(texts: list[str], cfg: BuildConfig) -> Sketches:
    return _sketched(texts, cfg).sketches


def _state(sk: Sketches) -> dict:
    """Every field of ``sk``: arrays as bytes, the rest by identity."""
    return {f.name: (getattr(sk, f.name).tobytes() if isinstance(getattr(sk, f.name), np.ndarray)
                     else id(getattr(sk, f.name))) for f in dataclasses.fields(sk)}


def test_link_returns_its_forest_and_memo_and_leaves_the_sketches_alone():
    cfg = BuildConfig(minhash=MinHashConfig(threshold=0.8, verify="auto"))
    sk, source = _sketched(_near_pairs(400), cfg)
    before = _state(sk)
    first = link(sk, linking_config(cfg), source=source, timings={})
    assert isinstance(first, Linked) and isinstance(first.memo, ExactMemo)
    assert first.parent.shape == (sk.n,) and first.parent.dtype == np.int64
    assert first.flags.shape == (sk.n,) and first.flags.dtype == np.uint8
    assert first.stats.exact_checks["minhash"] > 0, "the corpus must give borderline pairs"
    keys, vals = first.memo.known()
    assert keys.size > 0 and np.all((vals >= 0) & (vals <= 1))
    assert _state(sk) == before, "linking wrote into the sketches"
    second = link(sk, linking_config(cfg), source=source, timings={})
    assert np.array_equal(component_roots(first.parent), component_roots(second.parent))
    assert np.array_equal(first.flags, second.flags)
    assert first.stats == second.stats
    for a, b in zip(first.memo.known(), second.memo.known()):
        assert np.array_equal(a, b), "a second linking of the same sketches saw the first one's memo"


def test_link_starts_from_the_forest_it_is_given():
    """``add`` starts from the artifact's components: documents joined before stay joined, and
    the stage bits given are kept (the linking only ORs bits in)."""
    cfg = BuildConfig(minhash=MinHashConfig(threshold=0.8, verify="auto"))
    sk = _sketches(_near_pairs(40) + ["alpha beta gamma delta " * 4, "epsilon zeta eta theta " * 4], cfg)
    n = sk.n
    parent = np.arange(n, dtype=np.int64)
    parent[n - 1] = n - 2  # two unrelated documents joined beforehand
    flags = np.zeros(n, dtype=np.uint8)
    flags[n - 1] = 0x80
    out = link(sk, linking_config(cfg), parent=parent, flags=flags, timings={})
    root = component_roots(out.parent)
    assert root[n - 1] == root[n - 2]
    assert out.flags[n - 1] & 0x80
    alone = link(sk, linking_config(cfg), timings={})
    assert component_roots(alone.parent)[n - 1] != component_roots(alone.parent)[n - 2]


def test_the_memo_is_not_a_field_of_the_sketches():
    names = {f.name for f in dataclasses.fields(Sketches)}
    assert "checked_pairs" not in names
    assert not hasattr(Sketches, "remember_jaccard") and not hasattr(Sketches, "known_jaccard")


def test_the_cut_takes_each_documents_threshold_as_an_argument():
    """The same sketches and forest, cut with and without per-document thresholds: a strict
    threshold for some documents leaves their near copies unfolded, and the sketches carry none."""
    cfg = BuildConfig(minhash=MinHashConfig(threshold=0.5, verify="estimate"))
    sk = _sketches(_near_pairs(200), cfg)
    assert not {f.name for f in dataclasses.fields(Sketches)} & {"doc_threshold", "thresholds"}
    linked = link(sk, linking_config(cfg), timings={})
    root = component_roots(linked.parent)
    rank = priority_rank(cfg.representative, sk.lengths, sk.keys)
    loose, *_ = guaranteed_clusters(root, sk, cfg, rank, memo=linked.memo)
    strict_thr = np.full(sk.n, 0.5)
    strict_thr[: sk.n // 2] = 0.999  # the first half's pairs must be (almost) identical
    strict, *_ = guaranteed_clusters(root, sk, cfg, rank, memo=linked.memo, thresholds=strict_thr)
    folded = lambda labels: labels != np.arange(sk.n)  # noqa: E731
    assert folded(loose)[: sk.n // 2].sum() > 10, "near copies fold at 0.5"
    assert folded(strict)[: sk.n // 2].sum() == 0, "no near copy meets 0.999"
    assert np.array_equal(strict[sk.n // 2:], loose[sk.n // 2:]), "the second half's pairs are cut as before"
    same, *_ = guaranteed_clusters(root, sk, cfg, rank, memo=linked.memo, thresholds=np.full(sk.n, 0.5))
    assert np.array_equal(same, loose), "one threshold for every document is the config's"


def test_sketching_returns_the_text_source_beside_the_sketches():
    """The texts a build re-shingles from travel as one :class:`TextSource` (texts, their first
    document, the kept encodings, each text's shingle count) that sketching returns beside the
    sketches, not inside them; it is there only where a sequence was given."""
    from diversify.sketches.source import TextSource, reshingle
    from diversify.text import sorted_unique_shingles

    cfg = BuildConfig(minhash=MinHashConfig(threshold=0.8, verify="auto"))
    texts = _near_pairs(30) + ["caf\u00e9 stra\u00dfe \u0130stanbul " * 5]
    sk, source = sketch_inputs(texts, None, None, None, cfg, progress=False, chunk_size=8, timings={}, id_offset=100)
    assert isinstance(sk, Sketches) and sk.n == len(texts)
    assert isinstance(source, TextSource) and source.texts is texts and source.offset == 100
    assert source.encoded is not None and source.encoded.chunks, "the non-ASCII chunk is kept"
    assert source.shingle_counts is not None and source.shingle_counts.shape == (len(texts),)
    starts, counts, hashes = reshingle(source, [130, 100], cfg)
    want = sorted_unique_shingles([texts[30], texts[0]], cfg.text, cfg.seed)
    assert hashes[starts[0]: starts[0] + counts[0]].tolist() == want[2][want[0][0]: want[0][0] + want[1][0]].tolist()
    assert hashes[starts[1]: starts[1] + counts[1]].tolist() == want[2][want[0][1]: want[0][1] + want[1][1]].tolist()
    names = {f.name for f in dataclasses.fields(Sketches)}
    assert not names & {"source", "texts", "text_offset", "encoded", "text_shingles"}
    streamed = sketch_inputs(iter(texts), None, None, None, cfg, progress=False, chunk_size=8, timings={})
    assert streamed.source is None, "an iterator's texts are gone once sketched"


def test_the_linking_and_the_cut_take_the_text_source_as_an_argument():
    """The same sketches linked and cut with and without the texts at hand: with them, borderline
    pairs are decided by exact Jaccard (the memo holds them; the folds' similarities are exact
    Jaccard values); without them, by the estimate (no exact check, nothing in the memo)."""
    from diversify.text import exact_jaccard, sorted_unique_shingles

    cfg = BuildConfig(minhash=MinHashConfig(threshold=0.8, verify="auto"))
    texts = _near_pairs(400)
    sk, source = _sketched(texts, cfg)
    assert source is not None
    with_texts = link(sk, linking_config(cfg), source=source, timings={})
    blind = link(sk, linking_config(cfg), timings={})
    assert with_texts.stats.exact_checks["minhash"] > 0 and with_texts.memo.known()[0].size > 0
    assert blind.stats.exact_checks["minhash"] == 0 and blind.memo.known()[0].size == 0
    root = component_roots(with_texts.parent)
    rank = priority_rank(cfg.representative, sk.lengths, sk.keys)
    labels, reps, _, stats = guaranteed_clusters(root, sk, cfg, rank, memo=with_texts.memo, source=source)
    folded = np.flatnonzero(labels != np.arange(sk.n))
    assert folded.size > 10 and stats.exact_checks > 0
    starts, counts, hashes = sorted_unique_shingles(texts, cfg.text, cfg.seed)
    sets = [hashes[a: a + c] for a, c in zip(starts.tolist(), counts.tolist())]
    rep_of = {int(labels[r]): int(r) for r in np.flatnonzero(reps)}
    exact = np.array([exact_jaccard(sets[d], sets[rep_of[int(labels[d])]]) for d in folded.tolist()])
    assert (exact >= cfg.minhash.threshold - 1e-12).all(), "every fold is verified exactly with the texts at hand"
    checked = ~np.isclose(stats.similarity[folded], 1.0)
    assert np.allclose(stats.similarity[folded][checked], exact[checked]), "similarities are the exact Jaccard"
    _, _, _, blind_stats = guaranteed_clusters(root, sk, cfg, rank, memo=with_texts.memo)
    assert blind_stats.exact_checks == 0, "without the texts the cut cannot re-shingle"


def test_finish_makes_the_per_document_state_once(monkeypatch):
    """The artifact's incremental state and the report's input are one computation: ``finish``
    asks the stage layer for it once, with or without ``incremental``, and the report still sees it
    (an estimated member similarity needs the signatures)."""
    import diversify
    import diversify.engines.finish as fin

    calls = []
    real = fin.incremental_extras

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(fin, "incremental_extras", counted)
    texts = _near_pairs(60)
    for incremental in (True, False):
        calls.clear()
        cfg = BuildConfig(minhash=MinHashConfig(threshold=0.8, verify="estimate"), incremental=incremental,
                          clustering="components")
        res = diversify.build(texts, config=cfg, created_at="2000-01-01T00:00:00Z")
        assert calls == [1]
        assert res.report["similarity_known"] and res.report["member_similarity"]["min"] > 0.5
        assert ("minhash" in res.cluster_map.extras) == incremental
