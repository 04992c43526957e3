"""Markdown of the index_redis suite (the live index's anchor against datasketch on Redis)."""

from __future__ import annotations

from .markdown import command, env_line, fixed, num, table


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
