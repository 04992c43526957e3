"""diversify.engines.chunked.build_chunks: chunks folded inside their pages' clusters, by containment."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference import shingles

import diversify
from diversify.corpus.chunking import chunk_paragraphs
from diversify.engines.chunked import build_chunks
from diversify.errors import ConfigError, DiversifyError, InputError, InputTypeError
from diversify.stages import STAGE_CONTAINMENT, stage_names

VOCAB = [f"term{i}" for i in range(3000)]


def _paragraphs(rng: random.Random, n: int) -> list[str]:
    return [" ".join(rng.choice(VOCAB) for _ in range(rng.randint(25, 70))) for _ in range(n)]


def _versions(seed: int, n_pages: int = 3) -> tuple[list[str], list[str], list[str]]:
    """A page in two versions (the second has a paragraph more at the top and one in the middle)
    plus unrelated pages, chunked: (texts, parents, ids)."""
    rng = random.Random(seed)
    base = _paragraphs(rng, 16)
    pages = {"ga": base, "beta": _paragraphs(rng, 1) + base[:8] + _paragraphs(rng, 1) + base[8:]}
    for i in range(n_pages - 2):
        pages[f"other{i}"] = _paragraphs(rng, 8)
    texts, parents, ids = [], [], []
    for page, paragraphs in pages.items():
        for i, c in enumerate(chunk_paragraphs("\n\n".join(paragraphs), max_words=120)):
            texts.append(c.text)
            parents.append(page)
            ids.append(f"{page}#{i}")
    return texts, parents, ids


def _containment(a: str, b: str) -> float:
    sa, sb = set(shingles(a)), set(shingles(b))
    return len(sa & sb) / len(sa)


def _check_folds(texts, parents, res, plain, containment=0.8) -> int:
    """Oracle: every containment fold is >= containment in its representative, of another page of the
    same page cluster; the plain build's clusters are kept whole; returns the number of such folds."""
    cids, reps = np.asarray(res.cluster_ids), np.asarray(res.is_representative)
    rep_of = {int(c): int(d) for d, c in enumerate(cids) if reps[d]}
    plain_ids = np.asarray(plain.cluster_ids)
    page_cluster = _page_clusters(texts, parents)
    n = 0
    for d in range(len(texts)):
        same = plain_ids == plain_ids[d]
        assert len(set(cids[same])) == 1  # a plain cluster is never split
        if res.doc_stages[d] & STAGE_CONTAINMENT:
            r = rep_of[int(cids[d])]
            assert not reps[d] and r != d
            assert parents[r] != parents[d] and page_cluster[parents[r]] == page_cluster[parents[d]]
            assert _containment(texts[d], texts[r]) >= containment
            assert same.sum() == 1  # only chunks the plain build left alone
            n += 1
    return n


def test_chunks_of_two_versions_of_a_page_fold_by_containment_and_unrelated_pages_do_not():
    folds = plain_folds = 0
    for seed in range(6):
        texts, parents, ids = _versions(seed)
        plain = diversify.build(texts, ids=ids)
        res = build_chunks(texts, parents=parents, ids=ids)
        folds += _check_folds(texts, parents, res, plain)
        plain_folds += int((~np.asarray(plain.is_representative)).sum())
        other = [d for d, p in enumerate(parents) if p.startswith("other")]
        assert np.asarray(res.is_representative)[other].all()
        assert res.report["chunks"]["containment_folds"] == int(
            sum(bool(s & STAGE_CONTAINMENT) for s in res.doc_stages))
    assert folds > 0 and plain_folds + folds > plain_folds


def _page_clusters(texts, parents) -> dict:
    pages = sorted(set(parents), key=parents.index)
    page_build = diversify.build(["\n\n".join(t for t, p in zip(texts, parents) if p == q) for q in pages],
                                 config=diversify.BuildConfig(incremental=False))
    return dict(zip(pages, np.asarray(page_build.cluster_ids).tolist()))


@pytest.mark.parametrize("seed", [2, 5])
def test_an_unfolded_chunk_has_no_representative_tried_before_it_that_contains_it(seed):
    """Completeness oracle (all pairs): a chunk the plain build left alone and build_chunks did not fold has
    no final representative of another page in its page cluster that holds >= 0.8 of it and was tried
    before it (more shingles, or as many and earlier)."""
    texts, parents, ids = _versions(seed)
    res = build_chunks(texts, parents=parents, ids=ids)
    plain = diversify.build(texts, ids=ids)
    plain_ids = np.asarray(plain.cluster_ids)
    alone = np.bincount(plain_ids, minlength=len(texts))[plain_ids] == 1
    size = [len(set(shingles(t))) for t in texts]
    reps = np.asarray(res.is_representative)
    page_cluster = _page_clusters(texts, parents)
    checked = 0
    for x in np.flatnonzero(alone & reps):
        for t in np.flatnonzero(reps & np.asarray(plain.is_representative)):
            if parents[t] == parents[x] or page_cluster[parents[t]] != page_cluster[parents[x]]:
                continue
            if (size[t], -t) > (size[x], -x):
                checked += 1
                assert _containment(texts[x], texts[t]) < 0.8, (x, t)
    assert checked > 0


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10_000), st.sampled_from([0.6, 0.8, 1.0]))
def test_every_containment_fold_is_verified_property(seed, containment):
    texts, parents, ids = _versions(seed, n_pages=4)
    res = build_chunks(texts, parents=parents, ids=ids, containment=containment)
    _check_folds(texts, parents, res, diversify.build(texts, ids=ids), containment)
    again = build_chunks(texts, parents=parents, ids=ids, containment=containment)
    assert np.array_equal(res.cluster_ids, again.cluster_ids)  # deterministic
    assert np.array_equal(res.is_representative, again.is_representative)


def test_the_artifact_saves_loads_and_names_the_containment_stage(tmp_path):
    texts, parents, ids = _versions(1)
    res = build_chunks(texts, parents=parents, ids=ids, created_at="2026-01-01T00:00:00Z")
    res.save(tmp_path / "chunks.dvf")
    cmap = diversify.load(tmp_path / "chunks.dvf")
    assert np.array_equal(cmap.cluster_ids, res.cluster_ids)
    assert cmap.build_info["chunks"] == res.report["chunks"]
    folded = [d for d in range(len(ids)) if cmap.doc_stages[d] & STAGE_CONTAINMENT]
    assert folded and stage_names(int(cmap.doc_stages[folded[0]]))[-1] == "containment"


@pytest.mark.parametrize("kwargs, error, words", [
    ({"texts": "one text"}, InputTypeError, "`texts` must be a sequence of chunk texts"),
    ({"parents": "p"}, InputTypeError, "`parents` must be a sequence with one page id per chunk"),
    ({"parents": ["a"]}, InputError, "2 texts, got 1 parents"),
    ({"parents": ["a", None]}, InputTypeError, "`parents[1]` must be a page id"),
    ({"parents": ["a", float("nan")]}, InputTypeError, "`parents[1]` must be a page id"),
    ({"parents": ["a", ["b"]]}, InputTypeError, "`parents[1]` must be a page id"),
    ({"containment": 0}, ConfigError, "`containment` must be a number in (0, 1]; got 0"),
    ({"containment": 1.5}, ConfigError, "got 1.5"),
    ({"containment": True}, ConfigError, "got True"),
    ({"config": {"minhash": None, "simhash": {"threshold": 0.9}}}, ConfigError, "has no MinHash stage"),
])
def test_bad_arguments_name_the_parameter_the_rule_and_the_fix(kwargs, error, words):
    args = {"texts": ["alpha beta gamma delta epsilon", "zeta eta theta iota kappa"], "parents": ["a", "b"], **kwargs}
    with pytest.raises(error) as got:
        build_chunks(args.pop("texts"), **args)
    assert isinstance(got.value, DiversifyError)
    assert words in str(got.value)


def test_incremental_is_off_so_add_refuses_the_artifact(tmp_path):
    texts, parents, ids = _versions(3)
    res = build_chunks(texts, parents=parents, ids=ids, config=diversify.BuildConfig(incremental=True))
    assert res.cluster_map.config["incremental"] is False
    with pytest.raises(DiversifyError):
        diversify.add(res.cluster_map, ["a new chunk of text here"], ids=["new"])


def test_the_recipe_in_the_docs_runs(tmp_path, monkeypatch, capsys):
    """docs/recipes/chunked-rag.md's Python block, on two versions of a page and an unrelated one."""
    import re
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "recipes" / "chunked-rag.md").read_text(encoding="utf-8")
    code = re.findall(r"```python\n(.*?)```", doc, flags=re.S)[0]
    assert re.search(r"^pages = ", code, flags=re.M)
    rng = random.Random(4)
    base = _paragraphs(rng, 16)
    pages = {"ga": "\n\n".join(base), "beta": "\n\n".join(_paragraphs(rng, 1) + base[:8] + _paragraphs(rng, 1) + base[8:]),
             "other": "\n\n".join(_paragraphs(rng, 8))}
    monkeypatch.chdir(tmp_path)
    exec(re.sub(r"^pages = .*$", "", code, flags=re.M), {"pages": pages})
    cmap = diversify.load(tmp_path / "chunks.dvf")
    assert cmap.n_duplicates > 0 and "'containment_folds'" in capsys.readouterr().out
    assert all(not str(i).startswith("other") for i, c in zip(cmap.ids, cmap.cluster_ids)
               if list(cmap.cluster_ids).count(c) > 1)


def test_the_page_build_warns_nothing_of_its_own():
    """Most pages of a chunked corpus of versions fold: that is the point, not a warning about the chunks."""
    import warnings

    rng = random.Random(9)
    base = _paragraphs(rng, 10)
    texts, parents = [], []
    for v in range(24):
        for i, c in enumerate(chunk_paragraphs("\n\n".join(base), max_words=120)):
            texts.append(c.text + (f" version {v}" if i == 0 else ""))
            parents.append(f"p{v}")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        diversify.build(["\n\n".join(t for t, p in zip(texts, parents) if p == q) for q in dict.fromkeys(parents)])
        page_warnings = len(seen)
        seen.clear()
        res = build_chunks(texts, parents=parents)
    assert page_warnings > 0  # the pages alone would warn
    assert len(seen) == len(diversify.build(texts).warnings)
    assert res.report["chunks"]["page_clusters_with_copies"] == 1


def test_parents_and_texts_may_be_numpy_arrays_and_tuples():
    texts, parents, ids = _versions(5)
    want = build_chunks(texts, parents=parents, ids=ids)
    codes = {p: i for i, p in enumerate(dict.fromkeys(parents))}
    got = build_chunks(tuple(texts), parents=np.array([codes[p] for p in parents]), ids=ids)
    assert np.array_equal(got.cluster_ids, want.cluster_ids)
    assert got.report["chunks"] == want.report["chunks"]
    with pytest.raises(InputTypeError, match="`parents` must be a sequence"):
        build_chunks(texts, parents=iter(parents))
