"""Stage 3b, linking and verification: the local build's bucket scan inside each shuffle partition,
then the exact Jaccard check of its borderline pairs.

A shuffle partition holds every member of its shared buckets, so its candidate pairs are formed
and verified there with the local build's own pieces (:func:`diversify.linking.link.make_verifier`
and :func:`~diversify.linking.link.scan_buckets`: same bucket order (key, doc, band), same
``bucket_window``, same verification kernel). Only a spanning forest of its verified edges and its
borderline pairs leave the partition. Borderline pairs (``verify="auto"``) are decided by the local
build's exact check (:func:`decide_block`, with :func:`~diversify.linking.exact.link_exact`) in the
shuffle join of :mod:`.borderline`.
"""

from __future__ import annotations

import time

import numpy as np

from ...clusters import component_roots
from ...config import BuildConfig
from ...linking.exact import link_exact
from ...linking.link import make_forest, make_verifier, scan_buckets
from ...stages import STAGE_MINHASH

__all__ = ["scan_partition", "scan_summary", "decide_block", "flagged_of"]

#: borderline pairs a bucket scan buffers before it hands them out and resumes
BORDERLINE_CAPACITY = 1 << 16


def _rows_in_shared_buckets(key: np.ndarray) -> np.ndarray:
    """Rows whose key another row of the partition holds (singleton buckets, nearly all, leave)."""
    if key.size == 0:
        return np.zeros(0, np.int64)
    order = np.argsort(key, kind="stable")
    ks = key[order]
    run_start = np.ones(ks.size, dtype=bool)
    run_start[1:] = ks[1:] != ks[:-1]
    run_id = np.cumsum(run_start) - 1
    return order[np.bincount(run_id)[run_id] >= 2]


def _by_key_then(key: np.ndarray, minor: np.ndarray) -> np.ndarray:
    """The order sorting by ``key``, then ``minor`` (``np.lexsort((minor, key))``, as two stable sorts:
    faster than lexsort on 64-bit keys)."""
    o = np.argsort(minor, kind="stable")
    return o[np.argsort(key[o], kind="stable")]


def _first_copies_in_scan_order(key, doc, band, exact, shared=None) -> tuple:
    """Drop every exact copy that is not the first (smallest index) of its text within its bucket
    (= first globally: copies share every band key), then sort by the local scan order: key,
    document, band. Returns (key, doc). ``shared`` (optional) marks the rows whose exact hash
    another document holds: only those can be dropped, so only those are grouped."""
    o = _by_key_then(key, (doc.astype(np.int64) << np.int64(16)) | band.astype(np.int64))  # band < 2**15
    key, doc, exact = key[o], doc[o], exact[o]
    rows = np.arange(key.size) if shared is None else np.flatnonzero(shared[o])
    if rows.size:
        # within a bucket documents ascend: the first row of a (key, exact hash) group is its smallest document
        s = rows[np.lexsort((rows, exact[rows], key[rows]))]
        g = np.ones(s.size, dtype=bool)
        g[1:] = (key[s][1:] != key[s][:-1]) | (exact[s][1:] != exact[s][:-1])
        first_doc = doc[s][np.flatnonzero(g)][np.cumsum(g) - 1]
        drop = s[doc[s] != first_doc]
        if drop.size:
            keep = np.ones(key.size, dtype=bool)
            keep[drop] = False
            key, doc = key[keep], doc[keep]
    return key, doc


def _joined(pieces) -> tuple:
    """(key, doc, band) of every row of a shuffle partition's pieces, and its documents (sorted,
    unique) with their exact hashes and signatures."""
    key = np.concatenate([p["key"] for p in pieces])
    doc = np.concatenate([p["doc"] for p in pieces])
    band = np.concatenate([p["band"] for p in pieces])
    docs = np.concatenate([p["docs"] for p in pieces])
    docs, first = np.unique(docs, return_index=True)
    exact = np.concatenate([p["exact"] for p in pieces])[first]
    sigs = np.concatenate([p["sigs"] for p in pieces])[first]
    return key, doc, band, docs, exact, sigs


def _forest_out(uniq: np.ndarray, forest) -> dict:
    """The spanning forest of a local forest over documents ``uniq``: each moved node -> its root."""
    root = component_roots(forest.parent)
    moved = np.flatnonzero(root != np.arange(uniq.size))
    return {"u": uniq[moved], "v": uniq[root[moved]], "flagged": uniq[forest.flags != 0]}


def scan_partition(cfg_json: dict, *pieces) -> dict:
    """Candidate pairs of every bucket in this shuffle partition (its pieces of :func:`.bands.band_split`),
    verified; a spanning forest out, with the borderline pairs (global document indices, int64 (m, 2))
    in scan order."""
    from ..._kernels.linking import KIND_MINHASH_ESTIMATE, Buckets

    t0 = time.perf_counter()
    cfg = BuildConfig(**cfg_json)
    assert cfg.minhash is not None
    key, doc, band, docs, exact, sigs = _joined(pieces)
    n_rows = key.size
    keep = _rows_in_shared_buckets(key)
    if keep.size == 0:
        return {"u": np.zeros(0, np.int64), "v": np.zeros(0, np.int64), "flagged": np.zeros(0, np.int64),
                "deferred": np.zeros((0, 2), np.int64), "candidates": 0, "verified": 0, "rows": n_rows,
                "bucket_rows": 0, "docs": int(docs.size), "seconds": time.perf_counter() - t0}
    at = np.searchsorted(docs, doc[keep])
    ex = np.sort(exact)
    shared = np.isin(exact, ex[1:][ex[1:] == ex[:-1]])  # documents whose exact hash another one holds
    key, doc = _first_copies_in_scan_order(key[keep], doc[keep], band[keep], exact[at], shared[at])
    uniq, inv = np.unique(doc, return_inverse=True)
    minhash = np.ascontiguousarray(sigs[np.searchsorted(docs, uniq)])
    # every borderline pair is kept: a full buffer pauses the scan instead of letting the estimate
    # decide (which would make the result depend on the scan order)
    verifier = make_verifier(KIND_MINHASH_ESTIMATE, cfg, auto=True, minhash=minhash)
    forest = make_forest(np.arange(uniq.size, dtype=np.int64), np.zeros(uniq.size, dtype=np.uint8), STAGE_MINHASH)
    deferred: list = []
    buckets = Buckets(np.arange(key.size, dtype=np.int64), key, inv.astype(np.int64), 1, int(cfg.bucket_window), 0)
    scan_buckets(buckets, verifier, forest, on_borderline=deferred.append, capacity=BORDERLINE_CAPACITY)
    d = np.concatenate(deferred) if deferred else np.zeros((0, 2), np.int64)
    return {**_forest_out(uniq, forest), "deferred": uniq[d], "candidates": int(forest.counters[0]),
            "verified": int(forest.counters[1]), "rows": n_rows, "bucket_rows": int(keep.size),
            "docs": int(docs.size), "seconds": time.perf_counter() - t0}


def scan_summary(res: dict) -> tuple:
    """(candidates, verifications, rows, rows in buckets, forest edges, seconds, document records) of a
    scanned partition."""
    return (res["candidates"], res["verified"], res["rows"], res["bucket_rows"], int(res["u"].size), res["seconds"],
            res["docs"])


def flagged_of(res: dict) -> np.ndarray:
    return res["flagged"]


def _deferred_of(res: dict) -> np.ndarray:
    return res["deferred"]


def decide_block(pairs: np.ndarray, table_a: dict, table_b: dict, cfg_json: dict) -> dict:
    """Exact Jaccard of borderline pairs (documents of ``table_a`` x ``table_b``); a forest of the accepted."""
    from ..._kernels.linking import ShingleRows

    if table_b is table_a or np.array_equal(table_a["docs"], table_b["docs"]):
        docs, shingles = table_a["docs"], table_a["shingles"]
    else:
        a, b = table_a["shingles"], table_b["shingles"]
        docs = np.concatenate([table_a["docs"], table_b["docs"]])
        shingles = ShingleRows(np.concatenate([a.starts, b.starts + a.hashes.size]), np.concatenate([a.counts, b.counts]),
                               np.concatenate([a.hashes, b.hashes]))
    order = np.argsort(docs, kind="stable")
    rows = order[np.searchsorted(docs[order], pairs)].astype(np.int64)
    uniq, inv = np.unique(pairs, return_inverse=True)
    forest = make_forest(np.arange(uniq.size, dtype=np.int64), np.zeros(uniq.size, dtype=np.uint8), STAGE_MINHASH)
    link_exact(inv.reshape(-1, 2).astype(np.int64), rows, shingles, BuildConfig(**cfg_json), forest)
    return {**_forest_out(uniq, forest), "checked": int(forest.counters[1])}
