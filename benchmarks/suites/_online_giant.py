"""The online suite's giant-cluster scenario: the wrapper's own work per query when the store's
results hold members of one big cluster (boilerplate: a licence header, a footer).

Setup, per cluster size (1,000 members; 250,000 to show the work does not grow with it): str
ids ``doc-0000000``...; a real :class:`~diversify.ClusterMap` (``from_arrays``: the big cluster,
30% of the rest in pairs and triples, the others singletons), saved and loaded memory-mapped;
64-d vectors where the big cluster's members sit around one direction (a third of them exact
copies of one vector, so their scores tie) and every other document has its own direction (a
pair or triple = one direction plus noise, or for half of them exact copies). Each query mixes that direction, with a weight
drawn per query (uniform in [0, 0.6]), into a random document's direction, so its top-50
holds from none to all members of the big cluster (about 20 on average, and some 40% of the
queries need a refetch at the default fetch_k of 25).

The store's answers are replayed: each query's top ``REPLAY_DEPTH`` from a ``NumpyStore``,
computed once; the replay store filters ``exclude_ids`` and cuts at ``k`` (its time is taken
out of the measurement, like the store's own search time in the other rows). What is left is
the wrapper's work: convert hits, look up cluster ids, select, refetch rounds (exclusion
lists), cursor, counters.
"""

from __future__ import annotations

import gc
import os
import time

import numpy as np

from ._online_common import DIM, N_HITS, N_QUERIES, K

REPLAY_DEPTH = 1200  # deeper than any refetch asks for (fetch_k 25, 3 rounds: 25 + 50 + 100 + 200)
SIZES = (1_000, 250_000)


def _labels(n: int, big: int, rng) -> np.ndarray:
    """Planted groups: rows [0, big) are the big cluster; the rest 30% in pairs/triples."""
    labels = np.arange(n, dtype=np.int64)
    labels[:big] = 0
    j = big
    while j < n - 3:
        if rng.random() < 0.3:
            m = int(rng.integers(2, 4))
            labels[j:j + m] = j
            j += m
        else:
            j += 1
    return labels


def _vectors(labels: np.ndarray, big: int, rng) -> tuple[np.ndarray, np.ndarray]:
    n = len(labels)
    own = rng.standard_normal((n, DIM)).astype(np.float32)
    base = own[labels]  # a group shares its first member's direction
    noise = 0.05 * rng.standard_normal((n, DIM)).astype(np.float32)
    exact = (labels % 2 == 0)[:, None]  # half of the groups are exact copies: their scores tie
    vec = np.where(exact & (labels != np.arange(n))[:, None], base, base + noise)
    center = rng.standard_normal(DIM).astype(np.float32)
    center /= np.linalg.norm(center)
    spread = rng.standard_normal((big, DIM)).astype(np.float32)
    spread /= np.linalg.norm(spread, axis=1, keepdims=True)
    vec[:big] = center + 0.35 * spread
    vec[: big // 3] = center + 0.2 * spread[0]  # exact copies, nearer the centre: equal scores
    vec /= np.linalg.norm(vec, axis=1, keepdims=True)
    return vec, center


def scenario(workdir: str, big: int, *, seed: int = 5) -> dict:
    """The artifact (memory-mapped), the store, the queries and their replayed rankings."""
    import diversify
    from diversify import ClusterMap
    from diversify.stores import NumpyStore

    rng = np.random.default_rng(seed)
    n = max(20_000, big + 20_000)
    labels = _labels(n, big, rng)
    perm = rng.permutation(n)  # the big cluster's members spread over the id space
    ids = [f"doc-{int(p):07d}" for p in perm]
    first: dict = {}
    cids = np.empty(n, dtype=np.int64)
    rep = np.zeros(n, dtype=bool)
    for j, g in enumerate(labels.tolist()):
        if g not in first:
            first[g] = j
            rep[j] = True
        cids[j] = first[g]
    path = os.path.join(workdir, f"giant-{big}.dvf")
    ClusterMap.from_arrays(ids, cids, rep, np.zeros(n, np.uint8), np.zeros(n, np.uint32), config={},
                           fingerprint=f"giant-{big}", seed=seed, hash_scheme="bench", build_info={}).save(path)
    cm = diversify.load(path)
    vectors, center = _vectors(labels, big, rng)
    store = NumpyStore(vectors, ids)
    queries, rankings, store_ns = [], [], []
    big_ids = set(ids[:big])
    for j in rng.choice(np.arange(big, n), size=N_QUERIES, replace=False).tolist():
        w = float(rng.uniform(0.0, 0.6))
        q = vectors[j] + w * center + 0.2 * rng.standard_normal(DIM).astype(np.float32) / np.sqrt(DIM)
        q = (q / np.linalg.norm(q)).astype(np.float32)
        t0 = time.perf_counter_ns()
        store.search(q, N_HITS)
        store_ns.append(time.perf_counter_ns() - t0)
        queries.append(q)
        rankings.append(store.search(q, REPLAY_DEPTH))
    in_top = [sum(h.id in big_ids for h in r[:N_HITS]) for r in rankings]
    ties = [sum(1 for a, b in zip(r[:N_HITS], r[1:N_HITS]) if a.score == b.score) for r in rankings]
    return {"cm": cm, "rankings": rankings, "n_docs": n, "big": big, "store_search_ns": store_ns,
            "info": {"n_docs": n, "big_cluster": big, "n_clusters": cm.n_clusters,
                     "big_members_in_top50": {"mean": round(float(np.mean(in_top)), 1), "min": int(min(in_top)),
                                              "max": int(max(in_top))},
                     "tied_neighbours_in_top50_mean": round(float(np.mean(ties)), 1)}}


class ReplayStore:
    """Replays each query's precomputed ranking: filters ``exclude_ids``, cuts at ``k``; times itself
    (wall and thread CPU) so that its own work can be taken out."""

    supports_exclude = True
    scores_are = "similarity"

    def __init__(self, rankings):
        self.rankings = rankings
        self.wall = self.cpu = 0
        self.exclude_lens: list[int] = []

    def search(self, query, k, exclude_ids=None):
        w0, c0 = time.perf_counter_ns(), time.thread_time_ns()
        hits = self.rankings[query]
        if exclude_ids:
            self.exclude_lens.append(len(exclude_ids))
            ex = set(exclude_ids)
            hits = [h for h in hits if h.id not in ex]
        out = hits[:k]
        self.cpu += time.thread_time_ns() - c0
        self.wall += time.perf_counter_ns() - w0
        return out


def _pct(a, q) -> float:
    return round(float(np.percentile(np.asarray(a, dtype=np.float64), q)) / 1000.0, 1)


def measure(sc: dict, passes: int) -> dict:
    """Per query, ``Diversifier(cm, k=10).wrap(replay)`` minus the replay's own time: wall and CPU."""
    from diversify import Diversifier

    store = ReplayStore(sc["rankings"])
    d = Diversifier(sc["cm"], k=K, max_per_cluster=1)
    search = d.wrap(store)
    nq = len(sc["rankings"])
    for q in range(nq):  # warm-up (also fills the artifact's page cache)
        search(q)
    wall = np.empty(nq * passes, dtype=np.int64)
    cpu = np.empty_like(wall)
    store.exclude_lens.clear()
    pc, tt = time.perf_counter_ns, time.thread_time_ns
    refetched = short = i = 0
    gc.collect()
    gc.disable()
    try:
        for _ in range(passes):
            for q in range(nq):
                sw, sc_ = store.wall, store.cpu
                w0, c0 = pc(), tt()
                res = search(q)
                c1, w1 = tt(), pc()
                refetched += res.rounds > 0
                short += res.short
                wall[i] = (w1 - w0) - (store.wall - sw)
                cpu[i] = (c1 - c0) - (store.cpu - sc_)
                i += 1
    finally:
        gc.enable()
    st = d.stats()
    lens = store.exclude_lens or [0]
    # each query's median over the passes: what the code costs on that input, free of one-off interference
    per_query = np.median(cpu.reshape(passes, nq), axis=0)
    return {"queries": int(wall.size), "wall_p50_us": _pct(wall, 50), "wall_p99_us": _pct(wall, 99),
            "cpu_p50_us": _pct(cpu, 50), "cpu_p99_us": _pct(cpu, 99),
            "cpu_per_query_median_p50_us": _pct(per_query, 50), "cpu_per_query_median_p99_us": _pct(per_query, 99),
            "backend_calls_mean": round(st["backend_calls"] / st["queries"], 2),
            "queries_refetched_share": round(refetched / wall.size, 3),
            "refetch_rounds_per_query": round(st["refetch_rounds"] / st["queries"], 3),
            "short_share": round(short / wall.size, 3),
            "exclude_ids_len_mean": round(float(np.mean(lens)), 1), "exclude_ids_len_max": int(max(lens))}


def giant(workdir: str, passes: int, sizes=SIZES, rounds: int = 3) -> dict:
    """Every size: setup info, the store's own latency, and the best of ``rounds`` measurements."""
    from ..env import loadavg
    from ..paths import log

    out = {}
    for big in sizes:
        log(f"giant cluster {big:,}: setup")
        sc = scenario(workdir, big)
        runs = []
        for r in range(rounds):
            log(f"giant cluster {big:,}: round {r + 1}/{rounds} (load {loadavg()})")
            runs.append({"loadavg": loadavg(), **measure(sc, passes)})
        best = {key: min(x[key] for x in runs) for key in ("wall_p50_us", "wall_p99_us", "cpu_p50_us", "cpu_p99_us",
                                                             "cpu_per_query_median_p50_us",
                                                             "cpu_per_query_median_p99_us")}
        out[str(big)] = {**sc["info"], "store_search_50_p50_us": _pct(sc["store_search_ns"], 50),
                         "store_search_50_p99_us": _pct(sc["store_search_ns"], 99),
                         "best_of_rounds": best, "rounds": runs}
        sc["cm"] = None
    return out
