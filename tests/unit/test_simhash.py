"""SimHash of vectors (random hyperplanes) and of text (Charikar).

Kinds: oracle (bits vs numpy signs of the dot products with the planes from ``hyperplanes``;
text SimHash vs tests/reference.py), statistical (bit-flip rate vs angle/pi with a binomial
tolerance; the hyperplanes are standard normal), property, hostile (NaN/inf/zero rows, bad bits).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import reference as R
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_text import HOSTILE

from diversify._kernels.simhash import fill_simhash
from diversify.errors import ConfigError, InputError
from diversify.sketches.simhash import (
    cosine_from_hamming,
    hamming_distance,
    hamming_distance_hex,
    hyperplanes,
    normalize_vectors,
    simhash_vectors,
    text_simhash,
)

SIGMAS = 4.0
MIN_ABS_DOT = 1e-9  # bits whose dot product is closer to 0 than this are not compared


# ----------------------------------------------------------------------------- oracle: vectors


@pytest.mark.parametrize("bits, families, dim", [(64, 1, 3), (128, 2, 17), (256, 1, 64), (256, 4, 5)])
def test_vector_bits_equal_numpy_signs_of_dot_products(bits, families, dim, rng):
    vecs = rng.standard_normal((40, dim))
    seed = int(rng.integers(2**62))
    got = simhash_vectors(vecs, seed=seed, bits=bits, families=families)
    planes = hyperplanes(seed, dim, bits, families)
    assert planes.shape == (families * bits, dim)
    unit = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    dots = unit @ planes.T  # (n, families*bits)
    away = np.abs(dots) > MIN_ABS_DOT
    assert away.mean() > 0.999, "random data should be away from the hyperplanes"
    for i in range(vecs.shape[0]):
        want = R.pack_bits([bool(d > 0) for d in dots[i]])
        got_bits = [(int(got[i, j // 64]) >> (j % 64)) & 1 for j in range(families * bits)]
        want_bits = [(want[j // 64] >> (j % 64)) & 1 for j in range(families * bits)]
        bad = [j for j in range(families * bits) if away[i, j] and got_bits[j] != want_bits[j]]
        assert not bad, f"row {i}: bits {bad[:5]} differ from sign(planes @ v) (dots {dots[i, bad[:5]]})"


def test_zero_dot_product_gives_bit_zero():
    planes = hyperplanes(1, 4, 64)
    out = np.empty((2, 1), dtype=np.uint64)
    fill_simhash(np.zeros((2, 4)), planes, out)
    assert out.tolist() == [[0], [0]]


def test_scale_does_not_change_the_signature(rng):
    v = rng.standard_normal((5, 12))
    assert np.array_equal(simhash_vectors(v), simhash_vectors(v * 3.7))


def test_hyperplanes_are_deterministic_and_standard_normal():
    a = hyperplanes(7, 32, 256, families=2)
    b = hyperplanes(7, 32, 256, families=2)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, hyperplanes(8, 32, 256, families=2))
    z = a.ravel()
    n = z.size
    assert abs(z.mean()) <= SIGMAS / math.sqrt(n), f"mean {z.mean():.4f} of {n} N(0,1) draws"
    # Var(sample variance) = 2/n for a normal sample
    assert abs(z.var() - 1.0) <= SIGMAS * math.sqrt(2.0 / n), f"variance {z.var():.4f} of {n} N(0,1) draws"


def test_family_f_uses_plane_rows_from_f_times_bits():
    # families are consecutive row blocks of one (families*bits, dim) matrix, packed in order
    p = hyperplanes(3, 10, 64, families=3)
    sig = simhash_vectors(np.eye(10)[:1], seed=3, bits=64, families=3)
    assert sig.shape == (1, 3)
    want = R.pack_bits([bool(p[j, 0] > 0) for j in range(192)])
    assert [int(w) for w in sig[0]] == want


# ----------------------------------------------------------------------------- statistical

ANGLES = [0.05, 0.2, 0.5, 1.0, math.pi / 2, 2.5, 3.0]


def test_bit_flip_rate_matches_angle_over_pi(rng):
    bits, families, dim = 256, 16, 48  # 4096 independent hyperplanes per pair
    nbits = bits * families
    for theta in ANGLES:
        q, _ = np.linalg.qr(rng.standard_normal((dim, 2)))
        e, f = q[:, 0], q[:, 1]
        u = e
        v = math.cos(theta) * e + math.sin(theta) * f
        sig = simhash_vectors(np.stack([u, v]), seed=int(rng.integers(2**62)), bits=bits, families=families)
        rate = hamming_distance(sig[0], sig[1]) / nbits
        p = theta / math.pi
        tol = SIGMAS * math.sqrt(p * (1 - p) / nbits)
        assert abs(rate - p) <= tol, (
            f"angle {theta:.3f}: flip rate {rate:.4f} vs angle/pi {p:.4f}; tolerance "
            f"{SIGMAS}*sqrt(p(1-p)/{nbits}) = {tol:.4f}"
        )


# ----------------------------------------------------------------------------- helpers


def test_hamming_helpers_equal_python_popcount(rng):
    a = rng.integers(0, 2**63, size=4, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    b = rng.integers(0, 2**63, size=4, dtype=np.uint64)
    want = sum(bin(int(x) ^ int(y)).count("1") for x, y in zip(a, b))
    assert hamming_distance(a, b) == want
    ha = "".join(f"{int(w):016x}" for w in a)
    hb = "".join(f"{int(w):016x}" for w in b)
    assert hamming_distance_hex(ha, hb) == want
    with pytest.raises(InputError, match="equal length"):
        hamming_distance_hex(ha, hb[:-1])
    with pytest.raises(InputError, match="hexadecimal"):
        hamming_distance_hex("zz", "00")


def test_cosine_from_hamming():
    assert cosine_from_hamming(0, 256) == 1.0
    assert cosine_from_hamming(256, 256) == -1.0
    assert abs(cosine_from_hamming(128, 256)) < 1e-15
    with pytest.raises(InputError):
        cosine_from_hamming(257, 256)


# ----------------------------------------------------------------------------- hostile


@pytest.mark.parametrize(
    "vectors, match",
    [
        ([[1.0, float("nan")], [1.0, 0.0]], "finite"),
        ([[1.0, float("inf")], [1.0, 0.0]], "finite"),
        ([[0.0, 0.0], [1.0, 0.0]], "nonzero"),
        (np.zeros((2, 0)), "2-D"),
        (np.zeros((2, 2, 2)), "2-D"),
        ([[1.0, 2.0], [1.0]], "2-D array of numbers"),
        ([["a", "b"]], "2-D array of numbers"),
    ],
)
def test_bad_vectors_are_input_errors(vectors, match):
    with pytest.raises(InputError, match=match):
        normalize_vectors(vectors)


def test_bad_bits_and_families_are_config_errors():
    with pytest.raises(ConfigError, match="bits"):
        simhash_vectors(np.ones((1, 3)), bits=100)
    with pytest.raises(ConfigError, match="families"):
        simhash_vectors(np.ones((1, 3)), families=0)


def test_normalize_vectors_does_not_mutate_input(rng):
    v = rng.standard_normal((3, 4))
    before = v.copy()
    out = normalize_vectors(v)
    assert np.array_equal(v, before)
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0)


# ----------------------------------------------------------------------------- text SimHash (Charikar)


def test_text_simhash_equals_reference():
    got = text_simhash(HOSTILE)
    for i, d in enumerate(HOSTILE):
        assert int(got[i]) == R.text_simhash(d), f"doc {i} {d!r}: {int(got[i]):#018x} vs {R.text_simhash(d):#018x}"


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(docs=st.lists(st.text(max_size=80), min_size=1, max_size=5))
def test_text_simhash_equals_reference_property(one_numba_thread, docs):
    got = text_simhash(docs)
    assert [int(x) for x in got] == [R.text_simhash(d) for d in docs]


def test_text_simhash_near_copies_are_close_and_unrelated_are_far():
    base = "the committee approved the annual budget after a long debate about school funding and roads"
    near = base + " today"
    other = "quantum chromodynamics describes the strong interaction between quarks and gluons in hadrons"
    h = text_simhash([base, near, other])
    d_near = bin(int(h[0]) ^ int(h[1])).count("1")
    d_far = bin(int(h[0]) ^ int(h[2])).count("1")
    assert d_near < d_far, f"near copy at Hamming {d_near}, unrelated at {d_far}"


# ----------------------------------------------------------------------------- simhash_lsh_multi (online band keys)


def test_lsh_multi_band_keys_reassemble_the_signature_and_obey_pigeonhole(rng):
    from diversify.linking.bands import band_starts, simhash_lsh_multi

    bits, bands, families = 256, 16, 2
    v = rng.standard_normal(32)
    fams = simhash_lsh_multi(v, bits=bits, bands=bands, families=families, seed=5)
    packed = simhash_vectors(v[None, :], seed=5, bits=bits, families=families)[0]
    starts = band_starts(bits, bands).tolist()
    for f in fams:
        value = int(f.signature, 16)
        assert value == sum(int(w) << (64 * i) for i, w in enumerate(packed[f.family * 4 : f.family * 4 + 4]))
        rebuilt = 0
        for b, key in enumerate(f.bands):
            idx, hexpart = key.split(":")
            assert int(idx) == b
            rebuilt |= int(hexpart, 16) << starts[b]
        assert rebuilt == value, "band keys must be the signature's bit ranges"
    # nearby vectors: whenever a family differs in at most bands-1 bits, some band key is shared
    checked = 0
    for scale in (0.01, 0.03, 0.1, 0.3):
        for _ in range(10):
            w = v + scale * rng.standard_normal(32)
            other = simhash_lsh_multi(w, bits=bits, bands=bands, families=families, seed=5)
            for fa, fb in zip(fams, other):
                h = hamming_distance_hex(fa.signature, fb.signature)
                if h <= bands - 1:
                    checked += 1
                    assert set(fa.bands) & set(fb.bands), f"Hamming {h} <= {bands - 1} but no shared band key"
    assert checked >= 10


def test_text_simhash_multi_block_equals_reference(rng):
    from test_text import random_batch

    docs = random_batch(rng, 600)
    got = text_simhash(docs)
    assert [int(x) for x in got] == [R.text_simhash(d) for d in docs]
