"""integrations: diversify inside the stores and frameworks, on a real chunked corpus.

Licence files and manual pages of this machine, split by LangChain's
``RecursiveCharacterTextSplitter`` (~15k chunks), local TF-IDF + SVD vectors, the artifact from
``diversify.build`` (default config); 60 queries (12-word windows of chunks drawn with a fixed
seed), each run open and with its chunk's tenant as the user's filter. Per row (store adapter,
LangChain / LlamaIndex / Haystack retriever, the ecosystems' MMR and redundancy filters):
distinct clusters and exact-Jaccard near-duplicate pairs in the top-10, store and embedding
calls, wrapper CPU beyond the store, filter violations. The work lives in
``benchmarks/integrations/``; this registers it with the harness.
"""

from __future__ import annotations

from . import Suite

SUITE = Suite(
    name="integrations",
    summary="stores x frameworks on ~15k real chunks: distinct clusters / exact near-dup pairs in top-10, store and "
            "embedding calls, wrapper CPU, filter violations; vs LangChain MMR + EmbeddingsRedundantFilter, "
            "LlamaIndex MMR, Qdrant groups, Milvus group_by",
    results=("integrations.json",), render="benchmarks.report.integrations:render",
    peers=("langchain-community", "llama-index-core", "haystack-ai", "qdrant-client", "chromadb", "lancedb",
           "pymilvus"),
    quick={"chunks": 3000, "queries": 20, "slow_queries": 5}, takes="~20 min (2 busy cores); --quick ~1.5 min")


def add_arguments(p) -> None:
    from ..integrations.run import GROUPS

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
    from ..integrations.measure import checks, make_judge
    from ..integrations.run import PEERS, make_queries, plugin_paths, run_groups, setup
    from ..paths import log, now, shown, write_json
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
