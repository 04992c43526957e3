"""milvus: MilvusStore on Milvus Lite: write-back rate, per-call latency with and without the
exclusion filter, distinct clusters in top-10 (plain search, Milvus ``group_by_field``, diversify).

The integrations suite owns the cross-store table; this suite gives Milvus's own figures
(docs/integrations/milvus.md quotes them).

Corpus: licence files (``/usr/share/common-licenses``, ``/usr/share/doc/*/copyright``) and
manual pages (``/usr/share/man/man1``) of this machine, split with LangChain's
``RecursiveCharacterTextSplitter`` (1000 characters, overlap 100), embedded locally (hashed
word uni+bigram TF-IDF, randomized SVD to ``--dim``), clustered with ``diversify.build``.

``python -m benchmarks run --suite milvus [--chunks 15000] [--dim 128] [--queries 50]``
"""

from __future__ import annotations

import gzip
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from ..markdown import command, table
from . import Suite

SUITE = Suite(
    name="milvus",
    summary="MilvusStore on Milvus Lite: write_clusters points/s, search latency with and without the exclusion "
            "filter, distinct clusters in top-10 (plain, Milvus group_by_field, diversify)",
    results=("milvus.json",), render="benchmarks.suites.milvus:render",
    peers=("pymilvus", "milvus-lite", "langchain-text-splitters"), quick={"chunks": 1500, "queries": 5},
    takes="~5 min")


def add_arguments(p) -> None:
    p.add_argument("--chunks", type=int, default=15000)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--queries", type=int, default=50)


def _texts(limit_chars: int) -> list[str]:
    paths = sorted(Path("/usr/share/common-licenses").glob("*")) + sorted(Path("/usr/share/doc").glob("*/copyright"))
    paths += sorted(Path("/usr/share/man/man1").glob("*.gz"))
    out, total = [], 0
    for p in paths:
        try:
            raw = gzip.decompress(p.read_bytes()) if p.suffix == ".gz" else p.read_bytes()
        except (OSError, EOFError, gzip.BadGzipFile):
            continue
        t = raw.decode("utf-8", "replace")
        out.append(t)
        total += len(t)
        if total > limit_chars:
            break
    return out


def _chunks(n: int) -> list[str]:
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    split = RecursiveCharacterTextSplitter(chunk_size=1000, chunk_overlap=100)
    out: list[str] = []
    for t in _texts(limit_chars=n * 1200):
        out.extend(c for c in split.split_text(t) if len(c) > 50)
        if len(out) >= n:
            break
    return out[:n]


def _embed(chunks: list[str], dim: int, seed: int = 0) -> np.ndarray:
    import re
    import zlib

    import scipy.sparse as sp

    width = 1 << 18
    rows, cols = [], []
    for j, c in enumerate(chunks):
        w = re.findall(r"\w+", c.lower())
        grams = w + [a + " " + b for a, b in zip(w, w[1:])]
        rows.extend([j] * len(grams))
        cols.extend(zlib.crc32(g.encode()) % width for g in grams)
    x = sp.csr_matrix((np.ones(len(rows), dtype=np.float32), (rows, cols)), shape=(len(chunks), width))
    x.sum_duplicates()
    x.data = np.log1p(x.data)
    df = np.bincount(x.indices, minlength=width)
    x = x @ sp.diags(np.log((1 + len(chunks)) / (1 + df)).astype(np.float32) + 1)
    rng = np.random.default_rng(seed)  # randomized SVD: range finder + small dense SVD
    y = x @ rng.normal(size=(width, dim + 16)).astype(np.float32)
    q, _ = np.linalg.qr(x @ (x.T @ y))
    _, _, vt = np.linalg.svd(np.asarray((x.T @ q).T), full_matrices=False)
    v = np.asarray(x @ vt[:dim].T, dtype=np.float32)
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)


def _collection(client, name: str, dim: int) -> None:
    from pymilvus import DataType, MilvusClient

    schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=True)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=dim)
    schema.add_field("tenant", DataType.VARCHAR, max_length=8)
    schema.add_field("cluster_id", DataType.INT64, default_value=-1)
    schema.add_field("is_representative", DataType.BOOL, default_value=False)
    index = client.prepare_index_params()
    index.add_index("vector", index_type="FLAT", metric_type="COSINE")
    client.create_collection(name, schema=schema, index_params=index)


def _ms(fn, reps: int) -> tuple[float, float]:
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return 1000 * float(np.median(ts)), 1000 * float(np.percentile(ts, 90))


def _load(client, vecs, ids, cm) -> dict:
    """Insert every chunk, then write the clusters back twice (all rows, then nothing changed)."""
    from diversify.stores import MilvusStore

    out: dict = {}
    t = time.perf_counter()
    for s in range(0, len(ids), 2000):
        client.insert("docs", [{"id": i, "vector": vecs[i - 1].tolist(), "tenant": "ab"[i % 2]}
                               for i in ids[s:s + 2000]])
    client.flush("docs")
    out["insert_points_per_s"] = round(len(ids) / (time.perf_counter() - t))
    store = MilvusStore(client, "docs")
    for label in ("write_clusters (all rows)", "write_clusters again (nothing changed)"):
        t, cpu = time.perf_counter(), time.process_time()  # Milvus Lite serves from threads of this process
        n = store.write_clusters(cm)
        dt, cpu = time.perf_counter() - t, time.process_time() - cpu
        out[label] = {"rows": n, "seconds": round(dt, 2), "points_per_s": round(n / dt),
                      "points_per_cpu_s": round(n / cpu) if cpu else None}
    return out


def _latency(client, queries) -> dict:
    from diversify.stores import MilvusStore

    store = MilvusStore(client, "docs")
    q = queries[0].astype(np.float32)
    excl = [h.id for h in store.search(q, 470)]
    tenant = MilvusStore(client, "docs", filter='tenant == "a"')
    out = {}
    for label, fn in (("k=25, no filter", lambda: store.search(q, 25)),
                      ("k=25, exclusion of 470 ids", lambda: store.search(q, 25, exclude_ids=excl)),
                      ("k=25, tenant filter", lambda: tenant.search(q, 25)),
                      ("k=25, tenant filter + exclusion of 470 ids", lambda: tenant.search(q, 25, exclude_ids=excl)),
                      ("k=495 (larger k instead of exclusion)", lambda: store.search(q, 495))):
        p50, p90 = _ms(fn, 15)
        out[label] = {"median_ms": round(p50, 1), "p90_ms": round(p90, 1)}
    return out


def _distinct(client, cm, ids, queries) -> dict:
    import diversify
    from diversify.stores import MilvusStore

    store = MilvusStore(client, "docs")
    cluster = dict(zip(ids, cm.lookup(ids).tolist()))
    d = diversify.Diversifier(cm, k=10)
    rows = []
    for qq in queries.astype(np.float32):
        plain = [h.id for h in store.search(qq, 10)]
        res = d.wrap(store)(qq)
        native = client.search("docs", [qq.tolist()], limit=10, group_by_field="cluster_id",
                               output_fields=["cluster_id"])[0]
        rows.append((len({cluster[i] for i in plain}), len({h["entity"]["cluster_id"] for h in native}),
                     len({cluster[i] for i in res.ids}), res.backend_calls))
    r = np.asarray(rows, dtype=float)
    return {"queries": len(rows), "plain": round(r[:, 0].mean(), 2), "group_by": round(r[:, 1].mean(), 2),
            "group_by_min": int(r[:, 1].min()), "diversify": round(r[:, 2].mean(), 2),
            "diversify_min": int(r[:, 2].min()), "store_calls": round(r[:, 3].mean(), 2)}


def run(a, ctx) -> list:
    from pymilvus import MilvusClient

    import diversify

    from ..env import environment
    from ..paths import log, now, shown, write_json

    results: dict = {"suite": "milvus", "command": ctx.command, "created": now(), "env": environment(),
                     "loadavg_before": os.getloadavg()}
    chunks = _chunks(a.chunks)
    vecs = _embed(chunks, a.dim)
    ids = list(range(1, len(chunks) + 1))
    cm = diversify.build(texts=chunks, ids=ids).cluster_map
    results.update(chunks=len(chunks), dim=a.dim, clusters=cm.n_clusters, near_duplicates=cm.n_duplicates)
    client = MilvusClient(os.path.join(tempfile.mkdtemp(), "probe.db"))
    try:
        _collection(client, "docs", a.dim)
        results["writes"] = _load(client, vecs, ids, cm)
        rng = np.random.default_rng(1)
        queries = vecs[rng.integers(0, len(ids), size=a.queries)] + 0.02 * rng.normal(size=(a.queries, a.dim))
        results["search"] = _latency(client, queries)
        results["distinct_clusters_top10"] = _distinct(client, cm, ids, queries)
    finally:
        client.close()
    results["loadavg_after"] = os.getloadavg()
    path = write_json(ctx.results / "milvus.json", results)
    log(f"wrote {shown(path)}")
    return [path]


# --- RESULTS.md section

def render(d: dict) -> list[str]:
    w, s, c = d["writes"], d["search"], d["distinct_clusters_top10"]
    L = [f"## MilvusStore on Milvus Lite: {d['chunks']:,} chunks, {d['clusters']:,} clusters", "",
         f"Command: `{command(d.get('command'), 'python -m benchmarks run --suite milvus')}`, {d.get('created')}. "
         f"Insert + flush {w['insert_points_per_s']:,} points/s.", ""]
    L += table(["write-back", "rows", "points/s", "points per CPU-second"], "lrrr",
               [[k, v["rows"], v["points_per_s"], v["points_per_cpu_s"]] for k, v in w.items() if isinstance(v, dict)])
    L += ["", *table(["search", "median ms", "p90 ms"], "lrr", [[k, v["median_ms"], v["p90_ms"]] for k, v in s.items()])]
    L += ["", f"Distinct clusters in the top-10 over {c['queries']} queries: plain {c['plain']}, Milvus group_by "
          f"{c['group_by']} (min {c['group_by_min']}), diversify {c['diversify']} (min {c['diversify_min']}) in "
          f"{c['store_calls']} store calls."]
    return L + [""]
