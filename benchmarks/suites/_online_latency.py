"""The online suite's clocks: latency per call (wall and CPU), redundancy, backend calls."""

from __future__ import annotations

import gc
import time

import numpy as np

from ..env import loadavg
from ..paths import log
from ._online_common import BAR_P99_US, ERF_THRESHOLD, MMR_LAMBDA, N_HITS, K, redundancy


def _pct(samples_ns, q):
    return float(np.percentile(np.asarray(samples_ns, dtype=np.float64), q)) / 1000.0


def summary(samples_ns) -> dict:
    a = np.asarray(samples_ns, dtype=np.float64)
    return {"calls": int(a.size), "p50_us": round(_pct(a, 50), 2), "p99_us": round(_pct(a, 99), 2),
            "mean_us": round(float(a.mean()) / 1000.0, 2), "over_1ms_share": round(float((a > 1e6).mean()), 4)}


def blas_threads(threads=None):
    """Get (and with ``threads``, set) numpy's OpenBLAS thread count via its exported C API.

    Best effort: None when the library or symbol is not found (e.g. MKL or Accelerate)."""
    import ctypes

    try:
        with open("/proc/self/maps", encoding="utf-8") as f:
            libs = sorted({ln.split()[-1] for ln in f if "openblas" in ln.lower() and ln.split()[-1].startswith("/")})
    except OSError:
        return None
    for path in libs:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for get, put in (("scipy_openblas_get_num_threads64_", "scipy_openblas_set_num_threads64_"),
                         ("openblas_get_num_threads64_", "openblas_set_num_threads64_"),
                         ("openblas_get_num_threads", "openblas_set_num_threads")):
            if hasattr(lib, get) and hasattr(lib, put):
                if threads is not None:
                    getattr(lib, put)(int(threads))
                return int(getattr(lib, get)())
    return None


def time_calls(calls, passes, warm_passes=2, clock=time.perf_counter_ns):
    """Time each zero-arg callable in ``calls``, ``passes`` times over, with gc off.

    Returns per-call samples in ns (``clock`` around each call: wall clock by default,
    ``time.thread_time_ns`` for CPU time, which leaves out time the thread was descheduled)."""
    for _ in range(warm_passes):
        for c in calls:
            c()
    out = np.empty(len(calls) * passes, dtype=np.int64)
    i = 0
    gc.collect()
    gc.disable()
    try:
        for _ in range(passes):
            for c in calls:
                t0 = clock()
                c()
                out[i] = clock() - t0
                i += 1
    finally:
        gc.enable()
    return out


class TimedStore:
    """Forwards to a store and accumulates the time spent inside its search."""

    supports_exclude = True

    def __init__(self, store):
        self._store = store
        self.scores_are = store.scores_are
        self.ns = 0

    def search(self, query, k, exclude_ids=None):
        t0 = time.perf_counter_ns()
        r = self._store.search(query, k, exclude_ids)
        self.ns += time.perf_counter_ns() - t0
        return r


class ReplayStore:
    """Returns each query's precomputed top-50 (minus excluded ids): a store that costs ~nothing,
    so what is left is the wrapper's own work without the cache pollution of a real search."""

    supports_exclude = True
    scores_are = "similarity"

    def __init__(self, queries, hits):
        self._by_query = {id(q): hs for q, hs in zip(queries, hits)}

    def search(self, query, k, exclude_ids=None):
        hs = self._by_query[id(query)]
        if exclude_ids:
            ex = set(exclude_ids)
            hs = [h for h in hs if h.id not in ex]
        return hs[:k]


def wrap_added_ns(s, passes, store=None):
    """Per query: wall time of ``Diversifier.wrap(store)`` minus the time inside the store's search."""
    from diversify import Diversifier

    ts = TimedStore(s["store"] if store is None else store)
    search = Diversifier(s["cm"], k=K, max_per_cluster=1).wrap(ts)
    qs = s["queries"]
    for q in qs:  # warm-up
        search(q)
    out = np.empty(len(qs) * passes, dtype=np.int64)
    store_ns = np.empty_like(out)
    pc = time.perf_counter_ns
    i = 0
    gc.collect()
    gc.disable()
    try:
        for _ in range(passes):
            for q in qs:
                before = ts.ns
                t0 = pc()
                search(q)
                t1 = pc()
                store_ns[i] = ts.ns - before
                out[i] = (t1 - t0) - store_ns[i]
                i += 1
    finally:
        gc.enable()
    return out, store_ns


def peers(s):
    """(erf_call, mmr_call) on the setup's hits, made once."""
    if "peers" not in s:
        from ..peers.langchain import filters

        vector_of_text = {t: s["vectors"][s["row"][i]].tolist() for i, t in s["texts"].items()}
        s["peers"] = filters(s["hits"], s["queries"], s["texts"], vector_of_text, k=K, erf_threshold=ERF_THRESHOLD,
                             mmr_lambda=MMR_LAMBDA)
    return s["peers"]


def _calls(s):
    from diversify import select

    cm, hits = s["cm"], s["hits"]
    cids = [cm.lookup([h.id for h in hs]) for hs in hits]
    lookup = cm.lookup
    return {"select": [(lambda hs=hs, c=c: select(hs, c, k=K)) for hs, c in zip(hits, cids)],
            "lookup": [(lambda hs=hs: lookup([h.id for h in hs])) for hs in hits],
            "lookup_select": [(lambda hs=hs: select(hs, lookup([h.id for h in hs]), k=K)) for hs in hits],
            "timer_overhead": [(lambda: None) for _ in hits]}


def _wrap_rows(s, r: dict, passes: int, peer_passes: int) -> None:
    added, store_ns = wrap_added_ns(s, max(1, peer_passes))
    r["wrap_minus_store"] = summary(added)
    r["wrap_store_search"] = summary(store_ns)
    r["blas_threads"] = blas_threads()
    if r["blas_threads"] is not None and r["blas_threads"] > 1:
        # OpenBLAS workers spin after the store's matrix-vector product and compete with the
        # Python work that follows on a 2-CPU machine; the same with one BLAS thread:
        blas_threads(1)
        try:
            r["wrap_minus_store_blas1"] = summary(wrap_added_ns(s, max(1, peer_passes))[0])
        finally:
            blas_threads(r["blas_threads"])
    r["wrap_replay_minus_store"] = summary(wrap_added_ns(s, passes // 5 or 1, ReplayStore(s["queries"], s["hits"]))[0])


def latency_round(s, passes: int, peer_passes: int) -> dict:
    calls = _calls(s)
    erf_call, mmr_call = peers(s)
    r = {"loadavg_start": loadavg()}
    r["timer_overhead"] = summary(time_calls(calls["timer_overhead"], passes))
    for name in ("select", "lookup", "lookup_select"):
        t = time_calls(calls[name], passes)
        r[name] = summary(t)
        # the code's own cost per input: median over the passes of each hit list; the slowest one
        per_input = np.median(t.reshape(passes, len(calls[name])), axis=0) / 1000.0
        r[name]["slowest_input_median_us"] = round(float(per_input.max()), 2)
    _wrap_rows(s, r, passes, peer_passes)
    n = len(s["hits"])
    r["erf"] = summary(time_calls([(lambda j=j: erf_call(j)) for j in range(n)], peer_passes))
    r["mmr"] = summary(time_calls([(lambda j=j: mmr_call(j)) for j in range(n)], peer_passes))
    # CPU time of the thread (descheduled time left out): the code's own tail on a shared machine
    for name in ("timer_overhead", "select", "lookup", "lookup_select"):
        r[name + "_cpu"] = summary(time_calls(calls[name], passes // 5 or 1, clock=time.thread_time_ns))
    r["loadavg_end"] = loadavg()
    return r


def latency(s, repeats: int, passes: int, peer_passes: int) -> dict:
    rounds = []
    for i in range(repeats):
        log(f"latency round {i + 1}/{repeats} (load {loadavg()})")
        rounds.append(latency_round(s, passes, peer_passes))
    keys = [k for k in rounds[0] if isinstance(rounds[0][k], dict) and all(k in r for r in rounds)]
    return {"k": K, "hits": N_HITS, "passes": passes, "peer_passes": peer_passes, "rounds": rounds,
            "best_of_rounds": {k: {"p50_us": min(r[k]["p50_us"] for r in rounds),
                                   "p99_us": min(r[k]["p99_us"] for r in rounds)} for k in keys},
            "bar_p99_us": BAR_P99_US}


def _method_quality(s, fn) -> dict:
    hits, cluster_of = s["hits"], s["cluster_of"]
    lens, red, red_pl, best_copy, kept_total = [], [], [], 0, 0
    for j in range(len(hits)):
        ids = list(fn(j))
        if all(i in s["planted_of"] for i in ids):
            red_pl.append(redundancy(ids, s["planted_of"]))
        first_rank = {}
        for r, h in enumerate(hits[j]):
            first_rank.setdefault(cluster_of[h.id], r)
        rank = {h.id: r for r, h in enumerate(hits[j])}
        lens.append(len(ids))
        red.append(redundancy(ids, cluster_of))
        for i in ids:
            if i in rank:  # wrap may return hits beyond the first 50 (refetch)
                kept_total += 1
                best_copy += rank[i] == first_rank[cluster_of[i]]
    return {"returned_mean": round(float(np.mean(lens)), 2), "returned_min": int(np.min(lens)),
            "queries_short": int(sum(x < K for x in lens)),
            "redundancy_at_10_mean": round(float(np.mean(red)), 3), "redundancy_at_10_max": int(np.max(red)),
            "queries_with_redundancy": int(sum(x > 0 for x in red)),
            "redundancy_at_10_planted_mean": round(float(np.mean(red_pl)), 3) if red_pl else None,
            "redundancy_planted_queries": len(red_pl),
            "kept_best_ranked_copy_share": round(best_copy / kept_total, 3) if kept_total else None}


def _quality(s) -> dict:
    from diversify import Diversifier, select

    cm, hits = s["cm"], s["hits"]
    erf_call, mmr_call = peers(s)
    wrapped = Diversifier(cm, k=K, max_per_cluster=1).wrap(s["store"])
    methods = {
        "top10": lambda j: [h.id for h in hits[j][:K]],
        "select": lambda j: select(hits[j], cm.lookup([h.id for h in hits[j]]), k=K).ids,
        "wrap": lambda j: wrapped(s["queries"][j]).ids,
        "erf": erf_call,
        "erf_top10": lambda j: erf_call(j, top=K),
        "mmr": mmr_call,
    }
    return {name: _method_quality(s, fn) for name, fn in methods.items()}


def _backend_calls_one(s, fetch_k, exclude: bool) -> dict:
    from diversify import Diversifier

    store = s["store"]
    d = Diversifier(s["cm"], k=K, max_per_cluster=1, fetch_k=fetch_k)
    fetched = []

    def with_exclude(query, k, exclude_ids=None):
        r = store.search(query, k, exclude_ids)
        fetched.append(len(r))
        return r

    def without_exclude(query, k):  # a search callable that cannot filter
        r = store.search(query, k)
        fetched.append(len(r))
        return r

    search = d.wrap(with_exclude if exclude else without_exclude)
    calls, per_q, lens, exhausted = [], [], [], 0
    for q in s["queries"]:
        n0 = len(fetched)
        res = search(q)
        calls.append(res.backend_calls)
        per_q.append(sum(fetched[n0:]))
        lens.append(len(res.ids))
        exhausted += bool(res.exhausted)
    return {"fetch_k": d.fetch_k, "queries": len(calls),
            "backend_calls_mean": round(float(np.mean(calls)), 3), "backend_calls_max": int(np.max(calls)),
            "queries_refetched": int(sum(c > 1 for c in calls)),
            "hits_fetched_mean": round(float(np.mean(per_q)), 1), "hits_fetched_max": int(np.max(per_q)),
            "returned_min": int(np.min(lens)), "exhausted": exhausted}


def quality_and_calls(s) -> dict:
    out = {"quality": _quality(s), "backend_calls": {}}
    for label, fetch_k in (("default_fetch_k", None), ("fetch_k_10", K)):
        for mode in ("numpy_store_exclude", "callable_no_exclude"):
            out["backend_calls"][f"{label}/{mode}"] = _backend_calls_one(s, fetch_k, mode == "numpy_store_exclude")
    return out
