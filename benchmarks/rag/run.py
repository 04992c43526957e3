"""The integrations suite's loop: build the corpus, vectors and artifact, then every row on every
query, open and with the query's tenant as a user filter; metrics per row and the checks."""

from __future__ import annotations

import os
import sys
import time
import traceback
from pathlib import Path

import numpy as np

from . import systems_core, systems_haystack, systems_langchain, systems_llamaindex
from .measure import aggregate, per_query
from .probe import Probe
from .systems import K, Query, Setup, Skip

GROUPS = dict(systems_core.ROWS + systems_langchain.ROWS + systems_llamaindex.ROWS + systems_haystack.ROWS)
QUERY_WORDS = 12
PLUGINS = {"langchain_diversify": "integrations/langchain-diversify",
           "llama_index.postprocessor.diversify": "integrations/llama-index-postprocessor-diversify",
           "llama_index.retrievers.diversify": "integrations/llama-index-retrievers-diversify",
           "haystack_integrations.components.retrievers.diversify": "integrations/diversify-haystack/src"}
PEERS = ("qdrant-client", "chromadb", "lancedb", "pymilvus", "milvus-lite", "faiss-cpu", "langchain-core",
         "langchain-community", "langchain-qdrant", "langchain-text-splitters", "rank-bm25", "llama-index-core",
         "haystack-ai", "scikit-learn")


def plugin_paths() -> dict:
    """Put the plugins next to the measured ``diversify`` first on ``sys.path`` (the HEAD snapshot's,
    or the working tree's with ``--worktree``), import them, and say where each came from."""
    import importlib

    import diversify

    root = Path(diversify.__file__).resolve().parents[1]
    for sub in sorted(set(PLUGINS.values())):
        if (root / sub).is_dir() and str(root / sub) not in sys.path:
            sys.path.insert(0, str(root / sub))
    where = {}
    for mod, sub in PLUGINS.items():
        m = importlib.import_module(mod)
        path = Path(m.__file__).resolve()
        where[mod] = {"file": str(path), "next_to_measured_diversify": root / sub in path.parents}
    return where


def make_queries(s: Setup, n: int, seed: int) -> list[Query]:
    """``n`` queries: a window of ``QUERY_WORDS`` words from chunks drawn with ``seed``, tenant of that chunk."""
    import re

    rng = np.random.default_rng(seed)
    out: list[Query] = []
    for j in rng.permutation(len(s.corpus)).tolist():
        chunk = s.corpus.chunks[j]
        words = re.findall(r"[A-Za-z][A-Za-z0-9'-]+", chunk.text)
        if len(words) < QUERY_WORDS:
            continue
        a = int(rng.integers(0, len(words) - QUERY_WORDS + 1))
        text = " ".join(words[a:a + QUERY_WORDS])
        if not np.any(s.model.encode([text])):
            continue
        out.append(Query(text, chunk.tenant, chunk.id))
        if len(out) == n:
            break
    return out


def setup(chunks: int, seed: int, workdir: str) -> tuple[Setup, dict]:
    import diversify

    from ..paths import log
    from .corpus import N_TENANTS, build_corpus
    from .embed import Embedder, TfidfSvd

    t = time.perf_counter()
    corpus = build_corpus(chunks, seed)
    corpus.info["assemble_s"] = round(time.perf_counter() - t, 2)
    log(f"corpus: {len(corpus)} chunks ({corpus.info['assemble_s']} s); embedding")
    model = TfidfSvd(seed=seed).fit(corpus.texts)
    vectors = model.encode(corpus.texts)
    log(f"embedded ({model.info['fit_s']} s); building the artifact")
    diversify.build(corpus.texts[:300], ids=corpus.ids[:300])  # JIT warm-up
    t = time.perf_counter()
    built = diversify.build(corpus.texts, ids=corpus.ids)
    build_s = time.perf_counter() - t
    path = os.path.join(workdir, "chunks.dvf")
    built.save(path)
    cm = diversify.load(path)
    cids = np.asarray(cm.lookup(corpus.ids))
    _, inverse, counts = np.unique(cids, return_inverse=True, return_counts=True)
    artifact = {"api": "diversify.build(texts, ids=ids) (default config), saved, diversify.load(path)",
                "n_docs": built.n_docs, "n_clusters": built.n_clusters, "build_s": round(build_s, 2),
                "docs_in_multi_member_clusters_share": round(float((counts[inverse] > 1).mean()), 4),
                "largest_cluster": int(counts.max()), "bytes": os.path.getsize(path)}
    probe = Probe()
    s = Setup(corpus, vectors, model, Embedder(model, probe), probe, cm, workdir,
              tenants=tuple(f"t{i}" for i in range(N_TENANTS)))
    return s, {"corpus": corpus.info, "embedding": model.info, "artifact": artifact}


def _measure(system, queries, modes, s: Setup, judge) -> dict:
    out: dict = {"framework": system.framework, "store": system.store, "method": system.method,
                 "kind": system.kind, "filter": system.filter, "note": system.note, "modes": {}}
    if system.unavailable:
        out["unavailable"] = system.unavailable
        return out
    for mode in modes:
        if mode == "tenant" and system.filter is None:
            continue
        rows, errors = [], []
        for j, q in enumerate(queries):
            tenant = q.tenant if mode == "tenant" else None
            try:
                if j == 0:
                    system.call(q, tenant)  # warm-up (lazy loads, first-call caches), not recorded
                outcome, rec = s.probe.measure(lambda q=q, tenant=tenant: system.call(q, tenant))
            except Exception as exc:  # a row that fails must be recorded, not stop the suite
                errors.append(f"{type(exc).__name__}: {exc}"[:400])
                continue
            rows.append({"q": j, **per_query(outcome, rec, tenant, judge)})
        out["modes"][mode] = aggregate(rows, errors, len(queries))
    return out


def run_groups(names, queries, modes, s: Setup, judge, slow_queries: int) -> tuple[list, list]:
    from ..paths import log

    results, skipped = [], []
    for name in names:
        t = time.perf_counter()
        try:
            systems = GROUPS[name](s)
        except Skip as e:
            skipped.append({"group": name, "reason": str(e)})
            log(f"{name}: skipped ({e})")
            continue
        except Exception as e:
            skipped.append({"group": name, "reason": f"setup failed: {type(e).__name__}: {e}"[:400],
                            "traceback": traceback.format_exc(limit=4)[-1500:]})
            log(f"{name}: setup failed ({type(e).__name__}: {e})")
            continue
        setup_s = time.perf_counter() - t
        for system in systems:
            r = _measure(system, queries[:slow_queries] if system.slow else queries, modes, s, judge)
            r["group"], r["group_setup_s"] = name, round(setup_s, 2)
            results.append(r)
            m = r["modes"].get("open") or next(iter(r["modes"].values()), {})
            log(f"{name}: {system.method}: distinct {m.get('distinct_mean')}, calls {m.get('store_calls_mean')}, "
                f"errors {m.get('errors')}")
    return results, skipped


__all__ = ["GROUPS", "K", "PEERS", "plugin_paths", "make_queries", "setup", "run_groups"]
