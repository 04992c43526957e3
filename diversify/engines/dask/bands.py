"""Stage 3a, MinHash bands: band rows shuffled by key in two passes, so that a shuffle partition
holds every member of its shared buckets. Both passes are tasks shuffles of plain arrays split by
``key % q`` on the workers that hold the sketches (no DataFrame machinery).

Pass 1 shuffles the bare keys (8 bytes a row, each distinct key once per chunk) and keeps the keys held by two or more rows; their
Bloom filter (:mod:`diversify.linking.keyfilter`: no false negatives, a few percent false
positives at most, see ``FILTER_BITS_PER_KEY``) goes to every worker. Pass 2 emits only the
rows whose key passes the filter (key, document index, band: 18 bytes), split by ``key % q`` into
``q`` pieces on the worker holding the sketches (a tasks shuffle of plain arrays); a piece carries
the exact hash of each of its documents once (the bucket scan keeps the first copy of each text).
No signature travels with the rows: the scan's pairs meet their signatures where the documents
are (:mod:`.pairs`). A row left out by the filter has a key no other row holds: it can never give
a candidate pair.
"""

from __future__ import annotations

import math
import time
from typing import Optional

import numpy as np

from ..._arrays import distinct_ascending, unique_sorted
from ...hashing import lsh_seed
from ...linking.bands import LSHParams
from ...linking.keyfilter import KeyFilter, bits_for, filter_of
from .run import Run, split_positions, split_task, spread, whole_rounds

__all__ = ["SHUFFLE_PARTITION_BYTES", "key_split", "shared_keys", "candidate_rows", "band_split", "band_rows",
           "band_partitions", "shared_key_filter", "shuffled_band_rows"]

#: target size of one shuffle partition of band rows (bytes); lower -> less memory per task
SHUFFLE_PARTITION_BYTES = 128 * 2**20
#: bits of the filter of shared keys per key, at least (its size is a power of two, so 8 to 16): 2.4%
#: to 0.24% false positives; on average about the memory and the rate of the 10-bit filter with 7
#: probes the engine had before it took the library's one filter
FILTER_BITS_PER_KEY = 8
#: the smallest filter of shared keys (bits)
FILTER_MIN_BITS = 1 << 16


#: bytes of one pass-2 row (key, doc, band); a document's exact hash travels apart, once per shuffle
#: partition that holds one of its rows
ROW_BYTES = 8 + 8 + 2
#: bytes of one pass-2 document record: doc, exact hash
DOC_BYTES = 8 + 8


def _band_keys(skp: dict, lo: int, hi: int, rows: int, bands: int, seed_h: int) -> tuple[np.ndarray, np.ndarray]:
    from ..._kernels.linking import fill_minhash_band_keys

    local = (np.flatnonzero(~skp["empty"][lo:hi]) + lo).astype(np.int64)
    keys = np.empty((bands, local.size), dtype=np.uint64)
    if local.size:
        fill_minhash_band_keys(skp["minhash"], local, rows, np.uint64(seed_h), keys)
    return local, np.ascontiguousarray(keys.T)


def key_split(skp: dict, lo: int, hi: int, rows: int, bands: int, seed_h: int, q: int) -> tuple:
    """Pass 1, the sending side: the band keys of documents [lo, hi), split by ``key % q``; per piece
    (distinct keys, keys held by two or more rows here), both sorted."""
    _, keys = _band_keys(skp, lo, hi, rows, bands, seed_h)
    k = np.sort(keys.reshape(-1))
    start = np.ones(k.size, dtype=bool)
    start[1:] = k[1:] != k[:-1]
    uniq = k[start]
    dup = unique_sorted(k[1:][~start[1:]])
    out = []
    for keys_j in (uniq, dup):  # the split is stable: each piece stays sorted
        out.append([keys_j[sel] for sel in split_positions(keys_j % np.uint64(q), q)])
    pieces = tuple((out[0][j], out[1][j]) for j in range(q))
    return pieces if q > 1 else pieces[0]


def shared_keys(*pieces) -> np.ndarray:
    """Keys held by two or more band rows (the only buckets that can yield a candidate pair), from
    one shuffle partition's pieces of :func:`key_split`: held twice within a chunk, or by two chunks."""
    if not pieces:
        return np.zeros(0, np.uint64)
    k = np.sort(np.concatenate([p[0] for p in pieces]))
    across = k[1:][k[1:] == k[:-1]]
    return unique_sorted(np.concatenate([across] + [p[1] for p in pieces]).astype(np.uint64))


def _empty_piece() -> dict:
    return {"key": np.zeros(0, np.uint64), "doc": np.zeros(0, np.int64), "band": np.zeros(0, np.int16),
            "docs": np.zeros(0, np.int64), "exact": np.zeros(0, np.uint64)}


def candidate_rows(skp: dict, rows: int, bands: int, seed_h: int, key_filter: Optional[KeyFilter]) -> dict:
    """Pass 2's rows of one input partition: (local document, key, band) of each band of a non-empty
    document whose key may be shared (passes the Bloom filter of shared keys; no false negatives),
    in (document, band) order. The band keys are computed and looked up once per partition: the
    splits of :func:`band_split` and the texts kept for later stages (:func:`.texts.keep_candidates`)
    both read these rows."""
    local, keys = _band_keys(skp, 0, int(skp["n"]), rows, bands, seed_h)
    flat = keys.reshape(-1)
    row_doc = np.repeat(local, bands)
    row_band = np.tile(np.arange(bands, dtype=np.int16), local.size)
    if key_filter is not None and flat.size:
        keep = key_filter.may_contain(flat)
        flat, row_doc, row_band = flat[keep], row_doc[keep], row_band[keep]
    return {"doc": row_doc, "key": flat, "band": row_band}


def band_split(skp: dict, cand: dict, offset: int, lo: int, hi: int, q: int) -> tuple:
    """Pass 2, the sending side: one piece per shuffle partition (``key % q``) of the candidate rows
    (:func:`candidate_rows`) of documents in [lo, hi): key, doc, band; with each document of the
    piece once: its exact hash. Rows keep their (document, band) order."""
    a, b = np.searchsorted(cand["doc"], [lo, hi])
    flat, row_doc, row_band = cand["key"][a:b], cand["doc"][a:b], cand["band"][a:b]
    out = []
    for sel in split_positions(flat % np.uint64(q), q):
        if sel.size == 0:
            out.append(_empty_piece())
            continue
        docs = distinct_ascending(row_doc[sel])
        out.append({"key": flat[sel], "doc": row_doc[sel] + np.int64(offset), "band": row_band[sel],
                    "docs": docs + np.int64(offset), "exact": skp["exact"][docs]})
    return tuple(out)


def band_rows(skp: dict, offset: int, lo: int, hi: int, rows: int, bands: int, seed_h: int,
              key_filter: Optional[KeyFilter] = None) -> dict:
    """All of pass 2's rows of documents [lo, hi) as one piece (one shuffle partition)."""
    return band_rows_of(skp, candidate_rows(skp, rows, bands, seed_h, key_filter), offset, lo, hi)


def _chunks(run: Run, docs_per_chunk: int) -> list:
    """(partition, its future, lo, hi): the sketched partitions cut into chunks of documents."""
    out = []
    for i, f in enumerate(run.sketches):
        count = int(run.counts[i])
        for lo in range(0, count, docs_per_chunk):
            out.append((i, f, lo, min(count, lo + docs_per_chunk)))
    return out


def shared_key_filter(run: Run, p: LSHParams) -> tuple:
    """Pass 1: (a future of the Bloom filter of the shared band keys, their number). The keys are
    split by ``key % q1`` on the workers that hold the sketches (a tasks shuffle of plain arrays)."""

    t0 = time.perf_counter()
    client = run.client
    seed_h = int(lsh_seed(run.cfg.seed))
    chunks = _chunks(run, max(1, SHUFFLE_PARTITION_BYTES // (8 * p.bands)))
    n_rows_all = run.n_text * p.bands
    q1 = whole_rounds(math.ceil(n_rows_all * 8 / SHUFFLE_PARTITION_BYTES), run.n_workers)
    run.report.stage(f"MinHash stage: {n_rows_all:,} band keys -> {q1} partitions, bands={p.bands} rows={p.rows}")
    split = [split_task(key_split, q1, f, lo, hi, p.rows, p.bands, seed_h, q1) for _, f, lo, hi in chunks]
    shared = run.compute(spread(run.workers, shared_keys, [[s[j] for s in split] for j in range(q1)]), "band keys")
    n_shared = int(sum(run.gather(len, shared)))
    m_bits = bits_for(n_shared, bits_per_key=FILTER_BITS_PER_KEY, min_bits=FILTER_MIN_BITS)
    blooms = [client.submit(filter_of, f, m_bits, pure=False) for f in shared]
    del shared
    while len(blooms) > 1:  # a tree of unions: no worker holds more than two filters at a time
        blooms = [client.submit(KeyFilter.union, blooms[j], blooms[j + 1], pure=False) if j + 1 < len(blooms)
                  else blooms[j] for j in range(0, len(blooms), 2)]
    run.info.update(band_keys=n_rows_all, shared_keys=n_shared, bloom_bytes=m_bits // 8,
                    key_shuffle_seconds=round(time.perf_counter() - t0, 3))
    return blooms[0], n_shared


def band_partitions(n_rows: int, bands: int, n_workers: int) -> int:
    """Shuffle partitions of pass 2 for about ``n_rows`` rows: ~``SHUFFLE_PARTITION_BYTES`` each,
    counting a row and, on average, a ``bands``-th of a document record (a document's rows spread
    over the partitions; its record travels once to each)."""
    per_row = ROW_BYTES + DOC_BYTES / bands
    return whole_rounds(math.ceil(n_rows * per_row / SHUFFLE_PARTITION_BYTES), n_workers)


def shuffled_band_rows(run: Run, p: LSHParams, candidates: list, n_shared: int, shuffle_partitions: Optional[int]) -> list:
    """Pass 2: the candidate rows (``candidates``: a future of :func:`candidate_rows` per input
    partition) split by ``key % q`` on the workers that hold the sketches: per shuffle partition,
    the list of its pieces (Delayed), one per chunk of documents. A tasks shuffle of plain arrays:
    chunks x partitions edges, no DataFrame machinery."""
    from dask import delayed

    est_rows = max(2 * n_shared, 1)
    q = shuffle_partitions or band_partitions(est_rows, p.bands, run.n_workers)
    chunks = _chunks(run, max(1, SHUFFLE_PARTITION_BYTES // ((ROW_BYTES + DOC_BYTES) * p.bands)))
    run.report.stage(f"MinHash stage: {n_shared:,} shared keys; >= {est_rows:,} band rows -> {q} partitions")
    run.info["band_partitions"] = q
    if q == 1:
        return [[delayed(band_rows_of, pure=True)(f, candidates[i], int(run.offsets[i]), lo, hi)
                 for i, f, lo, hi in chunks]]
    split = [split_task(band_split, q, f, candidates[i], int(run.offsets[i]), lo, hi, q) for i, f, lo, hi in chunks]
    return [[s[j] for s in split] for j in range(q)]


def band_rows_of(skp: dict, cand: dict, offset: int, lo: int, hi: int) -> dict:
    """The candidate rows of documents [lo, hi) as one piece (a single shuffle partition)."""
    return band_split(skp, cand, offset, lo, hi, 1)[0]
