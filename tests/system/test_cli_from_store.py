"""`diversify build --from-store` run as users run it (``python -m diversify`` in a subprocess),
on a real store of each kind the path names: a Qdrant local path, a Chroma persistent directory,
a LanceDB directory, a Milvus Lite ``.db`` path, and a Chroma server URL. The artifact clusters
as ``diversify.build`` of the same documents; ``--write-back`` leaves each document's cluster id
in the store; each wrong invocation ends with one error line naming the flag, exit 2.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from needs import need_module

import diversify

N, DIM = 60, 8
TIMEOUT = 300




def _docs():
    """Twenty documents posted three times each, with near-identical vectors and one text."""
    rng = np.random.default_rng(5)
    base = rng.normal(size=(N // 3, DIM))
    vecs = np.concatenate([base + 0.001 * rng.normal(size=base.shape) for _ in range(3)]).astype(np.float32)
    texts = [f"topic {j % (N // 3)} is described at some length in these words here" for j in range(N)]
    return list(range(N)), vecs, texts


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "diversify", "build", *args, "--no-progress"], cwd=cwd,
                          capture_output=True, text=True, timeout=TIMEOUT)


def _qdrant(d: Path):
    qc = need_module("qdrant_client", "qdrant")
    from qdrant_client import models

    ids, vecs, texts = _docs()
    client = qc.QdrantClient(path=str(d / "qdrant"))
    client.create_collection("docs", vectors_config=models.VectorParams(size=DIM, distance=models.Distance.DOT))
    client.upsert("docs", points=[models.PointStruct(id=i, vector=v.tolist(), payload={"text": t})
                                  for i, v, t in zip(ids, vecs, texts)])
    client.close()
    return str(d / "qdrant"), "text"


def _chroma(d: Path):
    chromadb = need_module("chromadb", "chroma")
    ids, vecs, texts = _docs()
    col = chromadb.PersistentClient(path=str(d / "chroma")).create_collection("docs", embedding_function=None)
    col.add(ids=[str(i) for i in ids], embeddings=vecs, metadatas=[{"doc_id": i} for i in ids], documents=texts)
    return str(d / "chroma"), "#document"


def _lancedb(d: Path):
    lancedb = need_module("lancedb", "lancedb")
    ids, vecs, texts = _docs()
    lancedb.connect(str(d / "lance")).create_table("docs", data=[{"id": i, "vector": v.tolist(), "text": t}
                                                                 for i, v, t in zip(ids, vecs, texts)])
    return str(d / "lance"), "text"


def _milvus(d: Path):
    pymilvus = need_module("pymilvus", "milvus")
    need_module("milvus_lite", "milvus")
    ids, vecs, texts = _docs()
    client = pymilvus.MilvusClient(str(d / "docs.db"))
    dt = pymilvus.DataType
    schema = pymilvus.MilvusClient.create_schema(auto_id=False, enable_dynamic_field=True)
    schema.add_field("id", dt.INT64, is_primary=True)
    schema.add_field("vector", dt.FLOAT_VECTOR, dim=DIM)
    schema.add_field("cluster_id", dt.INT64, default_value=-1)
    schema.add_field("is_representative", dt.BOOL, default_value=False)
    index = client.prepare_index_params()
    index.add_index("vector", index_type="FLAT", metric_type="IP")
    client.create_collection("docs", schema=schema, index_params=index)
    client.insert("docs", [{"id": i, "vector": v.tolist(), "text": t} for i, v, t in zip(ids, vecs, texts)])
    _release_milvus(client, d / "docs.db")
    return str(d / "docs.db"), "text"


def _release_milvus(client, path) -> None:
    """Close the client and stop Milvus Lite's embedded server, which holds the .db path's lock."""
    client.close()
    from milvus_lite.server_manager import server_manager_instance

    server_manager_instance.release_server(str(path))


def _written(kind: str, location: str) -> dict:
    """{document id: cluster_id} as the store holds them after --write-back."""
    if kind == "qdrant":
        from qdrant_client import QdrantClient

        client = QdrantClient(path=location)
        try:
            points, _ = client.scroll("docs", limit=1000, with_payload=["cluster_id"])
            return {p.id: p.payload.get("cluster_id") for p in points}
        finally:
            client.close()
    if kind == "chroma":
        import chromadb

        got = chromadb.PersistentClient(path=location).get_collection("docs").get(include=["metadatas"])
        return {m["doc_id"]: m.get("cluster_id") for m in got["metadatas"]}
    if kind == "lancedb":
        import lancedb

        t = lancedb.connect(location).open_table("docs").to_arrow()
        return dict(zip(t.column("id").to_pylist(), t.column("cluster_id").to_pylist()))
    import pymilvus

    client = pymilvus.MilvusClient(location)
    try:
        client.load_collection("docs")
        rows = client.query("docs", filter="id >= 0", output_fields=["id", "cluster_id"])
        return {r["id"]: r["cluster_id"] for r in rows}
    finally:
        _release_milvus(client, location)


@pytest.mark.parametrize("kind", ["chroma", "lancedb", "milvus", "qdrant"])
def test_build_from_store_path_with_write_back(kind, tmp_path):
    location, text_field = {"qdrant": _qdrant, "chroma": _chroma, "lancedb": _lancedb, "milvus": _milvus}[kind](tmp_path)
    said = ["--store-kind", kind, "--vector-field", "vector"] if kind in ("lancedb", "milvus") else []
    r = _cli("--from-store", location, "--collection", "docs", "--text-field", text_field, "--write-back",
             "--batch-size", "7", *said, "-o", "out.dvf", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert f"wrote cluster_id and is_representative into {N} documents" in r.stdout
    ids, vecs, texts = _docs()
    want = diversify.build(texts, ids=ids, vectors=vecs).cluster_map.lookup(ids).tolist()
    got = diversify.load(tmp_path / "out.dvf")
    assert got.lookup(ids).tolist() == want
    assert len(set(want)) == N // 3
    assert _written(kind, location) == dict(zip(ids, want))


def test_build_from_a_chroma_server_url(chroma_server, tmp_path):
    chromadb = need_module("chromadb", "chroma")
    ids, vecs, texts = _docs()
    client = chromadb.HttpClient(host=chroma_server.host, port=chroma_server.port)
    name = f"cli-{tmp_path.name}"[:60]
    client.create_collection(name, embedding_function=None).add(
        ids=[str(i) for i in ids], embeddings=vecs, metadatas=[{"doc_id": i} for i in ids])
    r = _cli("--from-store", f"http://{chroma_server.host}:{chroma_server.port}", "--collection", name,
             "-o", "out.dvf", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    want = diversify.build(ids=ids, vectors=vecs).cluster_map.lookup(ids).tolist()
    assert diversify.load(tmp_path / "out.dvf").lookup(ids).tolist() == want


def _one_error(r: subprocess.CompletedProcess, *words: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("diversify build: error: "), r.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr


def test_wrong_invocations_name_the_flag(tmp_path):
    location, _ = _qdrant(tmp_path)
    (tmp_path / "empty").mkdir()
    (tmp_path / "in.jsonl").write_text('{"id": 1, "text": "a b c"}\n')
    _one_error(_cli("--from-store", location, "--collection", "nope", "-o", "o.dvf", cwd=tmp_path),
               "`--collection`", "'nope'", "'docs'")
    _one_error(_cli("--from-store", str(tmp_path / "empty"), "--collection", "docs", "-o", "o.dvf", cwd=tmp_path),
               "`--from-store` must name a vector store")
    _one_error(_cli("--from-store", location, "--collection", "docs", "--text-field", "title", "-o", "o.dvf",
                    cwd=tmp_path), "`--text-field`", "has no 'title'")
    _one_error(_cli("--from-store", location, "-o", "o.dvf", cwd=tmp_path), "`--collection` is needed")
    _one_error(_cli("in.jsonl", "--from-store", location, "--collection", "docs", "-o", "o.dvf", cwd=tmp_path),
               "does not combine with INPUT")
    _one_error(_cli("--from-store", location, "--collection", "docs", "--vector-field", "dense", "-o", "o.dvf",
                    cwd=tmp_path), "`--vector-field`")
    need_module("chromadb", "chroma")
    r = _cli("--from-store", "http://127.0.0.1:9", "--collection", "docs", "-o", "o.dvf", cwd=tmp_path)
    assert r.returncode == 1, r.stderr  # nothing answers there: the environment, not the command, is at fault
    assert r.stderr.startswith("diversify build: error: `--from-store`: could not open the chroma store") and \
        "Traceback" not in r.stderr
    assert not (tmp_path / "o.dvf").exists()


def test_help_says_how_a_path_names_a_store():
    r = subprocess.run([sys.executable, "-m", "diversify", "build", "--help"], capture_output=True, text=True,
                       timeout=TIMEOUT)
    assert r.returncode == 0
    text = " ".join(r.stdout.split())
    for words in ("--from-store URL_OR_PATH", "--collection NAME", "--write-back", "chroma.sqlite3",
                  "meta.json and collection/", "*.lance", "ending .db Milvus Lite", "{qdrant,chroma,lancedb,milvus}"):
        assert words in text, words
