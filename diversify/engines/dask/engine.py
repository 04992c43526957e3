"""The offline build on Dask: the local builder's stages, partitioned, with the same clusters.

Stages (each a pure Dask task graph; a failed task is recomputed from its inputs):

1. **read + sketch** per input partition with the local builder's own code
   (:func:`~diversify.build.pipeline.sketch_texts`: normalization, exact hash, MinHash kernels).
   Partitions stay on the workers. Their sizes give every document its *global index* (its
   position in the input order), which is what cluster labels are made of.
2. **exact stage**: rows ``(exact hash, doc)`` shuffled by hash; each document points at the
   smallest document with its hash.
3. **MinHash stage**, in two passes over the band keys. Pass 1 shuffles the bare keys (8 bytes
   a row) and keeps the keys held by two or more rows; their Bloom filter (no false negatives,
   ~1% false positives) goes to every worker. Pass 2 emits only the rows whose key passes the
   filter, each with the document index, band, exact hash and whole signature, shuffled by key.
   A shuffle partition then holds every member of its shared buckets, so candidate pairs are
   emitted and verified there, with the very scan of the local build (same bucket order (doc,
   band), same ``bucket_window``). Only a spanning forest of each partition's verified edges, and
   its borderline pairs, leave the partition. Borderline pairs (``verify="auto"``) are decided by
   exact Jaccard: each input partition re-shingles just its documents that occur in one.
4. **connected components** of the exact and MinHash edges by alternating large-star and
   small-star rounds (Kiveris et al. 2014) over the edge table, each a shuffle by node; O(log n)
   rounds. A component's label is its smallest member: the local build's cluster id.
5. **artifact**: the per-document columns are gathered partition by partition and written by the
   local builder's ``_finish`` (representatives, stage flags, extras).

Why the clusters are identical to the local build's
---------------------------------------------------
The local build links documents in buckets of equal band keys, sorted by (key, doc, band), each
member against the next ``bucket_window - 1`` members (all pairs in small buckets), among the
documents that are first of their exact hash; it skips a pair whose ends are already connected.
Skipping such pairs never changes connected components, so its clusters are the components of
the graph {exact edges} + {verified window pairs}. Here every window pair of a bucket is examined
in the same order within one partition (the skip only applies inside the partition, which again
leaves components unchanged). Exact copies have equal texts, hence equal signatures and band keys,
so all copies of a text meet in each of its buckets and the "first of its exact hash" filter is
applied there, per bucket, with the same result as the global filter. Hence the same edge graph up
to edges inside components, the same components, the same smallest members, the same ids; and the
same stage flags (a document gets the MinHash flag iff it lies in a non-trivial component of the
MinHash graph, in both engines). The one statistic that differs is ``verified["minhash"]``:
here a pair is skipped only if it is already connected within its partition. A row left out by
the filter has a key no other row holds: it can never give a candidate pair.

The local build decides borderline pairs by exact Jaccard only up to a buffer of
``max(16, min(4e6, 4 * n_lsh_docs))`` pairs and by the estimate's midpoint beyond it; which pairs
overflow depends on its global scan order. This engine never overflows (every borderline pair is
checked exactly), so on a corpus whose local build overflows that buffer (e.g. thousands of
near-identical boilerplate pages) the two can differ in a few borderline merges.

Corner case (documented, not handled): two *different* texts with the same 64-bit exact hash
(probability ~ n**2 / 2**65) are one exact group in both engines, but the per-bucket filter may
keep the second text in a bucket where the first is absent.

Not supported on this engine (raise ConfigError): vectors / SimHash, ``MinHashConfig(verify="exact")``.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional, Union

import numpy as np

from ...config import BuildConfig
from ...errors import ConfigError, InputError, InputTypeError, require
from ...linking.link import LinkStats, agreement_band, make_verifier, minhash_params
from ...sketches.batch import Sketches
from ...stages import STAGE_EXACT, STAGE_MINHASH

__all__ = ["build_dask", "connected_components"]

#: target size of one shuffle partition of band rows (bytes); lower -> less memory per task
SHUFFLE_PARTITION_BYTES = 128 * 2**20
#: documents per input partition when texts are handed in as a Python sequence
DEFAULT_PARTITION_DOCS = 20_000
_TARGET_EDGE_PARTITION_BYTES = 64 * 2**20
#: initial room for borderline pairs in a bucket partition beyond 4 per row (grown on demand)
_DEFERRED_SLACK = 1024


def _dask():
    require("dask.dataframe", extra="dask", purpose="The Dask engine")
    return require("distributed", extra="dask", purpose="The Dask engine")


# --------------------------------------------------------------------------------------------
# input partitions (worker side; every function here is pure)


@dataclass
class _Part:
    """One input partition: texts, optional ids (None -> global index) and optional keys."""

    texts: list
    ids: Optional[list] = None
    keys: Optional[np.ndarray] = None


def _texts_of(values, where: str) -> list:
    out = []
    for i, t in enumerate(values):
        if t is None or (isinstance(t, float) and math.isnan(t)):
            out.append("")  # as the local Parquet reader: a missing text is an empty document
        elif isinstance(t, str):
            out.append(t)
        else:
            raise InputTypeError(
                f"texts must be str; {where} row {i} is {type(t).__name__} ({t!r:.60}). "
                "Convert the text column to strings before building."
            )
    return out


def _part_from_pandas(df, text_field: str, id_field: Optional[str], key_field: Optional[str]) -> _Part:
    texts = _texts_of(df[text_field].tolist(), "a partition")
    ids = df[id_field].tolist() if id_field and id_field in df.columns else None
    keys = df[key_field].to_numpy(np.float64) if key_field and key_field in df.columns else None
    return _Part(texts, ids, keys)


def _part_from_records(items, text_field: str, id_field: Optional[str], key_field: Optional[str]) -> _Part:
    items = list(items)
    if all(isinstance(x, str) for x in items):
        return _Part(items)
    texts, ids, keys = [], [], []
    for i, rec in enumerate(items):
        if isinstance(rec, str):
            texts.append(rec)
            ids.append(None)
            keys.append(None)
        elif isinstance(rec, Mapping):
            if text_field not in rec:
                raise InputError(f"bag record {i} has no field {text_field!r}; fields present: {sorted(rec)[:12]}. "
                                 "Pass text_field=NAME.")
            texts.append(rec[text_field])
            ids.append(rec.get(id_field) if id_field else None)
            keys.append(rec.get(key_field) if key_field else None)
        else:
            raise InputTypeError(f"bag items must be str or dict records; item {i} is {type(rec).__name__}.")
    has_ids = any(x is not None for x in ids)
    has_keys = key_field is not None and any(x is not None for x in keys)
    return _Part(_texts_of(texts, "a bag partition"), ids if has_ids else None,
                 np.asarray(keys, dtype=np.float64) if has_keys else None)


def _part_from_jsonl(block: bytes, where: str, text_field: str, id_field: Optional[str],
                     key_field: Optional[str]) -> _Part:
    import json

    texts, ids, keys = [], [], []
    for lineno, raw in enumerate(block.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            rec = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise InputError(f"{where}, line {lineno} of the block: not valid JSON ({exc}). "
                             "Each line must be one JSON object.") from None
        if not isinstance(rec, dict):
            raise InputError(f"{where}: each line must be a JSON object; got {type(rec).__name__}.")
        if text_field not in rec:
            raise InputError(f"`text_field` {text_field!r} is missing in {where}; fields present: {sorted(rec)[:12]}. "
                             "Pass text_field=NAME.")
        texts.append(rec[text_field])
        ids.append(rec.get(id_field) if id_field else None)
        keys.append(rec.get(key_field) if key_field else None)
    has_ids = any(x is not None for x in ids)
    return _Part(_texts_of(texts, where), ids if has_ids else None,
                 np.asarray(keys, dtype=np.float64) if key_field else None)


def _part_from_parquet(fs, path: str, row_groups: list, text_field: str, id_field: Optional[str],
                       key_field: Optional[str]) -> _Part:
    import pyarrow.parquet as pq

    with fs.open(path, "rb") as f:
        pf = pq.ParquetFile(f)
        names = pf.schema_arrow.names
        cols = [c for c in (id_field, text_field, key_field) if c and c in names]
        table = pf.read_row_groups(row_groups, columns=cols)
    d = table.to_pydict()
    keys = np.asarray(d[key_field], dtype=np.float64) if key_field and key_field in d else None
    return _Part(_texts_of(d[text_field], path), d.get(id_field) if id_field else None, keys)


# --------------------------------------------------------------------------------------------
# stage 1: sketches


def _sketch_part(part: _Part, cfg_json: dict) -> dict:
    """Per-document columns of one input partition (same code as the local build)."""
    from ...sketches.batch import sketch_texts

    cfg = BuildConfig(**cfg_json)
    t0 = time.perf_counter()
    sk = sketch_texts(part.texts, None, cfg, timings={})
    n = sk.n
    if part.ids is not None and len(part.ids) != n:
        raise InputError(f"`ids` must have one id per text; a partition has {n} texts and {len(part.ids)} ids.")
    if part.keys is not None and len(part.keys) != n:
        raise InputError(f"`keys` must have one number per text; a partition has {n} texts and {len(part.keys)} keys.")
    return {
        "n": n,
        "ids": part.ids,
        "keys": part.keys,
        "lengths": sk.lengths,
        "exact": sk.exact,
        "empty": sk.empty,
        "minhash": sk.minhash,
        "seconds": time.perf_counter() - t0,
    }


def _n_of(skp: dict) -> int:
    return int(skp["n"])


def _empty_of(skp: dict) -> np.ndarray:
    return np.flatnonzero(skp["empty"])


def _columns_of(skp: dict, with_minhash: bool) -> dict:
    out = {k: skp[k] for k in ("n", "ids", "keys", "lengths", "exact", "empty", "seconds")}
    if with_minhash:
        out["minhash"] = skp["minhash"]
    return out


# --------------------------------------------------------------------------------------------
# stage 2: exact hashes


def _exact_frame(skp: dict, offset: int):
    import pandas as pd

    local = np.flatnonzero(~skp["empty"])
    return pd.DataFrame({"h": skp["exact"][local], "d": local.astype(np.int64) + np.int64(offset)})


def _exact_edges(df) -> dict:
    """Each document whose exact hash an earlier document has points at the first such document."""
    h = df["h"].to_numpy(np.uint64)
    d = df["d"].to_numpy(np.int64)
    order = np.lexsort((d, h))
    h, d = h[order], d[order]
    start = np.ones(h.size, dtype=bool)
    start[1:] = h[1:] != h[:-1]
    first = d[np.flatnonzero(start)][np.cumsum(start) - 1]
    dup = ~start
    u, v = d[dup], first[dup]
    return {"u": u, "v": v, "flagged": np.unique(np.concatenate([u, v]))}


# --------------------------------------------------------------------------------------------
# stage 3: MinHash bands


def _key_frame_meta():
    import pandas as pd

    return pd.DataFrame({"key": np.zeros(0, np.uint64)})


def _sig_columns(num_perm: int) -> list:
    return [f"s{j}" for j in range(num_perm)]


def _band_meta(num_perm: int):
    import pandas as pd

    cols = {"key": np.zeros(0, np.uint64), "doc": np.zeros(0, np.int64), "band": np.zeros(0, np.int16),
            "exact": np.zeros(0, np.uint64)}
    for c in _sig_columns(num_perm):
        cols[c] = np.zeros(0, np.uint32)
    return pd.DataFrame(cols)


def _band_keys(skp: dict, lo: int, hi: int, rows: int, bands: int, seed_h: int) -> tuple[np.ndarray, np.ndarray]:
    from ..._kernels.linking import fill_minhash_band_keys

    local = (np.flatnonzero(~skp["empty"][lo:hi]) + lo).astype(np.int64)
    keys = np.empty((local.size, bands), dtype=np.uint64)
    if local.size:
        fill_minhash_band_keys(skp["minhash"], local, rows, np.uint64(seed_h), keys)
    return local, keys


def _key_frame(skp: dict, lo: int, hi: int, rows: int, bands: int, seed_h: int):
    """Pass 1: just the band keys of documents [lo, hi) (8 bytes a row)."""
    import pandas as pd

    _, keys = _band_keys(skp, lo, hi, rows, bands, seed_h)
    return pd.DataFrame({"key": keys.reshape(-1)})


def _shared_keys(df) -> np.ndarray:
    """Keys held by two or more band rows (the only buckets that can yield a candidate pair)."""
    k = np.sort(df["key"].to_numpy(np.uint64))
    if k.size < 2:
        return np.zeros(0, np.uint64)
    dup = k[1:] == k[:-1]
    return np.unique(k[1:][dup])


_BLOOM_K = 7


def _bloom_slots(keys: np.ndarray, m_bits: int) -> np.ndarray:
    """k bit positions per key (double hashing on the two halves of an already mixed 64-bit key)."""
    h1 = (keys & np.uint64(0xFFFFFFFF)).astype(np.uint64)
    h2 = (keys >> np.uint64(32)) | np.uint64(1)
    i = np.arange(_BLOOM_K, dtype=np.uint64)
    return ((h1[:, None] + i[None, :] * h2[:, None]) % np.uint64(m_bits)).astype(np.int64)


def _bloom(keys: np.ndarray, m_bits: int) -> np.ndarray:
    bits = np.zeros(m_bits // 8, dtype=np.uint8)
    slots = _bloom_slots(keys, m_bits).reshape(-1)
    np.bitwise_or.at(bits, slots >> 3, (np.uint8(1) << (slots & 7).astype(np.uint8)))
    return bits


def _bloom_or(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a | b


def _bloom_has(bits: np.ndarray, keys: np.ndarray) -> np.ndarray:
    m_bits = bits.size * 8
    slots = _bloom_slots(keys, m_bits)
    hit = (bits[slots >> 3] >> (slots & 7).astype(np.uint8)) & np.uint8(1)
    return hit.all(axis=1)


def _band_frame(skp: dict, offset: int, lo: int, hi: int, rows: int, bands: int, seed_h: int, bloom=None):
    """Pass 2: one row per (non-empty document in [lo, hi), band) whose key may be shared (passes the
    Bloom filter of shared keys; no false negatives): key, doc, band, exact hash, signature."""
    import pandas as pd

    sigs = skp["minhash"]
    local, keys = _band_keys(skp, lo, hi, rows, bands, seed_h)
    flat = keys.reshape(-1)
    row_doc = np.repeat(local, bands)
    row_band = np.tile(np.arange(bands, dtype=np.int16), local.size)
    if bloom is not None:
        keep = _bloom_has(bloom, flat) if flat.size else np.zeros(0, bool)
        flat, row_doc, row_band = flat[keep], row_doc[keep], row_band[keep]
    num_perm = sigs.shape[1]
    frame = pd.DataFrame({"key": flat, "doc": row_doc + np.int64(offset), "band": row_band,
                          "exact": skp["exact"][row_doc]})
    sig_frame = pd.DataFrame(sigs[row_doc], columns=_sig_columns(num_perm))
    return pd.concat([frame, sig_frame], axis=1)


def _scan_buckets(df, cfg_json: dict) -> dict:
    """Candidate pairs of every bucket in this shuffle partition, verified; a spanning forest out.

    Uses the local build's bucket scan (``_link_keys`` -> ``link_sorted``) on the partition's rows
    ordered by (key, doc, band), after dropping every exact copy that is not the first (smallest
    index) of its text within the bucket.
    """
    from ..._kernels import linking as kl
    from ..._kernels.union import roots

    t0 = time.perf_counter()
    cfg = BuildConfig(**cfg_json)
    num_perm = cfg.minhash.num_perm
    key = df["key"].to_numpy(np.uint64)
    n_rows = key.size
    # singleton buckets (nearly all of them) leave first
    order = np.argsort(key, kind="stable")
    ks = key[order]
    run_start = np.ones(ks.size, dtype=bool)
    run_start[1:] = ks[1:] != ks[:-1]
    run_id = np.cumsum(run_start) - 1
    run_len = np.bincount(run_id) if ks.size else np.zeros(0, np.int64)
    keep = order[run_len[run_id] >= 2] if ks.size else order
    empty = {"u": np.zeros(0, np.int64), "v": np.zeros(0, np.int64), "flagged": np.zeros(0, np.int64),
             "deferred": np.zeros((0, 2), np.int64), "candidates": 0, "verified": 0, "rows": n_rows, "bucket_rows": 0,
             "seconds": time.perf_counter() - t0}
    if keep.size == 0:
        return empty
    key = key[keep]
    doc = df["doc"].to_numpy(np.int64)[keep]
    band = df["band"].to_numpy(np.int16)[keep]
    exact = df["exact"].to_numpy(np.uint64)[keep]
    sig = df[_sig_columns(num_perm)].to_numpy(np.uint32)[keep]
    # first of each exact hash within a bucket (= first globally: copies share every band key)
    o = np.lexsort((doc, exact, key))
    g = np.ones(o.size, dtype=bool)
    g[1:] = (key[o][1:] != key[o][:-1]) | (exact[o][1:] != exact[o][:-1])
    first_doc = doc[o][np.flatnonzero(g)][np.cumsum(g) - 1]
    sel = o[doc[o] == first_doc]
    key, doc, band, sig = key[sel], doc[sel], band[sel], sig[sel]
    # the local scan order: key, then document index, then band
    o = np.lexsort((band, doc, key))
    key, doc, sig = key[o], doc[o], sig[o]
    uniq, inv = np.unique(doc, return_inverse=True)
    mh = np.empty((uniq.size, num_perm), dtype=np.uint32)
    mh[inv] = sig
    agree_lo, agree_hi = agreement_band(cfg, auto=True)
    # every borderline pair must be kept (the kernel's buffer-full fallback would make the result
    # depend on the scan order): start small, and rescan with a larger buffer if it filled up
    run = np.ones(key.size, dtype=bool)
    run[1:] = key[1:] != key[:-1]
    sizes = np.diff(np.append(np.flatnonzero(run), key.size)).astype(np.int64)
    bound = int(np.minimum(sizes - 1, cfg.bucket_window - 1) @ sizes) if agree_lo < agree_hi else 0
    cap = max(1, min(bound, 4 * key.size + _DEFERRED_SLACK))
    while True:
        parent = np.arange(uniq.size, dtype=np.int64)
        flags = np.zeros(uniq.size, dtype=np.uint8)
        counters = np.zeros(3, dtype=np.int64)
        deferred = np.empty((cap, 2), dtype=np.int64)
        n_deferred = np.zeros(1, dtype=np.int64)
        kl.link_sorted(kl.Buckets(np.arange(key.size, dtype=np.int64), key, inv.astype(np.int64), 1, cfg.bucket_window, 0),
                       make_verifier(kl.KIND_MINHASH_ESTIMATE, cfg, auto=True, minhash=mh),
                       kl.Forest(parent, flags, np.uint8(STAGE_MINHASH), counters),
                       kl.Borderline(deferred, n_deferred, np.array([0, -1, -1], dtype=np.int64)))
        if n_deferred[0] < cap or cap >= bound:
            break
        cap = min(bound, 4 * cap)
    root = np.empty(uniq.size, dtype=np.int64)
    roots(parent, root)
    moved = np.flatnonzero(root != np.arange(uniq.size))
    d = deferred[: n_deferred[0]]
    return {"u": uniq[moved], "v": uniq[root[moved]], "flagged": uniq[flags != 0], "deferred": uniq[d],
            "candidates": int(counters[0]), "verified": int(counters[1]), "rows": n_rows, "bucket_rows": int(keep.size),
            "seconds": time.perf_counter() - t0}


def _shingle_docs(part: _Part, local: np.ndarray, offset: int, cfg_json: dict) -> dict:
    """Sorted unique shingles (CSR) of the documents ``local`` of one input partition."""
    from ...sketches.batch import unique_shingles
    from ...text import shingle_hashes

    cfg = BuildConfig(**cfg_json)
    sh = shingle_hashes([part.texts[int(i)] for i in local], cfg.text, cfg.seed)
    indptr, hashes = unique_shingles(sh)
    return {"docs": local.astype(np.int64) + np.int64(offset), "indptr": indptr, "hashes": hashes}


def _decide_block(pairs: np.ndarray, csr_a: dict, csr_b: dict, threshold: float) -> dict:
    """Exact Jaccard of borderline pairs (documents of ``csr_a`` x ``csr_b``); a forest of the accepted."""
    from ..._kernels.linking import Forest, ShingleRows, link_pairs_exact
    from ..._kernels.union import roots

    if csr_b is csr_a or np.array_equal(csr_a["docs"], csr_b["docs"]):
        docs, indptr, hashes = csr_a["docs"], csr_a["indptr"], csr_a["hashes"]
    else:
        docs = np.concatenate([csr_a["docs"], csr_b["docs"]])
        indptr = np.concatenate([csr_a["indptr"], csr_b["indptr"][1:] + csr_a["indptr"][-1]])
        hashes = np.concatenate([csr_a["hashes"], csr_b["hashes"]])
    order = np.argsort(docs, kind="stable")
    rows = order[np.searchsorted(docs[order], pairs)].astype(np.int64)
    uniq, inv = np.unique(pairs, return_inverse=True)
    local_pairs = inv.reshape(-1, 2).astype(np.int64)
    parent = np.arange(uniq.size, dtype=np.int64)
    flags = np.zeros(uniq.size, dtype=np.uint8)
    counters = np.zeros(3, dtype=np.int64)
    link_pairs_exact(local_pairs, rows, ShingleRows(indptr[:-1], np.diff(indptr), hashes), threshold,
                     Forest(parent, flags, np.uint8(STAGE_MINHASH), counters))
    root = np.empty(uniq.size, dtype=np.int64)
    roots(parent, root)
    moved = np.flatnonzero(root != np.arange(uniq.size))
    return {"u": uniq[moved], "v": uniq[root[moved]], "flagged": uniq[flags != 0], "checked": int(counters[1])}


def _flagged_of(res: dict) -> np.ndarray:
    return res["flagged"]


def _deferred_of(res: dict) -> np.ndarray:
    return res["deferred"]


# --------------------------------------------------------------------------------------------
# stage 4: connected components over an edge table
#
# The edge table is small next to the band rows (at most one edge per clustered document), so its
# shuffles are plain task shuffles of numpy arrays: each map task splits its edges by a hash of
# the node into q pieces, each reduce task concatenates its piece of every map output.


def _split_edges(res: dict, q: int, mode: str):
    """q pieces (s, d) of the directed edges to group by s. ``mode``: "both" emits (u, v) and
    (v, u) (large-star); "orient" emits (max, min) (small-star)."""
    u = np.asarray(res["u"], np.int64)
    v = np.asarray(res["v"], np.int64)
    if mode == "both":
        s, d = np.concatenate([u, v]), np.concatenate([v, u])
    else:
        s, d = np.maximum(u, v), np.minimum(u, v)
    h = (s.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(33)
    part = (h % np.uint64(q)).astype(np.int64)
    order = np.argsort(part, kind="stable")
    bounds = np.searchsorted(part[order], np.arange(q + 1))
    s, d = s[order], d[order]
    pieces = tuple((s[bounds[j]:bounds[j + 1]], d[bounds[j]:bounds[j + 1]]) for j in range(q))
    return pieces if q > 1 else pieces[0]


def _concat_pieces(pieces) -> tuple[np.ndarray, np.ndarray]:
    if not pieces:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate([p[0] for p in pieces]), np.concatenate([p[1] for p in pieces])


def _unique_pairs(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if a.size == 0:
        return a, b
    o = np.lexsort((b, a))
    a, b = a[o], b[o]
    k = np.ones(a.size, dtype=bool)
    k[1:] = (a[1:] != a[:-1]) | (b[1:] != b[:-1])
    return a[k], b[k]


def _large_star(*pieces) -> dict:
    """Large-star: every neighbour larger than u hangs under the smallest of u's closed neighbourhood.

    Also counts the nodes that are neither a star centre (all neighbours larger) nor a leaf (one
    neighbour, smaller): when there is none, the edges are stars rooted at component minima.
    """
    s, d = _unique_pairs(*_concat_pieces(pieces))
    if s.size == 0:
        return {"u": s, "v": d, "bad": 0}
    start = np.ones(s.size, dtype=bool)
    start[1:] = s[1:] != s[:-1]
    starts = np.flatnonzero(start)
    gid = np.cumsum(start) - 1
    cnt = np.diff(np.append(starts, s.size))
    s_g = s[starts]
    dmin = d[starts]  # neighbours are sorted within a group
    m_g = np.minimum(s_g, dmin)
    bad = int((~((dmin > s_g) | ((cnt == 1) & (dmin < s_g)))).sum())
    out = d > s
    u, v = _unique_pairs(d[out], m_g[gid][out])
    return {"u": u, "v": v, "bad": bad}


def _small_star(*pieces) -> dict:
    """Small-star: u and its smaller neighbours all hang under the smallest of them."""
    hi, lo = _unique_pairs(*_concat_pieces(pieces))
    if hi.size == 0:
        return {"u": hi, "v": lo, "bad": 0}
    start = np.ones(hi.size, dtype=bool)
    start[1:] = hi[1:] != hi[:-1]
    starts = np.flatnonzero(start)
    gid = np.cumsum(start) - 1
    m = lo[starts][gid]
    keep = lo != m
    u = np.concatenate([hi[starts], lo[keep]])
    v = np.concatenate([lo[starts], m[keep]])
    u, v = _unique_pairs(u, v)
    return {"u": u, "v": v, "bad": 0}


def _bad_of(res: dict) -> int:
    return int(res["bad"])


def _rows_of(res: dict) -> int:
    return int(np.asarray(res["u"]).size)


def _star_round(client, parts: list, q: int, mode: str, reducer, retries: int) -> list:
    from dask import delayed

    if q == 1:
        pieces = [[delayed(_split_edges, pure=True)(p, 1, mode)] for p in parts]
    else:
        pieces = [list(delayed(_split_edges, nout=q, pure=True)(p, q, mode)) for p in parts]
    outs = [delayed(reducer, pure=True)(*[pc[j] for pc in pieces]) for j in range(q)]
    return client.compute(outs, retries=retries)


def connected_components(client, edge_parts: list, *, npartitions: int, shuffle_method: Optional[str] = None,
                         retries: int = 2, max_rounds: int = 200) -> tuple[list, int]:
    """Connected components of a distributed edge table, labelled by their smallest node.

    Alternating large-star / small-star rounds (Kiveris et al., "Connected Components in
    MapReduce and Beyond", 2014), each a shuffle of the edge table by node, until every node is
    either a star centre or a leaf whose one neighbour is smaller: then each star is a component
    and its centre the component's smallest node.

    Parameters
    ----------
    client : distributed.Client
    edge_parts : list of Futures or Delayed, each a dict with int64 arrays ``u`` and ``v``
    npartitions : int
        Reduce partitions per round.
    shuffle_method : ignored (kept for symmetry with the band shuffles; these are task shuffles)

    Returns
    -------
    (futures, rounds): each future is a dict of ``u`` (a node) and ``v`` (its label, ``v < u``)
    for every node that is not its own label; the number of large-star rounds run.
    """
    parts = list(edge_parts)
    for rounds in range(1, max_rounds + 1):
        futs = _star_round(client, parts, npartitions, "both", _large_star, retries)
        bad = sum(client.gather(client.map(_bad_of, futs, pure=False)))
        if bad == 0:
            return futs, rounds
        parts = _star_round(client, futs, npartitions, "orient", _small_star, retries)
    raise RuntimeError(f"connected components did not converge in {max_rounds} rounds")  # pragma: no cover


# --------------------------------------------------------------------------------------------
# driver


class _Report:
    """Stage lines and per-partition progress bars on stderr when ``progress=True``."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.t0 = time.perf_counter()

    def stage(self, msg: str) -> None:
        if self.enabled:
            print(f"[diversify dask {time.perf_counter() - self.t0:7.1f}s] {msg}", file=sys.stderr, flush=True)

    def wait(self, futures: list, desc: str) -> None:
        if not self.enabled or not futures:
            return
        from distributed import as_completed

        try:
            from tqdm.auto import tqdm
        except ImportError:  # pragma: no cover
            return
        with tqdm(total=len(futures), desc=desc, unit="part", file=sys.stderr, leave=False) as bar:
            for _ in as_completed(futures):
                bar.update(1)


def _resolve_config(config) -> BuildConfig:
    from ..local import _resolve_config as resolve

    cfg = resolve(config)
    if cfg.minhash is not None and cfg.minhash.verify == "exact":
        raise ConfigError(
            "`minhash.verify='exact'` is not supported by the Dask engine (the shingle sets would have to travel "
            "with every band row); got verify='exact'. Use verify='estimate' (the default) with engine='dask', "
            "or engine='local'."
        )
    if cfg.minhash is None and not cfg.exact:
        raise ConfigError("both text stages are off (`minhash=None`, `exact=False`); the Dask engine builds from "
                          "text only. Enable one of them.")
    return cfg


def _expand_paths(source) -> tuple[Any, list]:
    fsspec = require("fsspec", extra="dask", purpose="Reading partitioned input")
    if isinstance(source, (list, tuple)):
        paths = [os.fspath(p) for p in source]
        fs, _, _ = fsspec.core.get_fs_token_paths(paths[0])
        return fs, paths
    fs, _, paths = fsspec.core.get_fs_token_paths(os.fspath(source))
    return fs, sorted(paths)


def _format_of(path: str, fmt: Optional[str]) -> str:
    if fmt:
        if fmt not in ("jsonl", "parquet"):
            raise ConfigError(f"`format` must be 'jsonl' or 'parquet'; got {fmt!r}.")
        return fmt
    p = path.lower()
    for suf in (".gz", ".bz2", ".zst", ".xz"):
        if p.endswith(suf):
            p = p[: -len(suf)]
    if p.endswith((".parquet", ".pq")):
        return "parquet"
    if p.endswith((".jsonl", ".ndjson", ".json")):
        return "jsonl"
    raise InputError(f"input format could not be told from the name {path!r} (expected .jsonl/.ndjson or .parquet). "
                     "Pass format='jsonl' or format='parquet'.")


def _sources(texts_or_paths, *, ids, keys, client, npartitions, text_field, id_field, key_field, fmt,
             blocksize) -> list:
    """Input partitions as a list of Delayed/Futures of :class:`_Part`, in global document order."""
    import dask.bag as db
    import dask.dataframe as dd
    from dask import delayed

    src = texts_or_paths
    is_texts = not isinstance(src, (dd.DataFrame, db.Bag, str, bytes, os.PathLike)) and not (
        isinstance(src, (list, tuple)) and src and all(isinstance(p, os.PathLike) for p in src))
    if not is_texts and (ids is not None or keys is not None):
        raise InputError("`ids` and `keys` go with a sequence of texts; with files, a DataFrame or a Bag name their "
                         "columns instead: id_field=..., key_field=...")
    if isinstance(src, dd.DataFrame):
        if text_field not in src.columns:
            raise InputError(f"`text_field` {text_field!r} is not a column of the DataFrame; columns: "
                             f"{list(src.columns)[:12]}. Pass text_field=NAME.")
        if key_field and key_field not in src.columns:
            raise InputError(f"`key_field` {key_field!r} is not a column of the DataFrame.")
        cols = [c for c in (id_field, text_field, key_field) if c and c in src.columns]
        return [delayed(_part_from_pandas, pure=True)(p, text_field, id_field, key_field)
                for p in src[cols].to_delayed()]
    if isinstance(src, db.Bag):
        return [delayed(_part_from_records, pure=True)(p, text_field, id_field, key_field) for p in src.to_delayed()]
    if isinstance(src, (str, os.PathLike)) or (
            isinstance(src, (list, tuple)) and src and all(isinstance(p, os.PathLike) for p in src)):
        fs, paths = _expand_paths(src)
        if not paths:
            raise InputError(f"no file matches {os.fspath(src) if not isinstance(src, (list, tuple)) else src!r}. "
                             "Check the path or glob (to build from one text, pass a list: [text]).")
        kind = _format_of(paths[0], fmt)
        if kind == "jsonl":
            from dask.bytes import read_bytes

            compressed = any(p.lower().endswith((".gz", ".bz2", ".zst", ".xz")) for p in paths)
            _, blocks = read_bytes(paths, delimiter=b"\n", blocksize=None if compressed else blocksize,
                                   compression="infer" if compressed else None)
            out = []
            for p, file_blocks in zip(paths, blocks):
                for j, b in enumerate(file_blocks):
                    out.append(delayed(_part_from_jsonl, pure=True)(b, f"{p} (block {j})", text_field, id_field,
                                                                    key_field))
            return out
        import pyarrow.parquet as pq

        out = []
        for p in paths:
            with fs.open(p, "rb") as f:
                md = pq.ParquetFile(f).metadata
            group: list = []
            size = 0
            for rg in range(md.num_row_groups):
                group.append(rg)
                size += md.row_group(rg).total_byte_size
                if size >= blocksize:
                    out.append(delayed(_part_from_parquet, pure=True)(fs, p, group, text_field, id_field, key_field))
                    group, size = [], 0
            if group:
                out.append(delayed(_part_from_parquet, pure=True)(fs, p, group, text_field, id_field, key_field))
        return out
    if isinstance(src, bytes):
        raise InputError("`texts_or_paths` must be texts or paths, not bytes. Decode it first.")
    # a sequence or iterable of texts: cut into partitions and scatter them to the workers
    seq = src if isinstance(src, Sequence) else list(src)
    id_list = list(ids) if ids is not None else None
    key_arr = np.asarray(keys, dtype=np.float64) if keys is not None else None
    n = len(seq)
    if id_list is not None and len(id_list) != n:
        raise InputError(f"`ids` must have one id per text; got {len(id_list)} ids for {n} texts.")
    if key_arr is not None and key_arr.shape != (n,):
        raise InputError(f"`keys` must have one number per text (shape ({n},)); got shape {key_arr.shape}.")
    nparts = npartitions or max(1, math.ceil(n / DEFAULT_PARTITION_DOCS))
    bounds = np.linspace(0, n, max(1, min(nparts, n)) + 1).astype(np.int64)
    parts = []
    for a, b in zip(bounds[:-1], bounds[1:]):
        parts.append(_Part(list(seq[a:b]), id_list[a:b] if id_list is not None else None,
                           key_arr[a:b] if key_arr is not None else None))
    return client.scatter(parts)


def _client_or_local(client):
    distributed = _dask()
    if client is not None:
        return client, None
    try:
        return distributed.get_client(), None
    except ValueError:
        cluster = distributed.LocalCluster(processes=True)
        return distributed.Client(cluster), cluster


def build_dask(
    texts_or_paths: Any,
    *,
    ids: Optional[Iterable] = None,
    config: Union[BuildConfig, Mapping, None] = None,
    keys: Any = None,
    client: Any = None,
    npartitions: Optional[int] = None,
    shuffle_partitions: Optional[int] = None,
    text_field: str = "text",
    id_field: Optional[str] = "id",
    key_field: Optional[str] = None,
    format: Optional[str] = None,
    blocksize: int = 64 * 2**20,
    shuffle_method: Optional[str] = None,
    retries: int = 2,
    metadata: Optional[Mapping] = None,
    progress: bool = False,
    created_at: Optional[str] = None,
):
    """Cluster near-duplicate documents on a Dask cluster; same clusters as :func:`diversify.build`.

    Parameters
    ----------
    texts_or_paths : paths, a dask DataFrame or Bag, or a sequence of str
        - a str or ``os.PathLike``: a file, directory glob or URL glob (``"data/*.parquet"``,
          ``"s3://bucket/part-*.jsonl"``); files are read in sorted path order, rows in file order;
          a list of ``os.PathLike`` is read in the order given;
        - a ``dask.dataframe.DataFrame`` with a ``text_field`` column (optionally ``id_field``,
          ``key_field``);
        - a ``dask.bag.Bag`` of str, or of dict records;
        - a sequence of str (cut into ``npartitions`` partitions and scattered to the workers).
        The global document index (the cluster labels) is the position in this order.
    ids : iterable, optional
        Only with a sequence of texts. Ids from files/frames come from ``id_field``; a document
        without one gets its global index.
    config : BuildConfig or dict, optional
        As in :func:`diversify.build`. Not supported here: ``minhash.verify="exact"``; vectors.
    keys : array, optional
        Only with a sequence of texts; else ``key_field``. For ``representative="key"``.
    client : distributed.Client, optional
        Default: the current client, or a temporary ``LocalCluster`` (closed afterwards).
    npartitions : int, optional
        Input partitions for a sequence of texts (default one per 20,000 documents).
    shuffle_partitions : int, optional
        Partitions of the band shuffle; default sized to ~128 MiB of band rows each. Higher ->
        less memory per task.
    blocksize : int
        Bytes per input partition for JSONL files and Parquet row groups (default 64 MiB).
    shuffle_method : {"p2p", "tasks"}, optional
        Dask's shuffle; default Dask's choice (``p2p`` on a distributed cluster).
    retries : int
        Times Dask retries a failed task (every task is pure: a retry recomputes the same result).
    progress : bool
        Stage lines and per-stage progress bars on stderr.

    Returns
    -------
    BuildResult
        ``cluster_ids`` equal to the local build's on the same documents and config (see the
        module docstring for why); ``stats["dask"]`` holds partition counts, shuffle rows and rounds.
    """
    cfg = _resolve_config(config)
    if not isinstance(retries, int) or retries < 0:
        raise ConfigError(f"`retries` must be an int >= 0; got {retries!r}.")
    if npartitions is not None and (not isinstance(npartitions, int) or npartitions < 1):
        raise ConfigError(f"`npartitions` must be a positive int or None; got {npartitions!r}.")
    if shuffle_partitions is not None and (not isinstance(shuffle_partitions, int) or shuffle_partitions < 1):
        raise ConfigError(f"`shuffle_partitions` must be a positive int or None; got {shuffle_partitions!r}.")
    if isinstance(texts_or_paths, str) and not any(c in texts_or_paths for c in "*?[") and "://" not in texts_or_paths \
            and not os.path.exists(texts_or_paths):
        raise InputError(f"`texts_or_paths` {texts_or_paths!r} is not an existing path. Check it; to build from one "
                         "text, pass a list: [text].")
    client, own_cluster = _client_or_local(client)
    try:
        return _run(texts_or_paths, ids=ids, keys=keys, cfg=cfg, client=client, npartitions=npartitions,
                    shuffle_partitions=shuffle_partitions, text_field=text_field, id_field=id_field,
                    key_field=key_field, fmt=format, blocksize=blocksize, shuffle_method=shuffle_method,
                    retries=retries, metadata=metadata, progress=progress, created_at=created_at)
    finally:
        if own_cluster is not None:
            client.close()
            own_cluster.close()


def _run(src, *, ids, keys, cfg: BuildConfig, client, npartitions, shuffle_partitions, text_field, id_field,
         key_field, fmt, blocksize, shuffle_method, retries, metadata, progress, created_at):
    import dask.dataframe as dd
    from dask import delayed

    from ...clusters import check_keys
    from ...hashing import lsh_seed
    from ...ids import check_ids, normalize_ids
    from ..local import _finish

    rep = _Report(progress)
    timings: dict = {}
    cfg_json = cfg.model_dump(mode="json")
    n_workers = max(1, len(client.scheduler_info().get("workers", {})))

    # ---- 1. read + sketch
    t0 = time.perf_counter()
    sources = _sources(src, ids=ids, keys=keys, client=client, npartitions=npartitions, text_field=text_field,
                       id_field=id_field, key_field=key_field, fmt=fmt, blocksize=blocksize)
    rep.stage(f"sketching {len(sources)} partitions on {n_workers} workers")
    sk_futs = client.compute([delayed(_sketch_part, pure=True)(s, cfg_json) for s in sources], retries=retries)
    rep.wait(sk_futs, "sketch")
    counts = np.asarray(client.gather(client.map(_n_of, sk_futs, pure=False)), dtype=np.int64)
    offsets = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    n = int(offsets[-1])
    timings["dask_sketch"] = time.perf_counter() - t0
    if n == 0:
        raise InputError("the corpus is empty: the input held no documents. Pass at least one document.")
    empties = client.gather(client.map(_empty_of, sk_futs, pure=False))
    n_empty = int(sum(e.size for e in empties))
    if cfg.empty == "error" and n_empty:
        bad = np.concatenate([e + offsets[i] for i, e in enumerate(empties)])
        raise InputError(
            f"documents must contain at least one word under `empty='error'`; {bad.size} do not, e.g. positions "
            f"{bad[:5].tolist()}. Drop them, or use BuildConfig(empty='singleton') to keep them as their own clusters."
        )
    rep.stage(f"{n:,} documents ({n_empty:,} empty)")
    stats = LinkStats()
    info: dict = {"input_partitions": len(sources), "workers": n_workers}
    edge_parts: list = []
    flagged_exact: list = []
    flagged_minhash: list = []
    n_text = n - n_empty

    # ---- 2. exact stage
    exact_merged = 0
    if cfg.exact and n_text:
        t0 = time.perf_counter()
        q = max(1, min(len(sources), math.ceil(n_text * 16 / _TARGET_EDGE_PARTITION_BYTES)))
        frame = dd.from_delayed([delayed(_exact_frame, pure=True)(f, int(offsets[i])) for i, f in enumerate(sk_futs)],
                                meta=_exact_frame({"exact": np.zeros(0, np.uint64), "empty": np.zeros(0, bool)}, 0),
                                verify_meta=False)
        sh = frame.shuffle(on="h", npartitions=q, shuffle_method=shuffle_method)
        ex_futs = client.compute([delayed(_exact_edges, pure=True)(p) for p in sh.to_delayed()], retries=retries)
        rep.wait(ex_futs, "exact")
        exact_merged = int(sum(client.gather(client.map(_rows_of, ex_futs, pure=False))))
        edge_parts += ex_futs
        flagged_exact = ex_futs
        stats.candidates["exact"] = stats.verified["exact"] = stats.merged["exact"] = exact_merged
        info["exact_partitions"] = q
        timings["dask_exact"] = time.perf_counter() - t0
        rep.stage(f"exact stage: {exact_merged:,} copies")

    # ---- 3. MinHash stage
    if cfg.minhash is not None and n_text:
        t0 = time.perf_counter()
        p = minhash_params(cfg)
        num_perm = cfg.minhash.num_perm
        seed_h = int(lsh_seed(cfg.seed))
        row_bytes = 8 + 8 + 2 + 8 + 4 * num_perm
        chunks = []
        key_chunk = max(1, SHUFFLE_PARTITION_BYTES // (8 * p.bands))
        for i, f in enumerate(sk_futs):
            for lo in range(0, int(counts[i]), key_chunk):
                chunks.append((i, f, lo, min(int(counts[i]), lo + key_chunk)))
        # pass 1: shuffle the bare keys; a key held by one row can never give a candidate pair
        n_rows_all = n_text * p.bands
        q1 = max(n_workers, math.ceil(n_rows_all * 8 / SHUFFLE_PARTITION_BYTES))
        rep.stage(f"MinHash stage: {n_rows_all:,} band keys -> {q1} partitions, bands={p.bands} rows={p.rows}")
        kframe = dd.from_delayed([delayed(_key_frame, pure=True)(f, lo, hi, p.rows, p.bands, seed_h)
                                  for _, f, lo, hi in chunks], meta=_key_frame_meta(), verify_meta=False)
        ksh = kframe.shuffle(on="key", npartitions=q1, shuffle_method=shuffle_method)
        shared = client.compute([delayed(_shared_keys, pure=True)(part) for part in ksh.to_delayed()], retries=retries)
        rep.wait(shared, "band keys")
        n_shared = int(sum(client.gather(client.map(len, shared, pure=False))))
        m_bits = max(1 << 16, 64 * math.ceil(10 * n_shared / 64))  # 10 bits a key: ~1% false positives at k=7
        blooms = [client.submit(_bloom, f, m_bits, pure=False) for f in shared]
        del shared
        while len(blooms) > 1:
            blooms = [client.submit(_bloom_or, blooms[j], blooms[j + 1], pure=False) if j + 1 < len(blooms)
                      else blooms[j] for j in range(0, len(blooms), 2)]
        bloom = blooms[0]
        info.update(band_keys=n_rows_all, shared_keys=n_shared, bloom_bytes=m_bits // 8,
                    key_shuffle_seconds=round(time.perf_counter() - t0, 3))
        # pass 2: only rows whose key may be shared travel, each with its document's signature
        est_rows = max(2 * n_shared, 1)
        chunk_docs = max(1, SHUFFLE_PARTITION_BYTES // (row_bytes * p.bands))
        parts = []
        for i, f in enumerate(sk_futs):
            for lo in range(0, int(counts[i]), chunk_docs):
                hi = min(int(counts[i]), lo + chunk_docs)
                parts.append(delayed(_band_frame, pure=True)(f, int(offsets[i]), lo, hi, p.rows, p.bands, seed_h,
                                                             bloom))
        total_bytes = est_rows * row_bytes
        q = shuffle_partitions or max(n_workers, math.ceil(total_bytes / SHUFFLE_PARTITION_BYTES))
        rep.stage(f"MinHash stage: {n_shared:,} shared keys; >= {est_rows:,} band rows with signatures "
                  f"(>= {total_bytes / 2**30:.2f} GiB) -> {q} partitions")
        frame = dd.from_delayed(parts, meta=_band_meta(num_perm), verify_meta=False)
        sh = frame.shuffle(on="key", npartitions=q, shuffle_method=shuffle_method)
        mh_futs = client.compute([delayed(_scan_buckets, pure=True)(part, cfg_json) for part in sh.to_delayed()],
                                 retries=retries)
        rep.wait(mh_futs, "bands")
        summ = client.gather(client.map(_scan_summary, mh_futs, pure=False))
        info["band_shuffle_seconds"] = round(time.perf_counter() - t0, 3)
        stats.candidates["minhash"] = int(sum(s[0] for s in summ))
        stats.verified["minhash"] = int(sum(s[1] for s in summ))
        stats.lsh["minhash"] = p.as_dict()
        info.update(band_rows=int(sum(s[2] for s in summ)), band_rows_in_buckets=int(sum(s[3] for s in summ)),
                    band_partitions=q, band_bytes=int(sum(s[2] for s in summ) * row_bytes), forest_edges=int(sum(s[4] for s in summ)),
                    scan_task_seconds=round(float(sum(s[5] for s in summ)), 3))
        edge_parts += mh_futs
        flagged_minhash = list(mh_futs)
        lo_hi = agreement_band(cfg, auto=True)
        stats.exact_checks["minhash"] = 0
        if lo_hi[0] < lo_hi[1]:
            dec_futs, n_checked = _decide_borderline(client, mh_futs, sources, offsets, cfg, cfg_json, retries, rep)
            stats.exact_checks["minhash"] = n_checked
            info["borderline_tasks"] = len(dec_futs)
            edge_parts += dec_futs
            flagged_minhash += dec_futs
            info["forest_edges"] += int(sum(client.gather(client.map(_rows_of, dec_futs, pure=False))))
        timings["dask_minhash"] = time.perf_counter() - t0
        rep.stage(f"MinHash stage: {stats.candidates['minhash']:,} candidate pairs")

    # ---- 4. connected components
    t0 = time.perf_counter()
    cluster_ids = np.arange(n, dtype=np.int64)
    n_edges = int(info.get("forest_edges", 0)) + exact_merged
    info["rounds"] = 0
    if n_edges:
        q = max(1, min(max(len(sources), n_workers), math.ceil(n_edges * 32 / _TARGET_EDGE_PARTITION_BYTES)))
        label_futs, rounds = connected_components(client, edge_parts, npartitions=q, shuffle_method=shuffle_method,
                                                  retries=retries)
        info["rounds"] = rounds
        info["cc_partitions"] = q
        for f in label_futs:
            lab = f.result()
            cluster_ids[lab["u"]] = lab["v"]
        del label_futs
    timings["dask_components"] = time.perf_counter() - t0
    rep.stage(f"components in {info['rounds']} rounds")

    # ---- 5. per-document columns -> artifact
    t0 = time.perf_counter()
    flags = np.zeros(n, dtype=np.uint8)
    for futs, bit in ((flagged_exact, STAGE_EXACT), (flagged_minhash, STAGE_MINHASH)):
        for f in futs:
            flags[client.submit(_flagged_of, f, pure=False).result()] |= bit
    del edge_parts, flagged_exact, flagged_minhash
    with_mh = cfg.incremental and cfg.minhash is not None
    id_list: list = []
    lengths, exact, empty, sigs, key_parts = [], [], [], [], []
    sketch_seconds = 0.0
    for i, f in enumerate(sk_futs):
        c = client.submit(_columns_of, f, with_mh, pure=False).result()
        if c["ids"] is None:
            id_list.extend(range(int(offsets[i]), int(offsets[i + 1])))
        else:
            id_list.extend(int(offsets[i]) + j if x is None else x for j, x in enumerate(c["ids"]))
        sketch_seconds += c["seconds"]
        lengths.append(c["lengths"])
        exact.append(c["exact"])
        empty.append(c["empty"])
        if with_mh:
            sigs.append(c["minhash"])
        key_parts.append(c["keys"])
    del sk_futs
    info["sketch_task_seconds"] = round(sketch_seconds, 3)
    check_ids(id_list)
    sk = Sketches(ids=normalize_ids(id_list), lengths=np.concatenate(lengths), exact=np.concatenate(exact),
                  empty=np.concatenate(empty))
    if with_mh:
        sk.minhash = np.concatenate(sigs)
    have_keys = [k is not None for k in key_parts]
    if cfg.representative == "key":
        if not all(have_keys):
            raise ConfigError("`representative='key'` needs a key for every document: pass `keys` (with texts) or "
                              "`key_field` (with files or frames) naming a numeric column.")
        sk.keys = check_keys(np.concatenate(key_parts), n)
    elif any(have_keys) and all(have_keys):
        sk.keys = check_keys(np.concatenate(key_parts), n)
    if cfg.minhash is not None and n_text:
        stats.merged["minhash"] = int(n - np.unique(cluster_ids).size - exact_merged)
    timings["dask_gather"] = time.perf_counter() - t0
    res = _finish(sk, cfg, cluster_ids, flags, stats, timings, aliases=np.zeros((0, 2), np.int64), raw_cluster=None,
                  metadata=metadata, created_at=created_at)
    res.stats["dask"] = info
    rep.stage(f"done: {res.n_clusters:,} clusters")
    return res


def _decide_borderline(client, mh_futs, sources, offsets, cfg, cfg_json, retries, rep) -> tuple[list, int]:
    """Exact Jaccard for the borderline pairs of every bucket partition (as the local "auto" mode).

    Only pair indices pass through the client (to route them): each input partition re-shingles
    just its documents that occur in a borderline pair, and one task per (partition of a,
    partition of b) block decides its pairs from those two shingle tables.
    """
    from dask import delayed

    parts = [d for d in client.gather(client.map(_deferred_of, mh_futs, pure=False)) if d.size]
    if not parts:
        return [], 0
    pairs = np.concatenate(parts).reshape(-1, 2)
    pairs = np.sort(pairs, axis=1)
    owner = np.searchsorted(offsets, pairs, side="right") - 1
    csr = {}
    for i in np.unique(owner):
        local = np.unique(pairs[owner == i]) - offsets[i]
        csr[int(i)] = delayed(_shingle_docs, pure=True)(sources[int(i)], local, int(offsets[i]), cfg_json)
    o = np.lexsort((owner[:, 1], owner[:, 0]))
    pairs, owner = pairs[o], owner[o]
    blk = np.ones(len(pairs), dtype=bool)
    blk[1:] = (owner[1:, 0] != owner[:-1, 0]) | (owner[1:, 1] != owner[:-1, 1])
    starts = np.flatnonzero(blk)
    ends = np.append(starts[1:], len(pairs))
    tasks = [delayed(_decide_block, pure=True)(pairs[a:b], csr[int(owner[a, 0])], csr[int(owner[a, 1])],
                                               cfg.minhash.threshold) for a, b in zip(starts, ends)]
    rep.stage(f"borderline pairs: {len(pairs):,} checked exactly in {len(tasks)} tasks")
    futs = client.compute(tasks, retries=retries)
    rep.wait(futs, "borderline")
    return futs, int(len(pairs))


def _scan_summary(res: dict) -> tuple:
    return (res["candidates"], res["verified"], res["rows"], res["bucket_rows"], int(res["u"].size), res["seconds"])
