"""online: added latency, lookup memory, backend calls, next to LangChain's
``EmbeddingsRedundantFilter`` and MMR, all on the same ranked hits.

Setup (one process; memory probes run in fresh subprocesses): a generated corpus with planted
near-duplicates clustered by ``diversify.build`` (after a warm-up build), saved and re-loaded
memory-mapped (what a server does); deterministic 64-d vectors from ``generate_vectors`` (copies
sit near their original) in a ``NumpyStore``; 200 queries (a random document's vector plus
noise), each query's top-50 from the store is "the hits" every method sees. Cluster ids come
from ``ClusterMap.lookup``. Redundancy@10 = kept hits that share an artifact cluster with a
higher kept hit.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

import numpy as np

from . import Suite
from ._online_common import CORPUS, DIM, N_HITS, N_QUERIES, QUERY_NOISE, redundancy

SUITE = Suite(
    name="online",
    summary="per-query cost of select / lookup / Diversifier.wrap (p50/p99 µs, CPU time), the wrapper's own CPU "
            "with a 1,000- / 250,000-member cluster in the results, redundancy@10, backend calls, lookup memory per "
            "document at 100k/1M; vs LangChain EmbeddingsRedundantFilter and MMR",
    results=("online.json",), render="benchmarks.report.online:online_section",
    peers=("langchain-community", "langchain-core"),
    quick={"n_docs": 2000, "repeats": 1, "passes": 5, "peer_passes": 1, "no_memory": True, "giant_sizes": [1000],
           "giant_passes": 3}, takes="~4 min")

def add_arguments(p) -> None:
    p.add_argument("--repeats", type=int, default=3, help="latency rounds (default 3; best-of and all reported)")
    p.add_argument("--passes", type=int, default=100,
                   help="passes over the 200 queries per round for select/lookup (default 100 = 20,000 calls)")
    p.add_argument("--peer-passes", type=int, default=10,
                   help="passes for wrap / EmbeddingsRedundantFilter / MMR (default 10 = 2,000 calls)")
    p.add_argument("--no-memory", action="store_true", help="skip the 100k / 1M memory probes")
    p.add_argument("--memory-sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    p.add_argument("--n-docs", type=int, default=CORPUS["n_docs"], help="documents of the generated corpus")
    p.add_argument("--giant-sizes", type=int, nargs="*", default=[1_000, 250_000],
                   help="sizes of the big cluster in the results of the giant-cluster scenario (none: skip it)")
    p.add_argument("--giant-passes", type=int, default=20,
                   help="passes over the 200 queries per round in the giant-cluster scenario (default 20)")


def _artifact(workdir: str, corpus):
    """Build (after a warm-up build for the JIT), save and load memory-mapped: (cm, path, built, seconds)."""
    import diversify

    diversify.build(corpus.texts[:300], ids=corpus.ids[:300])
    t = time.perf_counter()
    built = diversify.build(corpus.texts, ids=corpus.ids)
    t_build = time.perf_counter() - t
    path = os.path.join(workdir, "online-bench.dvf")
    built.save(path)
    return diversify.load(path), path, built, t_build  # load: memory-mapped, verified


def _queries(vectors: np.ndarray, n: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for j in rng.choice(n, size=N_QUERIES, replace=False).tolist():
        q = vectors[j] + QUERY_NOISE * rng.standard_normal(DIM).astype(np.float32) / np.sqrt(DIM)
        out.append((q / np.linalg.norm(q)).astype(np.float32))
    return out


def _hit_stats(hits, cluster_of, planted_of) -> dict:
    """Duplicate share of the hits (artifact clusters) and agreement with the planted groups."""
    shares, agree, pairs = [], 0, 0
    for hs in hits:
        ids = [h.id for h in hs]
        shares.append(redundancy(ids, cluster_of) / len(ids))
        for a in range(len(ids)):
            for b in range(a + 1, len(ids)):
                same_art = cluster_of[ids[a]] == cluster_of[ids[b]]
                same_pl = planted_of[ids[a]] == planted_of[ids[b]]
                if same_art or same_pl:
                    pairs += 1
                    agree += same_art and same_pl
    return {"dup_share_of_hits": {"mean": round(float(np.mean(shares)), 3), "min": round(float(np.min(shares)), 3),
                                  "max": round(float(np.max(shares)), 3)},
            "artifact_vs_planted_pair_agreement": round(agree / pairs, 3) if pairs else None}


def setup(workdir: str, corpus_params: dict) -> dict:
    from .. import lib

    params = dict(corpus_params)
    n = params.pop("n_docs")
    t = time.perf_counter()
    corpus = lib.generate_corpus(n, **params)
    t_gen = time.perf_counter() - t
    cm, path, built, t_build = _artifact(workdir, corpus)
    vectors = lib.generate_vectors(corpus, dim=DIM, seed=corpus_params["seed"])
    store = lib.numpy_store(vectors, corpus.ids)
    queries = _queries(vectors, n, corpus_params["seed"] + 1)
    hits = [store.search(q, N_HITS) for q in queries]
    all_ids = sorted({h.id for hs in hits for h in hs})
    cluster_of = dict(zip(all_ids, cm.lookup(all_ids).tolist()))
    planted = corpus.planted_clusters()
    row = {i: j for j, i in enumerate(corpus.ids)}
    planted_of = {i: int(planted[row[i]]) for i in all_ids}
    info = {
        "corpus": {**corpus_params, "edit_rate": list(corpus_params["edit_rate"]), "generate_s": round(t_gen, 2)},
        "build": {"n_docs": built.n_docs, "n_clusters": built.n_clusters, "seconds": round(t_build, 2),
                  "config": "diversify.build(texts, ids=ids) defaults (exact + MinHash at Jaccard 0.8)"},
        "embedding_dim": DIM, "queries": N_QUERIES, "hits_per_query": N_HITS, "query_noise": QUERY_NOISE,
        **_hit_stats(hits, cluster_of, planted_of),
    }
    return dict(cm=cm, path=path, store=store, vectors=vectors, row=row, queries=queries, hits=hits,
                cluster_of=cluster_of, planted_of=planted_of, texts={i: corpus.texts[row[i]] for i in all_ids},
                info=info)


def _environment() -> dict:
    from ..env import environment, version
    from ._online_latency import blas_threads

    env = environment({d: version(d) for d in ("langchain-core", "langchain-community", "langchain-classic")})
    try:
        from threadpoolctl import threadpool_info

        env["blas_threads"] = [{"api": i.get("internal_api"), "threads": i.get("num_threads")} for i in threadpool_info()]
    except Exception:
        env["blas_threads_openblas"] = blas_threads()
    env["python_gc_disabled_during_timing"] = True
    return env


def run(args, ctx) -> list:
    from ..env import loadavg
    from ..paths import log, now, shown, write_json
    from ..report.online import plot
    from ._online_latency import latency, quality_and_calls
    from ._online_memory import memory

    t_all = time.perf_counter()
    results = {"benchmark": "online", "command": ctx.command, "started_utc": now(), "loadavg_start": loadavg(),
               "environment": _environment()}
    with tempfile.TemporaryDirectory(prefix="diversify-online-") as wd:
        s = setup(wd, dict(CORPUS, n_docs=args.n_docs))
        results["setup"] = s["info"]
        results["latency"] = latency(s, args.repeats, args.passes, args.peer_passes)
        log("quality + backend calls")
        results.update(quality_and_calls(s))
        if args.giant_sizes:
            from ._online_giant import giant

            results["giant_cluster"] = giant(wd, args.giant_passes, tuple(args.giant_sizes), rounds=args.repeats)
        if not args.no_memory:
            log("memory")
            results["memory"] = memory(s, wd, tuple(args.memory_sizes))
        s["cm"] = None
    results["loadavg_end"] = loadavg()
    results["seconds"] = round(time.perf_counter() - t_all, 1)
    path = write_json(ctx.results / "online.json", results)
    log(f"wrote {shown(path)}")
    figure = plot(results, ctx.plots / "online_latency.png")
    if figure:
        log(f"wrote {shown(figure)}")
    print(f"online: select p99 {results['latency']['best_of_rounds']['select']['p99_us']} µs", file=sys.stderr)
    for size, g in results.get("giant_cluster", {}).items():
        b = g["best_of_rounds"]
        print(f"online: wrap with a {int(size):,}-member cluster in the results, CPU p50 {b['cpu_p50_us']} µs, "
              f"p99 {b['cpu_p99_us']} µs", file=sys.stderr)
    return [path]
