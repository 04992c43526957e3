"""Write a sharded build result into a vector store shard by shard, on Dask workers or here.

A Dask build with ``output_dir`` leaves Parquet shards and a manifest (:mod:`diversify.artifact.shards`);
assembling them into one :class:`~diversify.artifact.ClusterMap` needs one process to hold every
id. :func:`write_clusters_sharded` never does: each shard is read by the process that writes it
(a Dask task per shard when a client is given), as a :class:`~diversify.artifact.shards.ShardClusters`
that the adapters' ``write_clusters`` reads like an artifact, restricted to the shard's ids.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Optional

from ..errors import ConfigError
from ._base import check_field

__all__ = ["write_clusters_sharded", "write_shard"]


def write_clusters_sharded(result: str | os.PathLike, store_factory: Callable[[], Any], *, client: Any = None,
                           cluster_field: str = "cluster_id",
                           representative_field: Optional[str] = "is_representative") -> int:
    """Write each document's cluster id (and representative flag) of the sharded result ``result``
    into a store, one shard at a time; returns how many documents carry the result's values.

    ``store_factory()`` opens the store in the process that writes a shard: it returns a sync
    store adapter (``QdrantStore``, ``ChromaStore``, ``LanceDBStore``, ``MilvusStore``, ...), or a
    context manager that yields one (to open a connection per shard and close it after). With a
    Dask ``client``, one task per shard runs on the workers (the factory is pickled to them, so it
    must open the store by address or path, not close over an open connection; the workers need
    the result directory on a file system they reach); only the counts come back. Without one,
    the shards are written here in turn.
    """
    from ..artifact.shards import read_manifest

    if not callable(store_factory):
        raise ConfigError(f"`store_factory` must be a callable returning a store (or a context manager yielding one); "
                          f"got {type(store_factory).__name__}. E.g. store_factory=lambda: QdrantStore(QdrantClient(url), "
                          "'docs').")
    check_field("cluster_field", cluster_field)
    path = os.path.abspath(os.fspath(result))
    files = [s["file"] for s in read_manifest(path)["shards"]]
    if client is None:
        return sum(write_shard(path, f, store_factory, cluster_field=cluster_field,
                               representative_field=representative_field) for f in files)
    futs = client.map(write_shard, [path] * len(files), files, store_factory=store_factory, pure=False,
                      cluster_field=cluster_field, representative_field=representative_field)
    return int(sum(client.gather(futs, direct=client.direct_to_workers is not False)))


def write_shard(path: str, file: str, store_factory: Callable[[], Any], *, cluster_field: str = "cluster_id",
                representative_field: Optional[str] = "is_representative") -> int:
    """``write_clusters`` of the one shard ``file`` of the result directory ``path`` into the store
    ``store_factory()`` opens (see :func:`write_clusters_sharded`)."""
    from ..artifact.shards import read_shard

    shard = read_shard(path, file)
    opened = store_factory()
    if hasattr(opened, "__enter__") and not hasattr(opened, "write_clusters"):
        with opened as store:
            return _write(store, shard, cluster_field, representative_field)
    return _write(opened, shard, cluster_field, representative_field)


def _write(store: Any, shard, cluster_field: str, representative_field: Optional[str]) -> int:
    if getattr(store, "is_async", False) or not callable(getattr(store, "write_clusters", None)):
        raise ConfigError(f"`store_factory` must give a sync store adapter with write_clusters; got "
                          f"{type(store).__name__}. Use the sync twin of an async adapter (QdrantStore, not "
                          "AsyncQdrantStore).")
    if not len(shard):
        return 0
    return int(store.write_clusters(shard, ids=shard.ids, cluster_field=cluster_field,
                                    representative_field=representative_field))
