"""Online benchmark: added latency, lookup memory, backend calls, next to LangChain's
``EmbeddingsRedundantFilter`` and MMR, all on the same ranked hits.

``python -m benchmarks.online`` writes ``benchmarks/results/online.json``;
:func:`render_markdown` turns that dict into a RESULTS.md section.

Setup (one run, one process; memory probes run in fresh subprocesses):

* a generated corpus (``diversify.datagen.generate_corpus``) with planted near-duplicates,
  clustered by ``diversify.build`` (texts, default config), saved and re-loaded memory-mapped;
* deterministic 64-d "embeddings" from ``diversify.datagen.generate_vectors`` (copies sit near
  their original) in a ``diversify.stores.NumpyStore``;
* 200 queries (a random document's vector plus noise); each query's top-50 from the store is
  "the hits" every method below sees. Cluster ids come from ``ClusterMap.lookup``.

Peers get the precomputed vectors (no model download, no re-embedding cost counted):
``EmbeddingsRedundantFilter`` through an ``Embeddings`` object that returns the stored vector of
each text, MMR through ``langchain_core.vectorstores.utils.maximal_marginal_relevance``.
Redundancy@10 = kept hits that share an artifact cluster with a higher kept hit.
"""

from __future__ import annotations

import argparse
import gc
import importlib.metadata as md
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "online.json"
COMMAND = "python -m benchmarks.online"

# The corpus: dup_fraction 0.38 gives ~30% of each top-50 as near-duplicates of a higher hit
# under the built artifact (measured and reported as `dup_share_of_hits`).
CORPUS = dict(n_docs=20_000, words_per_doc=200, dup_fraction=0.38, edit_rate=(0.0, 0.02), seed=11)
DIM = 64
N_QUERIES = 200
N_HITS = 50
K = 10
QUERY_NOISE = 0.3
ERF_THRESHOLD = 0.95  # EmbeddingsRedundantFilter's default
MMR_LAMBDA = 0.5  # maximal_marginal_relevance's default


# --------------------------------------------------------------------------- helpers


def _version(dist):
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None


def _loadavg():
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _pct(samples_ns, q):
    return float(np.percentile(np.asarray(samples_ns, dtype=np.float64), q)) / 1000.0


def _summary(samples_ns):
    a = np.asarray(samples_ns, dtype=np.float64)
    return {"calls": int(a.size), "p50_us": round(_pct(a, 50), 2), "p99_us": round(_pct(a, 99), 2),
            "mean_us": round(float(a.mean()) / 1000.0, 2), "over_1ms_share": round(float((a > 1e6).mean()), 4)}


def _blas(threads=None):
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


def _time_calls(calls, passes, warm_passes=2, clock=time.perf_counter_ns):
    """Time each zero-arg callable in ``calls``, ``passes`` times over, with gc off.

    Returns per-call samples in ns (``clock`` around each call: wall clock by default,
    ``time.thread_time_ns`` for CPU time, which leaves out time the thread was descheduled)."""
    for _ in range(warm_passes):
        for c in calls:
            c()
    out = np.empty(len(calls) * passes, dtype=np.int64)
    pc = clock
    i = 0
    gc.collect()
    gc.disable()
    try:
        for _ in range(passes):
            for c in calls:
                t0 = pc()
                c()
                out[i] = pc() - t0
                i += 1
    finally:
        gc.enable()
    return out


def _redundancy(ids, cluster_of):
    """Kept hits sharing an artifact cluster with a higher kept hit."""
    seen, red = set(), 0
    for i in ids:
        c = cluster_of[i]
        if c in seen:
            red += 1
        seen.add(c)
    return red


# --------------------------------------------------------------------------- setup


def _setup(workdir):
    import diversify
    from diversify.corpus.datagen import generate_corpus, generate_vectors
    from diversify.stores import NumpyStore

    params = dict(CORPUS)
    n = params.pop("n_docs")
    t = time.perf_counter()
    corpus = generate_corpus(n, **params)
    t_gen = time.perf_counter() - t
    t = time.perf_counter()
    built = diversify.build(corpus.texts, ids=corpus.ids)
    t_build = time.perf_counter() - t
    path = os.path.join(workdir, "online-bench.dvf")
    built.save(path)
    cm = diversify.load(path)  # memory-mapped, verified: what a server does
    vectors = generate_vectors(corpus, dim=DIM, seed=CORPUS["seed"])
    store = NumpyStore(vectors, corpus.ids)
    rng = np.random.default_rng(CORPUS["seed"] + 1)
    queries = []
    for j in rng.choice(n, size=N_QUERIES, replace=False).tolist():
        q = vectors[j] + QUERY_NOISE * rng.standard_normal(DIM).astype(np.float32) / np.sqrt(DIM)
        queries.append((q / np.linalg.norm(q)).astype(np.float32))
    hits = [store.search(q, N_HITS) for q in queries]
    all_ids = sorted({h.id for hs in hits for h in hs})
    cluster_of = dict(zip(all_ids, cm.lookup(all_ids).tolist()))
    planted = corpus.planted_clusters()
    row = {i: j for j, i in enumerate(corpus.ids)}
    # duplicate share of the hits (artifact clusters), and agreement with the planted groups
    shares, agree, pairs = [], 0, 0
    for hs in hits:
        ids = [h.id for h in hs]
        shares.append(_redundancy(ids, cluster_of) / len(ids))
        for a in range(len(ids)):
            for b in range(a + 1, len(ids)):
                same_art = cluster_of[ids[a]] == cluster_of[ids[b]]
                same_pl = planted[row[ids[a]]] == planted[row[ids[b]]]
                if same_art or same_pl:
                    pairs += 1
                    agree += same_art and same_pl
    texts = {i: corpus.texts[row[i]] for i in all_ids}
    planted_of = {i: int(planted[row[i]]) for i in all_ids}
    info = {
        "corpus": {**CORPUS, "edit_rate": list(CORPUS["edit_rate"]), "generate_s": round(t_gen, 2)},
        "build": {"n_docs": built.n_docs, "n_clusters": built.n_clusters, "seconds": round(t_build, 2),
                  "config": "diversify.build(texts, ids=ids) defaults (exact + MinHash at Jaccard 0.8)"},
        "embedding_dim": DIM,
        "queries": N_QUERIES,
        "hits_per_query": N_HITS,
        "query_noise": QUERY_NOISE,
        "dup_share_of_hits": {"mean": round(float(np.mean(shares)), 3), "min": round(float(np.min(shares)), 3),
                              "max": round(float(np.max(shares)), 3)},
        "artifact_vs_planted_pair_agreement": round(agree / pairs, 3) if pairs else None,
    }
    return dict(cm=cm, path=path, store=store, vectors=vectors, row=row, queries=queries, hits=hits,
                cluster_of=cluster_of, planted_of=planted_of, texts=texts, info=info)


# --------------------------------------------------------------------------- peers


def _peers(s):
    """Build LangChain Documents, a lookup Embeddings and the two peer callables per query."""
    import warnings

    from langchain_core.documents import Document
    from langchain_core.embeddings import Embeddings
    from langchain_core.vectorstores.utils import maximal_marginal_relevance

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from langchain_community.document_transformers import EmbeddingsRedundantFilter

    vec_of_text = {}
    for i, t in s["texts"].items():
        vec_of_text[t] = s["vectors"][s["row"][i]].tolist()

    class LookupEmbeddings(Embeddings):
        """Deterministic precomputed vectors: what a model would return, without the model."""

        def embed_documents(self, texts):
            return [vec_of_text[t] for t in texts]

        def embed_query(self, text):
            raise NotImplementedError

    erf = EmbeddingsRedundantFilter(embeddings=LookupEmbeddings(), similarity_threshold=ERF_THRESHOLD)
    docs, mats = [], []
    for hs in s["hits"]:
        docs.append([Document(page_content=s["texts"][h.id], metadata={"id": h.id}, id=h.id) for h in hs])
        mats.append(np.stack([np.asarray(h.vector, dtype=np.float32) for h in hs]))

    def erf_call(j, top=N_HITS):
        out = erf.transform_documents(docs[j][:top])
        return [d.metadata["id"] for d in out][:K]

    def mmr_call(j):
        idx = maximal_marginal_relevance(s["queries"][j], mats[j], lambda_mult=MMR_LAMBDA, k=K)
        return [s["hits"][j][i].id for i in idx]

    return erf_call, mmr_call


# --------------------------------------------------------------------------- latency


class _TimedStore:
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


class _ReplayStore:
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


def _wrap_added_ns(s, passes, store=None):
    from diversify import Diversifier

    ts = _TimedStore(s["store"] if store is None else store)
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


def _latency_round(s, erf_call, mmr_call, passes, peer_passes):
    from diversify import select

    cm, hits = s["cm"], s["hits"]
    cids = [cm.lookup([h.id for h in hs]) for hs in hits]
    lookup = cm.lookup
    sel_calls = [(lambda hs=hs, c=c: select(hs, c, k=K)) for hs, c in zip(hits, cids)]
    look_calls = [(lambda hs=hs: lookup([h.id for h in hs])) for hs in hits]
    both_calls = [(lambda hs=hs: select(hs, lookup([h.id for h in hs]), k=K)) for hs in hits]
    empty_calls = [(lambda: None) for _ in hits]
    r = {"loadavg_start": _loadavg()}
    r["timer_overhead"] = _summary(_time_calls(empty_calls, passes))
    for name, calls in (("select", sel_calls), ("lookup", look_calls), ("lookup_select", both_calls)):
        t = _time_calls(calls, passes)
        r[name] = _summary(t)
        # the code's own cost per input: median over the passes of each hit list; the slowest one
        per_input = np.median(t.reshape(passes, len(calls)), axis=0) / 1000.0
        r[name]["slowest_input_median_us"] = round(float(per_input.max()), 2)
    added, store_ns = _wrap_added_ns(s, max(1, peer_passes))
    r["wrap_minus_store"] = _summary(added)
    r["wrap_store_search"] = _summary(store_ns)
    r["blas_threads"] = _blas()
    if r["blas_threads"] is not None and r["blas_threads"] > 1:
        # OpenBLAS workers spin after the store's matrix-vector product and compete with the
        # Python work that follows on a 2-CPU machine; the same with one BLAS thread:
        _blas(1)
        try:
            added, _ = _wrap_added_ns(s, max(1, peer_passes))
            r["wrap_minus_store_blas1"] = _summary(added)
        finally:
            _blas(r["blas_threads"])
    added, _ = _wrap_added_ns(s, passes // 5 or 1, _ReplayStore(s["queries"], hits))
    r["wrap_replay_minus_store"] = _summary(added)
    r["erf"] = _summary(_time_calls([(lambda j=j: erf_call(j)) for j in range(len(hits))], peer_passes))
    r["mmr"] = _summary(_time_calls([(lambda j=j: mmr_call(j)) for j in range(len(hits))], peer_passes))
    # CPU time of the thread (descheduled time left out): the code's own tail on a shared machine
    tt = time.thread_time_ns
    r["timer_overhead_cpu"] = _summary(_time_calls(empty_calls, passes // 5 or 1, clock=tt))
    r["select_cpu"] = _summary(_time_calls(sel_calls, passes // 5 or 1, clock=tt))
    r["lookup_cpu"] = _summary(_time_calls(look_calls, passes // 5 or 1, clock=tt))
    r["lookup_select_cpu"] = _summary(_time_calls(both_calls, passes // 5 or 1, clock=tt))
    r["loadavg_end"] = _loadavg()
    return r


# --------------------------------------------------------------------------- quality + backend calls


def _quality(s, erf_call, mmr_call):
    from diversify import Diversifier, select

    cm, hits, cluster_of = s["cm"], s["hits"], s["cluster_of"]
    ds = Diversifier(s["cm"], k=K, max_per_cluster=1)
    wrapped = ds.wrap(s["store"])
    methods = {
        "top10": lambda j: [h.id for h in hits[j][:K]],
        "select": lambda j: select(hits[j], cm.lookup([h.id for h in hits[j]]), k=K).ids,
        "wrap": lambda j: wrapped(s["queries"][j]).ids,
        "erf": erf_call,
        "erf_top10": lambda j: erf_call(j, top=K),
        "mmr": mmr_call,
    }
    out = {}
    for name, fn in methods.items():
        lens, red, red_pl, best_copy, kept_total = [], [], [], 0, 0
        for j in range(len(hits)):
            ids = list(fn(j))
            if all(i in s["planted_of"] for i in ids):
                red_pl.append(_redundancy(ids, s["planted_of"]))
            first_rank = {}
            for r, h in enumerate(hits[j]):
                first_rank.setdefault(cluster_of[h.id], r)
            rank = {h.id: r for r, h in enumerate(hits[j])}
            lens.append(len(ids))
            red.append(_redundancy(ids, cluster_of))
            for i in ids:
                if i in rank:  # wrap may return hits beyond the first 50 (refetch)
                    kept_total += 1
                    best_copy += rank[i] == first_rank[cluster_of[i]]
        out[name] = {
            "returned_mean": round(float(np.mean(lens)), 2), "returned_min": int(np.min(lens)),
            "queries_short": int(sum(x < K for x in lens)),
            "redundancy_at_10_mean": round(float(np.mean(red)), 3), "redundancy_at_10_max": int(np.max(red)),
            "queries_with_redundancy": int(sum(x > 0 for x in red)),
            "redundancy_at_10_planted_mean": round(float(np.mean(red_pl)), 3) if red_pl else None,
            "redundancy_planted_queries": len(red_pl),
            "kept_best_ranked_copy_share": round(best_copy / kept_total, 3) if kept_total else None,
        }
    return out


def _backend_calls(s):
    from diversify import Diversifier

    store = s["store"]

    def no_exclude(query, k):  # a search callable that cannot filter
        return store.search(query, k)

    out = {}
    for label, fetch_k in (("default_fetch_k", None), ("fetch_k_10", K)):
        for mode, fn in (("numpy_store_exclude", store), ("callable_no_exclude", no_exclude)):
            d = Diversifier(s["cm"], k=K, max_per_cluster=1, fetch_k=fetch_k)
            fetched = []

            def counting(query, k, exclude_ids=None, _fn=fn, _ex=(mode == "numpy_store_exclude")):
                r = _fn.search(query, k, exclude_ids) if _ex else _fn(query, k)
                fetched.append(len(r))
                return r

            if mode == "numpy_store_exclude":
                search = d.wrap(counting)
            else:
                search = d.wrap(lambda query, k: counting(query, k))
            calls, per_q, lens, exhausted = [], [], [], 0
            for q in s["queries"]:
                n0 = len(fetched)
                res = search(q)
                calls.append(res.backend_calls)
                per_q.append(sum(fetched[n0:]))
                lens.append(len(res.ids))
                exhausted += bool(res.exhausted)
            out[f"{label}/{mode}"] = {
                "fetch_k": d.fetch_k, "queries": len(calls),
                "backend_calls_mean": round(float(np.mean(calls)), 3), "backend_calls_max": int(np.max(calls)),
                "queries_refetched": int(sum(c > 1 for c in calls)),
                "hits_fetched_mean": round(float(np.mean(per_q)), 1), "hits_fetched_max": int(np.max(per_q)),
                "returned_min": int(np.min(lens)), "exhausted": exhausted,
            }
    return out


# --------------------------------------------------------------------------- memory


_PROBE = r"""
import json, os, sys, numpy as np
def status():
    d = {}
    with open('/proc/self/status') as f:
        for line in f:
            k, _, v = line.partition(':')
            if k in ('VmRSS', 'RssAnon', 'RssFile'):
                d[k] = int(v.split()[0]) * 1024
    return d
path, mode, n, warm = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
import diversify
# load a small artifact first (same mode) so lazy imports and allocator arenas are not counted
_w = diversify.load(warm, mmap=(mode != 'memory'), verify=(mode != 'mmap-noverify'))
_w.lookup(['doc-0000001'] * 50)
del _w
ids = ['doc-%07d' % i for i in np.random.default_rng(0).integers(0, n, 20000).tolist()]
b = status()
cm = diversify.load(path, mmap=(mode != 'memory'), verify=(mode != 'mmap-noverify'))
a = status()
import gc, time
batches = [ids[j:j + 50] for j in range(0, len(ids), 50)]
for x in batches:
    cm.lookup(x)
w = status()
t = []
gc.disable()
for _ in range(5):
    for x in batches:
        t0 = time.perf_counter_ns(); cm.lookup(x); t.append(time.perf_counter_ns() - t0)
gc.enable()
t = np.asarray(t) / 1000.0
print(json.dumps({'before': b, 'after_load': a, 'after_lookups': w,
                  'lookup_us': [round(float(np.percentile(t, 50)), 2), round(float(np.percentile(t, 99)), 2), len(t)]}))
"""


def _artifact_from_arrays(n, path, template):
    """A ClusterMap of n str ids with ~30% duplicates, assembled with ClusterMap.from_arrays."""
    from diversify.artifact import ClusterMap

    rng = np.random.default_rng(5)
    ids = [f"doc-{i:07d}" for i in range(n)]
    cl = np.arange(n, dtype=np.int64)
    copies = np.flatnonzero(rng.random(n) < 0.3)
    copies = copies[copies > 0]
    src = (rng.random(copies.size) * copies).astype(np.int64)  # an earlier document
    cl[copies] = src
    cl = cl[cl]  # point chains at their root (the smallest index)
    while not np.array_equal(cl, cl[cl]):
        cl = cl[cl]
    rep = cl == np.arange(n)
    stages = np.where(rep, 0, 2).astype(np.uint8)
    lengths = np.full(n, 1200, dtype=np.uint32)
    cm = ClusterMap.from_arrays(ids, cl, rep, stages, lengths, config=template.config,
                                fingerprint=template.fingerprint, seed=template.seed,
                                hash_scheme=template.hash_scheme, build_info={"note": "from_arrays benchmark"})
    cm.save(path)
    return cm.n_clusters


def _memory(s, workdir, sizes=(100_000, 1_000_000)):
    import diversify
    from diversify.corpus.datagen import generate_corpus

    out = {}
    for n in sizes:
        path = os.path.join(workdir, f"mem-{n}.dvf")
        t = time.perf_counter()
        if n <= 100_000:
            p = dict(CORPUS)
            p.pop("n_docs")
            corpus = generate_corpus(n, **p)
            built = diversify.build(corpus.texts, ids=corpus.ids)
            built.save(path)
            how, k = "diversify.build on generate_corpus texts", built.n_clusters
            del corpus, built
        else:
            how = "ClusterMap.from_arrays (synthetic ~30% duplicates; building 1M texts skipped for time)"
            k = _artifact_from_arrays(n, path, s["cm"])
        t_make = time.perf_counter() - t
        cm = diversify.load(path)
        arrs = cm._arrays  # the lookup's own arrays (read-only inspection)
        lookup_bytes = sum(int(arrs[a].nbytes) for a in ("lookup/key", "lookup/cluster", "lookup/bucket_start"))
        uses_buckets = bool(cm._use_buckets)
        del cm
        entry = {"how": how, "n_clusters": int(k), "make_s": round(t_make, 1),
                 "file_bytes_per_doc": round(os.path.getsize(path) / n, 1),
                 "lookup_arrays_bytes_per_doc": round(lookup_bytes / n, 1),
                 "bucket_directory": uses_buckets}
        for mode in ("mmap", "mmap-noverify", "memory"):
            raw = subprocess.run([sys.executable, "-c", _PROBE, path, mode, str(n), s["path"]], capture_output=True,
                                 text=True, check=True, cwd=str(ROOT)).stdout
            m = json.loads(raw)
            b, a, w = m["before"], m["after_load"], m["after_lookups"]
            entry[mode] = {
                "rss_per_doc_after_load": round((a["VmRSS"] - b["VmRSS"]) / n, 1),
                "rss_per_doc_after_lookups": round((w["VmRSS"] - b["VmRSS"]) / n, 1),
                "anon_per_doc_after_lookups": round((w["RssAnon"] - b["RssAnon"]) / n, 1),
                "file_per_doc_after_lookups": round((w["RssFile"] - b["RssFile"]) / n, 1),
                "lookup_50_p50_us": m["lookup_us"][0], "lookup_50_p99_us": m["lookup_us"][1],
                "lookup_calls": m["lookup_us"][2],
            }
        os.remove(path)
        out[str(n)] = entry
    return out


# --------------------------------------------------------------------------- environment


def _environment():
    env = {}
    try:
        from . import env as _env

        env = _env.environment()
    except Exception as exc:  # pragma: no cover - still record what we can
        env = {"error": repr(exc)}
    env["versions"] = {**env.get("versions", {}),
                       **{d: _version(d) for d in ("langchain-core", "langchain-community", "langchain-classic")}}
    env["thread_env"] = {v: os.environ.get(v) for v in
                         ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")}
    try:
        from threadpoolctl import threadpool_info

        env["blas_threads"] = [{"api": i.get("internal_api"), "threads": i.get("num_threads")} for i in threadpool_info()]
    except Exception:
        pass
    try:
        dirty = subprocess.run(["git", "status", "--porcelain", "diversify"], cwd=ROOT, capture_output=True,
                               text=True, timeout=10).stdout.strip()
        env["diversify_tree_dirty"] = bool(dirty)
    except Exception:
        pass
    env["python_gc_disabled_during_timing"] = True
    return env


# --------------------------------------------------------------------------- main


def run(*, repeats=3, passes=100, peer_passes=10, memory=True, memory_sizes=(100_000, 1_000_000)) -> dict:
    t_all = time.perf_counter()
    results = {"benchmark": "online", "command": COMMAND,
               "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "loadavg_start": _loadavg(), "environment": _environment()}
    with tempfile.TemporaryDirectory(prefix="diversify-online-") as wd:
        s = _setup(wd)
        results["setup"] = s["info"]
        erf_call, mmr_call = _peers(s)
        rounds = []
        for r in range(repeats):
            print(f"latency round {r + 1}/{repeats} (load {_loadavg()})", file=sys.stderr, flush=True)
            rounds.append(_latency_round(s, erf_call, mmr_call, passes, peer_passes))
        keys = [k for k in rounds[0] if isinstance(rounds[0][k], dict) and all(k in r for r in rounds)]
        results["latency"] = {
            "k": K, "hits": N_HITS, "passes": passes, "peer_passes": peer_passes,
            "rounds": rounds,
            "best_of_rounds": {k: {"p50_us": min(r[k]["p50_us"] for r in rounds),
                                   "p99_us": min(r[k]["p99_us"] for r in rounds)} for k in keys},
            "bar_p99_us": 25.0,
        }
        print("quality + backend calls", file=sys.stderr, flush=True)
        results["quality"] = _quality(s, erf_call, mmr_call)
        results["backend_calls"] = _backend_calls(s)
        if memory:
            print("memory", file=sys.stderr, flush=True)
            results["memory"] = _memory(s, wd, memory_sizes)
        s["cm"] = None
    results["loadavg_end"] = _loadavg()
    results["seconds"] = round(time.perf_counter() - t_all, 1)
    return results


def write(results: dict, path: Path = RESULTS) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


# --------------------------------------------------------------------------- markdown


def _fmt(x, nd=1):
    return "–" if x is None else f"{x:.{nd}f}"


def render_markdown(results: dict) -> str:
    """A RESULTS.md section from the dict :func:`run` returns (or ``online.json``)."""
    lat = results["latency"]
    rounds = lat["rounds"]
    best = lat["best_of_rounds"]
    su = results["setup"]
    env = results.get("environment", {})
    q = results.get("quality", {})
    L = []
    L.append("## Online: added latency, lookup memory, backend calls, vs LangChain")
    L.append("")
    L.append(f"k={lat['k']} from the store's top-{lat['hits']} for {su['queries']} queries over "
             f"{su['build']['n_docs']:,} generated documents ({su['build']['n_clusters']:,} clusters from "
             f"`diversify.build`); on average {su['dup_share_of_hits']['mean']:.0%} of each top-{lat['hits']} "
             f"are near-duplicates of a higher hit (min {su['dup_share_of_hits']['min']:.0%}, "
             f"max {su['dup_share_of_hits']['max']:.0%}). Same hits for every method.")
    L.append("")
    L.append(f"Machine: {env.get('cpu')}, {env.get('usable_cpus')} usable CPUs, Python {env.get('python')}, "
             f"diversify {env.get('diversify_commit')}; load average "
             + "; ".join(f"round {i + 1}: {r['loadavg_start'][0]}→{r['loadavg_end'][0]}" for i, r in enumerate(rounds)
                         if r.get('loadavg_start') and r.get('loadavg_end'))
             + ". Shared machine: read p99 as an upper bound.")
    L.append("")
    L.append("### Latency per query (µs, wall clock, gc off)")
    L.append("")
    L.append("| method | calls/round | p50 best | p99 best-of-3 | p99 rounds | calls > 1 ms (worst round) | "
             "p50 / p99 CPU time (best) | slowest hit list, median | redundancy@10 | returns 10 |")
    L.append("|---|---:|---:|---:|---|---:|---|---:|---:|---|")
    names = [("select", "diversify `select` (cluster ids given)", "select"),
             ("lookup", "`ClusterMap.lookup` (50 str ids, mmap)", None),
             ("lookup_select", "lookup + `select`", "select"),
             ("wrap_minus_store", "`Diversifier.wrap(NumpyStore)` minus store search", "wrap"),
             ("wrap_minus_store_blas1", "same, NumPy's OpenBLAS at 1 thread", "wrap"),
             ("wrap_replay_minus_store", "`Diversifier.wrap(replay store)` minus store search", "wrap"),
             ("erf", f"LangChain `EmbeddingsRedundantFilter` (thr {ERF_THRESHOLD}), first 10", "erf"),
             ("mmr", f"LangChain MMR (λ={MMR_LAMBDA})", "mmr"),
             ("wrap_store_search", "(for scale: NumpyStore search inside wrap)", None),
             ("timer_overhead", "(timer overhead: empty call)", None)]
    for key, label, qk in names:
        if key not in best:
            continue
        p99s = ", ".join(_fmt(r[key]["p99_us"]) for r in rounds)
        red = ret = "–"
        if qk and qk in q:
            red = f"{q[qk]['redundancy_at_10_mean']:.2f}"
            ret = "yes" if q[qk]["returned_min"] >= lat["k"] else f"no (min {q[qk]['returned_min']})"
        over = max(r[key].get("over_1ms_share", 0.0) for r in rounds)
        sl = [r[key]["slowest_input_median_us"] for r in rounds if "slowest_input_median_us" in r[key]]
        slow = _fmt(min(sl)) if sl else "–"
        cpu = "–"
        if key + "_cpu" in best:
            cpu = f"{_fmt(best[key + '_cpu']['p50_us'])} / {_fmt(best[key + '_cpu']['p99_us'])}"
        L.append(f"| {label} | {rounds[0][key]['calls']:,} | {_fmt(best[key]['p50_us'])} | "
                 f"**{_fmt(best[key]['p99_us'])}** | {p99s} | {over:.2%} | {cpu} | {slow} | {red} | {ret} |")
    L.append("")
    if PLOT.exists():
        L.append("![online latency, p50 and p99 per method](plots/online_latency.png)")
        L.append("")
    if q:
        L.append("### Redundancy and rank (same 200 queries)")
        L.append("")
        L.append("| method | mean returned | min returned | redundancy@10 mean / max | queries with a duplicate | "
                 "redundancy@10 vs planted groups | kept = best-ranked copy |")
        L.append("|---|---:|---:|---:|---:|---:|---:|")
        qlabels = {"top10": "no diversification (top-10)", "select": "diversify lookup + select",
                   "wrap": "diversify wrap (refetch)", "erf": "EmbeddingsRedundantFilter on 50, first 10",
                   "erf_top10": "EmbeddingsRedundantFilter on top-10 (compressor after k=10)",
                   "mmr": "MMR λ=0.5 on 50"}
        for k_, lab in qlabels.items():
            if k_ in q:
                e = q[k_]
                L.append(f"| {lab} | {e['returned_mean']:.2f} | {e['returned_min']} | "
                         f"{e['redundancy_at_10_mean']:.2f} / {e['redundancy_at_10_max']} | "
                         f"{e['queries_with_redundancy']} | {_fmt(e.get('redundancy_at_10_planted_mean'), 2)} | "
                         f"{_fmt(e['kept_best_ranked_copy_share'] * 100, 0)}% |")
        L.append("")
    bc = results.get("backend_calls")
    if bc:
        L.append("### Backend calls per query (k=10, max_per_cluster=1)")
        L.append("")
        L.append("| store | fetch_k | calls mean | calls max | queries refetched | hits fetched mean / max | min returned |")
        L.append("|---|---:|---:|---:|---:|---:|---:|")
        for key, e in bc.items():
            mode = key.split("/")[1]
            lab = "NumpyStore (exclusion)" if mode == "numpy_store_exclude" else "callable without `exclude_ids`"
            L.append(f"| {lab} | {e['fetch_k']} | {e['backend_calls_mean']:.2f} | {e['backend_calls_max']} | "
                     f"{e['queries_refetched']} / {e['queries']} | {e['hits_fetched_mean']:.1f} / "
                     f"{e['hits_fetched_max']} | {e['returned_min']} |")
        L.append("")
    mem = results.get("memory")
    if mem:
        L.append("### Memory of the loaded lookup (bytes per document)")
        L.append("")
        L.append("| docs | artifact made by | file | lookup arrays | RSS mmap (after 20k lookups) | "
                 "RSS mmap, verify=False | RSS in memory (mmap=False) | lookup of 50 ids p50 / p99 µs (mmap) |")
        L.append("|---:|---|---:|---:|---:|---:|---:|---:|")
        for n, e in mem.items():
            def cell(m):
                x = e[m]
                return (f"{_fmt(x['rss_per_doc_after_lookups'])} ({_fmt(x['anon_per_doc_after_lookups'])} anon "
                        f"+ {_fmt(x['file_per_doc_after_lookups'])} file)")
            L.append(f"| {int(n):,} | {e['how']} | {_fmt(e['file_bytes_per_doc'])} | "
                     f"{_fmt(e['lookup_arrays_bytes_per_doc'])} | {cell('mmap')} | {cell('mmap-noverify')} | "
                     f"{cell('memory')} | {_fmt(e['mmap'].get('lookup_50_p50_us'))} / "
                     f"{_fmt(e['mmap'].get('lookup_50_p99_us'))} |")
        L.append("")
    L.append("Notes:")
    L.append("")
    bar = lat.get("bar_p99_us", 25.0)
    sel_best = best.get("select", {}).get("p99_us")
    verdict = ("meets" if sel_best is not None and sel_best < bar else "misses")
    L.append(f"- **Bar (p99 < {bar:g} µs for `select`)**: best-of-3 wall-clock p99 {_fmt(sel_best)} µs, which "
             f"{verdict} it on this run. On a shared machine the wall-clock tail is set by preemption: a call "
             "that loses the CPU for one scheduler slice takes milliseconds (column \"calls > 1 ms\"); once that "
             "share reaches 1% it *is* the p99. The CPU-time column (`time.thread_time_ns`, separate loop) leaves "
             "descheduled time out but still includes cache and SMT contention from other jobs. \"Slowest hit "
             "list, median\": each of the 200 hit lists is timed once per pass; the largest per-list median is "
             "what the code itself costs on its worst input, free of one-off interference.")
    L.append("- Latency is wall clock per call (`time.perf_counter_ns` around each call, gc disabled, "
             "2 warm-up passes), repeated in 3 rounds; p50 is the best round's, the p99 headline is the best "
             "of the 3 rounds, all three are listed. `select` gets hits and cluster ids ready; lookup includes "
             "building the id list from the hits (str ids, 20k-document artifact: binary-search path).")
    L.append("- `wrap` is end to end (fetch_k=25 from the store, convert hits, lookup, select, cursor, stats; "
             "refetch if short) minus the time spent inside the store's `search` (a timing shim; its two timer "
             "calls count against us). Over the real NumpyStore it is slower than over a replay store that "
             "returns the same precomputed hits: after the store's matrix-vector product NumPy's OpenBLAS "
             "worker threads keep spinning and compete for the 2 CPUs (the \"1 thread\" row removes that); "
             "the rest of the gap to the replay row is most likely the search evicting the wrapper's data "
             "from cache (not isolated). For a store behind a network call the replay row is the relevant one.")
    L.append("- Peers get the precomputed datagen vectors through a lookup `Embeddings` (no model, nothing "
             "downloaded); a real `EmbeddingsRedundantFilter` would also re-embed every hit (a model call), "
             "and MMR needs the hit vectors from the store: neither cost is counted. "
             f"`EmbeddingsRedundantFilter` (default threshold {ERF_THRESHOLD}) filters whatever list it gets: "
             "on the 50 hits we take its first 10; as a compressor after a k=10 retriever it returns fewer than "
             "10 and cannot fetch more. It drops the *higher*-ranked document of a similar pair, hence its "
             "low \"kept = best-ranked copy\". MMR returns its own selection order, not rank order.")
    L.append("- Redundancy@10 = kept hits that share a cluster with a higher kept hit, against the artifact's "
             "clusters (what we enforce) and against the generator's planted groups (ground truth). The "
             "datagen vectors are built from the planted groups (a copy = its original's vector plus noise), "
             "so vector-based peers see the planted truth exactly, while the artifact comes from text MinHash "
             f"at the default Jaccard 0.8 and agrees with the planted groups on "
             f"{su.get('artifact_vs_planted_pair_agreement', 0):.0%} of the same-cluster pairs among the hits: "
             "our residual redundancy vs planted groups is the artifact's recall, not `select`.")
    L.append("- Backend calls: 200 queries through `Diversifier(cm, k=10, max_per_cluster=1)`; the default "
             "fetch_k (25) almost never needs a refetch at this duplicate rate, so fetch_k=10 (no over-fetch) "
             "is shown too. Without `exclude_ids` the refetch asks for a larger k and re-reads the first hits.")
    L.append("- Memory: RSS growth of a fresh process (after loading a small artifact once, so imports are not "
             "counted) over `diversify.load` plus 20,000 lookups of 50 random ids. mmap pages are file-backed "
             "page cache (shared between processes, reclaimable), `mmap=False` is anonymous memory. "
             "`verify=True` (default) checksums the core arrays once, which pages them all in; with "
             "`verify=False` only the touched lookup pages are resident. The built 100k artifact also carries "
             "the builder's incremental state (extras), which `mmap=False` reads into memory too; the 1M "
             "artifact was assembled with `ClusterMap.from_arrays` (no extras), not built from texts.")
    L.append("")
    L.append(f"Command: `{results.get('command', COMMAND)}` (took {results.get('seconds')} s; "
             f"results in `benchmarks/results/online.json`).")
    L.append("")
    return "\n".join(L)


PLOT = ROOT / "benchmarks" / "plots" / "online_latency.png"


def plot(results: dict, path: Path = PLOT) -> Path | None:
    """Bar chart (log scale) of best-of-rounds p50 / p99 per method; None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    best = results["latency"]["best_of_rounds"]
    keys = [("select", "select"), ("lookup", "lookup"), ("lookup_select", "lookup+select"),
            ("wrap_replay_minus_store", "wrap (replay store)"), ("wrap_minus_store", "wrap (NumpyStore)"),
            ("erf", "EmbeddingsRedundantFilter"), ("mmr", "MMR")]
    keys = [(k, lab) for k, lab in keys if k in best]
    x = np.arange(len(keys))
    fig, ax = plt.subplots(figsize=(8, 3.6))
    ax.bar(x - 0.2, [best[k]["p50_us"] for k, _ in keys], 0.4, label="p50 (best round)")
    ax.bar(x + 0.2, [best[k]["p99_us"] for k, _ in keys], 0.4, label="p99 (best of 3 rounds)")
    ax.axhline(results["latency"].get("bar_p99_us", 25.0), color="k", ls="--", lw=0.8, label="25 µs bar")
    ax.set_yscale("log")
    ax.set_xticks(x, [lab for _, lab in keys], rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("µs per query (k=10 of 50 hits)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.online", description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=3, help="latency rounds (default 3; best-of and all reported)")
    p.add_argument("--passes", type=int, default=100,
                   help="passes over the 200 queries per round for select/lookup (default 100 = 20,000 calls)")
    p.add_argument("--peer-passes", type=int, default=10,
                   help="passes for wrap / EmbeddingsRedundantFilter / MMR (default 10 = 2,000 calls)")
    p.add_argument("--no-memory", action="store_true", help="skip the 100k / 1M memory probes")
    p.add_argument("--memory-sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--markdown", action="store_true", help="print the RESULTS.md section")
    a = p.parse_args(argv)
    res = run(repeats=a.repeats, passes=a.passes, peer_passes=a.peer_passes, memory=not a.no_memory,
              memory_sizes=tuple(a.memory_sizes))
    write(res, a.out)
    print(f"wrote {a.out}", file=sys.stderr)
    if a.out == RESULTS and plot(res):
        print(f"wrote {PLOT}", file=sys.stderr)
    if a.markdown:
        print(render_markdown(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
