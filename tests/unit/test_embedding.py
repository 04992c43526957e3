"""diversify.embed: a tiny model2vec model with random weights, built and saved by the test, loaded
from disk (no network): shapes, normalization, batching, the vector cache, and bad input."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import diversify
from diversify.errors import InputError, InputTypeError

WORDS = ["the", "cat", "sat", "on", "mat", "dog", "ran", "in", "park", "a", "big", "red", "ball", "house"]


def make_model(path, dim: int = 24, seed: int = 0) -> str:
    """A model2vec StaticModel over WORDS with random vectors, saved to ``path``. Skips without the
    [embed] extra, except in CI (DIVERSIFY_CI=1, which installs it with [integrations]): there it fails."""
    try:
        import model2vec as m2v
    except ImportError:
        if os.environ.get("DIVERSIFY_CI") == "1":
            pytest.fail("model2vec must be installed in CI (the [integrations] extra lists it)")
        pytest.skip("the [embed] extra (model2vec) is not installed")
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.normalizers import Lowercase
    from tokenizers.pre_tokenizers import Whitespace

    vocab = {w: i for i, w in enumerate(["[UNK]", "[PAD]"] + WORDS)}
    tok = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    tok.normalizer = Lowercase()
    tok.pre_tokenizer = Whitespace()
    vectors = np.random.default_rng(seed).standard_normal((len(vocab), dim)).astype(np.float32)
    m2v.StaticModel(vectors=vectors, tokenizer=tok, normalize=False).save_pretrained(str(path))
    return str(path)


@pytest.fixture
def model(tmp_path):
    return make_model(tmp_path / "tiny-model")


TEXTS = ["the cat sat on the mat", "on the mat the cat sat", "a dog ran in the park", "a big red ball",
         "the house"]


def _reference(model_dir: str, texts: list) -> np.ndarray:
    """Mean of the token vectors, normalized: what a static model computes, from its saved files."""
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    table = next(iter(load_file(os.path.join(model_dir, "model.safetensors")).values())).astype(np.float64)
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    out = []
    for t in texts:
        ids = [i for i in tok.encode(t, add_special_tokens=False).ids if i != 0]  # [UNK] is dropped
        v = table[ids].mean(axis=0)
        out.append(v / np.linalg.norm(v))
    return np.array(out)


def test_embed_is_normalized_float32_and_matches_the_model_by_hand(model):
    v = diversify.embed(TEXTS, model=model)
    assert v.dtype == np.float32 and v.shape == (5, 24)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(v, _reference(model, TEXTS), atol=1e-5)
    assert float(v[0] @ v[1]) == pytest.approx(1.0, abs=1e-6)  # same words, other order: one direction


@pytest.mark.parametrize("batch_size", [1, 2, 3, 1024])
def test_batching_gives_the_same_vectors(model, batch_size):
    np.testing.assert_array_equal(diversify.embed(TEXTS, model=model, batch_size=batch_size),
                                  diversify.embed(TEXTS, model=model))


def test_progress_bar_counts_the_texts(model, capsys):
    diversify.embed(TEXTS, model=model, batch_size=2, progress=True)
    assert "embed" in capsys.readouterr().err


def test_loads_from_an_installed_package_that_ships_the_model(tmp_path, monkeypatch):
    pkg = tmp_path / "site" / "tiny_embed_pkg"
    pkg.mkdir(parents=True)
    make_model(pkg / "model")
    (pkg / "__init__.py").write_text("raise RuntimeError('diversify must not import the package')\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    v = diversify.embed(TEXTS[:2], model="tiny-embed-pkg")
    np.testing.assert_allclose(v, _reference(str(pkg / "model"), TEXTS[:2]), atol=1e-5)


def test_cache_reuses_rows_and_embeds_only_new_texts(model, tmp_path):
    from diversify.embedding import embed_with_info

    cache = tmp_path / "out.dvf.embed-cache.npz"
    v1, info, n1 = embed_with_info(TEXTS, model=model, cache=cache)
    assert n1 == 5 and cache.exists()
    v2, _, n2 = embed_with_info(TEXTS, model=model, cache=cache)
    assert n2 == 0
    np.testing.assert_array_equal(v1, v2)
    v3, _, n3 = embed_with_info(TEXTS[::-1] + ["a red house"], model=model, cache=cache)
    assert n3 == 1  # only the new text
    np.testing.assert_array_equal(v3[:5], v1[::-1])
    assert info.dim == 24 and len(info.digest) == 64 and info.library.startswith("model2vec ")


def test_cache_of_another_model_or_a_damaged_file_is_a_miss(model, tmp_path):
    from diversify.embedding import embed_with_info

    cache = tmp_path / "c.npz"
    embed_with_info(TEXTS, model=model, cache=cache)
    other = make_model(tmp_path / "other", seed=1)
    v, _, n = embed_with_info(TEXTS, model=other, cache=cache)
    assert n == 5  # another model's digest: nothing reused
    np.testing.assert_allclose(v, _reference(other, TEXTS), atol=1e-5)
    data = cache.read_bytes()
    cache.write_bytes(data[: len(data) // 2])  # a half-written file (copied, or cut by a full disk)
    v2, _, n2 = embed_with_info(TEXTS, model=other, cache=cache)
    assert n2 == 5
    np.testing.assert_array_equal(v, v2)
    assert embed_with_info(TEXTS, model=other, cache=cache)[2] == 0  # rewritten whole


def test_model_path_that_does_not_exist(tmp_path):
    with pytest.raises(InputError, match=r"`model` .*no-such-model.* was not found.*Nothing is downloaded"):
        diversify.embed(["x"], model=str(tmp_path / "no-such-model"))


def test_hub_name_is_not_downloaded():
    with pytest.raises(InputError, match=r"neither an existing path nor an installed Python package.*save_pretrained"):
        diversify.embed(["x"], model="minishlab/potion-base-8M")


def test_directory_that_is_not_a_model(tmp_path):
    (tmp_path / "st").mkdir()
    (tmp_path / "st" / "modules.json").write_text("[]")
    with pytest.raises(InputError, match=r"not a model2vec model directory: model.safetensors, tokenizer.json "
                                         r"missing.*sentence-transformers"):
        diversify.embed(["x"], model=tmp_path / "st")


def test_texts_that_are_not_strings(model):
    with pytest.raises(InputTypeError, match=r"`texts` must hold str only; texts\[1\] is int"):
        diversify.embed(["a cat", 7], model=model)
    with pytest.raises(InputTypeError, match=r"got a single str"):
        diversify.embed("the cat", model=model)
    with pytest.raises(InputTypeError, match=r"iterable of str.*got int"):
        diversify.embed(5, model=model)


def test_empty_texts_are_named(model):
    with pytest.raises(InputError, match=r"2 embed to the zero vector.*texts\[1\]=''.*texts\[3\]='zzz qqq'"):
        diversify.embed(["the cat", "", "a dog", "zzz qqq"], model=model)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "8"])
def test_batch_size_must_be_a_positive_int(model, bad):
    with pytest.raises(InputError, match=r"`batch_size` must be an integer >= 1"):
        diversify.embed(TEXTS, model=model, batch_size=bad)


def test_no_texts_give_an_empty_array(model):
    v = diversify.embed([], model=model)
    assert v.shape == (0, 24) and v.dtype == np.float32


_sentence = st.lists(st.sampled_from(WORDS), min_size=1, max_size=8).map(" ".join)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(_sentence, min_size=1, max_size=12), seed=st.integers(0, 2**16))
def test_embed_rows_follow_their_texts_with_and_without_cache_property(model, tmp_path, texts, seed):
    """Each row depends on its text alone: a permuted corpus gives the permuted rows, and a cache
    written by another corpus never changes a row."""
    from diversify.embedding import embed_with_info

    base = diversify.embed(texts, model=model)
    perm = np.random.default_rng(seed).permutation(len(texts))
    np.testing.assert_array_equal(diversify.embed([texts[i] for i in perm], model=model), base[perm])
    cache = tmp_path / f"c{seed}-{len(texts)}.npz"
    embed_with_info(texts[: len(texts) // 2] + ["a big house"], model=model, cache=cache)
    cached, _, _ = embed_with_info(texts, model=model, cache=cache)
    np.testing.assert_array_equal(cached, base)
