"""MinHash signatures: one-permutation hashing with optimal densification, and classic MinHash.

Kinds: oracle (CSR and fused kernels vs tests/reference.py; mulmod61 vs Python integers),
property (hypothesis), statistical (estimates vs exact Jaccard, tolerance from the binomial
standard error), golden (a pinned signature prefix), hostile (empty documents, extreme hashes).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import reference as R
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_text import HOSTILE

from diversify import hashing
from diversify._kernels._common import fmix64 as jit_fmix64
from diversify._kernels._common import splitmix64 as jit_splitmix64
from diversify._kernels.minhash import mulmod61
from diversify.config import TextConfig
from diversify.errors import ConfigError, InputError
from diversify.sketches.minhash import EMPTY, classic_params, estimate_jaccard, minhash_signatures, sketch_oph_buffer
from diversify.text import Shingles, encode_batch, shingle_hashes

P61 = (1 << 61) - 1
SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def _csr(sets: list[list[int]]) -> Shingles:
    """Shingles from explicit hash lists (lengths/exact are irrelevant to MinHash)."""
    indptr = np.zeros(len(sets) + 1, dtype=np.int64)
    np.cumsum([len(s) for s in sets], out=indptr[1:])
    hashes = np.array([x for s in sets for x in s], dtype=np.uint64)
    n = len(sets)
    return Shingles(indptr=indptr, hashes=hashes, lengths=np.zeros(n, np.uint32), exact=np.zeros(n, np.uint64))


# ----------------------------------------------------------------------------- oracle: arithmetic

EXTREMES = [0, 1, 2, 3, (1 << 29) - 1, 1 << 29, (1 << 32) - 1, 1 << 32, (1 << 32) + 1, (1 << 33) - 1,
            (1 << 60), P61 - 2, P61 - 1, P61]


@pytest.mark.parametrize("a", EXTREMES)
def test_mulmod61_extremes_equal_python_integers(a):
    for x in EXTREMES:
        got = int(mulmod61(np.uint64(a), np.uint64(x)))
        assert got == (a * x) % P61, f"mulmod61({a:#x}, {x:#x}) = {got:#x}, want {(a * x) % P61:#x}"


@SETTINGS
@given(a=st.integers(0, P61), x=st.integers(0, P61))
def test_mulmod61_equals_python_integers(a, x):
    assert int(mulmod61(np.uint64(a), np.uint64(x))) == (a * x) % P61


# The mixer has two homes by necessity: jitted in diversify/_kernels/_common.py (for kernels) and
# numpy/Python in diversify.hashing (for seeds, permutations, hyperplanes). Both must equal plain
# Python integers (tests/reference.py), so they can never drift apart.
MIX_INPUTS = [0, 1, 2, 30, 31, 32, (1 << 32) - 1, 1 << 32, (1 << 63) - 1, 1 << 63, (1 << 64) - 2, (1 << 64) - 1,
              hashing.GOLDEN, hashing.MIX_M1, hashing.MIX_M2, hashing.FNV_OFFSET]


@pytest.mark.parametrize("x", MIX_INPUTS)
def test_fmix64_jitted_and_hashing_equal_python_integers(x):
    want = R.fmix64(x)
    assert hashing.fmix64(x) == want, f"hashing.fmix64({x:#x}) = {hashing.fmix64(x):#x}, want {want:#x}"
    got = int(jit_fmix64(np.uint64(x)))
    assert got == want, f"jitted fmix64({x:#x}) = {got:#x}, want {want:#x}"


@SETTINGS
@given(x=st.integers(0, (1 << 64) - 1))
def test_fmix64_jitted_equals_hashing_on_any_uint64(x):
    assert int(jit_fmix64(np.uint64(x))) == hashing.fmix64(x) == R.fmix64(x)


@pytest.mark.parametrize("seed", [0, 1, 12345, 1 << 63, (1 << 64) - 1])
def test_splitmix64_jitted_and_hashing_stream_equal_python_integers(seed):
    count = 40
    stream = hashing.splitmix64_stream(seed, count)
    assert stream.dtype == np.uint64 and stream.shape == (count,)
    for i in range(count):
        want = R.splitmix64(seed, i)
        assert int(stream[i]) == want, f"splitmix64_stream({seed:#x})[{i}] = {int(stream[i]):#x}, want {want:#x}"
        got = int(jit_splitmix64(np.uint64(seed), i))
        assert got == want, f"jitted splitmix64({seed:#x}, {i}) = {got:#x}, want {want:#x}"


@pytest.mark.parametrize("seed", [0, 1, 12345, 2**63 - 1])
def test_classic_params_equal_reference_and_ranges(seed):
    a, b = classic_params(seed, 64)
    ra, rb = R.classic_params(seed, 64)
    assert [int(v) for v in a] == ra and [int(v) for v in b] == rb
    assert all(1 <= v < P61 for v in ra) and all(0 <= v < P61 for v in rb)


def test_classic_with_extreme_hash_values_equals_reference():
    # hashes >= p exercise the x mod p reduction; p-1 and 2**64-1 the top of the range
    hashes = [0, 1, P61 - 1, P61, P61 + 1, 2 * P61, 2**63, 2**64 - 2, 2**64 - 1]
    sets = [hashes, hashes[::-1], [2**64 - 1], [P61], [0]]
    sig = minhash_signatures(_csr(sets), num_perm=32, method="classic", seed=9)
    for i, s in enumerate(sets):
        assert sig[i].tolist() == R.classic(s, 32, 9), f"set {i}"


# ----------------------------------------------------------------------------- oracle: signatures


@pytest.mark.parametrize("mode, k", [("word", 1), ("word", 3), ("word", 5), ("char", 4)])
@pytest.mark.parametrize("num_perm", [8, 100, 128])
def test_oph_csr_and_fused_equal_reference(mode, k, num_perm):
    cfg = TextConfig(shingle=mode, k=k)
    sh = shingle_hashes(HOSTILE, cfg, seed=11)
    csr = minhash_signatures(sh, num_perm=num_perm, method="oph", seed=11)
    buf, offsets = encode_batch(HOSTILE)
    fused, counts, _, _ = sketch_oph_buffer(buf, offsets, cfg, 11, num_perm)
    for i, d in enumerate(HOSTILE):
        want = R.oph(R.shingles(d, mode, k, 11), num_perm, 11)
        assert csr[i].tolist() == want, f"CSR OPH of doc {i} {d!r}"
        assert fused[i].tolist() == want, f"fused OPH of doc {i} {d!r}"
    assert counts.tolist() == np.diff(sh.indptr).tolist()


@pytest.mark.parametrize("num_perm", [8, 64, 129])
def test_classic_equals_reference_on_text(num_perm):
    sh = shingle_hashes(HOSTILE, TextConfig(shingle="word", k=3), seed=4)
    sig = minhash_signatures(sh, num_perm=num_perm, method="classic", seed=4)
    for i, d in enumerate(HOSTILE):
        assert sig[i].tolist() == R.classic(R.shingles(d, "word", 3, 4), num_perm, 4), f"doc {i} {d!r}"


@SETTINGS
@given(sets=st.lists(st.lists(st.integers(0, 2**64 - 1), max_size=40), min_size=1, max_size=5),
       num_perm=st.sampled_from([8, 16, 33, 128]), seed=st.integers(0, 2**63 - 1))
def test_both_methods_equal_reference_property(one_numba_thread, sets, num_perm, seed):
    sh = _csr(sets)
    oph = minhash_signatures(sh, num_perm=num_perm, method="oph", seed=seed)
    cls = minhash_signatures(sh, num_perm=num_perm, method="classic", seed=seed)
    for i, s in enumerate(sets):
        assert oph[i].tolist() == R.oph(s, num_perm, seed)
        assert cls[i].tolist() == R.classic(s, num_perm, seed)


@SETTINGS
@given(docs=st.lists(st.text(max_size=60), min_size=1, max_size=5), k=st.integers(1, 6),
       mode=st.sampled_from(["word", "char"]), num_perm=st.sampled_from([8, 50, 128]))
def test_fused_equals_csr_property(one_numba_thread, docs, k, mode, num_perm):
    cfg = TextConfig(shingle=mode, k=k)
    csr = minhash_signatures(shingle_hashes(docs, cfg, seed=2), num_perm=num_perm, method="oph", seed=2)
    buf, offsets = encode_batch(docs)
    fused = sketch_oph_buffer(buf, offsets, cfg, 2, num_perm)[0]
    assert np.array_equal(csr, fused)


@pytest.mark.parametrize("method", ["oph", "classic"])
def test_empty_document_gets_all_empty_slots_and_neighbours_are_unaffected(method):
    sets = [[1, 2, 3], [], [1, 2, 3]]
    sig = minhash_signatures(_csr(sets), num_perm=16, method=method)
    assert (sig[1] == EMPTY).all()
    assert np.array_equal(sig[0], sig[2]) and not (sig[0] == EMPTY).all()


@pytest.mark.parametrize("method", ["oph", "classic"])
def test_signature_is_a_function_of_the_set(method, rng):
    base = rng.integers(0, 2**63, size=50, dtype=np.uint64).tolist()
    shuffled = list(base)
    rng.shuffle(shuffled)
    sets = [base, shuffled, base + base[:10]]  # order and multiplicity do not matter
    sig = minhash_signatures(_csr(sets), num_perm=64, method=method)
    assert np.array_equal(sig[0], sig[1]) and np.array_equal(sig[0], sig[2])


def test_bad_arguments_raise_config_and_input_errors():
    sh = _csr([[1, 2]])
    with pytest.raises(ConfigError, match="num_perm"):
        minhash_signatures(sh, num_perm=4)
    with pytest.raises(ConfigError, match="method"):
        minhash_signatures(sh, method="bogus")
    with pytest.raises(InputError, match="equal length"):
        estimate_jaccard(np.zeros(4, np.uint32), np.zeros(5, np.uint32))


# ----------------------------------------------------------------------------- statistical

J_GRID = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
UNION = 600  # elements in A ∪ B
TRIALS = 6  # independent pairs per J
NUM_PERM = 256
SIGMAS = 4.0


def _pair_with_jaccard(rng, j: float) -> tuple[list[int], list[int], float]:
    pool = rng.choice(2**62, size=UNION, replace=False).astype(np.uint64).tolist()
    common = round(j * UNION)
    only_a = (UNION - common + 1) // 2
    a = pool[:common] + pool[common : common + only_a]
    b = pool[:common] + pool[common + only_a :]
    return a, b, common / UNION


@pytest.mark.parametrize("method", ["oph", "classic"])
def test_minhash_estimates_within_binomial_tolerance_of_exact_jaccard(method, rng):
    sets, truth = [], []
    for j in J_GRID:
        for _ in range(TRIALS):
            a, b, jj = _pair_with_jaccard(rng, j)
            assert abs(len(set(a) & set(b)) / len(set(a) | set(b)) - jj) < 1e-12
            sets += [a, b]
            truth.append(jj)
    sig = minhash_signatures(_csr(sets), num_perm=NUM_PERM, method=method, seed=int(rng.integers(2**62)))
    est = np.array([estimate_jaccard(sig[2 * t], sig[2 * t + 1]) for t in range(len(truth))])
    truth = np.array(truth)
    sd = np.sqrt(truth * (1 - truth) / NUM_PERM)
    worst = int(np.argmax(np.abs(est - truth) / sd))
    assert np.all(np.abs(est - truth) <= SIGMAS * sd), (
        f"{method}: estimate {est[worst]:.4f} vs exact J={truth[worst]:.4f}; |error| "
        f"{abs(est[worst] - truth[worst]):.4f} > {SIGMAS}*sqrt(J(1-J)/{NUM_PERM}) = {SIGMAS * sd[worst]:.4f}"
    )
    # no bias: the mean over TRIALS pairs at each J is within SIGMAS standard errors of the mean
    for g, j in enumerate(J_GRID):
        sl = slice(g * TRIALS, (g + 1) * TRIALS)
        m, t = est[sl].mean(), truth[sl].mean()
        tol = SIGMAS * math.sqrt(t * (1 - t) / NUM_PERM / TRIALS)
        assert abs(m - t) <= tol, f"{method}: mean estimate {m:.4f} at J={t:.4f} off by more than {tol:.4f}"


@pytest.mark.parametrize("method", ["oph", "classic"])
def test_identical_sets_estimate_one_and_disjoint_sets_near_zero(method, rng):
    a, b, _ = _pair_with_jaccard(rng, 0.0)
    sig = minhash_signatures(_csr([a, list(a), b]), num_perm=NUM_PERM, method=method)
    assert estimate_jaccard(sig[0], sig[1]) == 1.0
    # disjoint: slots agree only through a 32-bit value collision (expected NUM_PERM / 2**32)
    assert estimate_jaccard(sig[0], sig[2]) <= 1 / NUM_PERM


@pytest.mark.parametrize("size", [1, 3, 20])
def test_oph_densification_on_sets_much_smaller_than_num_perm(size, rng):
    # most bins are empty and filled by densification; identical sets still agree everywhere and
    # a one-element change keeps J = (size-1)/(size+1) within the binomial tolerance
    a = rng.choice(2**62, size=size + 1, replace=False).astype(np.uint64).tolist()
    base, other = a[:size], a[: size - 1] + [a[size]]
    sig = minhash_signatures(_csr([base, list(base), other]), num_perm=NUM_PERM, method="oph")
    assert np.array_equal(sig[0], sig[1])
    j = (size - 1) / (size + 1)
    est = estimate_jaccard(sig[0], sig[2])
    # with so few elements the NUM_PERM slots are not independent: each copies one of `size` bins,
    # so the effective sample size is `size` draws, not NUM_PERM
    tol = SIGMAS * math.sqrt(j * (1 - j) / size) + 1e-12
    assert abs(est - j) <= max(tol, 1 / size), f"size={size}: estimate {est:.3f} vs J={j:.3f}"


# ----------------------------------------------------------------------------- golden
# Regenerate deliberately (only with a new hash scheme) with
#   python -c "import sys; sys.path.insert(0, 'tests'); import reference as R; \
#     s = R.shingles('the quick brown fox jumps over the lazy dog', 'word', 5, 1); \
#     print(R.oph(s, 128, 1)[:8], R.classic(s, 128, 1)[:8])"
GOLDEN_OPH = [61037944, 3059205113, 2607144516, 2607144516, 2313567320, 61037944, 2313567320, 663849268]
GOLDEN_CLASSIC = [2257507962, 1639800086, 352466428, 2702068769, 310088518, 467218544, 2045650281, 1848463698]


def test_golden_signature_prefixes():
    sh = shingle_hashes(["the quick brown fox jumps over the lazy dog"], TextConfig(k=5), seed=1)
    assert minhash_signatures(sh, num_perm=128, method="oph", seed=1)[0, :8].tolist() == GOLDEN_OPH
    assert minhash_signatures(sh, num_perm=128, method="classic", seed=1)[0, :8].tolist() == GOLDEN_CLASSIC


def test_multi_block_signatures_equal_reference(rng):
    from test_text import random_batch

    docs = random_batch(rng, 600)  # three blocks of 256 documents
    cfg = TextConfig(shingle="word", k=2)
    sh = shingle_hashes(docs, cfg, seed=8)
    oph = minhash_signatures(sh, num_perm=32, method="oph", seed=8)
    cls = minhash_signatures(sh, num_perm=8, method="classic", seed=8)
    buf, offsets = encode_batch(docs)
    fused = sketch_oph_buffer(buf, offsets, cfg, 8, 32)[0]
    for i, d in enumerate(docs):
        ref = R.shingles(d, "word", 2, 8)
        want = R.oph(ref, 32, 8)
        assert oph[i].tolist() == want and fused[i].tolist() == want, f"doc {i} {d!r}"
        assert cls[i].tolist() == R.classic(ref, 8, 8), f"doc {i} {d!r}"
