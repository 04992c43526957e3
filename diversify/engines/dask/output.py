"""Stage 6 with ``output_dir``: each input partition's worker writes its shard of the result
(Parquet, :mod:`diversify.artifact.shards` gives the layout), the client writes the manifest.

The cut partitions' results are split by the input partition that holds each document and go
worker to worker; the writer of partition ``i`` fills in its documents that are in no component
of two or more (their own cluster and representative). The client learns, per shard, its rows and
the clusters it starts (documents that are their cluster's label): O(partitions) in all.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from ...artifact.shards import FORMAT, MANIFEST, VERSION, shard_name
from ...errors import InputError
from .cut import ids_at
from .run import Run, owner_split, split_task

__all__ = ["ShardedBuild", "write_sharded", "write_shard"]


@dataclass
class ShardedBuild:
    """What ``build_dask(..., output_dir=DIR)`` returns: where the result is and what it holds.

    ``diversify.load(path)`` assembles it into one ClusterMap (when it fits one process);
    :func:`diversify.artifact.shards.iter_shards` reads it shard by shard."""

    path: str
    n_docs: int
    n_clusters: int
    manifest: dict
    stats: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)

    @property
    def n_duplicates(self) -> int:
        return self.n_docs - self.n_clusters


def _by_owner(res: dict, offsets: np.ndarray) -> Any:
    """A cut partition's results split by the input partition that holds each document."""
    docs = res["docs"]
    at = np.arange(docs.size, dtype=np.int64)
    sim = res["similarity"] if res["similarity"] is not None else np.full(docs.size, np.nan, np.float32)
    pieces = owner_split(docs, offsets, res["labels"], res["reps"], res["flags"], sim, at)
    rep_ids = res["rep_ids"]
    one = offsets.size == 2
    out = []
    for d, lab, rep, flg, sm, pos in ([pieces] if one else pieces):
        out.append({"docs": d, "labels": lab, "reps": rep, "flags": flg, "similarity": sm,
                    "rep_ids": [rep_ids[int(i)] for i in pos]})
    return out[0] if one else tuple(out)


def _id_array(ids: list, pa, where: str):
    if all(isinstance(x, int) and not isinstance(x, bool) for x in ids):
        return pa.array(ids, type=pa.int64())
    if all(isinstance(x, str) for x in ids):
        return pa.array(ids, type=pa.string())
    kinds = sorted({type(x).__name__ for x in ids})
    raise InputError(f"ids must be all str or all int; {where} mixes {kinds}. Give every document an id of one kind "
                     "(a document without one gets its global index, an int).")


def write_shard(skp: dict, offset: int, part: int, out_dir: str, what: dict, *pieces) -> dict:
    """Write input partition ``part``'s shard; (rows, clusters started, bytes) back to the client."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = int(skp["n"])
    docs = np.arange(n, dtype=np.int64) + np.int64(offset)
    ids = ids_at(skp["ids"], np.arange(n, dtype=np.int64), offset)
    labels, reps, stage = docs.copy(), np.ones(n, dtype=bool), np.zeros(n, dtype=np.uint8)
    sim = np.full(n, np.nan if what["components"] else 1.0, dtype=np.float32)
    rep_ids = list(ids)
    for pc in pieces:
        local = pc["docs"] - np.int64(offset)
        labels[local], reps[local], stage[local], sim[local] = pc["labels"], pc["reps"], pc["flags"], pc["similarity"]
        for j, r in zip(local.tolist(), pc["rep_ids"]):
            rep_ids[j] = r
    where = f"shard {part} (documents {offset} to {offset + n - 1})"
    cols: dict = {"id": _id_array(ids, pa, where), "cluster_id": pa.array(labels),
                  "representative_id": _id_array(rep_ids, pa, where), "stage": pa.array(stage),
                  "similarity": pa.array(sim, mask=np.isnan(sim) if what["components"] else None),
                  "is_representative": pa.array(reps), "length": pa.array(skp["lengths"]),
                  "exact_hash": pa.array(skp["exact"]), "empty": pa.array(skp["empty"])}
    if what["minhash"]:
        sig = np.ascontiguousarray(skp["minhash"], dtype=np.uint32)
        width = 4 * sig.shape[1]
        cols["minhash"] = pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), n, [None, pa.py_buffer(sig.tobytes())])
    if what["keys"] and skp["keys"] is not None:
        cols["rep_key"] = pa.array(np.asarray(skp["keys"], np.float64))
    file = os.path.join(out_dir, shard_name(part))
    tmp = f"{file}.tmp-{os.getpid()}"
    pq.write_table(pa.table(cols), tmp)
    os.replace(tmp, file)  # a retried task replaces the same bytes
    return {"file": shard_name(part), "rows": n, "first": int(offset), "clusters": int((labels == docs).sum()),
            "bytes": os.path.getsize(file)}


def _check_dir(out_dir: str) -> str:
    path = os.path.abspath(os.fspath(out_dir))
    if os.path.exists(path) and not os.path.isdir(path):
        raise InputError(f"`output_dir` {path!r} is a file; the sharded result is a directory. Name a new or empty "
                         "directory.")
    if os.path.isdir(path) and any(n.endswith(".parquet") or n == MANIFEST for n in os.listdir(path)):
        raise InputError(f"`output_dir` {path!r} already holds a result (shards or a manifest). Remove it, or name "
                         "another directory.")
    os.makedirs(path, exist_ok=True)
    return path


def write_sharded(run: Run, cut_futs: list, out_dir: str, *, build_info: dict, metadata: Optional[Any],
                  created_at: Optional[str]) -> ShardedBuild:
    """Shards written by the workers, the manifest by the client (atomically, last)."""
    import json

    from dask import delayed

    from ...config import fingerprint
    from ...files import atomic_write_text
    from ...hashing import HASH_SCHEME

    t0 = time.perf_counter()
    path = out_dir
    p = len(run.sources)
    offsets = run.offsets
    cfg = run.cfg
    what = {"components": cfg.clustering == "components", "keys": cfg.incremental,
            "minhash": cfg.incremental and cfg.minhash is not None}
    split = [split_task(_by_owner, p, f, offsets) for f in cut_futs]
    tasks = [delayed(write_shard, pure=True)(run.sketches[i], int(offsets[i]), i, path, what, *[s[i] for s in split])
             for i in range(p)]
    shards = run.client.gather(run.compute(tasks, "shards"))
    n_clusters = int(sum(s["clusters"] for s in shards))
    build_info["n_clusters"] = n_clusters
    manifest = {"format": FORMAT, "version": VERSION, "n_docs": run.n, "n_clusters": n_clusters,
                "shards": shards, "config": cfg.model_dump(mode="json"), "fingerprint": fingerprint(cfg),
                "seed": cfg.seed, "hash_scheme": HASH_SCHEME, "build_info": build_info,
                "metadata": dict(metadata) if metadata else None, "created_at": created_at}
    atomic_write_text(os.path.join(path, MANIFEST), lambda f: json.dump(manifest, f, indent=1),
                      what="the manifest", param="output_dir")
    run.timings["dask_write"] = time.perf_counter() - t0
    run.report.stage(f"wrote {p} shards and the manifest to {path}")
    return ShardedBuild(path=path, n_docs=run.n, n_clusters=n_clusters, manifest=manifest, timings=run.timings)
