"""index_redis: the live index's anchor — datasketch's ``MinHashLSH`` with its Redis storage vs
``diversify.Index`` on the same Redis server (and on SQLite), same corpus, num_perm and threshold.

Insert: datasketch sketches each text (5-word shingle strings, ``MinHash.update_batch``) and
inserts through an ``insertion_session`` (its buffered Redis pipeline); diversify adds the texts in
batches (``Index.add``: sketching, band lookup, verification, assignment, one commit per batch).
Query: datasketch ``MinHashLSH.query`` per document (its API has no batched query: its query
buffer intersects the buffered queries), diversify ``Index.query`` on the same documents in one
batch and one document at a time (latency percentiles). datasketch is reported twice: from the
texts (what a user of it pays) and its storage step alone (MinHash objects given, most
favourable to it). All tools run in this one process, one after the other, on one corpus.
"""

from __future__ import annotations

import tempfile
import time
import uuid

from ..markdown import command, env_line, fixed, num, table
from . import Suite

NUM_PERM, THRESHOLD = 128, 0.8

SUITE = Suite(
    name="index_redis",
    summary="live index on Redis vs datasketch MinHashLSH with its Redis storage (same server, corpus, 128 perms, "
            "threshold 0.8): insert and query docs/s, single-query latency, memory per document; SQLite beside",
    results=("index_redis-n*.json",), render="benchmarks.suites.index_redis:index_redis_section",
    peers=("datasketch",), quick={"n": 2000, "queries": 300, "figures_base": 2000, "figures_measure": 1000,
                                       "figures_batch": 500, "duration": 10.0}, takes="~15 min at 20k docs")


def add_arguments(p) -> None:
    p.add_argument("--n", type=int, default=20_000, help="documents indexed (default 20000)")
    p.add_argument("--batch", type=int, default=1000, help="documents per Index.add batch (default 1000)")
    p.add_argument("--queries", type=int, default=1000, help="documents queried by each tool (default 1000)")
    p.add_argument("--singles", type=int, default=300, help="single-document queries timed for latency (default 300)")
    p.add_argument("--redis-url", default=None,
                   help="a Redis server to use (default: start a throw-away redis-server on loopback)")
    p.add_argument("--tools", nargs="+", default=["datasketch", "redis", "sqlite"],
                   choices=["datasketch", "redis", "sqlite"], help="tools, in order")
    p.add_argument("--figures-base", type=int, default=50_000,
                   help="the index suite's figures on Redis (benchmarks.suites.index.measure_backend): documents in "
                        "the index before the timed adds; 0 skips them and the concurrency run (default 50000)")
    p.add_argument("--figures-measure", type=int, default=10_000, help="documents of the timed adds (default 10000)")
    p.add_argument("--figures-batch", type=int, default=5_000, help="documents per timed add (default 5000)")
    p.add_argument("--writers", type=int, default=4,
                   help="writer processes of the concurrency run (default 4; 0 skips the run)")
    p.add_argument("--queriers", type=int, default=4, help="query processes of the concurrency run (default 4)")
    p.add_argument("--duration", type=float, default=30.0, help="seconds of the concurrency run (default 30)")


def _used_memory(client) -> int:
    return int(client.info("memory")["used_memory"])


def _server_cpu(client) -> float:
    """CPU seconds the Redis server has used (user + system, all its threads)."""
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def _with_server_cpu(client, fn):
    """``timed(fn)`` plus the Redis server's CPU seconds during it (``server_cpu_s``)."""
    from ..protocol import timed

    before = _server_cpu(client) if client is not None else 0.0
    out, rec = timed(fn)
    rec["server_cpu_s"] = (_server_cpu(client) - before) if client is not None else 0.0
    return out, rec


def _fresh_server(server, client):
    """Restart the throw-away server on an empty directory (same binary, port and config), so that
    no tool pays for the previous one's append-only file (its rewrite, its fsyncs); a new client."""
    import shutil

    import redis

    client.close()
    server.stop()
    shutil.rmtree(server.directory, ignore_errors=True)
    server.directory.mkdir()
    server.start()
    return redis.Redis(host="127.0.0.1", port=server.port)


def _per_cpu(n: int, *recs: dict) -> float:
    """Documents per CPU-second of this process and the Redis server together (less sensitive to
    other people's load than wall-clock docs/s)."""
    cpu = sum(r["cpu_s"] + r.get("server_cpu_s", 0.0) for r in recs)
    return n / cpu if cpu > 0 else float("nan")


def _percentiles(seconds: list[float]) -> dict:
    import numpy as np

    a = np.asarray(seconds) * 1000
    return dict(p50_ms=float(np.percentile(a, 50)), p90_ms=float(np.percentile(a, 90)),
                p99_ms=float(np.percentile(a, 99)), mean_ms=float(a.mean()))


def _planted_found(sources, found) -> dict:
    """Of the planted near-duplicates among the queried documents, how many a tool matched with
    their source (``found[i]``: the set of documents matched with document i)."""
    hits = total = 0
    for i, src in enumerate(sources):
        if src >= 0 and src != i:
            total += 1
            hits += int(src in found[i])
    return dict(planted=total, found=hits, share=hits / total if total else None)


def run_datasketch(texts, sources, host: str, port: int, db: int, args) -> dict:
    import redis
    from datasketch import MinHash, MinHashLSH

    from ..reference import shingle_strings

    proto = MinHash(num_perm=NUM_PERM, seed=1)

    def sketch(batch):
        out = []
        for text in batch:
            m = MinHash(num_perm=NUM_PERM, seed=1, permutations=proto.permutations, scheme=proto.scheme)
            m.update_batch([s.encode("utf-8") for s in shingle_strings(text)])
            out.append(m)
        return out

    basename = f"bench-{uuid.uuid4().hex[:8]}".encode()
    config = {"type": "redis", "basename": basename, "redis": {"host": host, "port": port, "db": db}}
    client = redis.Redis(host=host, port=port, db=db)
    sketch(texts[:50])  # warm-up (imports, numpy)
    before = _used_memory(client)
    sigs, t_sketch = _with_server_cpu(client, lambda: sketch(texts))
    lsh = MinHashLSH(threshold=THRESHOLD, num_perm=NUM_PERM, storage_config=config)

    def insert():
        with lsh.insertion_session() as session:
            for i, m in enumerate(sigs):
                session.insert(i, m, check_duplication=False)

    _, t_insert = _with_server_cpu(client, insert)
    memory = _used_memory(client) - before
    q = sigs[:args.queries]
    qs, t_qsketch = _with_server_cpu(client, lambda: sketch(texts[:args.queries]))
    found, t_query = _with_server_cpu(client, lambda: [set(lsh.query(m)) for m in qs])
    singles = []
    for m in q[:args.singles]:
        t = time.perf_counter()
        lsh.query(m)
        singles.append(time.perf_counter() - t)
    n = len(texts)
    client.close()
    return dict(
        tool="datasketch", n=n, bands=lsh.b, rows=lsh.r,
        sketch=t_sketch, insert=t_insert, query_sketch=t_qsketch, query=t_query,
        insert_docs_per_s=n / (t_sketch["seconds"] + t_insert["seconds"]),
        insert_docs_per_s_storage_only=n / t_insert["seconds"],
        query_docs_per_s=len(q) / (t_qsketch["seconds"] + t_query["seconds"]),
        query_docs_per_s_storage_only=len(q) / t_query["seconds"],
        insert_docs_per_cpu_s=_per_cpu(n, t_sketch, t_insert), query_docs_per_cpu_s=_per_cpu(len(q), t_qsketch, t_query),
        single_query_storage_only=_percentiles(singles),
        memory_bytes=memory, bytes_per_doc=memory / n,
        planted=_planted_found(sources[:len(q)], found))


def run_index(kind: str, url: str, warm_url: str, texts, sources, args, client=None) -> dict:
    import diversify


    config = diversify.BuildConfig(minhash=diversify.MinHashConfig(num_perm=NUM_PERM, threshold=THRESHOLD))
    n = len(texts)
    ids = list(range(n))
    # Warm-up: the same work on the first 3,000 documents in another index, so that every kernel the
    # run needs is compiled before it is timed (a first compile mid-run costs one batch tens of seconds)
    with diversify.Index(warm_url, config=config) as warm:
        for lo in range(0, min(n, 3000), args.batch):
            warm.add(texts[lo:lo + args.batch], ids=ids[lo:lo + args.batch])
        warm.query(texts[:args.queries])
        for text in texts[:20]:
            warm.query([text])
    before = _used_memory(client) if client is not None else 0
    idx = diversify.Index(url, config=config)

    def add_all():
        batches = []
        for lo in range(0, n, args.batch):
            t = time.perf_counter()
            idx.add(texts[lo:lo + args.batch], ids=ids[lo:lo + args.batch])
            batches.append(time.perf_counter() - t)
        return batches

    batches, t_add = _with_server_cpu(client, add_all)
    stats = idx.stats()
    memory = (_used_memory(client) - before) if client is not None else stats.get("bytes")
    qn = min(args.queries, n)
    matches, t_query = _with_server_cpu(client, lambda: idx.query(texts[:qn]))
    singles = []
    for text in texts[:args.singles]:
        t = time.perf_counter()
        idx.query([text])
        singles.append(time.perf_counter() - t)
    by_cluster: dict = {}
    for j, c in zip(ids, idx.cluster_of(ids)):
        by_cluster.setdefault(c, set()).add(j)
    found = [by_cluster.get(c, set()) for c in idx.cluster_of(ids[:qn])]
    idx.close()
    return dict(
        tool=f"diversify-{kind}", n=n, batch=args.batch, add=t_add, query=t_query,
        insert_docs_per_s=n / t_add["seconds"], batch_seconds=_percentiles(batches),
        insert_docs_per_s_median_batch=args.batch / (_percentiles(batches)["p50_ms"] / 1000),
        query_docs_per_s=qn / t_query["seconds"], single_query=_percentiles(singles),
        insert_docs_per_cpu_s=_per_cpu(n, t_add), query_docs_per_cpu_s=_per_cpu(qn, t_query),
        memory_bytes=memory, bytes_per_doc=(memory / n) if memory else None,
        documents=stats.get("documents"), clusters=stats.get("clusters"), folded=stats.get("folded"),
        band_rows=stats.get("band_rows"), matched_queries=sum(1 for m in matches if m.matched),
        planted=_planted_found(sources[:qn], found))


def _own_server(tmp: str):
    """A throw-away redis-server (the suite restarts it empty for each tool); (server, url)."""
    import shutil
    from pathlib import Path

    from ..servers import RedisServer

    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("index_redis: redis-server is not installed (apt-get install -y redis-server), "
                         "or pass --redis-url")
    server = RedisServer(binary, Path(tmp) / "redis")
    server.directory.mkdir()
    server.start()
    return server, f"redis://127.0.0.1:{server.port}/0"


def _tool_rows(args, texts, sources, url: str, server, client, tmp: str):
    """Each tool on the same documents (a fresh server per tool when the suite owns it); (rows, client)."""
    from ..paths import log

    rows = {}
    for tool in args.tools:
        if server is not None:
            client = _fresh_server(server, client)
        log(f"{tool} on {args.n:,} documents ...")
        if tool == "datasketch":
            kw = client.connection_pool.connection_kwargs
            rows[tool] = run_datasketch(texts, sources, kw.get("host", "127.0.0.1"), kw.get("port", 6379),
                                        kw.get("db", 0), args)
        elif tool == "redis":
            sep = "&" if "?" in url else "?"
            tag = uuid.uuid4().hex[:8]
            rows[tool] = run_index("redis", f"{url}{sep}index=bench{tag}", f"{url}{sep}index=warm{tag}", texts,
                                   sources, args, client)
        else:
            rows[tool] = run_index("sqlite", f"sqlite:///{tmp}/index.db", f"sqlite:///{tmp}/warm.db", texts,
                                   sources, args)
        r = rows[tool]
        log(f"  {tool}: insert {r['insert_docs_per_s']:,.0f} docs/s, query {r['query_docs_per_s']:,.0f} docs/s")
    return rows, client


def _ratios(rows: dict) -> dict:
    ratios = {}
    if "datasketch" in rows:
        ds = rows["datasketch"]
        for tool in ("redis", "sqlite"):
            if tool in rows:
                r = rows[tool]
                ratios[tool] = dict(
                    insert=r["insert_docs_per_s"] / ds["insert_docs_per_s"],
                    insert_vs_storage_only=r["insert_docs_per_s"] / ds["insert_docs_per_s_storage_only"],
                    query=r["query_docs_per_s"] / ds["query_docs_per_s"],
                    query_vs_storage_only=r["query_docs_per_s"] / ds["query_docs_per_s_storage_only"],
                    insert_per_cpu=r["insert_docs_per_cpu_s"] / ds["insert_docs_per_cpu_s"],
                    query_per_cpu=r["query_docs_per_cpu_s"] / ds["query_docs_per_cpu_s"])
    return ratios


def _figures(args, url: str, server, client):
    """The index suite's figures (and its concurrency run) on Redis; (figures, client)."""
    from ..corpora import TEXT_CORPUS, corpus_file, load_texts
    from ..paths import log
    from .index import concurrency, measure_backend

    figures: dict = {}
    if args.figures_base <= 0:
        return figures, client
    sep = "&" if "?" in url else "?"
    need = args.figures_base + args.figures_measure + args.singles + 10
    fig_prefix = corpus_file(need, TEXT_CORPUS)
    if server is not None:
        client = _fresh_server(server, client)
    before = _used_memory(client)
    log(f"index suite figures on redis, base {args.figures_base:,} ...")
    fig = measure_backend(f"{url}{sep}index=figures{uuid.uuid4().hex[:8]}", load_texts(fig_prefix),
                          base=args.figures_base, measure=args.figures_measure, batch=args.figures_batch,
                          queries=args.singles, log=log)
    fig["redis_used_memory_per_document"] = (_used_memory(client) - before) / max(fig.get("documents") or 1, 1)
    figures["backend"] = fig
    if args.writers > 0:
        if server is not None:
            client = _fresh_server(server, client)
        log(f"{args.writers} writers + {args.queriers} queriers on redis for {args.duration:g} s ...")
        figures["concurrency"] = concurrency(f"{url}{sep}index=conc{uuid.uuid4().hex[:8]}", fig_prefix,
                                             min(need, 200_000), writers=args.writers, queriers=args.queriers,
                                             duration=args.duration, log=log)
    return figures, client


def run(args, ctx) -> list:
    import shutil

    import numpy as np
    import redis

    from ..corpora import TEXT_CORPUS, corpus_file, corpus_params, load_texts
    from ..env import environment
    from ..paths import log, now, shown, write_json

    prefix = corpus_file(args.n, TEXT_CORPUS)
    texts = load_texts(prefix)
    sources = np.load(prefix + ".npz")["source"].astype(np.int64).tolist()
    server = None
    tmp = tempfile.mkdtemp(prefix="dvf-bench-index-")
    try:
        if args.redis_url is None:
            server, url = _own_server(tmp)
        else:
            url = args.redis_url
        client = redis.Redis.from_url(url.split("?", 1)[0])
        info = client.info("server")
        rows, client = _tool_rows(args, texts, sources, url, server, client, tmp)
        figures, client = _figures(args, url, server, client)
        payload = dict(suite="index_redis", created=now(), env=environment(), command=ctx.command,
                       corpus=corpus_params(prefix), num_perm=NUM_PERM, threshold=THRESHOLD, batch=args.batch,
                       queries=args.queries, singles=args.singles,
                       redis=dict(version=info.get("redis_version"), own_server=server is not None,
                                  appendonly=server is not None or None, fresh_server_per_tool=server is not None),
                       load_note="shared 2-core machine: numbers are indicative; compare the ratios, measured in one run",
                       tools=rows, ratios=_ratios(rows), figures=figures)
        client.close()
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    path = write_json(ctx.results / f"index_redis-n{args.n}.json", payload)
    log(f"wrote {shown(path)}")
    return [path]


# --- RESULTS.md section

def _ms(d: dict | None, key: str) -> str:
    return fixed(d.get(key), 2) if d else "—"


def index_redis_section(d: dict) -> list[str]:
    t = d["tools"]
    c = d["corpus"]
    L = [f"## Live index on Redis vs datasketch MinHashLSH on Redis: {d['tools'][next(iter(t))]['n']:,} documents",
         "",
         f"Generated corpus (~{c['words_per_doc']} words, {c['dup_fraction']:.0%} planted near-duplicates, edit rates "
         f"{c['edit_rate'][0]}–{c['edit_rate'][1]}), {d['num_perm']} permutations, threshold {d['threshold']}, the same Redis "
         f"{d['redis'].get('version')} server for all (loopback, append-only file on"
         f"{', restarted empty for each tool' if d['redis'].get('fresh_server_per_tool') else ''}); diversify adds in batches of "
         f"{d['batch']:,}; {d['queries']:,} documents queried; {d['singles']:,} single-document queries for latency. "
         f"Command: `{command(d.get('command'), 'python -m benchmarks run --suite index_redis')}`. Measured "
         f"{d['created']} on {env_line(d['env'])}. **{d.get('load_note', '')}**.", ""]
    rows = []
    ds = t.get("datasketch")
    if ds:
        rows.append(["datasketch MinHashLSH (redis), from texts", num(ds["insert_docs_per_s"]),
                     num(ds.get("insert_docs_per_cpu_s")), num(ds["query_docs_per_s"]), num(ds.get("query_docs_per_cpu_s")),
                     "—", "—", num(ds["bytes_per_doc"]), fixed(ds["planted"]["share"], 3)])
        rows.append(["datasketch, storage step only (MinHash given)", num(ds["insert_docs_per_s_storage_only"]), "",
                     num(ds["query_docs_per_s_storage_only"]), "", _ms(ds["single_query_storage_only"], "p50_ms"),
                     _ms(ds["single_query_storage_only"], "p99_ms"), "", ""])
    for key, label in (("redis", "diversify Index, redis://"), ("sqlite", "diversify Index, sqlite://")):
        r = t.get(key)
        if r:
            rows.append([label, num(r["insert_docs_per_s"]), num(r.get("insert_docs_per_cpu_s")),
                         num(r["query_docs_per_s"]), num(r.get("query_docs_per_cpu_s")), _ms(r["single_query"], "p50_ms"),
                         _ms(r["single_query"], "p99_ms"), num(r["bytes_per_doc"]), fixed(r["planted"]["share"], 3)])
    L += table(["tool", "insert docs/s", "insert docs/CPU-s", "query docs/s", "query docs/CPU-s", "1-doc query p50 ms",
                "p99 ms", "bytes/doc", "planted dups found"], "lrrrrrrrr", rows) + [""]
    for key in ("redis", "sqlite"):
        r = t.get(key)
        if r and r.get("batch_seconds"):
            b = r["batch_seconds"]
            L.append(f"- {key}: add batches of {d['batch']:,} took p50 {b['p50_ms'] / 1000:.2f} s, p99 "
                     f"{b['p99_ms'] / 1000:.2f} s ({num(r.get('insert_docs_per_s_median_batch'))} docs/s at the median "
                     f"batch); {num(r.get('clusters'))} clusters, {num(r.get('band_rows'))} band rows.")
    for key, ratio in d.get("ratios", {}).items():
        cpu = (f"; per CPU-second (this process + the Redis server): insert {ratio['insert_per_cpu']:.1f}×, query "
               f"{ratio['query_per_cpu']:.1f}×" if "insert_per_cpu" in ratio else "")
        L.append(f"- {key}: insert {ratio['insert']:.1f}× datasketch from texts ({ratio['insert_vs_storage_only']:.1f}× its "
                 f"storage step alone); query {ratio['query']:.1f}× ({ratio['query_vs_storage_only']:.1f}×){cpu}. "
                 "Targets: ≥ 10× insert, ≥ 5× query.")
    f = d.get("figures") or {}
    b, c = f.get("backend"), f.get("concurrency")
    if b:
        L += ["", f"The index suite's figures on Redis (index of {b.get('base', 0):,} documents, adds of "
              f"{b.get('batch', 0):,}):", ""]
        rows2 = [["batch add into the full index, docs/s", num(b.get("add_docs_per_s"))],
                 ["query of one document p50 / p99, ms", f"{fixed(b.get('query_p50_ms'), 2)} / {fixed(b.get('query_p99_ms'), 2)}"],
                 ["Redis memory per document, bytes", num(b.get("redis_used_memory_per_document"))]]
        if c:
            rows2 += [[f"{c.get('writers')} writers + {c.get('queriers')} queriers, {fixed(c.get('duration_s'), 0)} s: "
                       "docs/s, query p50 / p99 ms",
                       f"{num(c.get('docs_per_s'))}, {fixed(c.get('query_p50_ms'), 2)} / {fixed(c.get('query_p99_ms'), 2)}"],
                      ["lost / duplicated / guarantee held",
                       f"{c.get('lost')} / {c.get('duplicated')} / {c.get('guarantee_held')}"]]
        L += table(["measure", "value"], "lr", rows2)
    return L + ["", "datasketch: `MinHash(num_perm=128).update_batch` over 5-word shingle strings, "
                "`MinHashLSH(threshold=0.8, num_perm=128, storage_config={'type': 'redis', ...})`, inserted through "
                "`insertion_session()`, queried with `query()` per document (its only query path that answers per "
                "document). diversify: `Index(url, BuildConfig(minhash=MinHashConfig(num_perm=128, threshold=0.8)))`, "
                "`add` per batch (sketch, band lookup, verification, assignment, one commit), `query` of all queried "
                "documents in one call; 1-doc latency is `query([text])` from the text (datasketch's: `query(m)`, "
                "its MinHash given). Memory: Redis `used_memory` growth per document (SQLite: the file). "
                "Planted dups found: share of the planted near-duplicates among the queried documents matched "
                "with their source (the corpus includes pairs below the threshold, so 1.0 is not expected).", ""]
