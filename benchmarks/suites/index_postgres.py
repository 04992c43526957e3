"""index_postgres: the live index on PostgreSQL 15, measured as the ``index`` suite measures SQLite.

The same corpus and the same two measurements as :mod:`benchmarks.suites.index`
(:func:`~benchmarks.suites.index.measure_backend`: batch adds into a full index, single-document
queries p50/p99, bytes per document; :func:`~benchmarks.suites.index.concurrency`: writer and query
processes on one index), on a ``postgresql://`` URL: ``--url`` names a server; without it the suite
starts a throw-away local PostgreSQL 15 (:mod:`benchmarks.servers`) on a
free loopback port with **durable settings** (fsync and synchronous_commit on, shared_buffers
256MB), and removes it at the end. The index lives in the schema ``diversify_bench`` /
``diversify_conc`` (``?index=``); client and server share the machine's cores.

``python -m benchmarks run --suite index_postgres [--base 200000] [--url postgresql://...]``.
"""

from __future__ import annotations

import json
import urllib.parse

from . import Suite

SUITE = Suite(
    name="index_postgres",
    summary="live index on PostgreSQL 15: batch add docs/s into a large index, query p50/p99, bytes/doc, "
            "4 writers + 4 queriers (lost / duplicated / guarantee)",
    results=("index_postgres.json",), render="benchmarks.suites.index_postgres:render",
    peers=("psycopg",), quick={"base": 5000, "measure": 2000, "duration": 10.0}, takes="~30 min at 200k on two busy cores")

#: the server settings of the throw-away server (durable: what a production server runs with)
SETTINGS = {"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on", "shared_buffers": "256MB",
            "max_wal_size": "2GB"}


def add_arguments(p) -> None:
    p.add_argument("--url", default=None, help="a postgresql:// URL (default: a throw-away local PostgreSQL 15)")
    p.add_argument("--base", type=int, default=200_000, help="documents in the index before the timed adds")
    p.add_argument("--measure", type=int, default=20_000, help="documents of the timed adds")
    p.add_argument("--batch", type=int, default=5_000, help="documents per add (one transaction each)")
    p.add_argument("--queries", type=int, default=400, help="single-document queries timed")
    p.add_argument("--writers", type=int, default=4)
    p.add_argument("--queriers", type=int, default=4)
    p.add_argument("--duration", type=float, default=60.0, help="seconds of the concurrency run")


def _with_index(url: str, name: str) -> str:
    parts = urllib.parse.urlsplit(url)
    query = [(k, v) for k, v in urllib.parse.parse_qsl(parts.query) if k != "index"] + [("index", name)]
    return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query)))


def _drop(url: str, name: str) -> None:
    """Remove an index of an earlier run on a given server (a benchmark starts from an empty index)."""
    import psycopg

    from diversify.index.postgres import libpq_url

    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "diversify_{name}" CASCADE')


def run(args, ctx) -> list:
    from ..corpora import TEXT_CORPUS, corpus_file
    from ..env import environment
    from ..paths import log, now, shown, write_json
    from .index import _texts, concurrency, measure_backend

    need = args.base + args.measure + args.queries + 10
    prefix = corpus_file(need, TEXT_CORPUS)
    texts = _texts(need)
    result: dict = {"suite": "index_postgres", "created": now(), "env": environment(), "corpus": dict(TEXT_CORPUS)}
    server = None
    if args.url is None:
        from .. import servers

        try:
            server = servers.start_postgres(SETTINGS)
        except servers.ServerUnavailable as exc:
            result["skipped"] = str(exc)
            log(f"skipped: {exc}")
            return [write_json(ctx.results / "index_postgres.json", result)]
        url = server.new_database()
        result["server"] = {"local": True, "settings": SETTINGS}
    else:
        url = args.url
        result["server"] = {"local": False}
    try:
        import psycopg

        from diversify.index.postgres import libpq_url

        with psycopg.connect(libpq_url(url)) as conn:
            result["server"]["version"] = conn.execute("SHOW server_version").fetchone()[0]
        for name in ("bench", "conc"):
            _drop(url, name)
        bench = _with_index(url, "bench")
        log(f"measure_backend postgresql base={args.base:,}")
        result["backend"] = measure_backend(bench, texts, base=args.base, measure=args.measure, batch=args.batch,
                                            queries=args.queries, log=log)
        log(f"  {json.dumps(result['backend'])}")
        result["concurrency"] = concurrency(_with_index(url, "conc"), prefix, min(need, 200_000),
                                            writers=args.writers, queriers=args.queriers, duration=args.duration,
                                            log=log)
    finally:
        if server is not None:
            server.stop()
    path = write_json(ctx.results / "index_postgres.json", result)
    log(f"wrote {shown(path)}")
    return [path]


def render(d: dict) -> list[str]:
    if "skipped" in d:
        return ["## Live index (PostgreSQL)", "", f"skipped: {d['skipped']}", ""]
    b = d.get("backend", {})
    c = d.get("concurrency", {})
    srv = d.get("server", {})
    where = (f"a local PostgreSQL {srv.get('version', '')} started by the suite ({', '.join(f'{k}={v}' for k, v in srv.get('settings', {}).items())}), "
             "on the same two cores as the client" if srv.get("local") else f"PostgreSQL {srv.get('version', '')} at --url")
    load = d.get("env", {}).get("loadavg")
    return ["## Live index (PostgreSQL)", "",
            f"Index of {b.get('base', 0):,} generated ~550-word documents, adds in batches of {b.get('batch')}; {where}"
            f"{f'; load average {load[0]} at the start (other work shared the cores)' if load else ''}.",
            "",
            "| measure | value | SQLite target |", "|---|---|---|",
            f"| batch add into the full index, docs/s (per client CPU-second) | {b.get('add_docs_per_s')} "
            f"({b.get('add_docs_per_cpu_s')}) | >= 10,000 at 1M |",
            f"| query of one document p50 / p99, ms | {b.get('query_p50_ms')} / {b.get('query_p99_ms')} | <= 2 / <= 10 |",
            f"| bytes per document (relations with their indexes) | {b.get('bytes_per_document')} | <= 1,500 |",
            f"| {c.get('writers')} writers + {c.get('queriers')} queriers: docs/s, query p50/p99 ms | "
            f"{c.get('docs_per_s')}, {c.get('query_p50_ms')} / {c.get('query_p99_ms')} | |",
            f"| lost / duplicated / guarantee held | {c.get('lost')} / {c.get('duplicated')} / "
            f"{c.get('guarantee_held')} | 0 / 0 / True |", ""]
