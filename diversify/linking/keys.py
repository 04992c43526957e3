"""LSH band keys and buckets: the parameters of each stage's bands, the keys of its documents, and
their sort into buckets (the input of :func:`diversify.linking.link.scan_buckets`).

Both engines and the live index make their band keys here, so that they never disagree.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, NamedTuple, Optional

import numpy as np

from ..config import BuildConfig, MinHashConfig, SimHashConfig
from ..hashing import SALT_LSH_SIMHASH, SALT_LSH_TEXT_SIMHASH, lsh_seed
from .bands import (
    LSHParams,
    band_starts,
    fixed_params,
    optimal_params,
    pigeonhole_params,
    simhash_bit_similarity,
)

if TYPE_CHECKING:  # the kernels' records; imported lazily at run time (they load numba)
    from .._kernels.linking import Buckets, Verifier

__all__ = [
    "minhash_params",
    "simhash_params",
    "stable_argsort",
    "sort_keys",
    "sorted_buckets",
    "Part",
    "minhash_band_keys",
    "minhash_band_rows",
    "band_by_band",
    "text_simhash_band_keys",
    "simhash_band_starts",
    "simhash_band_keys",
]


def _minhash_config(config: BuildConfig) -> MinHashConfig:
    mc = config.minhash
    assert mc is not None, "the MinHash stage is off (config.minhash is None)"
    return mc


def _simhash_config(config: BuildConfig) -> SimHashConfig:
    sc = config.simhash
    assert sc is not None, "the SimHash stage is off (config.simhash is None)"
    return sc


def minhash_params(config: BuildConfig) -> LSHParams:
    mc = _minhash_config(config)
    if mc.bands is not None:
        assert mc.rows is not None, "MinHashConfig sets rows whenever bands is set"
        return fixed_params(mc.threshold, mc.bands, mc.rows)
    return optimal_params(mc.threshold, mc.num_perm, mc.false_positive_weight, mc.false_negative_weight)


def simhash_params(config: BuildConfig) -> LSHParams:
    sc = _simhash_config(config)
    p = simhash_bit_similarity(sc.threshold)
    if sc.pigeonhole:
        return pigeonhole_params(sc.threshold, sc.bits)
    if sc.bands is not None:
        return fixed_params(p, sc.bands, sc.bits // sc.bands)
    # bit similarity is >= 0.5 for cosine >= 0; integrate the S-curve over [0.5, 1]
    return optimal_params(p, sc.bits, 0.1, 0.9, lo=0.5, hi=1.0)



def stable_argsort(keys: np.ndarray) -> np.ndarray:
    """``np.argsort(keys, kind="stable")`` as int64 (see :func:`sort_keys`)."""
    return sort_keys(keys, with_sorted=False)[0]


def sort_keys(keys: np.ndarray, *, with_sorted: bool = True) -> tuple[np.ndarray, Optional[np.ndarray]]:
    """``np.argsort(keys, kind="stable")`` as int64, and ``keys`` in that order (if ``with_sorted``);
    hash keys (uint64) by two bucket passes (:func:`diversify._kernels.linking.argsort_hashes`), the
    same permutation, several times faster, the sorted keys written on the way."""
    if keys.dtype == np.uint64 and keys.ndim == 1:
        from .._kernels.linking import argsort_hashes

        perm = np.empty(keys.size, dtype=np.int64)
        ordered = np.empty(keys.size, dtype=np.uint64) if with_sorted else None
        if argsort_hashes(np.ascontiguousarray(keys), perm, ordered):
            return perm, ordered
    perm = np.argsort(keys, kind="stable").astype(np.int64)
    return perm, (keys[perm] if with_sorted else None)


def sorted_buckets(keymat: np.ndarray, docs: np.ndarray, *, window: int, new_start: int = 0,
                   order_by: Optional[np.ndarray] = None) -> Buckets:
    """The band keys of ``docs`` (one row of ``keymat`` each) sorted into buckets.

    ``order_by`` (one value per row) orders the members of a bucket (e.g. the first word of their
    SimHash signature), so that the sliding window of a giant bucket compares similar members;
    without it members keep their row order.
    """
    from .._kernels.linking import Buckets

    stride = keymat.shape[1] if keymat.ndim == 2 else 1
    flat = keymat.reshape(-1)
    if order_by is None:
        perm, ordered = sort_keys(flat)
    else:  # np.lexsort((np.repeat(order_by, stride), flat)): the keys, taken in order_by's order, sorted stably
        rows = np.argsort(order_by, kind="stable").astype(np.int64)
        taken = (rows[:, None] * stride + np.arange(stride, dtype=np.int64)).reshape(-1)
        within, ordered = sort_keys(flat[taken])
        perm = taken[within]
    assert ordered is not None
    return Buckets(perm, ordered, docs, int(stride), int(window), int(new_start))


class Part(NamedTuple):
    """Buckets scanned with a verifier of their own (a spilled build's: the signatures it holds
    for them); ``band_done``: the last part of a band (the progress bar counts bands)."""

    buckets: Buckets
    verifier: Verifier
    band_done: bool



def minhash_band_keys(minhash: np.ndarray, docs: np.ndarray, config: BuildConfig) -> np.ndarray:
    """MinHash LSH band keys of ``docs`` (rows of the uint32 signatures ``minhash``): uint64 (m, bands)."""
    return np.ascontiguousarray(minhash_band_rows(minhash, docs, config).T)


def minhash_band_rows(minhash: np.ndarray, docs: np.ndarray, config: BuildConfig) -> np.ndarray:
    """The band keys of ``docs`` band-major, uint64 (bands, m): row b holds band b's keys."""
    from .._kernels import linking as kl

    p = minhash_params(config)
    keys = np.empty((p.bands, docs.size), dtype=np.uint64)
    kl.fill_minhash_band_keys(minhash, docs, p.rows, lsh_seed(config.seed), keys)
    return keys


def band_by_band(minhash: np.ndarray, docs: np.ndarray, config: BuildConfig, new_start: int) -> Iterator[Buckets]:
    """The MinHash buckets of ``docs``, one band at a time: every band's keys are made in one pass
    over the signatures (band-major), and each band is sorted when the scan reaches it: its sort
    (16 bytes a document) is held, not the sort of every band's keys (at 1M documents and 16
    bands, 256 MB). A bucket holds the documents of one band's key, as in one sort of every band's
    keys (the band is part of the key's hash); only the order in which the buckets are scanned
    differs, which changes how many pairs are found already joined (``verified``), never the
    components."""
    rows = minhash_band_rows(minhash, docs, config)
    for band in range(rows.shape[0]):
        yield sorted_buckets(rows[band], docs, window=config.bucket_window, new_start=new_start)



def text_simhash_band_keys(fingerprints: np.ndarray, docs: np.ndarray, config: BuildConfig) -> np.ndarray:
    """Pigeonhole band keys of text SimHash fingerprints (uint64 (n,)): uint64 (m, max_hamming + 1)."""
    from .._kernels import linking as kl

    assert config.text_simhash is not None
    radius = config.text_simhash.max_hamming
    fps = np.ascontiguousarray(fingerprints.reshape(-1, 1))
    keys = np.empty((docs.size, radius + 1), dtype=np.uint64)
    kl.fill_simhash_band_keys(fps, docs, 64, band_starts(64, radius + 1),
                              np.uint64(lsh_seed(config.seed) ^ np.uint64(SALT_LSH_TEXT_SIMHASH)), keys)
    return keys


def simhash_band_starts(config: BuildConfig) -> np.ndarray:
    """Bit offsets of the vector SimHash bands within a family: pigeonhole bands cover every bit;
    S-curve bands are exactly ``rows`` bits wide, so the reported candidate probability is the one
    of the keys actually used."""
    sc = _simhash_config(config)
    p = simhash_params(config)
    return band_starts(sc.bits, p.bands) if sc.pigeonhole else np.arange(p.bands + 1, dtype=np.int64) * p.rows


def simhash_band_keys(simhash: np.ndarray, docs: np.ndarray, config: BuildConfig) -> np.ndarray:
    """Vector SimHash band keys of ``docs`` (rows of the packed uint64 signatures): uint64 (m, bands * families)."""
    from .._kernels import linking as kl

    sc = _simhash_config(config)
    p = simhash_params(config)
    keys = np.empty((docs.size, p.bands * sc.families), dtype=np.uint64)
    kl.fill_simhash_band_keys(simhash, docs, sc.bits, simhash_band_starts(config),
                              np.uint64(lsh_seed(config.seed) ^ np.uint64(SALT_LSH_SIMHASH)), keys)
    return keys

