"""The fold check's kernel against its numpy reference (``diversify.clusters.guarantee``).

Kinds: oracle (the reference path, the per-component numpy greedy that the vector stages still
use, run on the same input) and property (hypothesis: chaining corpora under every verification
mode, the exact and text SimHash stages on and off, per-source thresholds, representative rules,
``add`` onto an artifact with and without texts, streamed input, and the live index's stored
sets). Equal means equal: cluster ids, representatives, stage bits, the fold statistics and every
folded document's similarity, to the bit.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import diversify
from diversify import BuildConfig, MinHashConfig, TextSimHashConfig, add, build
from diversify.clusters import guarantee

CONFIGS = {
    "auto": BuildConfig(minhash=MinHashConfig(threshold=0.6)),
    "estimate": BuildConfig(minhash=MinHashConfig(threshold=0.6, verify="estimate")),
    "exact": BuildConfig(minhash=MinHashConfig(threshold=0.6, verify="exact")),
    "no-exact-stage": BuildConfig(exact=False, minhash=MinHashConfig(threshold=0.7, borderline=3.0)),
    "text-simhash": BuildConfig(minhash=MinHashConfig(threshold=0.9), text_simhash=TextSimHashConfig(max_hamming=12)),
    "text-simhash-only": BuildConfig(minhash=None, text_simhash=TextSimHashConfig(max_hamming=10)),
    "first": BuildConfig(minhash=MinHashConfig(threshold=0.6), representative="first"),
    "sources": BuildConfig(minhash=MinHashConfig(threshold=0.7), source_thresholds={"a": 0.55, "b": 0.8}),
}


def _walks(seed: int, walks: int, steps: int, swaps: int, copies: bool) -> list[str]:
    """Chains of random edits (neighbours similar, ends not), some exact copies, an empty text."""
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(300)]
    out = []
    for _ in range(walks):
        doc = list(rng.choice(vocab, int(rng.integers(40, 120))))
        for _ in range(steps):
            out.append(" ".join(doc))
            for j in rng.choice(len(doc), min(swaps, len(doc)), replace=False):
                doc[j] = str(rng.choice(vocab))
    if copies:
        out += out[: len(out) // 3] + [""]
    return [out[i] for i in rng.permutation(len(out))]


def _both(fn):
    """fn() with the kernel path (whatever the corpus size), then with the reference path."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(guarantee, "_KERNEL_FROM", 0)
        got = fn()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(guarantee, "_REFERENCE", True)
        ref = fn()
    return got, ref


def _same(got, ref) -> None:
    assert got.cluster_ids.tolist() == ref.cluster_ids.tolist()
    assert got.is_representative.tolist() == ref.is_representative.tolist()
    assert got.doc_stages.tolist() == ref.doc_stages.tolist()
    assert got.cluster_map.build_info == ref.cluster_map.build_info
    a, b = got.cluster_map.extras["fold_similarity"], ref.cluster_map.extras["fold_similarity"]
    assert np.array_equal(a.view(np.uint32), b.view(np.uint32)), "similarities differ in some bit"


def _sources(n: int, seed: int) -> list[str]:
    return [("a", "b")[i] for i in np.random.default_rng(seed).integers(0, 2, n)]


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_kernel_equals_reference_on_a_small_chained_corpus(name):
    """Every configuration on one small corpus (cheap enough to run with the kernels as Python)."""
    texts = _walks(5, 3, 6, 3, True)
    cfg = CONFIGS[name]
    src = _sources(len(texts), 5) if cfg.source_thresholds else None
    got, ref = _both(lambda: build(texts, config=cfg, sources=src, created_at="2026-01-01T00:00:00Z"))
    _same(got, ref)
    assert got.cluster_map.build_info["fold"]["pairs_checked"] > 0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), walks=st.integers(1, 5), steps=st.integers(2, 10),
       swaps=st.integers(1, 6), copies=st.booleans(), name=st.sampled_from(sorted(CONFIGS)))
def test_property_kernel_equals_reference_on_builds(seed, walks, steps, swaps, copies, name):
    texts = _walks(seed, walks, steps, swaps, copies)
    cfg = CONFIGS[name]
    src = _sources(len(texts), seed) if cfg.source_thresholds else None
    got, ref = _both(lambda: build(texts, config=cfg, sources=src, created_at="2026-01-01T00:00:00Z"))
    _same(got, ref)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), steps=st.integers(4, 12), held=st.booleans(),
       name=st.sampled_from(["auto", "estimate", "exact", "sources"]))
def test_property_kernel_equals_reference_on_add_and_streams(seed, steps, held, name):
    """``add`` onto an artifact (its documents have no texts: the estimate decides their pairs),
    with the new texts held in memory or streamed from a generator (no exact checks at all)."""
    texts = _walks(seed, 3, steps, 2, True)
    cfg = CONFIGS[name]
    src = _sources(len(texts), seed) if cfg.source_thresholds else None
    half = len(texts) // 2
    base = build(texts[:half], config=cfg, sources=src[:half] if src else None, created_at="2026-01-01T00:00:00Z")

    def run():
        new = texts[half:] if held else (t for t in texts[half:])
        return add(base.cluster_map, new, sources=src[half:] if src else None, created_at="2026-01-01T00:00:00Z")

    got, ref = _both(run)
    _same(got, ref)
    # a streamed build holds no texts either
    got, ref = _both(lambda: build((t for t in texts), config=cfg, sources=src, created_at="2026-01-01T00:00:00Z"))
    _same(got, ref)


@pytest.mark.parametrize("verify", ["auto", "exact", "estimate"])
def test_kernel_equals_reference_on_the_live_index(tmp_path, verify):
    """The live index folds against its stored 32-bit shingle sets: batch by batch, both paths
    store the same clusters, representatives and similarities."""
    texts = _walks(7, 6, 10, 3, True)
    cfg = BuildConfig(minhash=MinHashConfig(threshold=0.6, verify=verify))

    def run(name):  # the same database path both times: the export records the URL
        db = tmp_path / "db"
        db.mkdir()
        with diversify.Index(f"sqlite:///{db / 'index.db'}", cfg) as idx:
            out = []
            for lo in range(0, len(texts), 9):
                out += [(m.cluster, m.joined, m.representative, m.similarity) for m in idx.add(texts[lo: lo + 9])]
            idx.export(tmp_path / f"{name}.dvf", created_at="2026-01-01T00:00:00Z")
        shutil.rmtree(db)
        return out

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(guarantee, "_KERNEL_FROM", 0)
        got = run("kernel")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(guarantee, "_REFERENCE", True)
        ref = run("reference")
    assert got == ref
    assert (tmp_path / "kernel.dvf").read_bytes() == (tmp_path / "reference.dvf").read_bytes()


def test_vectors_keep_the_reference_path_and_the_guarantee(rng):
    """With embeddings the cosine stage runs in numpy; the flag changes nothing there."""
    texts = _walks(3, 3, 8, 2, False)
    vecs = rng.normal(size=(len(texts), 16)).astype(np.float32)
    vecs[1::2] = vecs[::2][: vecs[1::2].shape[0]] + 0.01
    got, ref = _both(lambda: build(texts, vectors=vecs, created_at="2026-01-01T00:00:00Z"))
    _same(got, ref)


def test_text_simhash_stage_at_every_radius():
    """Fingerprint distances of a chaining corpus cover the radii: each radius has pairs exactly at
    it, which the comparison must fold (``<=``), as the reference does."""
    texts = _walks(11, 4, 12, 3, True)
    folded = set()
    for radius in range(0, 16):
        cfg = BuildConfig(minhash=None, text_simhash=TextSimHashConfig(max_hamming=radius))
        got, ref = _both(lambda: build(texts, config=cfg, created_at="2026-01-01T00:00:00Z"))
        _same(got, ref)
        folded.add(int((~got.is_representative).sum()))
    assert len(folded) > 3, f"the radii should fold different numbers of documents: {sorted(folded)}"


READY = """
import sys
import numpy as np
from diversify._kernels._runtime import kernel_ready
from diversify._kernels.fold import FoldRule, FoldState, fold_groups
from diversify._kernels.linking import ShingleRows
from diversify.clusters import guarantee
small, big = guarantee._kernel_pays(3), guarantee._kernel_pays(guarantee._KERNEL_FROM)
if sys.argv[1] == "compile":  # one component of two identical documents, straight into the kernel
    one, z = np.zeros(1, np.int64), np.zeros(1, np.uint64)
    rule = FoldRule(np.ones(2, bool), True, np.zeros(2, np.uint64), False, np.zeros((1, 1), np.uint32),
                    np.zeros(0, np.int64), False,
                    one, one, np.ones(1), 0, False, False, np.full(2, -1), ShingleRows(one, one, z), False, z, 0,
                    np.zeros(0, np.int64), np.zeros(0, np.float64))
    state = FoldState(np.arange(2), np.ones(2, bool), np.zeros(2, np.uint8), np.zeros(2, np.uint8),
                      np.full(2, np.nan), np.zeros(6, np.int64))
    fold_groups(np.arange(2), np.array([0, 2]), 0, rule, state, np.empty(2, np.int64), np.empty(2, np.int64))
    assert state.labels.tolist() == [0, 0] and state.reps.tolist() == [True, False]
print(small, big, guarantee._kernel_pays(3))
"""


def test_a_small_build_does_not_compile_the_fold_kernel_but_uses_a_compiled_one(tmp_path):
    """On a fresh install a build of a few components takes the numpy path (compiling the kernel
    costs ~3 s); once the kernel is compiled (here or in numba's on-disk cache) every build uses it."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"))

    def run(mode):
        r = subprocess.run([sys.executable, "-c", READY, mode], capture_output=True, text=True, env=env, timeout=900)
        assert r.returncode == 0, r.stderr[-2000:]
        return r.stdout.split()

    assert run("compile") == ["False", "True", "True"]
    assert run("look") == ["True", "True", "True"], "a new process finds the kernel in the on-disk cache"
