"""index: the live index (diversify.Index) on a storage URL, by default an SQLite file.

Four measurements, each callable on its own (the PostgreSQL and Redis suites call
:func:`measure_backend` and :func:`concurrency` with their URLs):

* ``measure_backend``: fill an index with ``base`` generated ~550-word documents (batches of
  ``batch``), then time further batch adds *into the full index* (docs/s), single-document queries
  (p50/p99 ms; half of them near-duplicates of indexed documents), and the bytes per document the
  backend reports;
* ``concurrency``: ``writers`` writer processes and ``queriers`` query processes on one index for a
  bounded run: docs/s, query latency percentiles, documents lost / duplicated, ``Index.check()``;
* ``streaming_quality``: the clusters quality corpora (the quality_real suite's: licence files,
  Clough & Stevenson) streamed into an index in batches of 1,000 and exported, against a batch
  build of the same documents: fold fidelity and true-pair recall against exact truth.

``python -m benchmarks run --suite index [--base 200000] [--url sqlite:///...]``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from . import Suite

SUITE = Suite(
    name="index",
    summary="live index on SQLite: batch add docs/s into a large index, query p50/p99, bytes/doc, "
            "4 writers + 4 queriers, streaming vs batch quality",
    results=("index.json", "index-*.json"), render="benchmarks.suites.index:render",
    quick={"base": 5000, "measure": 2000, "duration": 10.0, "quality": ["clough"]},
    takes="~30 min at 200k on two busy cores")


def add_arguments(p) -> None:
    p.add_argument("--url", default=None, help="storage URL (default: a fresh SQLite file in a temp dir)")
    p.add_argument("--base", type=int, default=200_000, help="documents in the index before the timed adds")
    p.add_argument("--measure", type=int, default=20_000, help="documents of the timed adds")
    p.add_argument("--batch", type=int, default=5_000, help="documents per add (one transaction each)")
    p.add_argument("--queries", type=int, default=400, help="single-document queries timed")
    p.add_argument("--writers", type=int, default=4)
    p.add_argument("--queriers", type=int, default=4)
    p.add_argument("--duration", type=float, default=60.0, help="seconds of the concurrency run")
    p.add_argument("--quality", nargs="*", default=["manpages", "licenses", "clough"],
                   help="quality_real corpora to stream")
    p.add_argument("--quality-batch", type=int, default=1000, help="documents per add when streaming a corpus")
    p.add_argument("--verify", default="auto", choices=["auto", "exact", "estimate"],
                   help="MinHashConfig(verify=...) of the measured index: auto/exact store each document's shingle "
                        "set (every fold verified exactly); estimate stores the signature alone (default auto)")
    p.add_argument("--parts", nargs="+", default=["backend", "concurrency", "quality"],
                   choices=["backend", "concurrency", "quality"], help="which measurements to run")


# ----------------------------------------------------------------------------- one backend


def _texts(n: int) -> list[str]:
    from ..corpora import TEXT_CORPUS, corpus_file, load_texts

    return load_texts(corpus_file(n, TEXT_CORPUS))


def measure_backend(url: str, texts: list[str], *, base: int, measure: int, batch: int, queries: int,
                    log=print, verify: str = "auto") -> dict:
    """Fill ``url`` with ``texts[:base]``, then time adds of ``texts[base:base+measure]`` and queries."""
    import diversify
    from diversify.index.urls import mask_url

    assert len(texts) >= base + measure + queries, "not enough texts"
    idx = diversify.Index(url, config=diversify.BuildConfig(minhash=diversify.MinHashConfig(verify=verify)))
    idx.add(texts[:10], ids=list(range(-10, 0)))  # compile / load the kernels
    idx.delete(list(range(-10, 0)))
    t0 = time.perf_counter()
    for lo in range(0, base, batch):
        idx.add(texts[lo: min(base, lo + batch)], ids=list(range(lo, min(base, lo + batch))))
        if (lo // batch) % 10 == 0:
            log(f"  fill {min(base, lo + batch):,}/{base:,} ({(min(base, lo + batch)) / (time.perf_counter() - t0):,.0f} docs/s)")
    fill_s = time.perf_counter() - t0
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    joined = 0
    for lo in range(base, base + measure, batch):
        hi = min(base + measure, lo + batch)
        joined += sum(m.joined for m in idx.add(texts[lo:hi], ids=list(range(lo, hi))))
    add_s = time.perf_counter() - t0
    add_cpu = time.process_time() - cpu0
    rng = np.random.default_rng(0)
    # queries: half near-duplicates of indexed documents (one word changed), half unseen documents
    q_texts = []
    for j in range(queries):
        if j % 2 == 0:
            words = texts[int(rng.integers(0, base))].split()
            words[len(words) // 2] = "zzqueryzz"
            q_texts.append(" ".join(words))
        else:
            q_texts.append(texts[base + measure + j])
    idx.query(q_texts[:2])
    lat = []
    found = 0
    for q in q_texts:
        t = time.perf_counter()
        found += idx.query([q])[0].joined
        lat.append(time.perf_counter() - t)
    st = idx.stats()
    idx.close()
    lat_ms = np.array(lat) * 1e3
    return {"url": mask_url(url), "verify": verify, "base": base, "measure": measure, "batch": batch,
            "fill_docs_per_s": round(base / fill_s, 1), "add_docs_per_s": round(measure / add_s, 1),
            "add_docs_per_cpu_s": round(measure / add_cpu, 1) if add_cpu else None, "add_joined": joined,
            "query_p50_ms": round(float(np.percentile(lat_ms, 50)), 3),
            "query_p99_ms": round(float(np.percentile(lat_ms, 99)), 3),
            "query_mean_ms": round(float(lat_ms.mean()), 3), "queries": queries, "queries_matched": found,
            "documents": st["documents"], "clusters": st["clusters"], "bytes": st["bytes"],
            "bytes_per_document": st["bytes_per_document"], "band_rows": st["band_rows"]}


# ----------------------------------------------------------------------------- writers + queriers

_WORKER = r"""
import json, sys, time
import numpy as np
import diversify
role, url, start, stop, batch, duration, seed, corpus = sys.argv[1:9]
start, stop, batch, duration, seed = int(start), int(stop), int(batch), float(duration), int(seed)
from benchmarks.corpora import load_texts
texts = load_texts(corpus)
idx = diversify.Index(url)
idx.query([texts[0]])  # warm
print("ready", flush=True)
sys.stdin.readline()
t_end = time.monotonic() + duration
out = {"role": role, "added": [], "latency_ms": [], "errors": 0}
rng = np.random.default_rng(seed)
lo = start
while time.monotonic() < t_end:
    if role == "writer":
        if lo >= stop:
            break
        hi = min(stop, lo + batch)
        t = time.perf_counter()
        idx.add(texts[lo:hi], ids=list(range(lo, hi)))
        out["latency_ms"].append((time.perf_counter() - t) * 1e3)
        out["added"].append([lo, hi])
        lo = hi
    else:
        j = int(rng.integers(0, len(texts)))
        t = time.perf_counter()
        idx.query([texts[j]])
        out["latency_ms"].append((time.perf_counter() - t) * 1e3)
print(json.dumps(out), flush=True)
"""


def concurrency(url: str, corpus: str, n_texts: int, *, writers: int, queriers: int, duration: float,
                batch: int = 500, log=print) -> dict:
    """Writers add disjoint slices of the corpus, queriers query random documents, for ``duration`` s.

    Each worker runs in a session of its own (``start_new_session``), as separate services do. In
    one shared session, Linux's autogroup scheduling (``kernel.sched_autogroup_enabled=1``, the
    default here) gave all eight workers together the CPU share of one PostgreSQL backend (every
    backend calls setsid(): a group of its own), and a writer's backend waited seconds in the run
    queue: 216-428 docs/s on PostgreSQL, batches of 500 in 3-34 s (with autogroup off: 0.1-0.2 s).
    """
    import diversify

    repo = str(Path(__file__).resolve().parents[2])
    lib = str(Path(diversify.__file__).resolve().parents[1])  # the library being measured (an export of HEAD)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([lib, repo, os.environ.get("PYTHONPATH", "")]))
    per = n_texts // writers
    procs = []
    for w in range(writers):
        procs.append(subprocess.Popen([sys.executable, "-c", _WORKER, "writer", url, str(w * per), str((w + 1) * per),
                                       str(batch), str(duration), str(w), corpus], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True, env=env, cwd=repo,
                                      start_new_session=True))
    for q in range(queriers):
        procs.append(subprocess.Popen([sys.executable, "-c", _WORKER, "querier", url, "0", "0", "0", str(duration),
                                       str(100 + q), corpus], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                      env=env, cwd=repo, start_new_session=True))
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    t0 = time.perf_counter()
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    outs = [json.loads(p.communicate(timeout=duration * 10 + 600)[0].strip().splitlines()[-1]) for p in procs]
    wall = time.perf_counter() - t0
    added = sorted(i for o in outs for a, b in o["added"] for i in range(a, b))
    idx = diversify.Index(url)
    present = [c is not None for c in idx.cluster_of(added)]
    rows = list(idx.scan())
    problems = idx.check()
    idx.close()
    wl = np.array([x for o in outs if o["role"] == "writer" for x in o["latency_ms"]])
    ql = np.array([x for o in outs if o["role"] == "querier" for x in o["latency_ms"]])
    res = {"writers": writers, "queriers": queriers, "duration_s": round(wall, 2), "batch": batch,
           "docs_added": len(added), "docs_per_s": round(len(added) / wall, 1),
           "lost": int(len(added) - sum(present)), "duplicated": int(len(rows) - len({r.id for r in rows})),
           "stored": len(rows), "check_problems": problems[:5], "guarantee_held": not problems,
           "queries": int(ql.size), "queries_per_s": round(ql.size / wall, 1),
           "query_p50_ms": round(float(np.percentile(ql, 50)), 3) if ql.size else None,
           "query_p99_ms": round(float(np.percentile(ql, 99)), 3) if ql.size else None,
           "batch_p50_ms": round(float(np.percentile(wl, 50)), 1) if wl.size else None,
           "batch_p99_ms": round(float(np.percentile(wl, 99)), 1) if wl.size else None,
           "batch_max_ms": round(float(wl.max()), 1) if wl.size else None, "sessions": "one per process"}
    log(f"  concurrency: {json.dumps(res)}")
    return res


# ----------------------------------------------------------------------------- streaming quality


def streaming_quality(corpora: list[str], batch: int = 1000, log=print) -> dict:
    """Each quality_real corpus: batch build vs streamed index (export), scored against exact truth."""
    import diversify

    from .. import truth as truthmod
    from ._real_corpora import DEFAULT_CACHE, assemble
    from ._real_scores import T, _components, score

    assemble(DEFAULT_CACHE)
    out = {}
    for name in corpora:
        corpus = DEFAULT_CACHE / f"{name}.jsonl"
        if not corpus.exists():
            out[name] = {"skipped": f"{corpus} missing"}
            continue
        truth = truthmod.load_or_compute(corpus, T, cache=DEFAULT_CACHE)
        ids, texts = truthmod.read_corpus(corpus)
        comps = _components(truth.n, truth.pi, truth.pj)
        pos = {d: k for k, d in enumerate(truth.ids)}
        entry = {"docs": len(ids), "batch": batch}

        def scored(cm) -> dict:
            order = np.array([pos[d] for d in cm.ids])
            labels = np.empty(truth.n, dtype=np.int64)
            reps = np.zeros(truth.n, dtype=bool)
            labels[order] = np.asarray(cm.cluster_ids)
            reps[order] = np.asarray(cm.is_representative, dtype=bool)
            s = score(labels, reps, truth, comps)
            return {k: s[k] for k in ("fold_fidelity", "fold_min_jaccard", "true_pair_recall", "pair_precision",
                                      "clusters", "folded")}

        t0 = time.perf_counter()
        built = diversify.build(texts, ids=ids)
        entry["batch_build"] = dict(scored(built.cluster_map), seconds=round(time.perf_counter() - t0, 2))
        with tempfile.TemporaryDirectory() as tmp:
            idx = diversify.Index(f"sqlite:///{tmp}/q.db")
            t0 = time.perf_counter()
            for lo in range(0, len(texts), batch):
                idx.add(texts[lo: lo + batch], ids=ids[lo: lo + batch])
            secs = time.perf_counter() - t0
            cm = idx.export(f"{tmp}/q.dvf")
            entry["check_problems"] = idx.check()[:5]
            idx.close()
        entry["streamed_index"] = dict(scored(cm), seconds=round(secs, 2))
        b, s = entry["batch_build"], entry["streamed_index"]
        entry["recall_gap_points"] = round(100 * (b["true_pair_recall"] - s["true_pair_recall"]), 3)
        out[name] = entry
        log(f"  quality {name}: {json.dumps(entry)}")
    return out


# ----------------------------------------------------------------------------- the suite


def run(args, ctx) -> list:
    from ..corpora import TEXT_CORPUS, corpus_file
    from ..env import environment
    from ..paths import log, now, shown, write_json

    need = args.base + args.measure + args.queries + 10
    prefix = corpus_file(need, TEXT_CORPUS)
    texts = _texts(need)
    result: dict = {"suite": "index", "created": now(), "env": environment(), "corpus": dict(TEXT_CORPUS)}
    with tempfile.TemporaryDirectory() as tmp:
        if "backend" in args.parts:
            url = args.url or f"sqlite:///{tmp}/bench.db"
            log(f"measure_backend {url} base={args.base:,}")
            result["backend"] = measure_backend(url, texts, base=args.base, measure=args.measure, batch=args.batch,
                                                queries=args.queries, log=log, verify=args.verify)
            log(f"  {json.dumps(result['backend'])}")
        if "concurrency" in args.parts:
            conc_url = f"sqlite:///{tmp}/conc.db" if args.url is None else args.url
            result["concurrency"] = concurrency(conc_url, prefix, min(need, 200_000), writers=args.writers,
                                                queriers=args.queriers, duration=args.duration, log=log)
    result["quality"] = (streaming_quality(args.quality, batch=args.quality_batch, log=log)
                         if args.quality and "quality" in args.parts else {})
    name = "index.json" if len(args.parts) == 3 else f"index-{'-'.join(args.parts)}.json"
    if args.verify != "auto" and "backend" in args.parts:
        name = name[:-len(".json")] + f"-{args.verify}.json"
    if args.parts == ["quality"]:
        name = f"index-quality-{'-'.join(args.quality)}-b{args.quality_batch}.json"
    path = write_json(ctx.results / name, result)
    log(f"wrote {shown(path)}")
    return [path]


def _stored(verify: str) -> str:
    return ("verify=estimate: the signature alone" if verify == "estimate"
            else f"verify={verify}: signature and exact shingle set")


def render(d: dict) -> list[str]:
    b = d.get("backend") or {}
    c = d.get("concurrency") or {}
    q = d.get("quality") or {}
    if not (b or c or q):
        return []
    parts = [name for name, part in (("batch adds and queries", b), ("concurrency", c), ("streaming quality", q))
             if part]
    env = d.get("env") or {}
    when = f", measured {d['created']}" if d.get("created") else ""
    at = f" at {(env.get('diversify_commit') or '')[:12]}" if env.get("diversify_commit") else ""
    lines = [f"## Live index (SQLite): {', '.join(parts)}{when}{at}", ""]
    if b or c:
        lines += ["| measure | value | target |", "|---|---|---|"]
    if b:
        lines += [f"| batch add (batches of {b['batch']:,}) into an index of {b['base']:,}, docs/s | "
                  f"{b['add_docs_per_s']} ({b['add_docs_per_cpu_s']} per CPU-s) | >= 10,000 at 1M |",
                  f"| query of one document p50 / p99, ms | {b['query_p50_ms']} / {b['query_p99_ms']} | <= 2 / <= 10 |",
                  f"| bytes per document ({_stored(b.get('verify', 'auto'))}) | {b['bytes_per_document']} | "
                  "<= 1,500 |"]
    if c:
        lines += [f"| {c['writers']} writers + {c['queriers']} queriers: docs/s, query p50/p99 ms | "
                  f"{c['docs_per_s']}, {c['query_p50_ms']} / {c['query_p99_ms']} | |",
                  f"| lost / duplicated / guarantee held | {c['lost']} / {c['duplicated']} / {c['guarantee_held']} | "
                  "0 / 0 / True |"]
    if q:
        lines += ["", "| corpus | batch | batch fidelity | streamed fidelity | batch recall | streamed recall | gap (points) |",
                  "|---|---|---|---|---|---|---|"]
        for name, e in q.items():
            if "skipped" in e:
                lines.append(f"| {name} | skipped: {e['skipped']} | | | | | |")
                continue
            bb, ss = e["batch_build"], e["streamed_index"]
            one = " (the whole corpus: one add)" if e.get("docs", 0) <= e["batch"] else ""
            lines.append(f"| {name} | {e['batch']}{one} | {bb['fold_fidelity']} | {ss['fold_fidelity']} | "
                         f"{bb['true_pair_recall']:.4f} | {ss['true_pair_recall']:.4f} | {e['recall_gap_points']} |")
    return lines + [""]
