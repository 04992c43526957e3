"""``write_clusters_sharded``: a Dask build's shards written into a real store shard by shard, on
the workers of a LocalCluster with two worker processes (a Qdrant collection on disk, opened by
each task in turn) and here (the numpy store).

Oracles: the local build of the same texts (each point's cluster id and representative flag) and
``write_clusters`` of the assembled artifact (the same payloads, the same count).
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")
pytest.importorskip("pyarrow.parquet")

import diversify  # noqa: E402
from diversify.artifact.shards import ShardClusters, iter_shards, read_manifest, read_shard  # noqa: E402
from diversify.corpus.datagen import generate_corpus  # noqa: E402
from diversify.engines.dask import build_dask  # noqa: E402
from diversify.errors import ConfigError  # noqa: E402
from diversify.stores.sharded import write_clusters_sharded  # noqa: E402


@pytest.fixture(scope="module")
def built(client, tmp_path_factory):
    c = generate_corpus(1500, words_per_doc=50, dup_fraction=0.3, edit_rate=(0.0, 0.03), seed=21)
    texts = list(c.texts)
    out = tmp_path_factory.mktemp("res") / "shards"
    build_dask(texts, ids=list(range(len(texts))), client=client, npartitions=4, output_dir=str(out))
    local = diversify.build(texts, ids=list(range(len(texts))))
    assert local.n_duplicates > 200
    return texts, out, local


def _vectors(n: int) -> np.ndarray:
    x = np.random.default_rng(3).normal(size=(n, 8)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@contextlib.contextmanager
def _qdrant_on_disk(path: str):
    """Qdrant's local mode locks its folder for one process: each shard's task opens it under a
    cluster-wide lock and closes it after (a Qdrant server would take the tasks at once)."""
    from qdrant_client import QdrantClient

    from diversify.stores import QdrantStore

    with distributed.Lock("qdrant-folder"):
        qc = QdrantClient(path=path)
        try:
            yield QdrantStore(qc, "docs")
        finally:
            qc.close()


def test_the_workers_write_each_shard_into_qdrant(client, built, tmp_path):
    qc_mod = pytest.importorskip("qdrant_client")
    from qdrant_client import models

    texts, out, local = built
    n = len(texts)
    folder = str(tmp_path / "qdrant")
    qc = qc_mod.QdrantClient(path=folder)
    qc.create_collection("docs", vectors_config=models.VectorParams(size=8, distance=models.Distance.COSINE))
    qc.upsert("docs", points=[models.PointStruct(id=i, vector=v.tolist(), payload={"keep": i})
                              for i, v in enumerate(_vectors(n))])
    qc.close()
    assert len(read_manifest(out)["shards"]) == 4
    written = write_clusters_sharded(out, lambda: _qdrant_on_disk(folder), client=client)
    assert written == n
    qc = qc_mod.QdrantClient(path=folder)
    try:
        points, _ = qc.scroll("docs", limit=n + 10, with_payload=True)
    finally:
        qc.close()
    got = {int(p.id): p.payload for p in points}
    assert len(got) == n
    for i in range(n):
        assert got[i]["keep"] == i, "other payload keys must be kept"
        assert got[i]["cluster_id"] == int(local.cluster_ids[i]), f"document {i}: cluster differs"
        assert got[i]["is_representative"] is bool(local.is_representative[i]), f"document {i}: flag differs"


def test_written_here_shard_by_shard_it_is_the_assembled_artifacts_write(built):
    from diversify.stores import NumpyStore

    texts, out, local = built
    n = len(texts)
    ids = [int(i) for i in np.random.default_rng(5).permutation(n)]  # the store's own order
    x = _vectors(n)
    a = NumpyStore(x, ids)
    b = NumpyStore(x, ids)
    assert write_clusters_sharded(out, lambda: a) == n
    assert b.write_clusters(diversify.load(str(out))) == n
    for i in ids:
        assert a.payload(i) == b.payload(i), f"document {i}"
    assert a.payload(ids[0])["cluster_id"] == int(local.cluster_ids[ids[0]])


def test_a_shard_looks_up_like_the_artifact(built):
    _, out, _ = built
    cmap = diversify.load(str(out))
    for s, _t in iter_shards(out):
        shard = read_shard(out, s["file"])
        probe = shard.ids[::7] + [10**9, -1, "0", "x"]  # unknown ints, and str ids against int ids
        assert np.array_equal(shard.lookup(probe)[: len(shard.ids[::7])], cmap.lookup(shard.ids[::7]))
        assert shard.lookup(probe)[-4:].tolist() == [-1, -1, -1, -1]
        rows = shard.doc_index(shard.ids)
        assert rows.tolist() == list(range(len(shard)))
    strs = ShardClusters(["a", "b", "c"], np.array([0, 0, 2]), np.array([True, False, True]))
    assert strs.lookup(["c", "a", 1, "zz"]).tolist() == [2, 0, -1, -1]
    assert ShardClusters([], np.zeros(0), np.zeros(0)).lookup([1, "a"]).tolist() == [-1, -1]


def test_bad_factories_are_clear_errors(built):
    _, out, _ = built
    with pytest.raises(ConfigError, match="`store_factory` must be a callable"):
        write_clusters_sharded(out, "qdrant://x")
    with pytest.raises(ConfigError, match="must give a sync store adapter"):
        write_clusters_sharded(out, lambda: object())
    with pytest.raises(ConfigError, match="cluster_field"):
        write_clusters_sharded(out, lambda: None, cluster_field="")
