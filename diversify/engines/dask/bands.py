"""Stage 3a, MinHash bands: band rows shuffled by key in two passes, so that a shuffle partition
holds every member of its shared buckets.

Pass 1 shuffles the bare keys (8 bytes a row) and keeps the keys held by two or more rows; their
Bloom filter (:mod:`diversify.linking.keyfilter`: no false negatives, a few percent false
positives at most, see ``FILTER_BITS_PER_KEY``) goes to every worker. Pass 2 emits only the
rows whose key passes the filter, each with the document index, band, exact hash and whole
signature, shuffled by key. A row left out by the filter has a key no other row holds: it can
never give a candidate pair.
"""

from __future__ import annotations

import math
import time
from typing import Optional

import numpy as np

from ..._arrays import unique_sorted
from ...hashing import lsh_seed
from ...linking.bands import LSHParams
from ...linking.keyfilter import KeyFilter, bits_for, filter_of
from .run import Run

__all__ = ["SHUFFLE_PARTITION_BYTES", "key_frame", "shared_keys", "band_frame", "shared_key_filter",
           "shuffled_band_rows"]

#: target size of one shuffle partition of band rows (bytes); lower -> less memory per task
SHUFFLE_PARTITION_BYTES = 128 * 2**20
#: bits of the filter of shared keys per key, at least (its size is a power of two, so 8 to 16): 2.4%
#: to 0.24% false positives; on average about the memory and the rate of the 10-bit filter with 7
#: probes the engine had before it took the library's one filter
FILTER_BITS_PER_KEY = 8
#: the smallest filter of shared keys (bits)
FILTER_MIN_BITS = 1 << 16


def sig_columns(num_perm: int) -> list:
    return [f"s{j}" for j in range(num_perm)]


def _key_frame_meta():
    import pandas as pd

    return pd.DataFrame({"key": np.zeros(0, np.uint64)})


def _band_meta(num_perm: int):
    import pandas as pd

    cols = {"key": np.zeros(0, np.uint64), "doc": np.zeros(0, np.int64), "band": np.zeros(0, np.int16),
            "exact": np.zeros(0, np.uint64)}
    for c in sig_columns(num_perm):
        cols[c] = np.zeros(0, np.uint32)
    return pd.DataFrame(cols)


def band_row_bytes(num_perm: int) -> int:
    """Bytes of one pass-2 row: key, doc, band, exact hash, signature."""
    return 8 + 8 + 2 + 8 + 4 * num_perm


def _band_keys(skp: dict, lo: int, hi: int, rows: int, bands: int, seed_h: int) -> tuple[np.ndarray, np.ndarray]:
    from ..._kernels.linking import fill_minhash_band_keys

    local = (np.flatnonzero(~skp["empty"][lo:hi]) + lo).astype(np.int64)
    keys = np.empty((bands, local.size), dtype=np.uint64)
    if local.size:
        fill_minhash_band_keys(skp["minhash"], local, rows, np.uint64(seed_h), keys)
    return local, np.ascontiguousarray(keys.T)


def key_frame(skp: dict, lo: int, hi: int, rows: int, bands: int, seed_h: int):
    """Pass 1: just the band keys of documents [lo, hi) (8 bytes a row)."""
    import pandas as pd

    _, keys = _band_keys(skp, lo, hi, rows, bands, seed_h)
    return pd.DataFrame({"key": keys.reshape(-1)})


def shared_keys(df) -> np.ndarray:
    """Keys held by two or more band rows (the only buckets that can yield a candidate pair)."""
    k = np.sort(df["key"].to_numpy(np.uint64))
    if k.size < 2:
        return np.zeros(0, np.uint64)
    dup = k[1:] == k[:-1]
    return unique_sorted(k[1:][dup])


def band_frame(skp: dict, offset: int, lo: int, hi: int, rows: int, bands: int, seed_h: int,
               key_filter: Optional[KeyFilter] = None):
    """Pass 2: one row per (non-empty document in [lo, hi), band) whose key may be shared (passes the
    Bloom filter of shared keys; no false negatives): key, doc, band, exact hash, signature."""
    import pandas as pd

    sigs = skp["minhash"]
    local, keys = _band_keys(skp, lo, hi, rows, bands, seed_h)
    flat = keys.reshape(-1)
    row_doc = np.repeat(local, bands)
    row_band = np.tile(np.arange(bands, dtype=np.int16), local.size)
    if key_filter is not None:
        keep = key_filter.may_contain(flat) if flat.size else np.zeros(0, bool)
        flat, row_doc, row_band = flat[keep], row_doc[keep], row_band[keep]
    num_perm = sigs.shape[1]
    frame = pd.DataFrame({"key": flat, "doc": row_doc + np.int64(offset), "band": row_band,
                          "exact": skp["exact"][row_doc]})
    sig_frame = pd.DataFrame(sigs[row_doc], columns=sig_columns(num_perm))
    return pd.concat([frame, sig_frame], axis=1)


def _chunks(run: Run, docs_per_chunk: int) -> list:
    """(partition, its future, lo, hi): the sketched partitions cut into chunks of documents."""
    out = []
    for i, f in enumerate(run.sketches):
        count = int(run.counts[i])
        for lo in range(0, count, docs_per_chunk):
            out.append((i, f, lo, min(count, lo + docs_per_chunk)))
    return out


def shared_key_filter(run: Run, p: LSHParams) -> tuple:
    """Pass 1: (a future of the Bloom filter of the shared band keys, their number)."""
    import dask.dataframe as dd
    from dask import delayed

    t0 = time.perf_counter()
    client = run.client
    seed_h = int(lsh_seed(run.cfg.seed))
    chunks = _chunks(run, max(1, SHUFFLE_PARTITION_BYTES // (8 * p.bands)))
    n_rows_all = run.n_text * p.bands
    q1 = max(run.n_workers, math.ceil(n_rows_all * 8 / SHUFFLE_PARTITION_BYTES))
    run.report.stage(f"MinHash stage: {n_rows_all:,} band keys -> {q1} partitions, bands={p.bands} rows={p.rows}")
    kframe = dd.from_delayed([delayed(key_frame, pure=True)(f, lo, hi, p.rows, p.bands, seed_h)
                              for _, f, lo, hi in chunks], meta=_key_frame_meta(), verify_meta=False)
    ksh = kframe.shuffle(on="key", npartitions=q1, shuffle_method=run.shuffle_method)
    shared = run.compute([delayed(shared_keys, pure=True)(part) for part in ksh.to_delayed()], "band keys")
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


def shuffled_band_rows(run: Run, p: LSHParams, bloom_future, n_shared: int, shuffle_partitions: Optional[int]) -> list:
    """Pass 2: the band rows whose key may be shared, shuffled by key (Delayed DataFrame partitions)."""
    import dask.dataframe as dd
    from dask import delayed

    assert run.cfg.minhash is not None
    num_perm = run.cfg.minhash.num_perm
    seed_h = int(lsh_seed(run.cfg.seed))
    row_bytes = band_row_bytes(num_perm)
    est_rows = max(2 * n_shared, 1)
    parts = [delayed(band_frame, pure=True)(f, int(run.offsets[i]), lo, hi, p.rows, p.bands, seed_h, bloom_future)
             for i, f, lo, hi in _chunks(run, max(1, SHUFFLE_PARTITION_BYTES // (row_bytes * p.bands)))]
    total_bytes = est_rows * row_bytes
    q = shuffle_partitions or max(run.n_workers, math.ceil(total_bytes / SHUFFLE_PARTITION_BYTES))
    run.report.stage(f"MinHash stage: {n_shared:,} shared keys; >= {est_rows:,} band rows with signatures "
                     f"(>= {total_bytes / 2**30:.2f} GiB) -> {q} partitions")
    run.info["band_partitions"] = q
    frame = dd.from_delayed(parts, meta=_band_meta(num_perm), verify_meta=False)
    return frame.shuffle(on="key", npartitions=q, shuffle_method=run.shuffle_method).to_delayed()
