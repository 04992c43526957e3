"""Linking: LSH band keys -> candidate pairs -> verification -> union-find edges.

Stages run cheap first: the exact-hash stage, MinHash bands (Jaccard), text SimHash bands, vector
SimHash bands. Every candidate is verified (estimate, exact, or exact for the borderline band of
``verify="auto"``) before it joins two components; clusters are the connected components of the
union of verified edges from every stage.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ..config import BuildConfig
from ..hashing import SALT_LSH_SIMHASH, SALT_LSH_TEXT_SIMHASH, lsh_seed
from ..sketches.batch import Sketches
from ..stages import STAGE_EXACT, STAGE_MINHASH, STAGE_SIMHASH, STAGE_TEXT_SIMHASH
from .bands import (
    LSHParams,
    band_starts,
    fixed_params,
    hamming_radius,
    optimal_params,
    pigeonhole_params,
    simhash_bit_similarity,
)

__all__ = ["LinkStats", "link", "minhash_params", "simhash_params", "agreement_band", "decide_deferred"]


@dataclass
class LinkStats:
    candidates: dict = field(default_factory=dict)  # stage -> candidate pairs examined
    verified: dict = field(default_factory=dict)  # stage -> verifications run
    merged: dict = field(default_factory=dict)  # stage -> edges that merged two components
    lsh: dict = field(default_factory=dict)  # stage -> chosen params
    exact_checks: dict = field(default_factory=dict)  # stage -> borderline pairs checked exactly


def minhash_params(config: BuildConfig) -> LSHParams:
    mc = config.minhash
    if mc.bands is not None:
        return fixed_params(mc.threshold, mc.bands, mc.rows)
    return optimal_params(mc.threshold, mc.num_perm, mc.false_positive_weight, mc.false_negative_weight)


def simhash_params(config: BuildConfig) -> LSHParams:
    sc = config.simhash
    p = simhash_bit_similarity(sc.threshold)
    if sc.pigeonhole:
        return pigeonhole_params(sc.threshold, sc.bits)
    if sc.bands is not None:
        return fixed_params(p, sc.bands, sc.bits // sc.bands)
    # bit similarity is >= 0.5 for cosine >= 0; integrate the S-curve over [0.5, 1]
    return optimal_params(p, sc.bits, 0.1, 0.9, lo=0.5, hi=1.0)


def _first_of_exact(exact: np.ndarray, eligible: np.ndarray) -> np.ndarray:
    """Mask of eligible documents that are the first (lowest index) with their exact hash."""
    idx = np.flatnonzero(eligible)
    order = np.argsort(exact[idx], kind="stable")
    sorted_h = exact[idx][order]
    first = np.ones(idx.size, dtype=bool)
    first[1:] = sorted_h[1:] != sorted_h[:-1]
    mask = np.zeros(exact.size, dtype=bool)
    mask[idx[order[first]]] = True
    return mask


def _link_keys(keymat: np.ndarray, docs: np.ndarray, window: int, kind: int, sk: Sketches, cfg: BuildConfig,
               new_start: int, parent: np.ndarray, flags: np.ndarray, stage_bit: int, counters: np.ndarray,
               *, sims: Optional[np.ndarray] = None, max_ham: Optional[int] = None, on_deferred=None,
               order_by: Optional[np.ndarray] = None):
    from .._kernels.linking import link_scan

    stride = keymat.shape[1] if keymat.ndim == 2 else 1
    flat = keymat.reshape(-1)
    if order_by is None:
        perm = np.argsort(flat, kind="stable").astype(np.int64)
    else:
        # inside a bucket, order members by a second key (e.g. the first word of their SimHash
        # signature) so that the sliding window of a giant bucket compares similar members
        perm = np.lexsort((np.repeat(order_by, stride), flat)).astype(np.int64)
    skeys = flat[perm]
    mh = sk.minhash if sk.minhash is not None else np.zeros((1, 1), np.uint32)
    shp = sk.sh_indptr if sk.sh_indptr is not None else np.zeros(1, np.int64)
    shh = sk.sh_hashes if sk.sh_hashes is not None else np.zeros(0, np.uint64)
    if sims is None:
        sims = sk.simhash if sk.simhash is not None else np.zeros((1, 1), np.uint64)
    vecs = sk.vectors if sk.vectors is not None else np.zeros((1, 1), np.float64)
    agree_lo = agree_hi = 0
    override_ham = max_ham
    max_ham = 0
    jt = ct = 0.0
    if cfg.minhash is not None:
        agree_lo, agree_hi = agreement_band(cfg, auto=sk.texts is not None)
        jt = cfg.minhash.threshold
    if cfg.simhash is not None:
        max_ham = hamming_radius(cfg.simhash.threshold, cfg.simhash.bits * cfg.simhash.families)
        ct = cfg.simhash.threshold - 1e-12
    if override_ham is not None:
        max_ham = override_ham
    # borderline pairs are buffered; when the buffer fills, the scan pauses, the caller decides
    # them exactly, and the scan resumes where it stopped: memory stays bounded and every
    # borderline pair gets the same (exact) decision whatever the buffer size or scan order
    deferred = np.empty((_DEFER_CAPACITY, 2), dtype=np.int64)
    n_deferred = np.zeros(1, dtype=np.int64)
    state = np.array([0, -1, -1], dtype=np.int64)
    while True:
        done = link_scan(perm, skeys, docs, stride, window, kind, mh, agree_lo, agree_hi, shp, shh, jt, sims, max_ham,
                         vecs, ct, new_start, parent, flags, np.uint8(stage_bit), counters, deferred, n_deferred,
                         state, on_deferred is not None)
        if n_deferred[0] and on_deferred is not None:
            on_deferred(deferred[: n_deferred[0]].copy())
            n_deferred[0] = 0
        if done:
            return


_DEFER_CAPACITY = 1 << 16  # borderline pairs buffered before the scan pauses for exact checks
_EXACT_BATCH = 4096  # borderline pairs checked per batch of re-shingled documents


def agreement_band(cfg: BuildConfig, *, auto: bool) -> tuple[int, int]:
    """Signature agreements (out of num_perm) below which a pair is rejected / at or above which
    it is accepted without an exact check. Equal bounds mean "decide by the estimate alone"."""
    mc = cfg.minhash
    need = int(math.ceil(mc.threshold * mc.num_perm - 1e-9))
    if mc.verify != "auto" or not auto or mc.borderline == 0:
        return need, need
    se = math.sqrt(mc.threshold * (1 - mc.threshold) / mc.num_perm)
    lo = int(math.floor((mc.threshold - mc.borderline * se) * mc.num_perm))
    hi = int(math.ceil((mc.threshold + mc.borderline * se) * mc.num_perm))
    return max(0, lo), min(mc.num_perm + 1, hi)


def decide_deferred(pairs: np.ndarray, sk: Sketches, cfg: BuildConfig, parent: np.ndarray, flags: np.ndarray,
                    counters: np.ndarray) -> int:
    """Exact Jaccard for borderline pairs whose texts are at hand; the estimate decides the rest."""
    from .._kernels.linking import link_pairs_accept, link_pairs_exact_rows
    from ..text import sorted_unique_shingles

    if pairs.size == 0:
        return 0
    # a borderline pair is deferred once per band it shares; check it once
    pairs = np.unique(np.sort(pairs, axis=1), axis=0)
    off = sk.text_offset
    have = (pairs >= off).all(axis=1) if sk.texts is not None else np.zeros(len(pairs), bool)
    exact_pairs = pairs[have]
    # in batches, so that only a bounded number of documents is re-shingled at a time
    for lo in range(0, exact_pairs.shape[0], _EXACT_BATCH):
        batch = exact_pairs[lo : lo + _EXACT_BATCH]
        docs, inv = np.unique(batch, return_inverse=True)
        starts, counts, hashes = sorted_unique_shingles([sk.texts[int(d) - off] for d in docs], cfg.text, cfg.seed)
        rows = inv.reshape(-1, 2).astype(np.int64)
        link_pairs_exact_rows(np.ascontiguousarray(batch), rows, starts, counts, hashes, cfg.minhash.threshold, parent,
                              flags, np.uint8(STAGE_MINHASH), counters)
    rest = pairs[~have]
    if rest.size:
        lo, hi = agreement_band(cfg, auto=True)
        agree = (sk.minhash[rest[:, 0]] == sk.minhash[rest[:, 1]]).sum(axis=1)
        ok = rest[2 * agree >= lo + hi]
        if ok.size:
            link_pairs_accept(np.ascontiguousarray(ok), parent, flags, np.uint8(STAGE_MINHASH), counters)
    return int(exact_pairs.shape[0])


def link(sk: Sketches, config: BuildConfig, parent: np.ndarray, flags: np.ndarray, *, new_start: int = 0,
         timings: dict) -> LinkStats:
    """Run every enabled stage, cheap first, updating the union-find forest ``parent``."""
    from .._kernels import linking as kl

    stats = LinkStats()
    has_text = sk.minhash is not None or config.exact or sk.text_simhash is not None
    text_ok = ~sk.empty
    seed_h = lsh_seed(config.seed)

    if config.exact and text_ok.any():
        t0 = time.perf_counter()
        docs = np.flatnonzero(text_ok).astype(np.int64)
        counters = np.zeros(3, dtype=np.int64)
        # window=2 chains each run of equal hashes: m identical documents cost m-1 unions
        _link_keys(sk.exact[docs], docs, 2, kl.KIND_ACCEPT, sk, config, new_start, parent, flags, STAGE_EXACT, counters)
        _record(stats, "exact", counters)
        timings["exact"] = timings.get("exact", 0.0) + time.perf_counter() - t0

    # with the exact stage on, one document per exact group is enough for LSH (the others are
    # already joined to it); with it off, every document must enter LSH
    lsh_mask = (_first_of_exact(sk.exact, text_ok) if config.exact else text_ok) if has_text else None

    if config.minhash is not None and sk.minhash is not None and lsh_mask is not None and lsh_mask.any():
        t0 = time.perf_counter()
        p = minhash_params(config)
        docs = np.flatnonzero(lsh_mask).astype(np.int64)
        keys = np.empty((docs.size, p.bands), dtype=np.uint64)
        kl.fill_minhash_band_keys(sk.minhash, docs, p.rows, seed_h, keys)
        kind = kl.KIND_MINHASH_EXACT if config.minhash.verify == "exact" else kl.KIND_MINHASH_ESTIMATE
        counters = np.zeros(3, dtype=np.int64)
        n_exact = [0]

        def on_deferred(pairs):
            n_exact[0] += decide_deferred(pairs, sk, config, parent, flags, counters)

        _link_keys(keys, docs, config.bucket_window, kind, sk, config, new_start, parent, flags, STAGE_MINHASH,
                   counters, on_deferred=on_deferred)
        n_exact = n_exact[0]
        _record(stats, "minhash", counters)
        stats.exact_checks["minhash"] = n_exact
        stats.lsh["minhash"] = p.as_dict()
        timings["lsh_minhash"] = timings.get("lsh_minhash", 0.0) + time.perf_counter() - t0

    if config.text_simhash is not None and sk.text_simhash is not None and lsh_mask is not None and lsh_mask.any():
        t0 = time.perf_counter()
        mh_ = config.text_simhash.max_hamming
        docs = np.flatnonzero(lsh_mask).astype(np.int64)
        fps2 = np.ascontiguousarray(sk.text_simhash.reshape(-1, 1))
        starts = band_starts(64, mh_ + 1)
        keys = np.empty((docs.size, mh_ + 1), dtype=np.uint64)
        kl.fill_simhash_band_keys(fps2, docs, 64, starts, np.uint64(seed_h ^ np.uint64(SALT_LSH_TEXT_SIMHASH)), keys)
        counters = np.zeros(3, dtype=np.int64)
        _link_keys(keys, docs, config.bucket_window, kl.KIND_SIMHASH_ESTIMATE, sk, config, new_start, parent, flags,
                   STAGE_TEXT_SIMHASH, counters, sims=fps2, max_ham=mh_)
        _record(stats, "text_simhash", counters)
        stats.lsh["text_simhash"] = {"bands": mh_ + 1, "rows": 64 // (mh_ + 1), "recall_at_threshold": 1.0,
                                     "method": "pigeonhole", "max_hamming": mh_}
        timings["lsh_text_simhash"] = timings.get("lsh_text_simhash", 0.0) + time.perf_counter() - t0

    if config.simhash is not None and sk.simhash is not None:
        t0 = time.perf_counter()
        sc = config.simhash
        p = simhash_params(config)
        # pigeonhole bands must cover every bit; S-curve bands are exactly `rows` bits wide, so the
        # reported candidate probability is the one of the keys actually used
        starts = band_starts(sc.bits, p.bands) if sc.pigeonhole else np.arange(p.bands + 1, dtype=np.int64) * p.rows
        docs = np.arange(sk.n, dtype=np.int64)
        keys = np.empty((docs.size, p.bands * sc.families), dtype=np.uint64)
        kl.fill_simhash_band_keys(sk.simhash, docs, sc.bits, starts, np.uint64(seed_h ^ np.uint64(SALT_LSH_SIMHASH)), keys)
        kind = kl.KIND_SIMHASH_EXACT if sc.verify == "exact" else kl.KIND_SIMHASH_ESTIMATE
        counters = np.zeros(3, dtype=np.int64)
        _link_keys(keys, docs, config.bucket_window, kind, sk, config, new_start, parent, flags, STAGE_SIMHASH, counters,
                   order_by=sk.simhash[docs, 0])
        _record(stats, "simhash", counters)
        d = p.as_dict()
        d["families"] = sc.families
        d["band_widths"] = sorted(set(np.diff(starts).tolist()))
        d["hamming_radius"] = hamming_radius(sc.threshold, sc.bits)
        stats.lsh["simhash"] = d
        timings["lsh_simhash"] = timings.get("lsh_simhash", 0.0) + time.perf_counter() - t0
    return stats


def _record(stats: LinkStats, name: str, counters: np.ndarray) -> None:
    stats.candidates[name] = int(counters[0])
    stats.verified[name] = int(counters[1])
    stats.merged[name] = int(counters[2])
