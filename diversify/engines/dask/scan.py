"""Stage 3b, the bucket scan: the candidate pairs of each shuffle partition, formed as the local
build forms them, and the exact Jaccard check of a block of borderline pairs.

A shuffle partition holds every member of its shared buckets, so its candidate pairs are formed
there with the local scan's rule (same bucket order (key, doc, band), same ``bucket_window``, the
first copy of each text per bucket; :func:`diversify._kernels.candidates.window_pairs`), each
distinct pair once. They are verified where the documents' signatures are (:mod:`.pairs`);
borderline pairs (``verify="auto"``) are decided by the local build's exact check
(:func:`decide_block`, with :func:`~diversify.linking.exact.link_exact`) in the shuffle join of
:mod:`.borderline`.
"""

from __future__ import annotations

import time
from typing import Optional

import numpy as np

from ..._arrays import unique_sorted
from ...clusters import component_roots
from ...config import BuildConfig
from ...linking.exact import link_exact
from ...linking.keys import stable_argsort
from ...linking.link import make_forest
from ...stages import STAGE_MINHASH

__all__ = ["scan_partition", "scan_summary", "decide_block"]

#: rows of sorted band keys whose window pairs are formed (and made distinct) at a time
SCAN_BLOCK_ROWS = 1 << 18


def _scan_order(key: np.ndarray, doc: np.ndarray, band: np.ndarray) -> np.ndarray:
    """The permutation sorting rows by the local scan order: key, then document, then band. The
    pieces of :func:`.bands.band_split`, joined in chunk order, already hold their rows in
    (document, band) order; then one stable sort of the keys (the radix kernel of
    :func:`~diversify.linking.keys.stable_argsort`) is the whole sort, else a stable sort by
    (document, band) comes first."""
    minor = (doc.astype(np.int64) << np.int64(16)) | band.astype(np.int64)  # band < 2**15
    if minor.size > 1 and not bool(np.all(minor[1:] >= minor[:-1])):
        o = np.argsort(minor, kind="stable")
        return o[stable_argsort(np.ascontiguousarray(key[o]))]
    return stable_argsort(np.ascontiguousarray(key))


def _in_shared_buckets(key: np.ndarray) -> np.ndarray:
    """Of rows sorted by key, those whose key another row holds (singleton buckets, nearly all, leave)."""
    start = np.ones(key.size, dtype=bool)
    start[1:] = key[1:] != key[:-1]
    run = np.cumsum(start) - 1
    return np.bincount(run)[run] >= 2


def _first_copy_rows(key: np.ndarray, doc: np.ndarray, exact: np.ndarray, shared: Optional[np.ndarray]) -> np.ndarray:
    """Of rows in scan order, those to keep: every exact copy that is not the first (smallest
    document) of its text within its bucket (= first globally: copies share every band key) leaves.
    ``shared`` (optional) marks the rows whose exact hash another document holds: only those can
    leave, so only those are grouped."""
    keep = np.ones(key.size, dtype=bool)
    rows = np.arange(key.size) if shared is None else np.flatnonzero(shared)
    if rows.size:
        # within a bucket documents ascend: the first row of a (key, exact hash) group is its smallest document
        s = rows[np.lexsort((rows, exact[rows], key[rows]))]
        g = np.ones(s.size, dtype=bool)
        g[1:] = (key[s][1:] != key[s][:-1]) | (exact[s][1:] != exact[s][:-1])
        first_doc = doc[s][np.flatnonzero(g)][np.cumsum(g) - 1]
        keep[s[doc[s] != first_doc]] = False
    return keep


def _joined(pieces) -> tuple:
    """(key, doc, band) of every row of a shuffle partition's pieces, and its documents (sorted,
    unique) with their exact hashes. A document's record comes from the one chunk that holds it,
    and chunks come in document order: the records are then sorted already."""
    key = np.concatenate([p["key"] for p in pieces])
    doc = np.concatenate([p["doc"] for p in pieces])
    band = np.concatenate([p["band"] for p in pieces])
    docs = np.concatenate([p["docs"] for p in pieces])
    exact = np.concatenate([p["exact"] for p in pieces])
    if docs.size > 1 and not bool(np.all(docs[1:] > docs[:-1])):
        docs, first = np.unique(docs, return_index=True)
        exact = exact[first]
    return key, doc, band, docs, exact


def _forest_out(uniq: np.ndarray, forest) -> dict:
    """The spanning forest of a local forest over documents ``uniq``: each moved node -> its root."""
    root = component_roots(forest.parent)
    moved = np.flatnonzero(root != np.arange(uniq.size))
    return {"u": uniq[moved], "v": uniq[root[moved]], "flagged": uniq[forest.flags != 0]}


def _distinct_window_pairs(key: np.ndarray, at: np.ndarray, window: int, n_docs: int) -> tuple[int, np.ndarray]:
    """(window pairs formed, the distinct ones packed ``a * n_docs + b``, sorted) of rows sorted by
    key; formed a block of whole buckets at a time (about ``SCAN_BLOCK_ROWS`` rows), each block's
    pairs made distinct before the next: a task holds one block's pairs (at most rows x window)
    beside the distinct pairs so far. A pair shares several bands, so blocks repeat pairs."""
    from ..._kernels.candidates import window_pairs

    cuts = np.unique(np.searchsorted(key, key[np.arange(0, key.size, SCAN_BLOCK_ROWS)], side="left"))
    bounds = np.append(cuts, key.size)
    formed, parts = 0, []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        packed = window_pairs(key[lo:hi], at[lo:hi], window, n_docs)
        formed += packed.size
        parts.append(unique_sorted(packed))
    return formed, (unique_sorted(np.concatenate(parts)) if len(parts) > 1 else parts[0])


def scan_partition(cfg_json: dict, *pieces) -> dict:
    """The candidate pairs of every bucket in this shuffle partition (its pieces of
    :func:`.bands.band_split`): the window pairs of the local build's scan (same order, same
    ``bucket_window``, the first copy of each text per bucket), each distinct pair once (global
    document indices ``a < b``, int64 (m, 2), sorted). They are verified where their documents'
    signatures are (:mod:`.pairs`), so no signature comes here."""
    t0 = time.perf_counter()
    cfg = BuildConfig(**cfg_json)
    key, doc, band, docs, exact = _joined(pieces)
    n_rows = key.size
    at = np.searchsorted(docs, doc)  # each row's document among the records (queries mostly ascending)
    o = _scan_order(key, doc, band)
    ks = key[o]
    in_bucket = _in_shared_buckets(ks)
    o, key = o[in_bucket], ks[in_bucket]
    n_bucket_rows = key.size
    local = np.zeros((0, 2), np.int64)
    candidates = 0
    if key.size:
        at = at[o]
        ex = np.sort(exact)
        shared = np.isin(exact, ex[1:][ex[1:] == ex[:-1]])  # documents whose exact hash another one holds
        first = _first_copy_rows(key, docs[at], exact[at], shared[at])
        key, at = key[first], at[first]
        candidates, packed = _distinct_window_pairs(key, at, int(cfg.bucket_window), int(docs.size))
        local = np.stack([packed // docs.size, packed % docs.size], axis=1)
    return {"pairs": docs[local], "candidates": candidates, "rows": n_rows, "bucket_rows": int(n_bucket_rows),
            "docs": int(docs.size), "seconds": time.perf_counter() - t0}


def scan_summary(res: dict) -> tuple:
    """(candidates, distinct pairs, rows, rows in buckets, document records, seconds) of a scanned partition."""
    return (res["candidates"], int(res["pairs"].shape[0]), res["rows"], res["bucket_rows"], res["docs"], res["seconds"])


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
