"""LSH: band keys, (bands, rows) choice, pigeonhole banding, union-find and bucket linking.

Kinds: oracle (band keys vs tests/reference.py; union-find and bucket linking vs BFS components;
the S-curve choice vs a brute-force grid with an independent integration), property (hypothesis:
random graphs, pigeonhole guarantee).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import reference as R
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diversify._kernels import candidates as kc
from diversify._kernels import linking as kl
from diversify._kernels import union as ku
from diversify.config import BuildConfig
from diversify.linking.bands import (
    band_starts,
    candidate_probability,
    hamming_cutoff,
    hamming_radius,
    optimal_params,
    pigeonhole_params,
    simhash_bit_similarity,
)
from diversify.linking.link import make_verifier

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


# ----------------------------------------------------------------------------- band keys (oracle)


@pytest.mark.parametrize("num_perm, rows", [(128, 8), (128, 9), (64, 1), (16, 16)])
def test_minhash_band_keys_equal_reference(num_perm, rows, rng):
    sigs = rng.integers(0, 2**32, size=(30, num_perm), dtype=np.uint32)
    sigs[3] = 0xFFFFFFFF  # an all-EMPTY row
    docs = np.array([5, 0, 3, 29, 5, 17], dtype=np.int64)  # any order, repeats allowed
    bands = num_perm // rows
    seed_h = np.uint64(rng.integers(0, 2**63)) * np.uint64(2) + np.uint64(1)
    out = np.empty((bands, docs.size), dtype=np.uint64)  # band-major
    kl.fill_minhash_band_keys(sigs, docs, rows, seed_h, out)
    for t, d in enumerate(docs):
        want = R.minhash_band_keys([int(x) for x in sigs[d]], rows, bands, int(seed_h))
        assert [int(x) for x in out[:, t]] == want, f"row {t} (doc {d})"


@pytest.mark.parametrize("bits, families, bands", [(64, 1, 4), (64, 3, 7), (256, 1, 16), (256, 2, 37), (128, 1, 128)])
def test_simhash_band_keys_equal_reference(bits, families, bands, rng):
    words = families * bits // 64
    sigs = rng.integers(0, 2**63, size=(20, words), dtype=np.uint64) * np.uint64(2) + rng.integers(
        0, 2, size=(20, words), dtype=np.uint64)
    sigs[0] = np.uint64(2**64 - 1)
    docs = np.arange(20, dtype=np.int64)[::-1].copy()
    starts = band_starts(bits, bands)
    seed_h = np.uint64(rng.integers(0, 2**63))
    out = np.empty((docs.size, bands * families), dtype=np.uint64)
    kl.fill_simhash_band_keys(sigs, docs, bits, starts, seed_h, out)
    for t, d in enumerate(docs):
        want = R.simhash_band_keys([int(w) for w in sigs[d]], bits, starts.tolist(), int(seed_h))
        assert [int(x) for x in out[t]] == want, f"row {t} (doc {d})"


@pytest.mark.parametrize("bits, bands", [(256, 16), (256, 7), (64, 64), (128, 1), (64, 5)])
def test_band_starts_cover_the_bits_evenly(bits, bands):
    s = band_starts(bits, bands)
    widths = np.diff(s)
    assert s[0] == 0 and s[-1] == bits and widths.size == bands
    assert widths.max() - widths.min() <= 1 and np.all(np.diff(widths) <= 0), "first bands are the longer ones"


# ----------------------------------------------------------------------------- S-curve choice


def _simpson(f, lo: float, hi: float, n: int = 2000) -> float:
    xs = np.linspace(lo, hi, n + 1)
    ys = f(xs)
    h = (hi - lo) / n
    return float(h / 3 * (ys[0] + ys[-1] + 4 * ys[1:-1:2].sum() + 2 * ys[2:-1:2].sum()))


def _error(t, b, r, wfp, wfn, lo, hi):
    def p(s):
        return 1.0 - (1.0 - s**r) ** b

    fp = _simpson(p, lo, t)
    fn = _simpson(lambda s: 1.0 - p(s), t, hi)
    return wfp * fp + wfn * fn


@pytest.mark.parametrize(
    "threshold, n, wfp, wfn, lo, hi",
    [
        (0.5, 128, 0.5, 0.5, 0.0, 1.0),
        (0.8, 128, 0.1, 0.9, 0.0, 1.0),
        (0.8, 128, 0.5, 0.5, 0.0, 1.0),
        (0.9, 64, 0.1, 0.9, 0.0, 1.0),
        (0.7, 100, 0.3, 0.7, 0.0, 1.0),
        (simhash_bit_similarity(0.95), 256, 0.1, 0.9, 0.5, 1.0),
    ],
)
def test_s_curve_choice_is_the_grid_minimum(threshold, n, wfp, wfn, lo, hi):
    p = optimal_params(threshold, n, wfp, wfn, lo=lo, hi=hi)
    assert p.bands * p.rows <= n and p.bands >= 1 and p.rows >= 1
    grid = {(b, r): _error(threshold, b, r, wfp, wfn, lo, hi) for b in range(1, n + 1) for r in range(1, n // b + 1)}
    best = min(grid, key=grid.get)
    chosen = grid[(p.bands, p.rows)]
    # the library integrates with a 257-point trapezoid, we with 2001-point Simpson: allow the
    # difference of the two quadratures, nothing more
    tol = 1e-3 * grid[best] + 1e-6
    assert chosen <= grid[best] + tol, (
        f"t={threshold}: chose (b={p.bands}, r={p.rows}) with error {chosen:.6f}; grid minimum is "
        f"{best} with {grid[best]:.6f} (tolerance {tol:.2e})"
    )
    assert p.recall_at_threshold == pytest.approx(float(candidate_probability(threshold, p.bands, p.rows)))


def test_candidate_probability_formula():
    s = np.array([0.0, 0.3, 0.8, 1.0])
    assert np.allclose(candidate_probability(s, 20, 5), 1 - (1 - s**5) ** 20)
    assert candidate_probability(1.0, 3, 4) == 1.0 and candidate_probability(0.0, 3, 4) == 0.0


# ----------------------------------------------------------------------------- pigeonhole


@pytest.mark.parametrize("cosine, bits", [(0.95, 256), (0.9, 256), (0.99, 128), (0.8, 64), (0.999, 256)])
def test_hamming_radius_is_the_largest_passing_distance(cosine, bits):
    h = hamming_radius(cosine, bits)
    assert math.cos(math.pi * h / bits) >= cosine - 1e-12
    assert h == bits or math.cos(math.pi * (h + 1) / bits) < cosine


def _shares_band(sig_a, sig_b, bits, bands) -> bool:
    starts = band_starts(bits, bands)
    out = np.empty((2, bands), dtype=np.uint64)
    kl.fill_simhash_band_keys(np.stack([sig_a, sig_b]), np.arange(2, dtype=np.int64), bits, starts, np.uint64(7), out)
    return bool(np.any(out[0] == out[1]))


@SETTINGS
@given(data=st.data(), cosine=st.sampled_from([0.8, 0.9, 0.95, 0.98]), bits=st.sampled_from([64, 128, 256]))
def test_pigeonhole_pairs_within_b_minus_1_share_a_band(one_numba_thread, data, cosine, bits):
    p = pigeonhole_params(cosine, bits)
    b = p.bands
    assert hamming_radius(cosine, bits) <= b - 1, "every pair the verifier accepts must be within b-1"
    words = [data.draw(st.integers(0, 2**64 - 1)) for _ in range(bits // 64)]
    flips = data.draw(st.sets(st.integers(0, bits - 1), max_size=b - 1))
    other = list(words)
    for j in flips:
        other[j // 64] ^= 1 << (j % 64)
    a = np.array(words, dtype=np.uint64)
    c = np.array(other, dtype=np.uint64)
    assert _shares_band(a, c, bits, b), f"{len(flips)} flips <= b-1 = {b - 1} but no shared band"


def test_pigeonhole_bound_is_tight():
    # one flip in every band: b differing bits and no shared band
    bits, cosine = 256, 0.95
    b = pigeonhole_params(cosine, bits).bands
    a = np.zeros(bits // 64, dtype=np.uint64)
    c = a.copy()
    for s in band_starts(bits, b)[:-1]:
        c[s // 64] ^= np.uint64(1) << np.uint64(s % 64)
    assert not _shares_band(a, c, bits, b)


# ----------------------------------------------------------------------------- union-find and linking

GRAPHS = st.integers(1, 40).flatmap(
    lambda n: st.tuples(st.just(n), st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=60))
)


@SETTINGS
@given(graph=GRAPHS)
def test_union_find_components_equal_bfs(graph):
    n, edges = graph
    parent = np.arange(n, dtype=np.int64)
    ku.union_pairs(parent, np.array(edges, dtype=np.int64).reshape(-1, 2))
    out = np.empty(n, dtype=np.int64)
    ku.roots(parent, out)
    assert out.tolist() == R.components_bfs(n, edges), "labels must be the smallest member of each component"


@SETTINGS
@given(data=st.data(), n=st.integers(2, 40), n_keys=st.integers(1, 6), stride=st.integers(1, 3),
       window=st.integers(2, 5), new_start=st.integers(0, 40))
def test_bucket_linking_equals_bfs_over_shared_keys(one_numba_thread, data, n, n_keys, stride, window, new_start):
    """link_sorted with an always-accepting verifier joins exactly the pairs of the documented rule:
    within a run of equal keys (in stable sorted order), all pairs if the run has at most ``window``
    members, else each member with the next ``window - 1``; pairs of two old documents
    (< new_start) are skipped."""
    keys = np.array(data.draw(st.lists(st.integers(0, n_keys - 1), min_size=n * stride, max_size=n * stride)),
                    dtype=np.uint64).reshape(n, stride)
    # a key in column c only matches the same key in column c (as band keys are salted by band)
    keys = keys + np.arange(stride, dtype=np.uint64) * np.uint64(1000)
    docs = np.arange(n, dtype=np.int64)
    flat = keys.reshape(-1)
    perm = np.argsort(flat, kind="stable").astype(np.int64)
    parent = np.arange(n, dtype=np.int64)
    flags = np.zeros(n, dtype=np.uint8)
    counters = np.zeros(3, dtype=np.int64)
    # the accepting verifier reads none of its arrays: make_verifier fills them with dummies
    buckets = kl.Buckets(perm=perm, keys=flat[perm], docs=docs, stride=stride, window=window, new_start=new_start)
    verifier = make_verifier(kl.KIND_ACCEPT, BuildConfig(), auto=False)
    forest = kl.Forest(parent=parent, flags=flags, stage_bit=np.uint8(2), counters=counters)
    borderline = kl.Borderline(pairs=np.zeros((16, 2), np.int64), n_pairs=np.zeros(1, np.int64),
                               position=np.array([0, -1, -1], np.int64))
    kl.link_sorted(buckets, verifier, forest, borderline)
    out = np.empty(n, dtype=np.int64)
    ku.roots(parent, out)
    runs: dict = {}
    for pos in range(flat.size):  # stable sorted order = increasing flat position within a key
        runs.setdefault(int(flat[pos]), []).append(pos // stride)
    edges = []
    for members in runs.values():
        m = len(members)
        for x in range(m):
            for y in range(x + 1, m if m <= window else min(m, x + window)):
                a, b = members[x], members[y]
                if a != b and not (a < new_start and b < new_start):
                    edges.append((a, b))
    assert out.tolist() == R.components_bfs(n, edges)
    if new_start == 0:
        # consecutive members of a run are always compared, so windowing loses no component
        share = [(a, b) for a in range(n) for b in range(a + 1, n) if np.any(keys[a] == keys[b])]
        assert out.tolist() == R.components_bfs(n, share)
    merged_docs = {x for e in edges for x in e if out[e[0]] == out[e[1]]}
    assert set(np.flatnonzero(flags).tolist()) <= merged_docs
    assert counters[2] == n - len(set(out.tolist())), "one merge per component join"


@SETTINGS
@given(data=st.data(), n=st.integers(2, 40), n_keys=st.integers(1, 6), window=st.integers(2, 5),
       new_start=st.integers(0, 40), n_joins=st.integers(0, 30))
def test_mark_apart_marks_the_ends_of_the_pairs_a_scan_can_still_compare(one_numba_thread, data, n, n_keys, window,
                                                                        new_start, n_joins):
    """mark_apart (what a spilled build reads back before a group) marks exactly both ends of every
    pair the scan's rule examines (runs of equal keys, the window, new_start) whose documents lie
    in different components of the forest; a range of key positions ``lo .. hi`` (bucket bounds)
    restricts it to the buckets there, and ``gain`` counts each bucket's newly marked documents."""
    keys = np.array(data.draw(st.lists(st.integers(0, n_keys - 1), min_size=n, max_size=n)), dtype=np.uint64)
    perm = np.argsort(keys, kind="stable").astype(np.int64)
    docs = np.arange(n, dtype=np.int64)
    parent = np.arange(n, dtype=np.int64)
    joins = data.draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=n_joins))
    for a, b in joins:
        ra, rb = ku.find(parent, a), ku.find(parent, b)
        if ra != rb:
            ku.union_roots(parent, ra, rb)
    roots = np.empty(n, dtype=np.int64)
    ku.roots(parent, roots)
    ordered = keys[perm]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]]).tolist() + [n]
    i0 = data.draw(st.integers(0, len(starts) - 2))
    i1 = data.draw(st.integers(i0 + 1, len(starts) - 1))
    lo, hi = starts[i0], starts[i1]
    already = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    mark = already.copy()
    gain = np.zeros(n, dtype=np.int64)
    buckets = kl.Buckets(perm=perm, keys=ordered, docs=docs, stride=1, window=window, new_start=new_start)
    got = kl.mark_apart(buckets, lo, hi, parent, mark, gain)
    want = already.copy()
    want_gain = np.zeros(n, dtype=np.int64)
    for s_, e_ in zip(starts[i0:i1], starts[i0 + 1:i1 + 1]):
        members = perm[s_:e_].tolist()
        m = len(members)
        before = int(want.sum())
        for x in range(m):
            for y in range(x + 1, m if m <= window else min(m, x + window)):
                a, b = members[x], members[y]
                if a != b and not (a < new_start and b < new_start) and roots[a] != roots[b]:
                    want[a] = want[b] = True
        want_gain[s_] = int(want.sum()) - before
    assert mark.tolist() == want.tolist()
    assert gain.tolist() == want_gain.tolist()
    assert got == int(want.sum() - already.sum())
    after = np.empty(n, dtype=np.int64)
    ku.roots(parent, after)
    assert after.tolist() == roots.tolist(), "it only reads the forest (path halving keeps every root)"


@SETTINGS
@given(data=st.data(), m=st.integers(0, 60), n_docs=st.integers(1, 12), n_keys=st.integers(1, 6),
       window=st.integers(2, 6))
def test_window_pairs_are_the_pairs_the_scan_examines(data, m, n_docs, n_keys, window):
    """window_pairs (the Dask engine's bucket scan, which verifies elsewhere) forms the pairs of
    link_scan's rule: runs of equal keys, all pairs up to ``window`` rows, else each row with the
    next ``window - 1``, a document never with itself; packed ``a * n_docs + b`` in scan order.
    Oracle: a plain loop; and as many as link_scan counts as candidates when it rejects every pair."""
    keys = np.sort(np.array(data.draw(st.lists(st.integers(0, n_keys - 1), min_size=m, max_size=m)), dtype=np.uint64))
    docs = np.array(data.draw(st.lists(st.integers(0, n_docs - 1), min_size=m, max_size=m)), dtype=np.int64)
    want = []
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]).tolist() + [m] if m else [0]
    for s_, e_ in zip(starts[:-1], starts[1:]):
        size = e_ - s_
        for x in range(s_, e_):
            for y in range(x + 1, e_ if size <= window else min(e_, x + window)):
                if docs[x] != docs[y]:
                    want.append(int(docs[x]) * n_docs + int(docs[y]))
    got = kc.window_pairs(keys, docs, window, n_docs)
    assert got.dtype == np.int64 and got.tolist() == want
    cfg = BuildConfig()
    never = make_verifier(kl.KIND_MINHASH_ESTIMATE, cfg, auto=False, minhash=np.zeros((n_docs, 4), np.uint32))
    never = never._replace(agree_lo=10**6, agree_hi=10**6 + 1)  # every pair below the band: rejected
    forest = kl.Forest(np.arange(n_docs, dtype=np.int64), np.zeros(n_docs, np.uint8), np.uint8(1), np.zeros(3, np.int64))
    border = kl.Borderline(np.empty((1, 2), np.int64), np.zeros(1, np.int64), np.array([0, -1, -1], np.int64))
    buckets = kl.Buckets(perm=np.arange(m, dtype=np.int64), keys=keys, docs=docs, stride=1, window=window, new_start=0)
    assert kl.link_scan(buckets, never, forest, border, True)
    assert int(forest.counters[0]) == len(want)


def test_pair_agreements_count_the_slots_sig_agreement_counts(rng):
    """Signatures in two tables (the Dask engine's pairs meet where their documents are): the same
    count as sig_agreement over one table holding both."""
    sigs_a = rng.integers(0, 4, (30, 16)).astype(np.uint32)
    sigs_b = rng.integers(0, 4, (20, 16)).astype(np.uint32)
    rows_a, rows_b = rng.integers(0, 30, 500), rng.integers(0, 20, 500)
    out = np.empty(500, np.int64)
    kc.pair_agreements(sigs_a, rows_a, sigs_b, rows_b, out)
    both = np.concatenate([sigs_a, sigs_b])
    want = [kl.sig_agreement(both, np.zeros(0, np.int64), a, 30 + b) for a, b in zip(rows_a, rows_b)]
    assert out.tolist() == want and len(set(want)) > 3


# ----------------------------------------------------------------------------- what the build reports


def test_simhash_stage_reports_the_banding_it_uses(rng):
    from diversify import build
    from diversify.config import BuildConfig, SimHashConfig

    cfg = BuildConfig(simhash=SimHashConfig())
    res = build(vectors=rng.standard_normal((4, 8)), config=cfg)
    p = res.stats["lsh"]["simhash"]
    # S-curve bands are exactly `rows` bits wide (pigeonhole bands would cover every bit instead)
    assert p["band_widths"] == [p["rows"]]
    widths = np.full(p["bands"], p["rows"])
    s = simhash_bit_similarity(cfg.simhash.threshold)
    actual = 1.0 - float(np.prod(1.0 - s ** widths.astype(np.float64)))
    assert p["recall_per_family"] == pytest.approx(actual, abs=1e-9), (
        f"reported recall {p['recall_per_family']:.4f} for rows={p['rows']}, but bands are {sorted(set(widths.tolist()))} "
        f"bits wide: actual {actual:.4f}")
    # a pair is a candidate when any family collides: the reported recall is the one actually used
    fam = cfg.simhash.families
    assert fam == p["families"] == 2
    assert p["recall_at_threshold"] == pytest.approx(1.0 - (1.0 - actual) ** fam, abs=1e-9)


def test_minhash_stage_reports_the_banding_it_uses(rng):
    from diversify import build

    res = build(texts=["a b c d e f g", "a b c d e f g h"])
    p = res.stats["lsh"]["minhash"]
    assert p["bands"] * p["rows"] <= 128
    assert p["recall_at_threshold"] == pytest.approx(float(candidate_probability(0.8, p["bands"], p["rows"])))


# ----------------------------------------------------------------------------- the cutoff before the exact check


def _binomial_above(h: int, bits: int, q: float) -> float:
    """P(Binomial(bits, q) > h), summed term by term with exact binomial coefficients."""
    return math.fsum(math.comb(bits, k) * q**k * (1.0 - q) ** (bits - k) for k in range(h + 1, bits + 1))


@pytest.mark.parametrize("cosine", [0.5, 0.8, 0.9, 0.95, 0.99])
@pytest.mark.parametrize("bits", [64, 256, 512])
def test_hamming_cutoff_is_the_smallest_distance_with_a_tail_below_the_bound(cosine, bits):
    q = math.acos(cosine) / math.pi
    tail = 1e-12
    h = hamming_cutoff(cosine, bits, tail)
    assert _binomial_above(h, bits, q) <= tail * (1 + 1e-9)
    assert _binomial_above(h - 1, bits, q) > tail * (1 - 1e-9)
    assert hamming_radius(cosine, bits) < h < bits  # beyond the estimate's radius, short of every bit


def test_hamming_cutoff_grows_as_the_threshold_falls_and_the_tail_shrinks():
    cuts = [hamming_cutoff(c, 512) for c in (0.99, 0.95, 0.9, 0.8, 0.5)]
    assert cuts == sorted(cuts) and len(set(cuts)) == len(cuts)
    assert hamming_cutoff(0.9, 512, 1e-15) > hamming_cutoff(0.9, 512, 1e-6)


def test_pairs_at_the_threshold_stay_within_the_cutoff(rng):
    """Vectors at exactly cosine t under many independent hyperplane seeds: the Hamming distance of
    their 512-bit signatures never passes the cutoff, and sits well inside it on average."""
    from diversify.sketches.simhash import hamming_distance, simhash_vectors

    t, d = 0.9, 32
    a = rng.standard_normal((200, d))
    a /= np.linalg.norm(a, axis=1, keepdims=True)
    o = rng.standard_normal((200, d))
    o -= np.einsum("ij,ij->i", o, a)[:, None] * a
    o /= np.linalg.norm(o, axis=1, keepdims=True)
    b = t * a + math.sqrt(1 - t * t) * o  # cosine t to a, exactly up to rounding
    cut = hamming_cutoff(t, 512)
    dists = []
    for seed in range(20):
        sa = simhash_vectors(a, seed=seed, bits=256, families=2)
        sb = simhash_vectors(b, seed=seed, bits=256, families=2)
        dists += [hamming_distance(sa[i], sb[i]) for i in range(len(a))]
    assert max(dists) <= cut
    assert np.mean(dists) == pytest.approx(512 * math.acos(t) / math.pi, rel=0.05)


def test_exact_vector_check_skips_pairs_beyond_the_cutoff():
    """Two equal vectors whose signatures differ in every bit are rejected without the cosine
    (the cutoff decides); with signatures within it, the cosine accepts them."""
    from diversify.config import SimHashConfig

    cfg = BuildConfig(minhash=None, exact=False, simhash=SimHashConfig(threshold=0.9))
    vecs = np.full((2, 4), 0.5)
    keys = np.zeros(2, dtype=np.uint64)
    buckets = kl.Buckets(perm=np.arange(2, dtype=np.int64), keys=keys, docs=np.arange(2, dtype=np.int64), stride=1,
                         window=64, new_start=0)
    joined = {}
    for name, second in (("far", ~np.uint64(0)), ("near", np.uint64(0))):
        sigs = np.array([[0] * 8, [second] * 8], dtype=np.uint64)
        verifier = make_verifier(kl.KIND_SIMHASH_EXACT, cfg, auto=False, simhash=sigs, vectors=vecs)
        assert verifier.max_hamming == hamming_cutoff(0.9, 512)
        forest = kl.Forest(np.arange(2, dtype=np.int64), np.zeros(2, np.uint8), np.uint8(8), np.zeros(3, np.int64))
        border = kl.Borderline(np.empty((4, 2), np.int64), np.zeros(1, np.int64), np.array([0, -1, -1], np.int64))
        assert kl.link_scan(buckets, verifier, forest, border, False)
        joined[name] = forest.counters.tolist()
    assert joined == {"far": [1, 1, 0], "near": [1, 1, 1]}


@pytest.mark.parametrize("stride", [1, 3, 26])
def test_sorted_buckets_with_order_by_equal_lexsort(stride, rng):
    """Keys sorted with ties broken by ``order_by`` and then by position, as np.lexsort orders them."""
    from diversify.linking.keys import sorted_buckets

    n = 3000
    keymat = rng.integers(0, 40, size=(n, stride)).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    order_by = rng.integers(0, 5, size=n).astype(np.uint64)
    b = sorted_buckets(keymat, np.arange(n, dtype=np.int64), window=64, order_by=order_by)
    want = np.lexsort((np.repeat(order_by, stride), keymat.reshape(-1)))
    assert b.perm.dtype == np.int64
    assert np.array_equal(b.perm, want)
    assert np.array_equal(b.keys, keymat.reshape(-1)[want])


@SETTINGS
@given(seed=st.integers(0, 2**31), t=st.sampled_from([0.8, 0.9, 0.95]), gap=st.floats(-1e-3, 1e-3),
       dim=st.integers(2, 64))
def test_exact_vector_check_near_the_threshold_is_the_float64_cosine(one_numba_thread, seed, t, gap, dim):
    """A pair at cosine t + gap (either side, close) is joined exactly when its float64 cosine is
    >= t: the Hamming cutoff never decides a pair this close to the threshold."""
    from diversify.config import SimHashConfig
    from diversify.sketches.simhash import normalize_vectors, simhash_vectors

    rng = np.random.default_rng(seed)
    a = normalize_vectors(rng.standard_normal((1, dim)))[0]
    o = rng.standard_normal(dim)
    o -= (o @ a) * a
    o /= np.linalg.norm(o)
    c = min(1.0, t + gap)
    vecs = normalize_vectors(np.stack([a, c * a + math.sqrt(1 - c * c) * o]))
    cfg = BuildConfig(minhash=None, exact=False, simhash=SimHashConfig(threshold=t))
    sigs = simhash_vectors(vecs, seed=seed, bits=256, families=2, normalized=True)
    verifier = make_verifier(kl.KIND_SIMHASH_EXACT, cfg, auto=False, simhash=sigs, vectors=vecs)
    buckets = kl.Buckets(perm=np.arange(2, dtype=np.int64), keys=np.zeros(2, np.uint64),
                         docs=np.arange(2, dtype=np.int64), stride=1, window=64, new_start=0)
    forest = kl.Forest(np.arange(2, dtype=np.int64), np.zeros(2, np.uint8), np.uint8(8), np.zeros(3, np.int64))
    border = kl.Borderline(np.empty((4, 2), np.int64), np.zeros(1, np.int64), np.array([0, -1, -1], np.int64))
    assert kl.link_scan(buckets, verifier, forest, border, False)
    cos = float(sum(float(x) * float(y) for x, y in zip(vecs[0], vecs[1])))  # the kernel's order
    assert int(forest.counters[2]) == int(cos >= t - 1e-12), (cos, t)
