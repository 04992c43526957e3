"""The filter contract: a user's filter holds on every result, refills included.

A tenant / access-control filter must apply to every call a refill makes, composed (AND) with
the exclusion of what was already seen. :func:`make_tenant_corpus` plants near-duplicate clusters
whose members are spread over three tenants, next to each of four queries, so that a filtered,
diversified top-k needs refills on every query; :data:`SHAPES` are the filters tried (equality,
membership, an OR of ANDs), written once as a small tree and rendered into each store's and
framework's own filter language by the test cases (``tests/integration/test_filters_contract.py``).

:func:`check_run` is the assertion every case makes: no returned id violates the filter, no
cluster repeats, the answer is as long as the filtered corpus allows (never short and "exhausted"
while more matching documents exist), it equals the reference selection over the filtered
ranking when the store is exact, and the queries did refill (else the check could not fail).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .corpus import make_cluster_map, oracle_select

TENANTS = ("a", "b", "c")

# A filter is a tree: ("eq", field, value) | ("in", field, [values]) | ("and", [trees]) | ("or", [trees]).
SHAPES: dict[str, tuple] = {
    "eq": ("eq", "tenant", "a"),
    "in": ("in", "tenant", ["a", "c"]),
    "nested": ("or", [("and", [("eq", "tenant", "a"), ("in", "level", [0, 1])]),
                      ("and", [("eq", "tenant", "c"), ("in", "level", [2, 3])])]),
}


def holds(tree: tuple, meta: dict) -> bool:
    """Does a document with metadata ``meta`` satisfy ``tree``?"""
    op = tree[0]
    if op == "eq":
        return meta.get(tree[1]) == tree[2]
    if op == "in":
        return meta.get(tree[1]) in tree[2]
    if op == "and":
        return all(holds(t, meta) for t in tree[1])
    if op == "or":
        return any(holds(t, meta) for t in tree[1])
    raise ValueError(f"unknown filter node {op!r}")


@dataclass
class TenantCorpus:
    ids: list              # int document ids, row order
    vectors: np.ndarray    # (n, d) float32, unit norm
    metas: list            # {"doc_id", "tenant", "level"} per row
    texts: list            # unique text per row (framework documents; an embedding table maps it back)
    queries: np.ndarray    # (4, d) float32
    cluster_of: dict       # id -> cluster id for the ids the artifact knows
    cluster_map: Any

    def meta_of(self, doc_id) -> dict:
        return self.metas[self._row[doc_id]]

    def __post_init__(self) -> None:
        self._row = {i: j for j, i in enumerate(self.ids)}

    def ranking(self, q: int) -> list:
        scores = self.vectors.astype(np.float64) @ self.queries[q].astype(np.float64)
        order = sorted(range(len(self.ids)), key=lambda j: (-scores[j], j))
        return [self.ids[j] for j in order]

    def expected(self, tree: tuple, q: int, k: int) -> list:
        allowed = [i for i in self.ranking(q) if holds(tree, self.meta_of(i))]
        return oracle_select(allowed, self.cluster_of, k=k)


def _unit(x):
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def make_tenant_corpus(seed: int = 3, *, dim: int = 16) -> TenantCorpus:
    """4 queries; next to each, 6 clusters of 36 near-duplicates spread evenly over the tenants and
    levels (so every filter shape leaves 6 near-duplicates of each); 90 small clusters and 6
    unknown documents elsewhere. ~1,060 documents."""
    rng = np.random.default_rng(seed)
    queries = _unit(rng.normal(size=(4, dim)))
    rows, groups, metas = [], [], []
    label = 0
    for q in queries:
        for _ in range(6):
            center = _unit(q + 0.12 * _unit(rng.normal(size=dim)))
            for m in range(36):
                rows.append(_unit(center + 0.015 * rng.normal(size=dim)))
                groups.append(label)
                metas.append({"tenant": TENANTS[m % 3], "level": (m // 3) % 4})
            label += 1
    for _ in range(90):  # small clusters, some of them near a query
        base = queries[int(rng.integers(0, 4))] + 0.6 * _unit(rng.normal(size=dim)) if rng.random() < 0.5 \
            else rng.normal(size=dim)
        center = _unit(base)
        for _ in range(int(rng.integers(1, 4))):
            rows.append(_unit(center + 0.015 * rng.normal(size=dim)))
            groups.append(label)
            metas.append({"tenant": TENANTS[int(rng.integers(0, 3))], "level": int(rng.integers(0, 4))})
        label += 1
    for _ in range(6):  # unknown to the artifact
        rows.append(_unit(queries[int(rng.integers(0, 4))] + 0.5 * _unit(rng.normal(size=dim))))
        groups.append(None)
        metas.append({"tenant": TENANTS[int(rng.integers(0, 3))], "level": int(rng.integers(0, 4))})
    n = len(rows)
    perm = rng.permutation(n)
    ids = [5000 + int(p) for p in perm]
    for i, m in zip(ids, metas):
        m["doc_id"] = i
    known = [i for i, g in zip(ids, groups) if g is not None]
    cm = make_cluster_map(known, [g for g in groups if g is not None], fingerprint="tenants")
    cluster_of = {i: int(c) for i, c in zip(known, cm.lookup(known).tolist())}
    texts = [f"text of document {i}" for i in ids]
    return TenantCorpus(ids, np.stack(rows).astype(np.float32), metas, texts, queries, cluster_of, cm)


@dataclass
class Run:
    """One diversified query through a case: the ids returned, in order, and the store calls made."""

    ids: list
    backend_calls: int


def violations(corpus: TenantCorpus, tree: tuple, runs: list) -> tuple[int, int]:
    """(results violating ``tree``, results) over ``runs``."""
    bad = sum(1 for r in runs for i in r.ids if not holds(tree, corpus.meta_of(i)))
    return bad, sum(len(r.ids) for r in runs)


def check_run(corpus: TenantCorpus, tree: tuple, runs: list, *, k: int, exact: bool, label: str) -> None:
    """The contract (see the module docstring); ``runs[q]`` answers query ``q``."""
    bad, total = violations(corpus, tree, runs)
    print(f"filter-contract {label}: {bad} of {total} results violate the filter")
    assert bad == 0, f"{label}: {bad} of {total} results violate the user's filter"
    for q, run in enumerate(runs):
        clusters = [corpus.cluster_of.get(i, ("own", i)) for i in run.ids]
        assert len(set(run.ids)) == len(run.ids), f"{label} q{q}: duplicate ids {run.ids}"
        assert len(set(clusters)) == len(clusters), f"{label} q{q}: a cluster repeats: {run.ids}"
        expected = corpus.expected(tree, q, k)
        assert len(run.ids) == len(expected), \
            f"{label} q{q}: {len(run.ids)} results where the filtered corpus has {len(expected)} (k={k})"
        if exact:
            assert run.ids == expected, f"{label} q{q}: got {run.ids}, expected {expected}"
    assert any(r.backend_calls >= 2 for r in runs), \
        f"{label}: no query refilled ({[r.backend_calls for r in runs]}), so this case checks nothing"
