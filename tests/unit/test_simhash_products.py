"""Vector signatures from float32 matrix products (diversify.sketches.simhash.sign_by_products).

Kinds: oracle (every bit equals the float64 loop of ``fill_simhash``, the kernel every signature
came from before), hostile (products perturbed as another BLAS or summation order could make them;
vectors built to lie on the hyperplanes), property (hypothesis, near-zero dot products), and
determinism across block sizes and BLAS / Numba thread counts (subprocesses).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diversify._kernels.simhash import fill_simhash
from diversify.sketches import simhash as S

ROOT = Path(__file__).resolve().parents[2]


def old_bits(vecs: np.ndarray, planes: np.ndarray) -> np.ndarray:
    """The signatures as the float64 loop makes them (the reference)."""
    out = np.empty((vecs.shape[0], planes.shape[0] // 64), dtype=np.uint64)
    fill_simhash(np.ascontiguousarray(vecs, dtype=np.float64), planes, out)
    return out


def product_bits(vecs: np.ndarray, planes: np.ndarray, block: int = S.PRODUCT_BLOCK) -> np.ndarray:
    out = np.empty((vecs.shape[0], planes.shape[0] // 64), dtype=np.uint64)
    S.sign_by_products(np.ascontiguousarray(vecs, dtype=np.float64), planes, out, block=block)
    return out


def unit(rng, n: int, d: int) -> np.ndarray:
    return S.normalize_vectors(rng.standard_normal((n, d)))


def on_the_planes(rng, planes: np.ndarray, n: int, scale: float) -> np.ndarray:
    """Unit vectors whose dot product with one plane each is about ``scale`` (0: on the plane)."""
    d = planes.shape[1]
    x = rng.standard_normal((n, d))
    j = rng.integers(0, planes.shape[0], n)
    p = planes[j]
    x -= (np.einsum("ij,ij->i", x, p) / np.einsum("ij,ij->i", p, p))[:, None] * p  # orthogonal to plane j
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    x += (scale * rng.standard_normal(n))[:, None] * p / np.linalg.norm(p, axis=1, keepdims=True)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


# ----------------------------------------------------------------------------- oracle


@pytest.mark.parametrize("bits, families, dim", [(64, 1, 3), (128, 2, 17), (256, 2, 384), (256, 1, 1000)])
def test_product_bits_equal_the_float64_loop(bits, families, dim, rng):
    planes = S.hyperplanes(7, dim, bits, families)
    vecs = unit(rng, 300, dim)
    assert np.array_equal(product_bits(vecs, planes, block=128), old_bits(vecs, planes))


def test_simhash_vectors_takes_the_product_path_and_keeps_every_bit(rng, monkeypatch):
    vecs = unit(rng, S.PRODUCT_MIN_ROWS * 3, 48)
    calls = []
    real = S.sign_by_products
    monkeypatch.setattr(S, "sign_by_products", lambda *a, **k: (calls.append(1), real(*a, **k)))
    got = S.simhash_vectors(vecs, seed=3, bits=256, families=2, normalized=True)
    assert calls, "a batch of this size must be signed by matrix products"
    assert np.array_equal(got, old_bits(vecs, S.hyperplanes(3, 48, 256, 2)))


@pytest.mark.parametrize("scale", [0.0, 1e-9, 1e-7, 1e-6])
def test_vectors_on_the_hyperplanes_get_the_float64_bit(scale, rng):
    """Dot products inside the margin are decided by the float64 loop (exactly 0 -> bit 0)."""
    planes = S.hyperplanes(11, 64, 256, 2)
    vecs = on_the_planes(rng, planes, 400, scale)
    m = S.product_margin(vecs, planes)
    near = np.abs(vecs.astype(np.float32) @ planes.T.astype(np.float32)) <= m[:, None]
    assert near.sum() >= 200, "the construction must put products inside the margin"
    assert np.array_equal(product_bits(vecs, planes, block=64), old_bits(vecs, planes))


def test_margin_bounds_the_float32_error_twice_over(rng):
    """|float32 product - exact| <= margin / 2 on data where the error is largest (same-sign terms)."""
    for d in (3, 384, 4096):
        planes = np.abs(S.hyperplanes(5, d, 64))
        vecs = np.abs(unit(rng, 50, d)) + rng.random((50, d)) * 1e-3
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        got = (vecs.astype(np.float32) @ planes.T.astype(np.float32)).astype(np.longdouble)
        exact = vecs.astype(np.longdouble) @ planes.T.astype(np.longdouble)
        err = np.abs(got - exact).astype(np.float64)
        half = S.product_margin(vecs, planes)[:, None] / 2
        assert (err <= half).all(), f"d={d}: error {err.max():.3g} beyond half the margin {half.min():.3g}"
        assert err.max() > 0  # the products do round


# ----------------------------------------------------------------------------- hostile: other BLAS


def test_bits_survive_any_product_error_within_the_bound(rng, monkeypatch):
    """Another BLAS, summation order or thread count changes float32 products by at most half the
    margin: such products, pushed to either side, still give the float64 loop's bits."""
    planes = S.hyperplanes(2, 96, 256, 1)
    vecs = np.concatenate([on_the_planes(rng, planes, 300, 1e-4), unit(rng, 300, 96)])
    real = S._project
    state = {"flipped": 0}

    def shaken(rows32, planes32_t):
        p = real(rows32, planes32_t)
        rows = rows32.astype(np.float64)
        half = (S.product_margin(rows, planes) / 2)[:, None].astype(np.float32)
        push = np.where(rng.random(p.shape) < 0.5, -half, half)  # the worst case: a full error to one side
        shaken = (p + push * np.float32(0.999)).astype(np.float32)
        state["flipped"] += int((np.sign(shaken) != np.sign(p)).sum())
        return shaken

    monkeypatch.setattr(S, "_project", shaken)
    assert np.array_equal(product_bits(vecs, planes, block=100), old_bits(vecs, planes))
    assert state["flipped"] > 0, "the perturbation must change some signs, or the test proves nothing"


def test_huge_coordinates_fall_back_to_the_float64_loop(rng):
    """normalized=True does not check unit length: rows float32 cannot hold are signed directly."""
    vecs = rng.standard_normal((S.PRODUCT_MIN_ROWS + 5, 8)) * 1e30
    got = S.simhash_vectors(vecs, seed=1, bits=64, normalized=True)
    assert np.array_equal(got, old_bits(vecs, S.hyperplanes(1, 8, 64)))


# ----------------------------------------------------------------------------- property


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**31), dim=st.integers(1, 300), n=st.integers(1, 200),
       scale=st.sampled_from([0.0, 1e-12, 1e-7, 1e-5, 1e-3, 1.0]), block=st.integers(1, 300))
def test_product_bits_equal_the_float64_loop_property(one_numba_thread, seed, dim, n, scale, block):
    rng = np.random.default_rng(seed)
    planes = S.hyperplanes(seed, dim, 64, 2)
    vecs = on_the_planes(rng, planes, n, scale) if dim > 1 else unit(rng, n, dim)
    assert np.array_equal(product_bits(vecs, planes, block=block), old_bits(vecs, planes))


# ----------------------------------------------------------------------------- determinism


def test_block_size_does_not_change_a_bit(rng):
    planes = S.hyperplanes(9, 384, 256, 2)
    vecs = np.concatenate([unit(rng, 500, 384), on_the_planes(rng, planes, 200, 1e-5)])
    want = old_bits(vecs, planes)
    for block in (1, 7, 64, 333, 8192):
        assert np.array_equal(product_bits(vecs, planes, block=block), want), block


def _thread_data() -> tuple[np.ndarray, np.ndarray]:
    """3,000 random unit vectors and 1,000 lying on a hyperplane each (384-d, 2 x 256 bits)."""
    rng = np.random.default_rng(12)
    planes = S.hyperplanes(4, 384, 256, 2)
    vecs = np.concatenate([unit(rng, 3000, 384), on_the_planes(rng, planes, 1000, 0.0)]).astype(np.float32)
    return S.normalize_vectors(vecs), planes


_CHILD = """
import hashlib, sys
sys.path.insert(0, sys.argv[1])
from test_simhash_products import _thread_data
from diversify.sketches import simhash as S
vecs, planes = _thread_data()
sig = S.simhash_vectors(vecs, seed=4, bits=256, families=2, normalized=True)
print(hashlib.sha256(sig.tobytes()).hexdigest())
"""


def test_signatures_are_the_same_bytes_for_any_blas_and_numba_threads(tmp_path):
    """The same vectors signed in fresh processes with 1 or 2 BLAS threads and 1 or 2 Numba threads
    are the same bytes, and those of the float64 loop."""
    digests = {}
    for blas, nb in ((1, 1), (2, 2), (2, 1)):
        env = dict(os.environ, PYTHONPATH=str(ROOT), OPENBLAS_NUM_THREADS=str(blas), OMP_NUM_THREADS=str(blas),
                   MKL_NUM_THREADS=str(blas), NUMBA_NUM_THREADS=str(nb))
        r = subprocess.run([sys.executable, "-c", _CHILD, str(Path(__file__).parent)], capture_output=True,
                           text=True, env=env, cwd=tmp_path, timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]
        digests[(blas, nb)] = r.stdout.strip()
    assert len(set(digests.values())) == 1, json.dumps({str(k): v for k, v in digests.items()})
    vecs, planes = _thread_data()
    assert digests[(1, 1)] == hashlib.sha256(old_bits(vecs, planes).tobytes()).hexdigest()


# ----------------------------------------------------------------------------- normalizing in blocks


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int16, np.float16])
def test_normalize_in_blocks_equals_the_whole_array_division(dtype, rng):
    n = S._NORMALIZE_BLOCK * 2 + 17
    v = (rng.standard_normal((n, 6)) * 50).astype(dtype)
    v[v.sum(axis=1) == 0] = 1  # no zero rows (int16 can round a row to zeros)
    whole = np.asarray(v, dtype=np.float64)
    want = whole / np.sqrt(np.einsum("ij,ij->i", whole, whole))[:, None]
    got = S.normalize_vectors(v)
    assert got.dtype == np.float64 and got.flags.c_contiguous
    assert np.array_equal(got, want)


def test_bad_rows_are_named_across_blocks(rng):
    n = S._NORMALIZE_BLOCK + 100
    v = rng.standard_normal((n, 4)).astype(np.float32)
    v[S._NORMALIZE_BLOCK + 3, 1] = np.nan
    with pytest.raises(S.InputError, match=rf"rows \[{S._NORMALIZE_BLOCK + 3}\] contain NaN or inf \(1 rows\)"):
        S.normalize_vectors(v)
    v[S._NORMALIZE_BLOCK + 3] = 0
    v[5] = 0
    with pytest.raises(S.InputError, match=rf"rows \[5, {S._NORMALIZE_BLOCK + 3}\] are all zeros \(2 rows\)"):
        S.normalize_vectors(v)
