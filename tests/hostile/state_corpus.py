"""Real incremental artifacts and the tools to tamper with their stored state (used by
``tests/system/test_add_tampered_state.py`` and the workers ``state_worker.py`` / ``state_fuzz.py``).

Three artifacts, built with the public API, together hold every array an ``add`` reads:

* ``text``: guaranteed clustering, ``minhash.verify="exact"`` (shingle rows), a text SimHash stage,
  ``representative="key"`` with two key columns and per-source thresholds: ``exact_hash``,
  ``doc_flags``, ``minhash``, ``shingle_indptr``, ``shingle_hashes``, ``text_simhash``, ``rep_keys``,
  ``doc_threshold``, ``fold_similarity``;
* ``vectors``: texts and vectors: ``simhash`` and ``vectors`` (float64 under verify="exact");
* ``components``: 300 clusters of two near-copies plus a bridge added afterwards, so that two
  clusters merged: ``aliases``.

:func:`tamper` rewrites a file with one change and every checksum recomputed (so the change
reaches the state checks, not the CRC check); :func:`recluster` recomputes the arrays derived from
``doc/cluster_id`` so that only the rule under test is broken.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import numpy as np

CREATED = "2026-01-01T00:00:00Z"


def words(rng, n: int) -> list[str]:
    return [f"w{int(x)}" for x in rng.integers(0, 50_000, size=n)]


def _pairs(rng, n_pairs: int, length: int = 40) -> list[str]:
    texts = []
    for _ in range(n_pairs):
        base = words(rng, length)
        texts += [" ".join(base), " ".join(base + words(rng, 1))]
    return texts


def build_artifacts(out: Path, *, pairs: int = 300) -> dict[str, dict]:
    """Build the three artifacts under ``out``; return kind -> {path, add (API arguments), cli (argv tail)}."""
    import diversify
    from diversify import BuildConfig, MinHashConfig, TextSimHashConfig

    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(11)
    kinds: dict[str, dict] = {}

    texts = _pairs(rng, 40)
    n = len(texts)
    cfg = BuildConfig(minhash=MinHashConfig(verify="exact"), text_simhash=TextSimHashConfig(), simhash=None,
                      representative="key", source_thresholds={"news": 0.7, "wiki": 0.9})
    keys = np.stack([np.arange(n) % 5, np.arange(n)], axis=1).astype(np.float64)
    sources = ["news" if i % 3 else "wiki" for i in range(n)]
    res = diversify.build(texts, ids=[f"t{i}" for i in range(n)], config=cfg, keys=keys, sources=sources,
                          created_at=CREATED)
    # the new document is a near-copy of document 0: the add compares it with stored state
    kinds["text"] = _save(out, "text", res, {"texts": [texts[0] + " again"], "ids": ["new-text"],
                                             "keys": [[1.0, 2.0]], "sources": ["news"]},
                          ["--key-field", "k1", "--key-field", "k2", "--source-field", "src"])

    texts = _pairs(rng, 20)
    n = len(texts)
    vecs = rng.standard_normal((n, 16))
    res = diversify.build(texts, ids=[f"v{i}" for i in range(n)], vectors=vecs, created_at=CREATED)
    new_vec = vecs[:1] + 0.01 * rng.standard_normal((1, 16))
    np.save(out / "vectors-new.npy", new_vec)
    kinds["vectors"] = _save(out, "vectors", res, {"texts": [texts[0] + " again"], "ids": ["new-vec"],
                                                   "vectors": str(out / "vectors-new.npy")},
                             ["--vectors", str(out / "vectors-new.npy")])

    x = words(rng, 110)  # A = x[0:90], B = x[20:110], bridge = x[10:100]: J(A,B)=0.62, J(A,bridge)=J(B,bridge)=0.79
    a, b, bridge = " ".join(x[0:90]), " ".join(x[20:110]), " ".join(x[10:100])
    texts = [a, b] + _pairs(rng, pairs)
    ccfg = BuildConfig(clustering="components", minhash=MinHashConfig(threshold=0.7, verify="exact"))
    old = diversify.build(texts, ids=[f"c{i}" for i in range(len(texts))], config=ccfg, created_at=CREATED)
    assert old.cluster_ids[:2].tolist() == [0, 1], "A and B start apart"
    res = diversify.add(old.cluster_map, [bridge], ids=["bridge"], created_at=CREATED)
    assert res.cluster_map.extras["aliases"].tolist() == [[1, 0]], "the bridge merged B into A"
    kinds["components"] = _save(out, "components", res, {"texts": [" ".join(words(rng, 30))], "ids": ["new-comp"]}, [])
    return kinds


def _save(out: Path, kind: str, res, add: dict, cli: list) -> dict:
    path = out / f"{kind}.dvf"
    res.save(path)
    record = {"id": add["ids"][0], "text": add["texts"][0]}
    if "keys" in add:
        record.update(k1=add["keys"][0][0], k2=add["keys"][0][1])
    if "sources" in add:
        record["src"] = add["sources"][0]
    jsonl = out / f"{kind}-new.jsonl"
    jsonl.write_text(json.dumps(record) + "\n")
    return {"path": str(path), "add": add, "cli": [str(jsonl), *cli, "--no-progress"]}


def add_kwargs(add: dict) -> dict[str, Any]:
    """``diversify.add`` keyword arguments (texts included) from a kind's ``add`` record."""
    kw: dict[str, Any] = {"ids": add["ids"]}
    if "keys" in add:
        kw["keys"] = np.asarray(add["keys"], dtype=np.float64)
    if "sources" in add:
        kw["sources"] = add["sources"]
    if "vectors" in add:
        kw["vectors"] = np.load(add["vectors"], allow_pickle=False)
    return {"texts": add["texts"], **kw}


# --------------------------------------------------------------------------- tampering


def read(path) -> tuple[dict, dict[str, np.ndarray]]:
    """(header without format_version, writable copies of the arrays) of an artifact file."""
    from diversify.artifact import read_container

    header, arrays = read_container(path)
    header = dict(header)
    header.pop("format_version", None)
    return header, {name: np.array(arrays[name]) for name in arrays}


def write(path, header: dict, arrays: dict[str, np.ndarray]) -> None:
    from diversify.artifact import write_container

    write_container(path, header, arrays)


def tamper(src, dst, change: Callable[[dict, dict], None]) -> bytes:
    """Write ``src`` with ``change(header, arrays)`` applied (checksums recomputed) to ``dst``; its bytes."""
    header, arrays = read(src)
    change(header, arrays)
    write(dst, header, arrays)
    return Path(dst).read_bytes()


def recluster(header: dict, arrays: dict[str, np.ndarray], cl: np.ndarray) -> None:
    """Set ``doc/cluster_id`` to ``cl`` and recompute what is derived from it (CSR, lookup, counts),
    keeping ``doc/is_representative``: only the rule a test targets is then broken."""
    cl = np.asarray(cl, dtype=np.int64)
    rep = arrays["doc/is_representative"].astype(bool)
    cids, counts = np.unique(cl, return_counts=True)
    indptr = np.zeros(cids.size + 1, np.int64)
    np.cumsum(counts, out=indptr[1:])
    reps = np.flatnonzero(rep)
    representative = np.empty(cids.size, np.int64)
    representative[np.searchsorted(cids, cl[reps])] = reps
    arrays.update({
        "doc/cluster_id": cl,
        "lookup/cluster": cl[arrays["lookup/doc"]],
        "cluster/id": cids.astype(np.int64),
        "cluster/indptr": indptr,
        "cluster/members": np.argsort(cl, kind="stable").astype(np.int64),
        "cluster/representative": representative,
    })
    n = int(cl.size)
    header["counts"] = {"n_docs": n, "n_clusters": int(cids.size), "n_duplicates": n - int(cids.size)}


def set_config(header: dict, path: tuple, value) -> None:
    """Change one build-config value and write a matching fingerprint (a consistent, hostile header)."""
    from diversify.config import BuildConfig, fingerprint

    node = header["config"]
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    try:
        header["fingerprint"] = fingerprint(BuildConfig(**header["config"]))
    except ValueError:
        pass  # an invalid config has no fingerprint; the reader must refuse it anyway
