"""integrations: diversify inside the stores and frameworks, on a real chunked corpus.

Licence files and manual pages of this machine, split by LangChain's
``RecursiveCharacterTextSplitter`` (~15k chunks), local TF-IDF + SVD vectors, the artifact from
``diversify.build`` (default config); 60 queries (12-word windows of chunks drawn with a fixed
seed), each run open and with its chunk's tenant as the user's filter. Per row (store adapter,
LangChain / LlamaIndex / Haystack retriever, the ecosystems' MMR and redundancy filters):
distinct clusters and exact-Jaccard near-duplicate pairs in the top-10, store and embedding
calls, wrapper CPU beyond the store, filter violations. The work lives in
``benchmarks/rag/``; this registers it with the harness.
"""

from __future__ import annotations

from ..markdown import NONE, command, env_line, fixed, num, table
from . import Suite

SUITE = Suite(
    name="integrations",
    summary="stores x frameworks on ~15k real chunks: distinct clusters / exact near-dup pairs in top-10, store and "
            "embedding calls, wrapper CPU, filter violations; vs LangChain MMR + EmbeddingsRedundantFilter, "
            "LlamaIndex MMR, Qdrant groups, Milvus group_by",
    results=("integrations.json",), render="benchmarks.suites.integrations:render",
    peers=("langchain-community", "llama-index-core", "haystack-ai", "qdrant-client", "chromadb", "lancedb",
           "pymilvus"),
    quick={"chunks": 3000, "queries": 20, "slow_queries": 5}, takes="~20 min (2 busy cores); --quick ~1.5 min")


def add_arguments(p) -> None:
    from ..rag.run import GROUPS

    p.add_argument("--chunks", type=int, default=15_000, help="chunks in the corpus (default 15000)")
    p.add_argument("--queries", type=int, default=60, help="queries (default 60)")
    p.add_argument("--seed", type=int, default=7, help="file order, query draw, SVD (default 7)")
    p.add_argument("--groups", nargs="+", default=list(GROUPS), choices=list(GROUPS),
                   help="which stores / frameworks to run (default all)")
    p.add_argument("--slow-queries", type=int, default=20,
                   help="queries for rows that take seconds per query (LlamaIndex's MMR): the first N (default 20)")
    p.add_argument("--modes", nargs="+", default=["open", "tenant"], choices=["open", "tenant"],
                   help="open: no user filter; tenant: the query's tenant as the user's filter")


def _close(stores: dict) -> None:
    for obj in stores.values():
        for o in obj if isinstance(obj, tuple) else (obj,):
            close = getattr(o, "close", None)
            if callable(close):
                try:
                    close()
                except Exception:
                    pass


def run(args, ctx) -> list:
    import tempfile
    import time

    from ..env import environment, loadavg, version
    from ..paths import log, now, shown, write_json
    from ..rag.measure import checks, make_judge
    from ..rag.run import PEERS, make_queries, plugin_paths, run_groups, setup
    from ._online_latency import blas_threads

    t0 = time.perf_counter()
    results = {"benchmark": "integrations", "command": ctx.command, "started_utc": now(), "loadavg_start": loadavg(),
               "quick": ctx.quick}
    blas = blas_threads()
    if blas is not None:
        blas_threads(1)  # idle OpenBLAS workers spin and would be counted as CPU of whatever runs next
    try:
        with tempfile.TemporaryDirectory(prefix="diversify-integrations-") as wd:
            results["plugins"] = plugin_paths()
            results["environment"] = environment({d: version(d) for d in PEERS})
            results["environment"]["blas_threads"] = {"before": blas, "during": 1 if blas is not None else None}
            s, info = setup(args.chunks, args.seed, wd)
            results.update(info)
            queries = make_queries(s, args.queries, args.seed + 1)
            results["queries"] = {"n": len(queries), "words": 12, "examples": [q.text for q in queries[:5]],
                                  "tenants": sorted({q.tenant for q in queries})}
            rows, skipped = run_groups(args.groups, queries, args.modes, s, make_judge(s), args.slow_queries)
            _close(s.stores)
    finally:
        if blas is not None:
            blas_threads(blas)
    results.update({"k": 10, "modes": args.modes, "slow_queries": args.slow_queries, "rows": rows, "skipped": skipped, "checks": checks(rows),
                    "loadavg_end": loadavg(), "seconds": round(time.perf_counter() - t0, 1)})
    path = write_json(ctx.results / "integrations.json", results)
    failed = [c for c in results["checks"] if not c["ok"]]
    log(f"wrote {shown(path)}; checks: {len(results['checks']) - len(failed)} passed, {len(failed)} failed")
    return [path]


# --- RESULTS.md section

DEFAULT_COMMAND = "python -m benchmarks run --suite integrations"
KIND = {"baseline": "plain top-10", "diversify": "**diversify**", "peer": "ecosystem's own"}
HEADER = ["framework", "store", "method", "distinct clusters@10 (min)", "near-dup pairs@10 (max)",
          "returned (min)", "store calls/q (max)", "embed calls/q", "own CPU ms/q p50 / p99", "total CPU ms/q",
          "wall ms p50 / p99", "filter violations (tenant)", "tenant: distinct / returned (min) / calls"]


def _f(x, nd=2):
    return fixed(x, nd, none=NONE)


def _violations(r: dict) -> str:
    t = r["modes"].get("tenant")
    if r.get("filter") is None:
        return "no filter (n/a)"
    if not t or "violations" not in t:
        return NONE
    v = t["violations"]
    cell = f"{v} of {t['results']:,}" + (f" ({t['violating_queries']} q)" if v else "")
    return cell if v == 0 else f"**{cell}**"


def _cells(r: dict, main: str, n: int) -> list:
    m = r["modes"].get(main, {})
    t = r["modes"].get("tenant", {})
    few = f", first {m['queries']} queries" if m.get("queries", n) < n else ""
    lead = [r["framework"], r["store"], f"{r['method']} ({KIND.get(r['kind'], r['kind'])}{few})"]
    if "distinct_mean" not in m:
        why = m.get("first_errors", ["not measured"])[0] if m.get("errors") else "not measured"
        return [*lead, f"failed: {why}"[:160]] + [""] * (len(HEADER) - 4)
    err = f" · {m['errors']} errors" if m.get("errors") else ""
    return [*lead, f"{_f(m['distinct_mean'])} ({m['distinct_min']})",
            f"{_f(m['dup_pairs_mean'])} ({m['dup_pairs_max']})", f"{_f(m['returned_mean'], 1)} ({m['returned_min']})",
            f"{_f(m['store_calls_mean'])} ({m['store_calls_max']})" + err, _f(m["embed_calls_mean"]),
            f"{_f(m['own_cpu_ms_p50'])} / {_f(m['own_cpu_ms_p99'])}", _f(m["cpu_ms_mean"]),
            f"{_f(m['wall_ms_p50'], 1)} / {_f(m['wall_ms_p99'], 1)}", _violations(r),
            f"{_f(t['distinct_mean'])} / {_f(t['returned_mean'], 1)} ({t['returned_min']}) / {_f(t['store_calls_mean'])}"
            if "distinct_mean" in t else NONE]


def _intro(d: dict) -> list[str]:
    c, a, e, q = d["corpus"], d["artifact"], d["embedding"], d["queries"]
    lic, man = c["licence"], c["man"]
    return [
        "## Integrations: stores x frameworks on real chunks", "",
        f"{c['chunks']:,} chunks ({lic['chunks']:,} of {lic['files_used']} licence/copyright files, {man['chunks']:,} "
        f"of {man['files_used']} manual pages on this machine; {c['splitter']}, at most {c['max_chunks_per_file']} "
        f"per file), {len(c['tenants'])} tenants by file. Vectors: local TF-IDF ({e['vocabulary']:,} terms) + "
        f"truncated SVD to {e['dim']} dimensions, normalized; nothing downloaded. Artifact: {a['api']} — "
        f"{a['n_clusters']:,} clusters, {a['docs_in_multi_member_clusters_share']:.0%} of chunks in a cluster "
        f"with another chunk, largest {a['largest_cluster']}. {q['n']} queries ({q['words']}-word windows of "
        f"chunks drawn with a fixed seed, e.g. “{q['examples'][0]}”), k={d['k']}.", "",
        "Columns are over the open queries (no user filter); *filter violations* and *tenant* run every query "
        "again with its chunk's tenant as the user's filter, given the way the method takes it. Distinct "
        "clusters come from the artifact; near-duplicate pairs are counted independently (exact Jaccard ≥ 0.8 "
        "of word 5-shingles, `benchmarks/rag/shingles.py`). *Store calls* are counted on the vendor "
        "client for the core rows (Qdrant `query_points`, Chroma `query`, LanceDB query execution, FAISS "
        "`search`, Milvus `search`) and on the framework's store method otherwise (LangChain's embeds the "
        "query inside it); nested calls count once. *Own CPU* is process CPU time of the whole call minus "
        "that of the store and embedding calls inside it: the wrapper's and the framework's own work (for "
        "the ecosystems' MMR the work is inside the store call, so read *total CPU*). Timing is rough: a shared 2-core machine (load "
        f"{d['loadavg_start'][0]} → {d['loadavg_end'][0]}), OpenBLAS at 1 thread, process CPU counts every "
        "thread (Chroma, LanceDB) but not Milvus Lite's server process.", "",
        f"Machine: {env_line(d.get('environment', {}))}.", ""]


def render(d: dict) -> list[str]:
    main = "open" if "open" in d.get("modes", ["open"]) else "tenant"
    lines = _intro(d)
    lines += table(HEADER, "lllrrrrrrrrll", [_cells(r, main, d["queries"]["n"]) for r in d["rows"]]) + [""]
    for s in d.get("skipped", []):
        lines.append(f"- skipped {s['group']}: {s['reason']}")
    notes = sorted({f"{r['framework']} · {r['store']} · {r['method']}: {r['note']}" for r in d["rows"] if r.get("note")})
    lines += [f"- {n}" for n in notes] + [""]
    lines += _checks(d.get("checks", []))
    lines += [f"Reproduce: `{command(d.get('command'), DEFAULT_COMMAND)}` ({num(d.get('seconds'), 0)} s).", ""]
    return lines


def _checks(checks: list[dict]) -> list[str]:
    """Every failed check on its own line; the passed ones counted per check."""
    if not checks:
        return []
    failed = [c for c in checks if not c["ok"]]
    lines = [f"### Checks: {len(checks) - len(failed)} passed, {len(failed)} failed", ""]
    kinds = sorted({c["check"] for c in checks})
    rows = [[k, sum(c["ok"] for c in checks if c["check"] == k), sum(not c["ok"] for c in checks if c["check"] == k)]
            for k in kinds]
    lines += table(["check", "passed", "failed"], "lrr", rows) + [""]
    if failed:
        lines += table(["failed check", "row", "mode", "got"], "llll",
                       [[c["check"], c["row"], c["mode"], c["got"]] for c in failed]) + [""]
    return lines
