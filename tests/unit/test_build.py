"""The offline builder: ``build``, ``add`` and ``BuildResult``.

Kinds: behaviour on planted corpora (what must and must not cluster), property (partition
soundness under exact verification), hostile inputs (ids, empty documents, bad arguments), and a
scale check of the giant-bucket path read from ``res.stats``.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import reference as R

from diversify import add, build
from diversify.config import BuildConfig, MinHashConfig, SimHashConfig, TextConfig
from diversify.errors import (
    ConfigError,
    DuplicateIdError,
    IncompatibleArtifactError,
    InputError,
    InputTypeError,
)
from diversify.stages import STAGE_EXACT, STAGE_MINHASH, STAGE_SIMHASH

# ----------------------------------------------------------------------------- planted corpora


def words(rng, n: int, vocab: int = 50_000) -> list[str]:
    return [f"w{int(x)}" for x in rng.integers(0, vocab, size=n)]


def planted(rng, n_groups: int, *, size: int = 3, length: int = 60) -> tuple[list[str], list[int]]:
    """Groups of near-copies far above 0.8 Jaccard (word 5-shingles), unrelated across groups.

    Member 0 is the base text; the others append one or two words, drop the last word, or change
    case and spacing. Returns (texts, group of each text).
    """
    texts, group = [], []
    for g in range(n_groups):
        base = words(rng, length)
        variants = [
            base,
            base + words(rng, 1),
            base[:-1],
            [w.upper() if i % 7 == 0 else w for i, w in enumerate(base)],
            base + words(rng, 2),
        ]
        for v in range(size):
            sep = "  " if v == 3 else " "
            texts.append(sep.join(variants[v % len(variants)]))
            group.append(g)
    return texts, group


def parts(res, ids=None) -> frozenset:
    return R.partition(res.cluster_ids, ids)


# ----------------------------------------------------------------------------- what clusters


def test_exact_duplicates_cluster_across_case_and_whitespace():
    base = "The Committee approved the budget"  # 5 words: below k there is exactly one shingle
    texts = [base, base.upper(), "  the   committee\tapproved\nthe budget  ", base.lower(), "the committee rejected the budget"]
    res = build(texts=texts)
    assert res.cluster_ids.tolist() == [0, 0, 0, 0, 4]
    assert res.doc_stages[:4].tolist() == [STAGE_EXACT] * 4, "case/whitespace variants are joined by the exact stage"
    assert res.doc_stages[4] == 0
    assert res.stats["verified"]["exact"] == 3, "m identical documents cost m-1 exact-stage unions"


def test_near_duplicates_cluster_and_unrelated_do_not(rng):
    texts, group = planted(rng, 12, size=4)
    res = build(texts=texts)
    assert parts(res) == R.partition(group), "planted groups must be exactly the clusters"
    assert res.n_clusters == 12
    stages = np.bitwise_or.reduce(res.doc_stages)
    assert stages & STAGE_MINHASH


@pytest.mark.parametrize("verify", ["estimate", "exact", "auto"])
def test_threshold_separates_above_from_below(verify, rng):
    # A and B share a 90-word core: J(A, B) = 86/96 = 0.896 (word 5-shingles); A and C share 45
    # words: J = 41/141 = 0.29. Threshold 0.8 must join A-B and keep C apart, for every verifier.
    core = words(rng, 90)
    a = " ".join(words(rng, 5) + core)
    b = " ".join(core + words(rng, 5))
    c = " ".join(core[:45] + words(rng, 55))
    res = build(texts=[a, b, c], config=BuildConfig(minhash=MinHashConfig(verify=verify)))
    assert res.cluster_ids.tolist() == [0, 0, 2]


def test_clusters_are_sound_under_exact_verification(rng):
    """Every multi-member cluster is connected by pairs that truly pass (equal normalized text or
    exact Jaccard >= threshold): no false merges, whatever LSH proposes."""
    threshold = 0.7
    pool = words(rng, 400)
    texts = []
    for _ in range(60):  # overlapping windows of one long text: a graded range of Jaccard values
        start = int(rng.integers(0, 300))
        texts.append(" ".join(pool[start : start + int(rng.integers(20, 100))]))
    cfg = BuildConfig(minhash=MinHashConfig(threshold=threshold, verify="exact"))
    res = build(texts=texts, config=cfg)
    sets = [set(R.shingles(t, "word", 5, cfg.seed)) for t in texts]
    n = len(texts)
    ok_edges = [(i, j) for i in range(n) for j in range(i + 1, n)
                if R.exact_hash(texts[i]) == R.exact_hash(texts[j])
                or len(sets[i] & sets[j]) / len(sets[i] | sets[j]) >= threshold]
    truth = R.components_bfs(n, ok_edges)
    # every build cluster lies inside one true component (sound) ...
    for c in set(res.cluster_ids.tolist()):
        members = np.flatnonzero(res.cluster_ids == c)
        assert len({truth[m] for m in members}) == 1, f"cluster {c} joins documents no passing path connects"
    # ... and labels are canonical: the smallest member of each cluster
    for c in set(res.cluster_ids.tolist()):
        assert c == int(np.flatnonzero(res.cluster_ids == c).min())


# ----------------------------------------------------------------------------- giant bucket


@pytest.mark.parametrize("exact", [True, False], ids=["exact-stage", "minhash-only"])
def test_giant_bucket_is_fast_and_correct(exact, rng):
    boiler = words(rng, 60)
    n_same, n_near, n_other = 5000, 2000, 300
    texts = ([" ".join(boiler)] * n_same
             + [" ".join(boiler + [f"tail{i}"]) for i in range(n_near)]
             + [" ".join(words(rng, 60)) for _ in range(n_other)])
    cfg = BuildConfig(exact=exact)
    build(texts=texts[:3] + texts[-3:], config=cfg)  # compile first: time the algorithm, not the JIT
    t0 = time.perf_counter()
    res = build(texts=texts, config=cfg)
    elapsed = time.perf_counter() - t0
    # documents reaching MinHash LSH in the giant bucket: the boilerplate once if the exact stage
    # grouped its copies, else every copy
    m = n_near + (1 if exact else n_same)
    assert res.n_clusters == 1 + n_other, f"expected the {n_same + n_near} boilerplate docs in one cluster"
    assert res.cluster_ids[: n_same + n_near].max() == 0
    st = res.stats
    if exact:
        assert st["verified"]["exact"] == n_same - 1
    # a pair already in one component is skipped: verifications stay O(m), not O(m * window)
    assert st["verified"]["minhash"] <= 2 * m, f"{st['verified']['minhash']} verifications for m={m}"
    bands = st["lsh"]["minhash"]["bands"]
    assert st["candidates"]["minhash"] <= m * (cfg.bucket_window - 1) * bands, "candidates must stay O(m * window)"
    assert elapsed < 10.0, f"giant bucket took {elapsed:.1f}s (about 0.2 s expected)"


# ----------------------------------------------------------------------------- empty documents


EMPTY_DOCS = ["", "   ", "\n\t", "!!! ...", "\u2028"]


def test_empty_documents_are_singletons_by_default():
    texts = ["some words in a document that is long enough"] * 2 + EMPTY_DOCS + EMPTY_DOCS
    res = build(texts=texts)
    n_empty = 2 * len(EMPTY_DOCS)
    assert res.cluster_ids.tolist() == [0, 0] + list(range(2, 2 + n_empty)), "empty docs never join, not even each other"
    assert res.cluster_map.build_info["n_empty"] == n_empty


def test_empty_documents_are_an_input_error_under_empty_error():
    texts = ["a document", "", "another", "   "]
    with pytest.raises(InputError, match=r"empty='error'.*positions \[1, 3\]"):
        build(texts=texts, config=BuildConfig(empty="error"))


# ----------------------------------------------------------------------------- ids


@pytest.mark.parametrize("ids, dup", [(["x", "y", "x"], "'x'"), ([7, 8, 9, 8], "8")])
def test_duplicate_ids_raise_naming_the_id(ids, dup):
    with pytest.raises(DuplicateIdError, match=f"id {dup} occurs"):
        build(texts=[f"doc {i}" for i in range(len(ids))], ids=ids)


@pytest.mark.parametrize("ids", [["a", 1, "c"], [1, "b", 3], [1, 2.5, 3], ["a", None, "c"], [True, 2, 3]])
def test_mixed_or_wrong_id_types_raise_input_type_error(ids):
    with pytest.raises(InputTypeError, match="ids"):
        build(texts=["doc one", "doc two", "doc three"], ids=ids)


def test_ids_are_kept_and_looked_up():
    res = build(texts=["alpha beta gamma", "alpha beta gamma", "delta"], ids=["x", "y", "z"])
    cm = res.cluster_map
    assert cm.ids == ["x", "y", "z"]
    assert cm.cluster_of("y") == cm.cluster_of("x") == 0 and cm.cluster_of("z") == 2


@pytest.mark.parametrize("n_ids", [2, 4])
def test_ids_count_must_match_texts(n_ids):
    with pytest.raises(InputError, match="one id per text"):
        build(texts=["a", "b", "c"], ids=[f"i{j}" for j in range(n_ids)])


# ----------------------------------------------------------------------------- representatives


def test_representative_longest_with_ties_to_first():
    texts = ["one two three four five six", "one two three four five six seven", "one two three four five six"]
    # exact stage: 0 and 2 identical; minhash joins 1 (J = 2/3 < 0.8 with k=5) -> use k=2
    cfg = BuildConfig(text=TextConfig(k=2), minhash=MinHashConfig(threshold=0.6))
    res = build(texts=texts, config=cfg)
    assert res.cluster_ids.tolist() == [0, 0, 0]
    assert res.is_representative.tolist() == [False, True, False]
    tie = build(texts=["same text here", "SAME TEXT HERE", "same  text here"])
    assert tie.is_representative.tolist() == [True, False, False], "equal lengths: the first seen wins"


def test_representative_first():
    texts = ["short doc words", "short doc words plus more words", "SHORT DOC WORDS"]
    cfg = BuildConfig(text=TextConfig(k=2), minhash=MinHashConfig(threshold=0.3), representative="first")
    res = build(texts=texts, config=cfg)
    assert res.cluster_ids.tolist() == [0, 0, 0]
    assert res.is_representative.tolist() == [True, False, False]


def test_representative_key_largest_wins_ties_to_first():
    texts = ["same words again"] * 4 + ["other words entirely"]
    cfg = BuildConfig(representative="key")
    res = build(texts=texts, config=cfg, keys=[3.0, 9.0, 9.0, 1.0, 0.0])
    assert res.is_representative.tolist() == [False, True, False, False, True]
    with pytest.raises(ConfigError, match="keys"):
        build(texts=texts, config=cfg)
    with pytest.raises(InputError, match="finite"):
        build(texts=texts, config=cfg, keys=[1.0, float("nan"), 0, 0, 0])
    with pytest.raises(InputError, match="one number per document"):
        build(texts=texts, config=cfg, keys=[1.0, 2.0])


def test_exactly_one_representative_per_cluster(rng):
    texts, _ = planted(rng, 10, size=3)
    for rule in ("longest", "first"):
        res = build(texts=texts, config=BuildConfig(representative=rule))
        for c in np.unique(res.cluster_ids):
            assert res.is_representative[res.cluster_ids == c].sum() == 1


# ----------------------------------------------------------------------------- vectors


def planted_vectors(rng, n_groups: int, size: int, dim: int = 32, noise: float = 0.02):
    """Groups of vectors with pairwise cosine > 0.99 around random centres (unrelated: |cos| ~ 0.2)."""
    centres = rng.standard_normal((n_groups, dim))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    vecs = np.repeat(centres, size, axis=0) + noise * rng.standard_normal((n_groups * size, dim)) / np.sqrt(dim)
    return vecs, np.repeat(np.arange(n_groups), size).tolist()


@pytest.mark.parametrize("simhash", [SimHashConfig(), SimHashConfig(verify="estimate"), SimHashConfig(pigeonhole=True),
                                     SimHashConfig(families=3), SimHashConfig(bits=64, pigeonhole=True, families=2),
                                     SimHashConfig(bits=128, bands=8, verify="estimate")],
                         ids=["default", "estimate", "pigeonhole", "3-families", "64-bit-pigeonhole-2f", "128-bit-8-bands"])
def test_vectors_only_build_with_simhash(simhash, rng):
    vecs, group = planted_vectors(rng, 15, 3)
    res = build(vectors=vecs, config=BuildConfig(simhash=simhash))
    assert parts(res) == R.partition(group)
    joined = res.doc_stages[np.bincount(res.cluster_ids, minlength=len(group))[res.cluster_ids] > 1]
    assert np.all(joined == STAGE_SIMHASH), "vector-only clusters are joined by the SimHash stage only"
    assert res.cluster_map.doc_lengths.tolist() == [0] * len(group)


def test_texts_and_vectors_compose_stages_and_record_them(rng):
    """0~1 by text only (vectors unrelated), 2~3 by vector only (texts unrelated), 1~2 by nothing:
    two clusters; doc_stages says which stage joined whom. 4 is an exact copy of 0."""
    t0 = " ".join(words(rng, 40))
    texts = [t0, t0 + " extra", " ".join(words(rng, 40)), " ".join(words(rng, 40)), t0.upper()]
    v = rng.standard_normal((5, 16))
    v[3] = v[2] + 1e-3 * rng.standard_normal(16)
    comps = BuildConfig(clustering="components")
    res = build(texts=texts, vectors=v, config=comps)
    assert res.cluster_ids.tolist() == [0, 0, 2, 2, 0]
    assert res.doc_stages[2] == res.doc_stages[3] == STAGE_SIMHASH
    assert res.doc_stages[1] == STAGE_MINHASH
    assert res.doc_stages[4] == STAGE_EXACT
    assert res.doc_stages[0] & STAGE_EXACT and not res.doc_stages[0] & STAGE_SIMHASH
    # a vector bridge between the two text clusters merges them
    v2 = v.copy()
    v2[1] = v[2] + 1e-3 * rng.standard_normal(16)
    res2 = build(texts=texts, vectors=v2, config=comps)
    assert res2.cluster_ids.tolist() == [0] * 5


def test_vectors_must_align_with_texts(rng):
    with pytest.raises(InputError, match="one row per document"):
        build(texts=["a b", "c d"], vectors=rng.standard_normal((3, 4)))
    with pytest.raises(InputError, match="finite"):
        build(vectors=[[1.0, float("nan")]])
    with pytest.raises(ConfigError, match="simhash=None"):
        build(vectors=rng.standard_normal((2, 4)), config=BuildConfig(simhash=None))


# ----------------------------------------------------------------------------- arguments


def test_bad_build_arguments():
    with pytest.raises(InputError, match="neither"):
        build()
    with pytest.raises(InputError, match="not one str"):
        build(texts="a single string")
    with pytest.raises(InputError, match="empty"):
        build(texts=[])
    with pytest.raises(ConfigError, match="chunk_size"):
        build(texts=["a"], chunk_size=0)
    with pytest.raises(ConfigError, match="every text stage is off"):
        build(texts=["a"], config=BuildConfig(minhash=None, exact=False))
    with pytest.raises(ConfigError, match="config"):
        build(texts=["a"], config=42)
    with pytest.raises(InputTypeError, match="item 1"):
        build(texts=["a", 2])


def test_config_as_dict_equals_model():
    texts = ["one two three four five six", "one two three four five six seven", "x"]
    a = build(texts=texts, config={"minhash": {"threshold": 0.6}, "text": {"k": 2}})
    b = build(texts=texts, config=BuildConfig(minhash=MinHashConfig(threshold=0.6), text=TextConfig(k=2)))
    assert a.cluster_ids.tolist() == b.cluster_ids.tolist()
    assert a.cluster_map.fingerprint == b.cluster_map.fingerprint


def test_generator_input_and_chunking_do_not_change_the_partition(rng):
    texts, group = planted(rng, 8, size=3)
    whole = build(texts=texts)
    chunked = build(texts=(t for t in texts), chunk_size=5)
    assert parts(chunked) == parts(whole) == R.partition(group)
    assert chunked.cluster_ids.tolist() == whole.cluster_ids.tolist()


def test_build_does_not_mutate_inputs(rng):
    texts, _ = planted(rng, 3)
    ids = [f"d{i}" for i in range(len(texts))]
    vecs = rng.standard_normal((len(texts), 8))
    before = (list(texts), list(ids), vecs.copy())
    build(texts=texts, ids=ids, vectors=vecs)
    assert (texts, ids) == before[:2] and np.array_equal(vecs, before[2])


# ----------------------------------------------------------------------------- add


def _bridge_corpus(rng):
    """A = X[0:90], B = X[20:110], bridge = X[10:100] over 110 random words (word 5-shingles):
    J(A, B) = 66/106 = 0.62, J(A, bridge) = J(B, bridge) = 76/96 = 0.79; threshold 0.7."""
    x = words(rng, 110)
    return " ".join(x[0:90]), " ".join(x[20:110]), " ".join(x[10:100])


BRIDGE_CFG = BuildConfig(minhash=MinHashConfig(threshold=0.7, verify="exact"))


def test_add_keeps_old_cluster_ids_and_a_new_doc_joins(rng):
    texts, group = planted(rng, 6, size=2)
    old = build(texts=texts, ids=[f"d{i}" for i in range(len(texts))])
    joiner = texts[4] + " and one more"
    res = add(old.cluster_map, texts=[joiner, " ".join(words(rng, 50))], ids=["new0", "new1"])
    n = len(texts)
    assert res.cluster_ids[:n].tolist() == old.cluster_ids.tolist(), "old documents keep their cluster ids"
    assert res.cluster_ids[n] == old.cluster_ids[4], "the near-copy joins its cluster"
    assert res.cluster_ids[n + 1] == n + 1, "a new unrelated document starts its own cluster, labelled by its index"
    cm = res.cluster_map
    assert cm.cluster_of("new0") == cm.cluster_of("d4")
    assert cm.n_docs == n + 2


def test_add_bridge_under_the_fold_guarantee_joins_one_cluster_and_merges_none(rng):
    a, b, bridge = _bridge_corpus(rng)
    other = " ".join(words(rng, 60))
    old = build(texts=[a, other, b], ids=["a", "o", "b"], config=BRIDGE_CFG)
    res = add(old.cluster_map, texts=[bridge], ids=["bridge"])
    assert res.cluster_ids[:3].tolist() == [0, 1, 2], "existing clusters keep their ids and are not merged"
    assert res.cluster_ids[3] in (0, 2) and "aliases" not in res.cluster_map.extras


def test_add_bridge_merges_two_clusters_with_an_alias(rng):
    a, b, bridge = _bridge_corpus(rng)
    other = " ".join(words(rng, 60))
    old = build(texts=[a, other, b], ids=["a", "o", "b"], config=BRIDGE_CFG.model_copy(update={"clustering": "components"}))
    assert old.cluster_ids.tolist() == [0, 1, 2], "A and B are below the threshold on their own"
    res = add(old.cluster_map, texts=[bridge], ids=["bridge"])
    assert res.cluster_ids.tolist() == [0, 1, 0, 0], "the bridge joins A and B; the smaller id survives"
    aliases = np.asarray(res.cluster_map.extras["aliases"]).tolist()
    assert [2, 0] in aliases, f"cluster 2 must be recorded as an alias of 0; aliases {aliases}"
    assert res.cluster_map.cluster_of("b") == 0
    assert res.cluster_map.resolve_cluster(2) == 0


def test_add_with_a_different_config_is_incompatible(rng):
    old = build(texts=["one two three", "four five six"])
    for cfg in (BuildConfig(seed=2), BuildConfig(minhash=MinHashConfig(threshold=0.9)), {"text": {"k": 3}}):
        with pytest.raises(IncompatibleArtifactError, match="fingerprint"):
            add(old.cluster_map, texts=["seven eight"], config=cfg)
    # the artifact's own config is accepted explicitly too
    ok = add(old.cluster_map, texts=["seven eight"], config=BuildConfig())
    assert ok.n_docs == 3


def test_add_without_incremental_state_is_incompatible():
    old = build(texts=["one two three", "four five six"], config=BuildConfig(incremental=False))
    with pytest.raises(IncompatibleArtifactError, match="incremental"):
        add(old.cluster_map, texts=["seven"])


def test_add_rejects_duplicate_and_wrong_kind_ids():
    old = build(texts=["one two three", "four five six"], ids=["a", "b"])
    with pytest.raises(DuplicateIdError, match="'a'"):
        add(old.cluster_map, texts=["seven"], ids=["a"])
    with pytest.raises((InputError, InputTypeError), match="ids"):
        add(old.cluster_map, texts=["seven"], ids=[5])


@pytest.mark.parametrize("cfg", [BuildConfig(), BRIDGE_CFG, BuildConfig(minhash=MinHashConfig(method="classic"))],
                         ids=["default", "exact-verify", "classic"])
def test_add_equals_a_from_scratch_build(cfg, rng, tmp_path):
    texts, group = planted(rng, 10, size=3)
    order = rng.permutation(len(texts))
    texts = [texts[i] for i in order]
    ids = [f"doc{i}" for i in range(len(texts))]
    half = len(texts) // 2
    old = build(texts=texts[:half], ids=ids[:half], config=cfg)
    path = tmp_path / "old.dvf"
    old.save(path)  # add from a saved artifact (path), as a user would
    inc = add(str(path), texts=texts[half:], ids=ids[half:])
    scratch = build(texts=texts, ids=ids, config=cfg)
    assert parts(inc) == parts(scratch) == R.partition([group[i] for i in order])


# ----------------------------------------------------------------------------- stats invariants


@pytest.mark.parametrize("cfg", [BuildConfig(), BuildConfig(minhash=MinHashConfig(verify="exact")),
                                 BuildConfig(minhash=MinHashConfig(threshold=0.5)),
                                 BuildConfig(minhash=MinHashConfig(method="classic", verify="estimate"))],
                         ids=["default", "exact", "t0.5", "classic"])
def test_merges_equal_components_removed(cfg, rng):
    """Every counted merge joins two components: sum(merged) = n_docs - n_clusters (components)."""
    cfg = cfg.model_copy(update={"clustering": "components"})
    texts, _ = planted(rng, 20, size=4)
    pool = words(rng, 300)
    texts += [" ".join(pool[s : s + 80]) for s in rng.integers(0, 220, size=20)]  # graded overlaps
    res = build(texts=texts, config=cfg)
    assert sum(res.stats["merged"].values()) == res.n_docs - res.n_clusters, res.stats
    assert all(res.stats["verified"][s] <= res.stats["candidates"][s] + res.stats.get("exact_checks", {}).get(s, 0)
               for s in res.stats["verified"])
    singletons = np.bincount(res.cluster_ids, minlength=res.n_docs)[res.cluster_ids] == 1
    assert np.all(res.doc_stages[singletons] == 0), "a document no edge joined records no stage"


def test_add_merges_equal_components_removed(rng):
    texts, _ = planted(rng, 12, size=3)
    old = build(texts=texts[:18])
    res = add(old.cluster_map, texts=texts[18:])
    assert sum(res.stats["merged"].values()) == old.n_clusters + (len(texts) - 18) - res.n_clusters


def test_borderline_estimate_decisions_count_only_real_merges():
    from diversify.linking.exact import decide_deferred
    from diversify.linking.link import make_forest
    from diversify.sketches.batch import Sketches
    from diversify.sketches.memo import ExactMemo
    from diversify.stages import STAGE_MINHASH as BIT

    n = 3
    sig = np.tile(np.arange(128, dtype=np.uint32), (n, 1))
    sk = Sketches(ids=list(range(n)), lengths=np.ones(n, np.uint32), exact=np.arange(n, dtype=np.uint64),
                  empty=np.zeros(n, bool), minhash=sig)  # no texts: the estimate decides
    parent = np.array([0, 0, 1], dtype=np.int64)  # one component, doc 2 at depth 2
    flags = np.zeros(n, np.uint8)
    forest = make_forest(parent, flags, BIT)
    counters = forest.counters
    memo = ExactMemo(n)
    decide_deferred(np.array([[2, 0]], dtype=np.int64), sk, BuildConfig(), forest, memo, None)
    assert not memo.parts, "no pair was checked from texts, so none is remembered"
    assert counters[2] == 0, f"no components were joined but {counters[2]} merge(s) were counted"
    assert not (flags & BIT).any(), "no edge merged anything, so no document should record the stage"


# ----------------------------------------------------------------------------- streaming input


def _texts_with_bad_item(texts, bad_at):
    for i, t in enumerate(texts):
        yield 5 if i == bad_at else t


def test_streaming_errors_name_the_global_position():
    texts = [f"document number {i} with a few words" for i in range(50)]
    with pytest.raises(InputTypeError, match="item 33 is int"):
        build(texts=_texts_with_bad_item(texts, 33), chunk_size=4)
    with pytest.raises(InputError, match="ran out after 40"):
        build(texts=iter(texts), ids=iter(range(40)), chunk_size=4)
    with pytest.raises(InputError, match="more ids than the 50 texts"):
        build(texts=iter(texts), ids=iter(range(60)), chunk_size=4)


def test_an_exception_in_the_callers_generator_propagates():
    def failing():
        yield "a b c d"
        yield "e f g h"
        raise RuntimeError("source went away")

    with pytest.raises(RuntimeError, match="source went away"):
        build(texts=failing(), chunk_size=1)


@pytest.mark.parametrize("cfg", [BuildConfig(minhash=MinHashConfig(verify="exact")),
                                 BuildConfig(minhash=MinHashConfig(method="classic")),
                                 BuildConfig(text=TextConfig(shingle="char", k=6))], ids=["exact", "classic", "char"])
def test_chunk_size_changes_nothing(cfg, rng):
    texts, group = planted(rng, 8, size=3)
    whole = build(texts=texts, config=cfg)
    assert parts(whole) == R.partition(group)
    for chunk_size in (1, 5):
        chunked = build(texts=iter(texts), config=cfg, chunk_size=chunk_size)
        assert chunked.cluster_ids.tolist() == whole.cluster_ids.tolist()
        assert np.array_equal(np.asarray(chunked.cluster_map.extras["minhash"]),
                              np.asarray(whole.cluster_map.extras["minhash"])), f"chunk_size={chunk_size}"


# ----------------------------------------------------------------------------- BuildResult


def test_build_result_counts_and_summary(rng):
    texts, _ = planted(rng, 5, size=3)
    res = build(texts=texts + [""])
    assert (res.n_docs, res.n_clusters, res.n_duplicates) == (16, 6, 10)
    assert res.n_verified_edges == sum(res.stats["merged"].values()) == 10
    assert res.n_candidates == sum(res.stats["candidates"].values())
    text = res.summary()
    assert "documents        16" in text and "clusters         6" in text
    cm = res.cluster_map
    assert cm.n_docs == 16 and cm.n_clusters == 6
    assert cm.cluster_ids.tolist() == res.cluster_ids.tolist()
    assert cm.is_representative.tolist() == res.is_representative.tolist()


def test_build_stays_the_function_after_importing_every_submodule():
    import importlib
    import importlib.util
    import inspect
    import pkgutil

    import diversify

    serve_extra = importlib.util.find_spec("starlette") is not None
    for mod in pkgutil.walk_packages(diversify.__path__, "diversify."):
        if mod.name.endswith("__main__"):
            continue
        if mod.name.startswith("diversify.serve.") and not serve_extra:
            continue  # the server's modules need the [serve] extra (tests/system/test_serve.py)
        importlib.import_module(mod.name)
    assert inspect.isfunction(diversify.build) and inspect.isfunction(diversify.add)
    assert "texts" in inspect.signature(diversify.build).parameters
    res = diversify.build(texts=["a b c d e f", "a b c d e f!", "something else"], ids=["x", "y", "z"])
    assert res.cluster_ids.tolist() == [0, 0, 2]


def test_add_vectors_only_equals_a_from_scratch_build(rng):
    vecs, group = planted_vectors(rng, 10, 3)
    order = rng.permutation(len(group))
    vecs, group = vecs[order], [group[i] for i in order]
    old = build(vectors=vecs[:15])
    inc = add(old.cluster_map, vectors=vecs[15:])
    assert inc.cluster_map.ids.tolist() == list(range(30)), "default ids continue after the old ones"
    assert parts(inc) == parts(build(vectors=vecs)) == R.partition(group)
    with pytest.raises(InputError, match="vectors"):
        add(old.cluster_map, texts=["text without a vector"])


def test_add_texts_and_vectors_equals_a_from_scratch_build(rng):
    texts, group = planted(rng, 8, size=3)
    vecs = rng.standard_normal((len(texts), 16))  # unrelated vectors: the text stages decide
    old = build(texts=texts[:12], vectors=vecs[:12])
    inc = add(old.cluster_map, texts=texts[12:], vectors=vecs[12:])
    assert parts(inc) == parts(build(texts=texts, vectors=vecs)) == R.partition(group)


def test_exact_copies_cluster_through_minhash_when_the_exact_stage_is_off():
    t = "the committee approved the annual budget after a long debate"
    res = build(texts=[t, t, t.upper(), t + " today"], config=BuildConfig(exact=False))
    assert res.cluster_ids.tolist() == [0, 0, 0, 0]


def test_repeated_adds_equal_scratch_and_old_labels_resolve(rng):
    """Four increments of a corpus with graded overlaps (many bridges): after every add the
    partition equals a from-scratch build, and every earlier label resolves to the current one."""
    pool = words(rng, 400)
    texts = []
    for _ in range(48):
        start = int(rng.integers(0, 320))
        texts.append(" ".join(pool[start : start + 80]))
    cfg = BuildConfig(minhash=MinHashConfig(threshold=0.6, verify="exact"), clustering="components")
    ids = [f"t{i}" for i in range(len(texts))]
    res = build(texts=texts[:12], ids=ids[:12], config=cfg)
    history = [res.cluster_ids.copy()]
    merged_any = False
    for step in range(1, 4):
        lo, hi = 12 * step, 12 * (step + 1)
        res = add(res.cluster_map, texts=texts[lo:hi], ids=ids[lo:hi])
        scratch = build(texts=texts[:hi], ids=ids[:hi], config=cfg)
        assert parts(res) == parts(scratch), f"after add #{step}"
        cm = res.cluster_map
        for old in history:
            for doc, label in enumerate(old.tolist()):
                assert cm.resolve_cluster(label) == res.cluster_ids[doc], f"doc {doc}: old label {label} lost"
        merged_any |= len(np.unique(res.cluster_ids[: lo])) < len(np.unique(history[-1]))
        history.append(res.cluster_ids.copy())
    assert merged_any, "the corpus should make some add bridge two old clusters"


def _shifted_pairs(rng, shift: int, n_pairs: int) -> list[str]:
    """Pairs X[0:104], X[shift:shift+104] of random words: J = (100-shift)/(100+shift) (word 5-shingles)."""
    texts = []
    for _ in range(n_pairs):
        x = words(rng, 104 + shift)
        texts += [" ".join(x[:104]), " ".join(x[shift : shift + 104])]
    return texts


def test_auto_verification_decides_borderline_pairs_exactly(rng):
    n = 30
    below = _shifted_pairs(rng, 12, n)  # J = 88/112 = 0.786, just below the threshold 0.8
    above = _shifted_pairs(rng, 10, n)  # J = 90/110 = 0.818, just above

    def joined(texts, verify, stream=False):
        res = build(texts=iter(texts) if stream else texts, config=BuildConfig(minhash=MinHashConfig(verify=verify)))
        return int(sum(res.cluster_ids[2 * i] == res.cluster_ids[2 * i + 1] for i in range(n))), res

    est_below, _ = joined(below, "estimate")
    auto_below, res = joined(below, "auto")
    assert res.stats["exact_checks"]["minhash"] > 0, "borderline pairs must be checked exactly"
    # the estimate (sd 0.035 at J=0.786) accepts about a third of these pairs; exact checking none,
    # except a pair whose estimate clears the upper edge of the borderline band (p ~ 0.005 each)
    assert auto_below <= 2 < est_below, (auto_below, est_below)
    est_above, _ = joined(above, "estimate")
    auto_above, _ = joined(above, "auto")
    exact_above, _ = joined(above, "exact")
    assert auto_above >= exact_above - 2 and auto_above >= est_above, (auto_above, exact_above, est_above)
    # texts without random access (a generator): "auto" falls back to the estimate alone
    stream_res = joined(below, "auto", stream=True)[1]
    assert stream_res.cluster_ids.tolist() == joined(below, "estimate")[1].cluster_ids.tolist()
    assert stream_res.stats["exact_checks"]["minhash"] == 0


def test_each_borderline_pair_is_checked_exactly_once(rng):
    texts = _shifted_pairs(rng, 12, 30)  # 30 mutually unrelated pairs: at most 30 candidate pairs
    res = build(texts=texts)
    assert 0 < res.stats["exact_checks"]["minhash"] <= 30, res.stats["exact_checks"]
