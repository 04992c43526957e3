"""The Dask engine's purity sample reproduces numpy's ``Generator.choice`` with ``p`` (what
:func:`diversify.clusters.purity.sampled_purity` draws with): a cumulative sum carried across
partitions, normalized by its end, searched with the same uniforms, picks the same clusters."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from diversify.engines.dask.purity import _carry, _picks, _segment, _weights, choice_positions


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31), n=st.integers(1, 400), cuts=st.integers(1, 6))
def test_carried_cumulative_sums_pick_what_generator_choice_picks(seed, n, cuts):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 12, n)
    sizes[rng.random(n) < 0.5] = 1  # singletons: no pairs, never picked
    weight = sizes.astype(np.float64) * (sizes - 1) / 2
    total = weight.sum()
    if total == 0:
        return
    k = int(min(1000, total))
    want = np.random.default_rng([seed, 7]).choice(n, size=k, p=weight / total)
    # the partitions' clusters (those of two or more) in label order, a carry between them
    labels = np.flatnonzero(sizes >= 2)
    bounds = np.sort(rng.integers(0, labels.size + 1, cuts - 1)).tolist()
    pieces = [(labels[a:b], sizes[labels[a:b]], np.zeros(b - a, np.int64))
              for a, b in zip([0] + bounds, bounds + [labels.size])]
    parts = [_weights(p) for p in pieces]
    assert sum(p["pairs"] for p in parts) == int(total)
    carries = [0.0]
    for w in parts:
        carries.append(_carry(w, carries[-1], float(int(total))))
    draws = np.random.default_rng([seed, 7])
    uniforms = draws.random(k)
    segments = [_segment(w, c, float(int(total))) for w, c in zip(parts, carries)]
    assert np.array_equal(labels[choice_positions(carries[-1], uniforms, segments)], want)
    got = np.concatenate([_picks(w, c, float(int(total)), carries[-1], uniforms) for w, c in zip(parts, carries)])
    got = got[np.argsort(got[:, 0])]
    assert np.array_equal(got[:, 0], np.arange(k)), "every draw lands in exactly one partition"
    assert np.array_equal(got[:, 1], want)
    assert np.array_equal(got[:, 2], sizes[want])
