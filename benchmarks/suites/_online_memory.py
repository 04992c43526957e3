"""The online suite's memory probe: RSS of a fresh process that loads an artifact and looks up ids."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np

from ..paths import ROOT
from ._online_common import CORPUS

_PROBE = r"""
import json, os, sys, numpy as np
def status():
    d = {}
    with open('/proc/self/status') as f:
        for line in f:
            k, _, v = line.partition(':')
            if k in ('VmRSS', 'RssAnon', 'RssFile'):
                d[k] = int(v.split()[0]) * 1024
    return d
path, mode, n, warm = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
import diversify
# load a small artifact first (same mode) so lazy imports and allocator arenas are not counted
_w = diversify.load(warm, mmap=(mode != 'memory'), verify=(mode != 'mmap-noverify'))
_w.lookup(['doc-0000001'] * 50)
del _w
ids = ['doc-%07d' % i for i in np.random.default_rng(0).integers(0, n, 20000).tolist()]
b = status()
cm = diversify.load(path, mmap=(mode != 'memory'), verify=(mode != 'mmap-noverify'))
a = status()
import gc, time
batches = [ids[j:j + 50] for j in range(0, len(ids), 50)]
for x in batches:
    cm.lookup(x)
w = status()
t = []
gc.disable()
for _ in range(5):
    for x in batches:
        t0 = time.perf_counter_ns(); cm.lookup(x); t.append(time.perf_counter_ns() - t0)
gc.enable()
t = np.asarray(t) / 1000.0
print(json.dumps({'before': b, 'after_load': a, 'after_lookups': w,
                  'lookup_us': [round(float(np.percentile(t, 50)), 2), round(float(np.percentile(t, 99)), 2), len(t)]}))
"""
MODES = ("mmap", "mmap-noverify", "memory")


def artifact_from_arrays(n, path, template):
    """A ClusterMap of n str ids with ~30% duplicates, assembled with ClusterMap.from_arrays."""
    from diversify import ClusterMap

    rng = np.random.default_rng(5)
    ids = [f"doc-{i:07d}" for i in range(n)]
    cl = np.arange(n, dtype=np.int64)
    copies = np.flatnonzero(rng.random(n) < 0.3)
    copies = copies[copies > 0]
    src = (rng.random(copies.size) * copies).astype(np.int64)  # an earlier document
    cl[copies] = src
    cl = cl[cl]  # point chains at their root (the smallest index)
    while not np.array_equal(cl, cl[cl]):
        cl = cl[cl]
    rep = cl == np.arange(n)
    stages = np.where(rep, 0, 2).astype(np.uint8)
    lengths = np.full(n, 1200, dtype=np.uint32)
    cm = ClusterMap.from_arrays(ids, cl, rep, stages, lengths, config=template.config,
                                fingerprint=template.fingerprint, seed=template.seed,
                                hash_scheme=template.hash_scheme, build_info={"note": "from_arrays benchmark"})
    cm.save(path)
    return cm.n_clusters


def _make(s, n: int, path: str) -> tuple[str, int]:
    import diversify

    from .. import lib

    if n <= 100_000:
        p = dict(CORPUS)
        p.pop("n_docs")
        corpus = lib.generate_corpus(n, **p)
        built = diversify.build(corpus.texts, ids=corpus.ids)
        built.save(path)
        return "diversify.build on generate_corpus texts", built.n_clusters
    how = "ClusterMap.from_arrays (synthetic ~30% duplicates; building 1M texts skipped for time)"
    return how, artifact_from_arrays(n, path, s["cm"])


def _lookup_arrays(path: str, n: int) -> dict:
    """Bytes of the lookup's own arrays (private attributes, read only; absent ones are None)."""
    import diversify

    cm = diversify.load(path)
    arrs = getattr(cm, "_arrays", None)
    names = ("lookup/key", "lookup/cluster", "lookup/bucket_start")
    nbytes = sum(int(arrs[a].nbytes) for a in names) if arrs is not None and all(a in arrs for a in names) else None
    return {"lookup_arrays_bytes_per_doc": round(nbytes / n, 1) if nbytes is not None else None,
            "bucket_directory": bool(getattr(getattr(cm, "_lookup_table", None), "use_buckets", False))}


def _probe(path: str, mode: str, n: int, warm: str) -> dict:
    raw = subprocess.run([sys.executable, "-c", _PROBE, path, mode, str(n), warm], capture_output=True,
                         text=True, check=True, cwd=os.getcwd() if os.environ.get("DIVERSIFY_BENCH_LIB") else str(ROOT)
                         ).stdout
    m = json.loads(raw)
    b, a, w = m["before"], m["after_load"], m["after_lookups"]
    return {"rss_per_doc_after_load": round((a["VmRSS"] - b["VmRSS"]) / n, 1),
            "rss_per_doc_after_lookups": round((w["VmRSS"] - b["VmRSS"]) / n, 1),
            "anon_per_doc_after_lookups": round((w["RssAnon"] - b["RssAnon"]) / n, 1),
            "file_per_doc_after_lookups": round((w["RssFile"] - b["RssFile"]) / n, 1),
            "lookup_50_p50_us": m["lookup_us"][0], "lookup_50_p99_us": m["lookup_us"][1],
            "lookup_calls": m["lookup_us"][2]}


def memory(s, workdir: str, sizes=(100_000, 1_000_000)) -> dict:
    out = {}
    for n in sizes:
        path = os.path.join(workdir, f"mem-{n}.dvf")
        t = time.perf_counter()
        how, k = _make(s, n, path)
        entry = {"how": how, "n_clusters": int(k), "make_s": round(time.perf_counter() - t, 1),
                 "file_bytes_per_doc": round(os.path.getsize(path) / n, 1), **_lookup_arrays(path, n)}
        for mode in MODES:
            entry[mode] = _probe(path, mode, n, s["path"])
        os.remove(path)
        out[str(n)] = entry
    return out
