"""build_from: ``diversify.build_from`` on a Qdrant local collection: read + build + write back,
wall and CPU seconds and peak RSS, next to ``diversify.build`` of the same vectors in memory.

Each side runs in its own fresh process (:mod:`benchmarks.worker`): the store side fills a Qdrant
local collection (``QdrantClient(":memory:")``, or ``--mode disk``: a local path the parent fills
first) with ``--n`` planted near-duplicate vectors of ``--dim`` (30% copies of another point at
cosine ~0.995), then times ``build_from(store)`` and ``store.write_clusters(result.cluster_map)``;
the other side builds the same vectors with ``diversify.build``. "RSS before" is the process with
the store open (Qdrant's local mode holds every point in memory); "peak - before" is what reading,
building and writing back add. Qdrant's local mode on disk commits every point written to SQLite
(docs/online.md): fill and write-back there cost minutes per thousand points, hence the in-memory
default.

``python -m benchmarks run --suite build_from [--n 100000] [--dim 384] [--mode memory|disk] [--batch-size 4096]``
"""

from __future__ import annotations

import os
import tempfile

from ..markdown import command, table
from ..protocol import Task
from . import Suite

SUITE = Suite(
    name="build_from",
    summary="diversify.build_from on a Qdrant local collection (read + build + write back: wall, CPU, peak RSS) "
            "next to diversify.build of the same vectors in memory",
    results=("build_from-*.json",), render="benchmarks.suites.build_from:render", peers=("qdrant-client",),
    quick={"n": 5000, "dim": 64}, takes="~10 min at 100k x 384")


def add_arguments(p) -> None:
    p.add_argument("--n", type=int, default=100_000, help="points in the collection")
    p.add_argument("--dim", type=int, default=384, help="vector dimension")
    p.add_argument("--mode", choices=["memory", "disk"], default="memory",
                   help="Qdrant local mode in memory, or on a local path (slow writes: use a small --n)")
    p.add_argument("--batch-size", type=int, default=4096, help="points per scroll page")


def corpus(n: int, dim: int, seed: int = 42):
    """(float32 vectors (n, dim), planted copy -> original pairs): 30% of the points copy another."""
    import numpy as np

    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, dim)).astype(np.float32)
    copies = rng.choice(n, size=int(0.3 * n), replace=False)
    originals = rng.integers(0, n, size=copies.size)
    keep = ~np.isin(originals, copies)
    copies, originals = copies[keep], originals[keep]
    x[copies] = x[originals] + 0.1 * rng.normal(size=(copies.size, dim)).astype(np.float32) * \
        np.linalg.norm(x[originals], axis=1, keepdims=True) / np.sqrt(dim)
    return x, np.stack([copies, originals], axis=1)


def _fill(client, x, name: str = "docs") -> None:
    from qdrant_client import models

    client.create_collection(name, vectors_config=models.VectorParams(size=x.shape[1], distance=models.Distance.COSINE))
    for s in range(0, len(x), 2000):
        client.upsert(name, points=[models.PointStruct(id=i, vector=x[i].tolist())
                                    for i in range(s, min(len(x), s + 2000))], wait=True)


def _load_store(args: dict):
    from qdrant_client import QdrantClient

    from diversify.stores import QdrantStore

    if args["path"]:
        client = QdrantClient(path=args["path"])
    else:
        client = QdrantClient(":memory:")
        _fill(client, corpus(args["n"], args["dim"])[0])
    return QdrantStore(client, "docs")


def _warm(_data, args: dict) -> None:
    import numpy as np

    import diversify
    from diversify.stores import NumpyStore

    x = np.random.default_rng(0).normal(size=(200, args["dim"])).astype(np.float32)
    diversify.build_from(NumpyStore(np.concatenate([x, x + 1e-3]), list(range(400))))  # compiles the kernels


def _run_store(store, args: dict) -> dict:
    import time

    import numpy as np

    import diversify

    t0, c0 = time.perf_counter(), os.times()
    res = diversify.build_from(store, batch_size=args["batch_size"])
    t1, c1 = time.perf_counter(), os.times()
    written = store.write_clusters(res.cluster_map)
    t2, c2 = time.perf_counter(), os.times()
    return {"arrays": {"cluster_ids": np.asarray(res.cluster_map.lookup(list(range(args["n"]))))},
            "n_clusters": res.n_clusters, "written": written, "read_build_s": t1 - t0, "write_back_s": t2 - t1,
            "read_build_cpu_s": _cpu(c0, c1), "write_back_cpu_s": _cpu(c1, c2), "timings": res.timings}


def _cpu(a, b) -> float:
    return (b.user - a.user) + (b.system - a.system)


def _load_vectors(args: dict):
    return corpus(args["n"], args["dim"])[0]


def _run_build(x, args: dict) -> dict:
    import numpy as np

    import diversify

    res = diversify.build(vectors=x, ids=list(range(args["n"])))
    return {"arrays": {"cluster_ids": np.asarray(res.cluster_map.lookup(list(range(args["n"]))))},
            "n_clusters": res.n_clusters, "timings": res.timings}


STORE = Task(load=_load_store, warm=_warm, run=_run_store)
BUILD = Task(load=_load_vectors, warm=_warm, run=_run_build)


def run(args, ctx) -> list:
    from ..env import environment
    from ..paths import log, now, shown, write_json
    from ..worker import run_job

    job = {"n": args.n, "dim": args.dim, "batch_size": args.batch_size, "path": None}
    with tempfile.TemporaryDirectory() as tmp:
        if args.mode == "disk":
            from qdrant_client import QdrantClient

            job["path"] = os.path.join(tmp, "qdrant")
            client = QdrantClient(path=job["path"])
            _fill(client, corpus(args.n, args.dim)[0])
            client.close()
        store = run_job("benchmarks.suites.build_from:STORE", job, tag="build_from-store")
    build = run_job("benchmarks.suites.build_from:BUILD", {k: v for k, v in job.items() if k != "path"},
                    tag="build_from-build")
    if store is None or build is None:
        raise RuntimeError("a build_from job timed out")
    same = bool((store[1]["cluster_ids"] == build[1]["cluster_ids"]).all())
    results = {"suite": "build_from", "command": ctx.command, "created": now(), "env": environment(), "n": args.n,
               "dim": args.dim, "mode": args.mode, "batch_size": args.batch_size, "same_clusters": same,
               "store": store[0], "build": build[0]}
    log(f"build_from: store {store[0]['wall_s']:.1f}s wall, build {build[0]['wall_s']:.1f}s, same clusters {same}")
    path = write_json(ctx.results / f"build_from-{args.mode}-n{args.n}.json", results)
    log(f"wrote {shown(path)}")
    return [path]


# --- RESULTS.md section

def render(d: dict) -> list[str]:
    s, b = d["store"], d["build"]
    rows = [["build_from (Qdrant local) + write back", f"{s['wall_s']:.1f}", f"{s['cpu_s']:.1f}",
             f"{s['read_build_s']:.1f} / {s['read_build_cpu_s']:.1f}", f"{s['write_back_s']:.1f} / "
             f"{s['write_back_cpu_s']:.1f}", f"{s['rss_before_mb']:,.0f}", f"{s['rss_delta_mb']:,.0f}"],
            ["build (same vectors in memory)", f"{b['wall_s']:.1f}", f"{b['cpu_s']:.1f}", "—", "—",
             f"{b['rss_before_mb']:,.0f}", f"{b['rss_delta_mb']:,.0f}"]]
    L = [f"## Build from a store: Qdrant local ({d['mode']}), {d['n']:,} x {d['dim']}", "",
         f"`diversify.build_from` (scroll pages of {d['batch_size']:,}) then `write_clusters`, each side in a fresh "
         f"process; the same clusters as `diversify.build`: {'yes' if d['same_clusters'] else 'NO'}. RSS before = "
         f"the process with the store open. Command: "
         f"`{command(d.get('command'), 'python -m benchmarks run --suite build_from')}`, {d.get('created')}.", ""]
    return L + table(["run", "wall s", "CPU s", "read+build wall / CPU s", "write back wall / CPU s",
                      "RSS before MB", "peak - before MB"], "lrrrrrr", rows) + [""]
