"""A sharded Dask result (``output_dir``): Parquet shards written by the workers, a manifest by the
client, read by ``diversify.load``, ``stats``, ``export`` and ``show``, on a real LocalCluster with
two worker processes.

Oracles: the artifact the same build returns as a BuildResult (the assembled shards must be the
same bytes), and the local build (each shard row's cluster, representative id, stage bits and
similarity).
"""

from __future__ import annotations

import csv
import hashlib
import json

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")
pq = pytest.importorskip("pyarrow.parquet")

import diversify  # noqa: E402
from diversify.artifact.shards import MANIFEST, iter_shards  # noqa: E402
from diversify.config import BuildConfig, MinHashConfig  # noqa: E402
from diversify.corpus.datagen import generate_corpus  # noqa: E402
from diversify.engines.dask import build_dask  # noqa: E402
from diversify.errors import ArtifactError, InputError  # noqa: E402

CREATED = "2024-01-01T00:00:00Z"


@pytest.fixture(scope="module")
def corpus():
    c = generate_corpus(1200, words_per_doc=60, dup_fraction=0.3, edit_rate=(0.0, 0.06), seed=4)
    texts = list(c.texts) + ["", texts_copy := c.texts[5]]
    assert texts_copy == texts[5]
    return texts, [f"doc-{i}" for i in range(len(texts))]


def _sha(path) -> str:
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


@pytest.mark.parametrize("clustering, incremental", [("clique", True), ("star", False), ("components", True)])
def test_the_assembled_shards_are_the_artifact_the_build_returns(client, corpus, tmp_path, clustering, incremental):
    texts, ids = corpus
    cfg = BuildConfig(clustering=clustering, incremental=incremental)
    whole = build_dask(texts, ids=ids, config=cfg, client=client, npartitions=3, created_at=CREATED,
                       metadata={"run": "a"})
    sharded = build_dask(texts, ids=ids, config=cfg, client=client, npartitions=3, created_at=CREATED,
                         metadata={"run": "a"}, output_dir=str(tmp_path / "out"))
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [MANIFEST] + [f"part-0000{i}.parquet" for i in range(3)]
    assert (sharded.n_docs, sharded.n_clusters) == (whole.n_docs, whole.n_clusters)
    whole.cluster_map.save(tmp_path / "whole.dvf")
    diversify.load(str(tmp_path / "out")).save(tmp_path / "assembled.dvf")
    assert _sha(tmp_path / "whole.dvf") == _sha(tmp_path / "assembled.dvf"), "the assembled artifact differs"
    assert sharded.stats["merged"] == whole.stats["merged"]
    assert sharded.stats["dask"]["cut_partitions"] >= 2


def test_each_shard_row_says_what_the_local_build_says(client, corpus, tmp_path):
    texts, ids = corpus
    cfg = BuildConfig(minhash=MinHashConfig(threshold=0.7))
    local = diversify.build(texts, ids=ids, config=cfg)
    build_dask(texts, ids=ids, config=cfg, client=client, npartitions=4, output_dir=str(tmp_path / "o"))
    rows = {k: [] for k in ("id", "cluster_id", "representative_id", "stage", "similarity")}
    for _, t in iter_shards(tmp_path / "o"):
        for k in rows:
            rows[k] += t.column(k).to_pylist()
    assert rows["id"] == ids
    assert np.array_equal(rows["cluster_id"], local.cluster_ids)
    rep_of = {int(c): ids[i] for i, c in enumerate(local.cluster_ids) if local.is_representative[i]}
    assert rows["representative_id"] == [rep_of[int(c)] for c in local.cluster_ids]
    assert np.array_equal(rows["stage"], local.doc_stages)
    want = np.asarray(local.cluster_map.extras["fold_similarity"])
    assert np.array_equal(np.asarray(rows["similarity"], np.float32), want)
    assert local.n_duplicates > 100


def test_the_cli_writes_shards_and_stats_export_show_read_them(client, corpus, tmp_path, capsys):
    from diversify.cli import main

    texts, ids = corpus
    src = tmp_path / "c.jsonl"
    src.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in zip(ids, texts)), encoding="utf-8")
    out = tmp_path / "res"
    assert main(["build", str(src), "--engine", "dask", "--scheduler", client.scheduler.address, "--shards",
                 "-o", str(out), "--no-progress"]) == 0
    cap = capsys.readouterr()
    said = cap.out + cap.err
    assert "shards and" in said and (out / MANIFEST).exists(), said
    cmap = diversify.load(str(out))
    local = diversify.build(texts, ids=ids, config=BuildConfig(**cmap.config))
    assert np.array_equal(np.asarray(cmap.cluster_ids), local.cluster_ids)
    assert main(["stats", str(out)]) == 0
    stats_out = capsys.readouterr()
    assert f"{local.n_clusters:,}" in stats_out.out + stats_out.err
    assert main(["export", str(out), "-o", str(tmp_path / "e.csv")]) == 0
    with open(tmp_path / "e.csv", encoding="utf-8") as f:
        exported = list(csv.DictReader(f))
    assert [r["id"] for r in exported] == ids
    assert main(["show", str(out), "--id", ids[5], "--limit", "3"]) == 0


def test_bad_output_dirs_and_damaged_results_are_clear_errors(client, corpus, tmp_path, capsys):
    from diversify.cli import main

    texts, ids = corpus
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match="`output_dir` .* is a file"):
        build_dask(texts[:50], client=client, output_dir=str(tmp_path / "file"))
    out = tmp_path / "o"
    build_dask(texts[:200], client=client, npartitions=2, output_dir=str(out))
    with pytest.raises(InputError, match="already holds a result"):
        build_dask(texts[:50], client=client, output_dir=str(out))
    assert main(["build", "x.jsonl", "--shards", "-o", str(tmp_path / "z")]) == 2
    assert "--engine dask" in capsys.readouterr().err
    m = json.loads((out / MANIFEST).read_text())
    m["shards"][1]["rows"] += 1
    (out / MANIFEST).write_text(json.dumps(m))
    with pytest.raises(ArtifactError, match="incomplete"):
        diversify.load(str(out))
    m["n_docs"] += 1
    (out / MANIFEST).write_text(json.dumps(m))
    with pytest.raises(ArtifactError, match="holds 100 rows; the manifest says 101"):
        diversify.load(str(out))
    (out / MANIFEST).write_text("{not json")
    with pytest.raises(ArtifactError, match="cannot read the manifest"):
        diversify.load(str(out))


def test_what_the_client_receives_does_not_grow_with_the_corpus(client, tmp_path, monkeypatch):
    """Everything the client gathers during a sharded build, measured at two corpus sizes with the
    same partitions: it grows by less than the purity sample's bound (1,000 picks of 4 int64),
    while the corpus grows by megabytes; and no text is among it."""
    import pickle

    seen: list = []
    gather = client.gather

    def spy(futures, *args, **kwargs):
        out = gather(futures, *args, **kwargs)
        seen.append(out)
        return out

    monkeypatch.setattr(client, "gather", spy)
    received, text_bytes = [], []
    for n in (4000, 12000):
        c = generate_corpus(n, words_per_doc=40, dup_fraction=0.3, edit_rate=(0.0, 0.01), seed=n)
        seen.clear()
        res = build_dask(list(c.texts), client=client, npartitions=3, output_dir=str(tmp_path / f"n{n}"))
        assert res.manifest["build_info"]["purity"]["pairs_in_clusters"] > 1000
        received.append(sum(len(pickle.dumps(x)) for x in seen))
        text_bytes.append(sum(len(t) for t in c.texts))

        def strings(x):
            if isinstance(x, str):
                yield x
            elif isinstance(x, dict):
                for v in x.values():
                    yield from strings(v)
            elif isinstance(x, (list, tuple)):
                for v in x:
                    yield from strings(v)

        longest = max((len(s) for x in seen for s in strings(x)), default=0)
        assert longest < 40, f"a string of {longest} characters reached the client: a text?"
    assert text_bytes[1] - text_bytes[0] > 1_000_000
    assert received[1] - received[0] < 1000 * 4 * 8 + 4096, f"the client received {received} bytes"
