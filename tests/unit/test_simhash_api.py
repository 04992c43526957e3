"""The public per-vector SimHash API: importable from ``diversify`` (lazily), the examples of
docs/simhash-api.md run, the band table agrees with a brute-force scan, and bad input is refused."""

from __future__ import annotations

import contextlib
import io
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import diversify
from diversify.errors import ConfigError, DiversifyError, InputError

DOC = Path(__file__).resolve().parents[2] / "docs" / "simhash-api.md"
PUBLIC = ["simhash_bands", "simhash_lsh_multi", "SimHashFamily", "SimHashBandTable", "normalize_vector",
          "hamming_distance_hex", "cosine_from_hamming"]


def test_the_doc_examples_run_and_print_what_they_say():
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    assert len(blocks) == 4
    ns: dict = {"__name__": "docs_simhash"}
    checked = 0
    for j, code in enumerate(blocks):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, f"{DOC.name}[block {j}]", "exec"), ns)
        for expected in re.findall(r"^\s*print\(.*\)\s*#\s*(.+)$", code, flags=re.M):
            assert expected.strip() in out.getvalue(), (j, expected, out.getvalue())
            checked += 1
    assert checked >= 7
    assert out.getvalue().count("refused:") == 4


def test_public_names_resolve_lazily_without_numba():
    code = ("import sys, diversify\n"
            f"for n in {PUBLIC!r}:\n"
            "    assert n in diversify.__all__, n\n"
            "    getattr(diversify, n)\n"
            "assert 'numba' not in sys.modules\n"
            "assert diversify.simhash_lsh_multi is diversify.simhash_bands\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_old_paths_keep_working():
    from diversify.linking.bands import simhash_lsh_multi
    from diversify.sketches.simhash import cosine_from_hamming, hamming_distance_hex, normalize_vector

    v = np.arange(1.0, 9.0)
    assert simhash_lsh_multi(v, bits=64, bands=4) == diversify.simhash_bands(v, bits=64, bands=4)
    assert normalize_vector(v) @ normalize_vector(v) == pytest.approx(1.0)
    assert hamming_distance_hex("0f", "ff") == 4 and cosine_from_hamming(0, 64) == 1.0


def test_signatures_are_the_ones_a_build_stores(rng):
    vecs = rng.standard_normal((6, 24))
    cfg = diversify.BuildConfig(seed=7, simhash=diversify.SimHashConfig(bits=128, families=2))
    res = diversify.build(vectors=vecs, config=cfg)
    stored = np.asarray(res.cluster_map.extras["simhash"])
    from diversify.sketches.simhash import row_hex

    for i in range(6):
        fams = diversify.simhash_bands(vecs[i], bits=128, families=2, seed=7)
        words = stored[i]
        assert [f.signature for f in fams] == [row_hex(words[f * 2:(f + 1) * 2]) for f in range(2)]


def test_band_keys_cover_the_signature():
    fam = diversify.simhash_bands(np.linspace(-1, 1, 50), bits=64, bands=5)[0]
    value = int(fam.signature, 16)
    rebuilt, shift = 0, 0
    for j, key in enumerate(fam.bands):
        band, hexpart = key.split(":")
        assert int(band) == j
        width = 13 if j < 4 else 12  # 64 bits in 5 bands: the first ones one bit longer
        rebuilt |= int(hexpart, 16) << shift
        shift += width
    assert shift == 64 and rebuilt == value


def test_table_candidates_match_a_brute_force_scan(rng):
    table = diversify.SimHashBandTable(bits=64, bands=8, families=2, seed=3)
    base = rng.standard_normal((40, 16))
    vecs = np.vstack([base, base[:20] + 0.1 * rng.standard_normal((20, 16))])
    sigs = {}
    for i, v in enumerate(vecs[:50]):
        sigs[i] = table.add(i, v)
    assert len(table) == 50 and 3 in table
    for q in vecs[50:]:
        mine = diversify.simhash_bands(q, bits=64, bands=8, families=2, seed=3)
        want = [k for k, fams in sigs.items()
                if any(set(a.bands) & set(b.bands) for a, b in zip(mine, fams))]
        assert table.candidates(q) == want
        hits = table.query(q)
        assert [k for k, _ in hits] == sorted(want, key=lambda k: -dict(hits)[k])
        for k, cos in hits:
            h = sum(diversify.hamming_distance_hex(a.signature, b.signature) for a, b in zip(mine, sigs[k]))
            assert cos == pytest.approx(np.cos(np.pi * h / 128))
        assert all(c >= 0.8 for _, c in table.query(q, min_cosine=0.8))


def test_empty_table_answers_nothing():
    table = diversify.SimHashBandTable()
    assert table.candidates(np.ones(4)) == [] and table.query(np.ones(4)) == []


@pytest.mark.parametrize("vector,words", [
    (np.array([1.0, np.nan]), "finite"),
    (np.array([1.0, np.inf, 0.0]), "finite"),
    (np.zeros(5), "nonzero"),
    (np.ones((2, 5)), "1-D"),
    (np.ones((5, 1)), "1-D"),
    (np.float64(3.0), "1-D"),
    (np.zeros(0), "1-D"),
    (np.array([1 + 2j, 3]), "real numbers"),
    (["a", "b"], "numbers"),
    ([1.0, "x"], "numbers"),
])
def test_bad_vectors_are_refused(vector, words):
    for call in (diversify.simhash_bands, diversify.normalize_vector, lambda v: diversify.SimHashBandTable().add("k", v)):
        with pytest.raises(InputError, match=re.escape(words)) as exc:
            call(vector)
        assert "`vector`" in str(exc.value)
        assert isinstance(exc.value, (DiversifyError, ValueError))


def test_one_row_matrix_is_one_vector():
    v = np.arange(1.0, 6.0)
    assert np.array_equal(diversify.normalize_vector(v[None, :]), diversify.normalize_vector(v))


def test_table_refuses_another_dimension_and_a_repeated_key():
    table = diversify.SimHashBandTable(bits=64, bands=4)
    table.add("a", np.ones(8))
    with pytest.raises(InputError, match="dimension 8"):
        table.add("b", np.ones(9))
    with pytest.raises(InputError, match="dimension 8"):
        table.query(np.ones(7))
    with pytest.raises(InputError, match="already in the table"):
        table.add("a", np.ones(8))
    with pytest.raises(InputError, match="hashable"):
        table.add(["a"], np.ones(8))
    with pytest.raises(InputError, match="min_cosine"):
        table.query(np.ones(8), min_cosine=2.0)
    assert len(table) == 1


@pytest.mark.parametrize("kwargs,words", [
    ({"bits": 100}, "`bits` must be 64, 128 or 256"),
    ({"bands": 0}, "`bands` must be in [1, bits=256]"),
    ({"bands": 300}, "`bands` must be in [1, bits=256]"),
    ({"families": 0}, "`families` must be in [1, 16]"),
    ({"seed": -1}, "`seed` must be in [0, 2**64)"),
    ({"bits": 64.0}, "`bits` must be an int"),
    ({"bands": True}, "`bands` must be an int"),
])
def test_bad_settings_are_refused(kwargs, words):
    with pytest.raises(ConfigError, match=re.escape(words)):
        diversify.simhash_bands(np.ones(4), **kwargs)
    with pytest.raises(ConfigError, match=re.escape(words)):
        diversify.SimHashBandTable(**kwargs)


@pytest.mark.parametrize("a,b,words", [
    ("ff", "fff", "equal length"),
    ("", "", "non-empty hex string"),
    (15, "0f", "non-empty hex string"),
    ("zz", "00", "hexadecimal"),
    (" f", "0f", "hexadecimal"),
    ("0x", "00", "hexadecimal"),
])
def test_hamming_distance_hex_refuses_what_is_not_a_signature(a, b, words):
    with pytest.raises(InputError, match=words):
        diversify.hamming_distance_hex(a, b)


@pytest.mark.parametrize("h,bits", [(-1, 64), (65, 64), (1, 0), (1.5, 64), (True, 64), (1, 64.0), ("3", 64)])
def test_cosine_from_hamming_refuses_bad_counts(h, bits):
    with pytest.raises(InputError, match="`h`|`bits`"):
        diversify.cosine_from_hamming(h, bits)


def test_cosine_from_hamming_values():
    assert diversify.cosine_from_hamming(0, 256) == 1.0
    assert diversify.cosine_from_hamming(128, 256) == pytest.approx(0.0, abs=1e-12)
    assert diversify.cosine_from_hamming(256, 256) == -1.0
    assert diversify.cosine_from_hamming(np.int64(64), 256) == pytest.approx(np.cos(np.pi / 4))
