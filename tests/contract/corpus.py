"""A small seeded corpus with planted near-duplicate clusters, and a reference `select`.

Layout (all vectors unit-norm, so cosine, inner product and L2 rank identically):

* two big clusters (10 members each) right next to the query: the first fetch of a
  diversified top-k is dominated by them, so refill is needed;
* 25 small clusters (1-3 members) at random directions;
* 4 documents the artifact does not know (two of them near the query).

Ids are ints ``1000 + shuffled position`` (ids != row numbers, to catch label/id mix-ups).
The cluster map is the real :class:`diversify.ClusterMap` (cluster id = index of the first
member among the known ids, so cluster ids are sparse and differ from the planted labels).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np


class StubClusterMap:
    """Dict-backed stand-in with the ClusterMap read API (lookup, cluster_of, members, ...)."""

    def __init__(self, ids, cluster_ids, is_representative, fingerprint: str = "stub"):
        self._c = {i: int(c) for i, c in zip(ids, cluster_ids)}
        self._rep = {i: bool(r) for i, r in zip(ids, is_representative)}
        self.fingerprint = fingerprint
        self.n_docs = len(self._c)
        self._rep_of = {int(c): i for i, c in zip(ids, cluster_ids) if self._rep[i]}

    def lookup(self, ids):
        get = self._c.get
        return np.fromiter((get(i, -1) for i in ids), dtype=np.int64, count=len(ids))

    def cluster_of(self, doc_id):
        return self._c.get(doc_id, -1)

    def members(self, cluster_id):
        return [i for i, c in self._c.items() if c == cluster_id]

    def representative_of(self, cluster_id):
        return self._rep_of[cluster_id]


def make_cluster_map(ids, groups, *, fingerprint: str = "contract", stub: bool = False):
    """A ClusterMap over ``ids`` where equal ``groups`` labels share a cluster.

    The real :class:`diversify.ClusterMap` (cluster id = index of the cluster's first member,
    which is also its representative), or the dict-backed stub when ``stub=True``.
    """
    ids = list(ids)
    first: dict = {}
    cluster_ids = np.empty(len(ids), dtype=np.int64)
    rep = np.zeros(len(ids), dtype=bool)
    for j, g in enumerate(groups):
        if g not in first:
            first[g] = j
            rep[j] = True
        cluster_ids[j] = first[g]
    if stub:
        return StubClusterMap(ids, cluster_ids, rep, fingerprint)
    from diversify.artifact import ClusterMap

    n = len(ids)
    return ClusterMap.from_arrays(ids, cluster_ids, rep, np.zeros(n, dtype=np.uint8),
                                  np.zeros(n, dtype=np.uint32), config={}, fingerprint=fingerprint,
                                  seed=0, hash_scheme="", build_info={})


@dataclass
class Corpus:
    ids: list            # document ids (int), row order
    vectors: np.ndarray  # (n, d) float32, unit norm
    payloads: list       # one dict per row (the caller's: tests check they are never mutated)
    texts: list          # one short text per row (for framework documents)
    cluster_of: dict     # id -> cluster id, for ids the artifact knows
    is_representative: dict
    query: np.ndarray    # (d,) float32, unit norm
    cluster_map: Any = None
    ranked_ids: list = field(default_factory=list)  # exact ranking of all ids for `query`

    @property
    def known_ids(self) -> list:
        return [i for i in self.ids if i in self.cluster_of]

    def rank(self, query: Optional[np.ndarray] = None) -> list:
        q = self.query if query is None else np.asarray(query, dtype=np.float64)
        scores = self.vectors.astype(np.float64) @ q
        order = sorted(range(len(self.ids)), key=lambda j: (-scores[j], j))
        return [self.ids[j] for j in order]

    def distinct_available(self, n: int = 1) -> int:
        """How many hits a diversified search over the whole corpus can return."""
        return len(oracle_select(self.ranked_ids, self.cluster_of, k=10**9, n=n))

    def snapshot(self):
        return copy.deepcopy(self.payloads), self.vectors.copy()


def _unit(x):
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def make_corpus(seed: int = 7, *, dim: int = 16) -> Corpus:
    rng = np.random.default_rng(seed)
    q = _unit(rng.normal(size=dim))
    rows, cluster, _unknown = [], [], []
    # two big clusters right next to the query
    for c in range(2):
        center = _unit(q + 0.15 * _unit(rng.normal(size=dim)))
        for _ in range(10):
            rows.append(_unit(center + 0.02 * rng.normal(size=dim)))
            cluster.append(c)
    # 25 small clusters elsewhere
    for c in range(2, 27):
        center = _unit(rng.normal(size=dim))
        for _ in range(int(rng.integers(1, 4))):
            rows.append(_unit(center + 0.02 * rng.normal(size=dim)))
            cluster.append(c)
    # 4 unknown documents, two near the query
    for j in range(4):
        base = q + 0.3 * _unit(rng.normal(size=dim)) if j < 2 else rng.normal(size=dim)
        rows.append(_unit(base))
        cluster.append(None)
    n = len(rows)
    perm = rng.permutation(n)
    ids = [1000 + int(p) for p in perm]
    vectors = np.stack(rows).astype(np.float32)
    known = [i for i, c in zip(ids, cluster) if c is not None]
    cm = make_cluster_map(known, [c for c in cluster if c is not None])
    cluster_of = {i: int(c) for i, c in zip(known, cm.lookup(known).tolist())}
    rep = {i: i == cm.representative_of(cluster_of[i]) for i in known}
    payloads = [{"title": f"doc {i}", "tags": ["t", str(i % 3)]} for i in ids]
    texts = [f"document {i} of cluster {cluster_of.get(i, 'none')}" for i in ids]
    corpus = Corpus(ids, vectors, payloads, texts, cluster_of, rep, q, cm)
    corpus.ranked_ids = corpus.rank()
    return corpus


def oracle_select(ranked_ids, cluster_of, *, k: int, n: int = 1, unknown: str = "own",
                  exclude_clusters=()) -> list:
    """Slow, obvious reference: walk the ranking, keep a hit while its cluster has room."""
    kept, counts = [], {}
    for i in ranked_ids:
        c = cluster_of.get(i)
        if c is None:
            if unknown == "drop":
                continue
            c = ("own", i)
        elif c in exclude_clusters:
            continue
        if counts.get(c, 0) >= n:
            continue
        if len(kept) >= k:
            break
        counts[c] = counts.get(c, 0) + 1
        kept.append(i)
    return kept
