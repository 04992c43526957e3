"""A sharded build result: Parquet shards written by the workers of a Dask build, and the manifest
its client writes. :func:`diversify.load` (hence ``diversify stats``, ``export``, ``show``) opens a directory holding
a manifest by streaming the shards into the one artifact (:func:`assemble`: the bytes the build
would have returned as a :class:`~diversify.artifact.ClusterMap`), when it fits one process.

Layout of a result directory::

    manifest.json        the client's: format, counts, config, build info, one entry per shard
    part-00000.parquet   one shard per input partition, rows in document order

Columns of a shard (one row per document):

- ``id``: the document id (int64 or string); ``cluster_id`` (int64): the global index of the
  cluster's smallest member (the artifact's cluster id); ``representative_id``: the id of the
  cluster's representative; ``stage`` (uint8): the stage bits (:mod:`diversify.stages`);
  ``similarity`` (float32): verified similarity to the representative (1 for representatives;
  null under ``clustering="components"``);
- what the artifact keeps besides: ``is_representative`` (bool), ``length`` (uint32),
  ``exact_hash`` (uint64), ``empty`` (bool), and for ``incremental=True`` builds ``minhash``
  (the signature, fixed-size binary) and ``rep_key`` (float64, when the build had keys).
"""

from __future__ import annotations

import json
import os
from typing import Any, Optional

import numpy as np

from ..errors import ArtifactError, require

__all__ = ["MANIFEST", "FORMAT", "shard_name", "is_sharded", "read_manifest", "iter_shards", "assemble",
           "ShardClusters", "read_shard"]

#: the manifest's file name inside a result directory
MANIFEST = "manifest.json"
#: the manifest's ``format`` and ``version``
FORMAT = "diversify-shards"
VERSION = 1


def shard_name(part: int) -> str:
    return f"part-{part:05d}.parquet"


def is_sharded(path: Any) -> bool:
    """True when ``path`` is a directory holding a sharded result's manifest."""
    try:
        return os.path.isdir(path) and os.path.isfile(os.path.join(path, MANIFEST))
    except TypeError:
        return False


def read_manifest(path: str | os.PathLike) -> dict:
    """The manifest of the result directory ``path``, checked for its format and its shards."""
    where = os.path.join(os.fspath(path), MANIFEST)
    try:
        with open(where, encoding="utf-8") as f:
            m = json.load(f)
    except (OSError, ValueError) as exc:
        raise ArtifactError(f"cannot read the manifest {where!r} of a sharded result: {exc}. Re-run the build "
                            "with output_dir=..., or pass the path of a .dvf artifact.") from None
    if not isinstance(m, dict) or m.get("format") != FORMAT or m.get("version") != VERSION:
        raise ArtifactError(f"{where!r} is not a manifest of format {FORMAT!r} version {VERSION}; got "
                            f"{(m.get('format'), m.get('version')) if isinstance(m, dict) else type(m).__name__}. "
                            "Build it again with this version of diversify.")
    rows = sum(int(s["rows"]) for s in m["shards"])
    if rows != m["n_docs"]:
        raise ArtifactError(f"the manifest {where!r} lists shards of {rows} rows for n_docs={m['n_docs']}: the "
                            "result is incomplete. Build it again.")
    return m


def iter_shards(path: str | os.PathLike, columns: Optional[list] = None):
    """(shard entry, pyarrow Table) of each shard in document order, one shard in memory at a time."""
    pq = require("pyarrow.parquet", extra="parquet", purpose="Reading a sharded result")
    m = read_manifest(path)
    for s in m["shards"]:
        file = os.path.join(os.fspath(path), s["file"])
        try:
            table = pq.read_table(file, columns=columns)
        except OSError as exc:
            raise ArtifactError(f"cannot read the shard {file!r} of a sharded result: {exc}. Build it again.") from None
        if table.num_rows != int(s["rows"]):
            raise ArtifactError(f"the shard {file!r} holds {table.num_rows} rows; the manifest says {s['rows']}. "
                                "Build it again.")
        yield s, table


class ShardClusters:
    """The clusters of one shard's documents, with the lookup a store adapter's ``write_clusters``
    reads (``lookup``, ``doc_index``, ``is_representative``: the rules of
    :meth:`ClusterMap.lookup <diversify.artifact.ClusterMap.lookup>`, ids of the other kind or not
    in the shard are unknown, -1). Made by :func:`read_shard`; the shard's ids are ``ids``."""

    def __init__(self, ids: list, cluster_ids: np.ndarray, is_representative: np.ndarray):
        from ..ids import id_keys, id_kind_of

        self.ids = ids
        self.cluster_ids = np.asarray(cluster_ids, dtype=np.int64)
        self.is_representative = np.asarray(is_representative, dtype=bool)
        self._kind: str = (id_kind_of(ids[0]) or "int") if ids else "int"
        keys = id_keys(ids) if ids else np.zeros(0, np.uint64)
        self._order = np.argsort(keys, kind="stable")
        self._keys = keys[self._order]

    def __len__(self) -> int:
        return len(self.ids)

    def doc_index(self, ids) -> np.ndarray:
        """Row of each id in the shard, -1 when unknown."""
        from ..ids import query_keys

        keys, valid = query_keys(ids, self._kind)
        if not self._keys.size:
            return np.full(keys.size, -1, dtype=np.int64)
        at = np.minimum(np.searchsorted(self._keys, keys), self._keys.size - 1)
        found = self._keys[at] == keys
        if valid is not None:
            found &= valid
        return np.where(found, self._order[at], -1).astype(np.int64)

    def lookup(self, ids) -> np.ndarray:
        """Cluster id of each id, -1 when unknown."""
        rows = self.doc_index(ids)
        if not self.cluster_ids.size:
            return rows
        return np.where(rows >= 0, self.cluster_ids[np.maximum(rows, 0)], -1)


def read_shard(path: str | os.PathLike, file: str) -> ShardClusters:
    """The :class:`ShardClusters` of the shard ``file`` (a manifest entry's ``file``) of the result
    directory ``path``: only its id, cluster id and representative columns are read."""
    pq = require("pyarrow.parquet", extra="parquet", purpose="Reading a sharded result")
    where = os.path.join(os.fspath(path), file)
    try:
        t = pq.read_table(where, columns=["id", "cluster_id", "is_representative"])
    except OSError as exc:
        raise ArtifactError(f"cannot read the shard {where!r} of a sharded result: {exc}. Build it again.") from None
    return ShardClusters(t.column("id").to_pylist(), _column(t, "cluster_id"), _column(t, "is_representative"))


def assemble(path: str | os.PathLike) -> tuple[tuple, dict]:
    """The arguments of :meth:`ClusterMap.from_arrays <diversify.artifact.ClusterMap.from_arrays>`
    that make the one artifact of a sharded result, read shard by shard: the same bytes a build
    returning a ClusterMap writes (:func:`diversify.load` calls it on a result directory)."""
    from ..ids import check_ids, normalize_ids
    from ..sketches.batch import Sketches
    from ..staging import check_keys, incremental_extras

    m = read_manifest(path)
    cols: dict = {k: [] for k in ("cluster_id", "is_representative", "stage", "length", "exact_hash", "empty",
                                  "similarity", "minhash", "rep_key")}
    ids: list = []
    for _, t in iter_shards(path):
        ids.extend(t.column("id").to_pylist())
        for k in cols:
            if k in t.column_names:
                cols[k].append(_column(t, k))
    check_ids(ids)
    n_shards = len(m["shards"])
    arr: dict[str, Any] = {k: np.concatenate(v) if v and len(v) == n_shards else None for k, v in cols.items()}
    n = int(m["n_docs"])
    extras: dict = {}
    if m["config"].get("incremental"):
        sk = Sketches(ids=ids, lengths=arr["length"], exact=arr["exact_hash"], empty=arr["empty"],
                      minhash=arr["minhash"], keys=check_keys(arr["rep_key"], n) if arr["rep_key"] is not None else None)
        extras = incremental_extras(sk)
    if m["config"].get("clustering") != "components":
        extras["fold_similarity"] = arr["similarity"]
    return ((normalize_ids(ids), arr["cluster_id"], arr["is_representative"], arr["stage"], arr["length"]),
            {"config": m["config"], "fingerprint": m["fingerprint"], "seed": m["seed"], "hash_scheme": m["hash_scheme"],
             "build_info": m["build_info"], "metadata": m.get("metadata"), "created_at": m.get("created_at"),
             "extras": extras})


_DTYPES = {"cluster_id": np.int64, "is_representative": bool, "stage": np.uint8, "length": np.uint32,
           "exact_hash": np.uint64, "empty": bool, "similarity": np.float32, "rep_key": np.float64}


def _column(t, name: str) -> np.ndarray:
    col = t.column(name).combine_chunks()
    if name == "minhash":
        width = col.type.byte_width
        buf = col.buffers()[1]
        return np.frombuffer(buf, dtype=np.uint32, count=len(col) * width // 4,
                             offset=col.offset * width).reshape(len(col), width // 4).copy()
    return np.asarray(col.to_numpy(zero_copy_only=False), dtype=_DTYPES[name])
