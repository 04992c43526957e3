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
from pathlib import Path

import numpy as np

from ..markdown import command, fixed, table
from . import Suite
from ._online_common import CORPUS, DIM, N_HITS, N_QUERIES, QUERY_NOISE, redundancy

SUITE = Suite(
    name="online",
    summary="per-query cost of select / lookup / Diversifier.wrap (p50/p99 µs, CPU time), the wrapper's own CPU "
            "with a 1,000- / 250,000-member cluster in the results, redundancy@10, backend calls, lookup memory per "
            "document at 100k/1M; vs LangChain EmbeddingsRedundantFilter and MMR",
    results=("online.json",), render="benchmarks.suites.online:online_section",
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


# --- RESULTS.md section

DEFAULT_COMMAND = "python -m benchmarks run --suite online"
FIGURE = "plots/online_latency.png"  # relative to RESULTS.md
ERF_THRESHOLD, MMR_LAMBDA = 0.95, 0.5  # the peers' defaults, as the suite runs them


def _f(x, nd=1):
    return fixed(x, nd, none="–")


LATENCY_ROWS = [
    ("select", "diversify `select` (cluster ids given)", "select"),
    ("lookup", "`ClusterMap.lookup` (50 str ids, mmap)", None),
    ("lookup_select", "lookup + `select`", "select"),
    ("wrap_minus_store", "`Diversifier.wrap(NumpyStore)` minus store search", "wrap"),
    ("wrap_minus_store_blas1", "same, NumPy's OpenBLAS at 1 thread", "wrap"),
    ("wrap_replay_minus_store", "`Diversifier.wrap(replay store)` minus store search", "wrap"),
    ("erf", f"LangChain `EmbeddingsRedundantFilter` (thr {ERF_THRESHOLD}), first 10", "erf"),
    ("mmr", f"LangChain MMR (λ={MMR_LAMBDA})", "mmr"),
    ("wrap_store_search", "(for scale: NumpyStore search inside wrap)", None),
    ("timer_overhead", "(timer overhead: empty call)", None),
]
QUALITY_ROWS = {"top10": "no diversification (top-10)", "select": "diversify lookup + select",
                "wrap": "diversify wrap (refetch)", "erf": "EmbeddingsRedundantFilter on 50, first 10",
                "erf_top10": "EmbeddingsRedundantFilter on top-10 (compressor after k=10)",
                "mmr": "MMR λ=0.5 on 50"}


def _intro(results: dict) -> list[str]:
    lat, su, env = results["latency"], results["setup"], results.get("environment", {})
    dup = su["dup_share_of_hits"]
    loads = "; ".join(f"round {i + 1}: {r['loadavg_start'][0]}→{r['loadavg_end'][0]}"
                      for i, r in enumerate(lat["rounds"]) if r.get("loadavg_start") and r.get("loadavg_end"))
    return ["## Online: added latency, lookup memory, backend calls, vs LangChain", "",
            f"k={lat['k']} from the store's top-{lat['hits']} for {su['queries']} queries over "
            f"{su['build']['n_docs']:,} generated documents ({su['build']['n_clusters']:,} clusters from "
            f"`diversify.build`); on average {dup['mean']:.0%} of each top-{lat['hits']} "
            f"are near-duplicates of a higher hit (min {dup['min']:.0%}, max {dup['max']:.0%}). Same hits for every "
            "method.", "",
            f"Machine: {env.get('cpu')}, {env.get('usable_cpus')} usable CPUs, Python {env.get('python')}, "
            f"diversify {env.get('diversify_commit')}; load average {loads}. Shared machine: read p99 as an upper "
            "bound.", ""]


def _latency_cells(key: str, label: str, qk, lat: dict, q: dict) -> list:
    rounds, best = lat["rounds"], lat["best_of_rounds"]
    red = ret = "–"
    if qk and qk in q:
        red = f"{q[qk]['redundancy_at_10_mean']:.2f}"
        ret = "yes" if q[qk]["returned_min"] >= lat["k"] else f"no (min {q[qk]['returned_min']})"
    over = max(r[key].get("over_1ms_share", 0.0) for r in rounds)
    sl = [r[key]["slowest_input_median_us"] for r in rounds if "slowest_input_median_us" in r[key]]
    cpu = "–"
    if key + "_cpu" in best:
        cpu = f"{_f(best[key + '_cpu']['p50_us'])} / {_f(best[key + '_cpu']['p99_us'])}"
    return [label, f"{rounds[0][key]['calls']:,}", _f(best[key]["p50_us"]), f"**{_f(best[key]['p99_us'])}**",
            ", ".join(_f(r[key]["p99_us"]) for r in rounds), f"{over:.2%}", cpu, _f(min(sl)) if sl else "–", red, ret]


def _latency(results: dict, figure: bool) -> list[str]:
    lat, q = results["latency"], results.get("quality", {})
    rows = [_latency_cells(key, label, qk, lat, q) for key, label, qk in LATENCY_ROWS if key in lat["best_of_rounds"]]
    L = ["### Latency per query (µs, wall clock, gc off)", ""]
    L += table(["method", "calls/round", "p50 best", "p99 best-of-3", "p99 rounds", "calls > 1 ms (worst round)",
                "p50 / p99 CPU time (best)", "slowest hit list, median", "redundancy@10", "returns 10"],
               "lrrrlrlrrl", rows) + [""]
    if figure:
        L += [f"![online latency, p50 and p99 per method]({FIGURE})", ""]
    return L


def _quality(q: dict) -> list[str]:
    if not q:
        return []
    rows = [[lab, f"{e['returned_mean']:.2f}", e["returned_min"],
             f"{e['redundancy_at_10_mean']:.2f} / {e['redundancy_at_10_max']}", e["queries_with_redundancy"],
             _f(e.get("redundancy_at_10_planted_mean"), 2), f"{_f(e['kept_best_ranked_copy_share'] * 100, 0)}%"]
            for k, lab in QUALITY_ROWS.items() if k in q for e in [q[k]]]
    L = ["### Redundancy and rank (same 200 queries)", ""]
    L += table(["method", "mean returned", "min returned", "redundancy@10 mean / max", "queries with a duplicate",
                "redundancy@10 vs planted groups", "kept = best-ranked copy"], "lrrrrrr", rows)
    return L + [""]


def _backend(bc: dict | None) -> list[str]:
    if not bc:
        return []
    rows = []
    for key, e in bc.items():
        mode = key.split("/")[1]
        lab = "NumpyStore (exclusion)" if mode == "numpy_store_exclude" else "callable without `exclude_ids`"
        rows.append([lab, e["fetch_k"], f"{e['backend_calls_mean']:.2f}", e["backend_calls_max"],
                     f"{e['queries_refetched']} / {e['queries']}",
                     f"{e['hits_fetched_mean']:.1f} / {e['hits_fetched_max']}", e["returned_min"]])
    L = ["### Backend calls per query (k=10, max_per_cluster=1)", ""]
    L += table(["store", "fetch_k", "calls mean", "calls max", "queries refetched", "hits fetched mean / max",
                "min returned"], "lrrrrrr", rows)
    return L + [""]


def _mem_cell(e: dict, mode: str) -> str:
    x = e[mode]
    return (f"{_f(x['rss_per_doc_after_lookups'])} ({_f(x['anon_per_doc_after_lookups'])} anon "
            f"+ {_f(x['file_per_doc_after_lookups'])} file)")


def _memory(mem: dict | None) -> list[str]:
    if not mem:
        return []
    rows = [[f"{int(n):,}", e["how"], _f(e["file_bytes_per_doc"]), _f(e["lookup_arrays_bytes_per_doc"]),
             _mem_cell(e, "mmap"), _mem_cell(e, "mmap-noverify"), _mem_cell(e, "memory"),
             f"{_f(e['mmap'].get('lookup_50_p50_us'))} / {_f(e['mmap'].get('lookup_50_p99_us'))}"]
            for n, e in mem.items()]
    L = ["### Memory of the loaded lookup (bytes per document)", ""]
    L += table(["docs", "artifact made by", "file", "lookup arrays", "RSS mmap (after 20k lookups)",
                "RSS mmap, verify=False", "RSS in memory (mmap=False)", "lookup of 50 ids p50 / p99 µs (mmap)"],
               "rlrrrrrr", rows)
    return L + [""]


def online_section(results: dict) -> list[str]:
    """A RESULTS.md section from ``online.json``."""
    from ..paths import PLOTS

    L = _intro(results) + _latency(results, (PLOTS / "online_latency.png").exists())
    L += _giant(results.get("giant_cluster"))
    L += _quality(results.get("quality", {})) + _backend(results.get("backend_calls")) + _memory(results.get("memory"))
    return L + _notes(results)


GIANT_TARGET = (60.0, 150.0)  # µs: the wrapper's own work per query, median and p99 (issue 12)


def _giant(g: dict | None) -> list[str]:
    if not g:
        return []
    rows = []
    for size, e in g.items():
        b, r0 = e["best_of_rounds"], e["rounds"][0]
        top = e["big_members_in_top50"]
        rows.append([f"{int(size):,}", f"{e['n_docs']:,}", f"{top['mean']:.1f} ({top['min']}–{top['max']})",
                     f"{r0['queries_refetched_share']:.0%}", f"{r0['backend_calls_mean']:.2f}",
                     f"{r0['exclude_ids_len_mean']:.0f} / {r0['exclude_ids_len_max']}",
                     f"**{_f(b['cpu_p50_us'])} / {_f(b['cpu_p99_us'])}**",
                     f"{_f(b['cpu_per_query_median_p50_us'])} / {_f(b['cpu_per_query_median_p99_us'])}",
                     f"{_f(b['wall_p50_us'])} / {_f(b['wall_p99_us'])}",
                     f"{_f(e['store_search_50_p50_us'])} / {_f(e['store_search_50_p99_us'])}"])
    med, p99 = GIANT_TARGET
    L = ["### The wrapper's own work with a big cluster in the results (µs per query, replayed store)", ""]
    L += table(["cluster size", "docs", "its members in top-50, mean (min–max)", "queries refetched",
                "store calls", "exclude_ids on refetch, mean / max", "CPU p50 / p99", "per-query median CPU p50 / p99",
                "wall p50 / p99", "NumpyStore search(50) p50 / p99"], "rrrrrrrrrr", rows)
    return L + ["", f"`Diversifier(cm, k=10).wrap(replay store)`, defaults (fetch_k 25, max_rounds 3, "
                "max_exclude_members 1000), 200 queries; the replay store's own time is taken out. Target (issue 12): "
                f"≤ {med:g} µs median and ≤ {p99:g} µs p99 for the 1,000-member row. Setup: "
                "`benchmarks/suites/_online_giant.py`.", ""]


def _notes(results: dict) -> list[str]:
    lat, su = results["latency"], results["setup"]
    bar = lat.get("bar_p99_us", 25.0)
    sel_best = lat["best_of_rounds"].get("select", {}).get("p99_us")
    verdict = "meets" if sel_best is not None and sel_best < bar else "misses"
    return [
        "Notes:", "",
        f"- **Bar (p99 < {bar:g} µs for `select`)**: best-of-3 wall-clock p99 {_f(sel_best)} µs, which "
        f"{verdict} it on this run. On a shared machine the wall-clock tail is set by preemption: a call "
        "that loses the CPU for one scheduler slice takes milliseconds (column \"calls > 1 ms\"); once that "
        "share reaches 1% it *is* the p99. The CPU-time column (`time.thread_time_ns`, separate loop) leaves "
        "descheduled time out but still includes cache and SMT contention from other jobs. \"Slowest hit "
        "list, median\": each of the 200 hit lists is timed once per pass; the largest per-list median is "
        "what the code itself costs on its worst input, free of one-off interference.",
        "- Latency is wall clock per call (`time.perf_counter_ns` around each call, gc disabled, "
        "2 warm-up passes), repeated in 3 rounds; p50 is the best round's, the p99 headline is the best "
        "of the 3 rounds, all three are listed. `select` gets hits and cluster ids ready; lookup includes "
        "building the id list from the hits (str ids, 20k-document artifact: binary-search path).",
        "- `wrap` is end to end (fetch_k=25 from the store, convert hits, lookup, select, cursor, stats; "
        "refetch if short) minus the time spent inside the store's `search` (a timing shim; its two timer "
        "calls count against us). Over the real NumpyStore it is slower than over a replay store that "
        "returns the same precomputed hits: after the store's matrix-vector product NumPy's OpenBLAS "
        "worker threads keep spinning and compete for the 2 CPUs (the \"1 thread\" row removes that); "
        "the rest of the gap to the replay row is most likely the search evicting the wrapper's data "
        "from cache (not isolated). For a store behind a network call the replay row is the relevant one.",
        "- Peers get the precomputed datagen vectors through a lookup `Embeddings` (no model, nothing "
        "downloaded); a real `EmbeddingsRedundantFilter` would also re-embed every hit (a model call), "
        "and MMR needs the hit vectors from the store: neither cost is counted. "
        f"`EmbeddingsRedundantFilter` (default threshold {ERF_THRESHOLD}) filters whatever list it gets: "
        "on the 50 hits we take its first 10; as a compressor after a k=10 retriever it returns fewer than "
        "10 and cannot fetch more. It drops the *higher*-ranked document of a similar pair, hence its "
        "low \"kept = best-ranked copy\". MMR returns its own selection order, not rank order.",
        "- Redundancy@10 = kept hits that share a cluster with a higher kept hit, against the artifact's "
        "clusters (what we enforce) and against the generator's planted groups (ground truth). The "
        "datagen vectors are built from the planted groups (a copy = its original's vector plus noise), "
        "so vector-based peers see the planted truth exactly, while the artifact comes from text MinHash "
        f"at the default Jaccard 0.8 and agrees with the planted groups on "
        f"{su.get('artifact_vs_planted_pair_agreement', 0):.0%} of the same-cluster pairs among the hits: "
        "our residual redundancy vs planted groups is the artifact's recall, not `select`.",
        "- Backend calls: 200 queries through `Diversifier(cm, k=10, max_per_cluster=1)`; the default "
        "fetch_k (25) almost never needs a refetch at this duplicate rate, so fetch_k=10 (no over-fetch) "
        "is shown too. Without `exclude_ids` the refetch asks for a larger k and re-reads the first hits.",
        "- Memory: RSS growth of a fresh process (after loading a small artifact once, so imports are not "
        "counted) over `diversify.load` plus 20,000 lookups of 50 random ids. mmap pages are file-backed "
        "page cache (shared between processes, reclaimable), `mmap=False` is anonymous memory. "
        "`verify=True` (default) checksums the core arrays once, which pages them all in; with "
        "`verify=False` only the touched lookup pages are resident. The built 100k artifact also carries "
        "the builder's incremental state (extras), which `mmap=False` reads into memory too; the 1M "
        "artifact was assembled with `ClusterMap.from_arrays` (no extras), not built from texts.",
        "",
        f"Command: `{command(results.get('command'), DEFAULT_COMMAND)}` (took {results.get('seconds')} s; "
        "results in `benchmarks/results/online.json`).",
        "",
    ]


def plot(results: dict, path: Path) -> Path | None:
    """Bar chart (log scale) of best-of-rounds p50 / p99 per method; None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import numpy as np
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
