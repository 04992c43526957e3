"""The report's representative of each document (diversify.clusters.report.representative_of) is
the one a dict from cluster id to representative gives, for any ids, with or without a table."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from diversify.clusters.report import representative_of


def _by_dict(cluster_ids: np.ndarray, reps: np.ndarray) -> list:
    rep_of = dict(zip(cluster_ids[reps].tolist(), reps.tolist()))  # the later of two wins
    return [rep_of.get(c, -1) for c in cluster_ids.tolist()]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(-5, 40), st.booleans()), max_size=50), st.sampled_from([1, 10**9]))
def test_the_representative_a_dict_gives(rows, scale):
    """Small ids take the table, ids far beyond the document count (or negative) the sorted search;
    clusters without a representative get -1, two representatives of one cluster the later."""
    cluster_ids = np.array([c * scale for c, _ in rows], dtype=np.int64)
    reps = np.flatnonzero(np.array([r for _, r in rows], dtype=bool))
    got = representative_of(cluster_ids, reps)
    assert got.dtype == np.int64 and got.tolist() == _by_dict(cluster_ids, reps)


def test_a_million_documents():
    rng = np.random.default_rng(4)
    cluster_ids = np.sort(rng.integers(0, 1_000_000, 1_000_000))
    reps = np.unique(np.searchsorted(cluster_ids, cluster_ids))  # the first member of each cluster
    assert representative_of(cluster_ids, reps).tolist() == _by_dict(cluster_ids, reps)
