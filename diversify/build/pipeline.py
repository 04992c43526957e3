"""The offline pipeline: sketch -> exact stage -> LSH stages (verified) -> union-find -> clusters.

Stages compose, cheap first. Clusters are the connected components of the union of verified
edges from every stage; each document records the stages whose edges joined it to its cluster.
"""

from __future__ import annotations

import math
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional, Sequence

import numpy as np

from .. import __version__
from ..config import HASH_SCHEME, BuildConfig, fingerprint
from ..errors import ConfigError, IncompatibleArtifactError, InputError
from ..lsh import (
    LSHParams,
    band_starts,
    fixed_params,
    hamming_radius,
    optimal_params,
    pigeonhole_params,
    simhash_bit_similarity,
)
from ..text import encode_batch, shingle_buffer, sketch_oph_buffer
from ._inputs import check_ids, check_keys, chunks, normalize_ids

STAGE_EXACT = 1
STAGE_MINHASH = 2
STAGE_SIMHASH = 4
STAGE_TEXT_SIMHASH = 8
STAGE_NAMES = {STAGE_EXACT: "exact", STAGE_MINHASH: "minhash", STAGE_SIMHASH: "simhash", STAGE_TEXT_SIMHASH: "text_simhash"}

# bits of the per-document "doc_flags" extra
FLAG_EMPTY_TEXT = 1
FLAG_HAS_VECTOR = 2


@dataclass
class Sketches:
    """Per-document state the linking stages need (and that `add` keeps in the artifact)."""

    ids: list
    lengths: np.ndarray  # uint32 (n,)
    exact: np.ndarray  # uint64 (n,)
    empty: np.ndarray  # bool (n,) no words (or no text)
    minhash: Optional[np.ndarray] = None  # uint32 (n, P)
    sh_indptr: Optional[np.ndarray] = None  # int64 (n+1,) sorted unique shingles (exact verify)
    sh_hashes: Optional[np.ndarray] = None
    simhash: Optional[np.ndarray] = None  # uint64 (n, W)
    text_simhash: Optional[np.ndarray] = None  # uint64 (n,) Charikar fingerprints of the texts
    vectors: Optional[np.ndarray] = None  # float32/64 (n, d), L2-normalized
    keys: Optional[np.ndarray] = None  # float64 (n,) representative keys
    has_text: bool = True  # False for a vectors-only build
    texts: Optional[Sequence] = None  # random-access texts of documents text_offset.. (for verify="auto")
    text_offset: int = 0

    @property
    def n(self) -> int:
        return len(self.ids)


def _progress(total: Optional[int], desc: str, enabled: bool):
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover - tqdm is a dependency
        return None
    return tqdm(total=total, desc=desc, unit="doc", unit_scale=True, file=sys.stderr, leave=False)


def _unique_shingles(sh) -> tuple[np.ndarray, np.ndarray]:
    from .._kernels.minhash import gather_segments, sort_unique_segments

    hashes = sh.hashes.copy()
    counts = np.empty(len(sh), dtype=np.int64)
    sort_unique_segments(hashes, sh.indptr, counts)
    indptr = np.zeros(len(sh) + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    out = np.empty(int(indptr[-1]), dtype=np.uint64)
    gather_segments(hashes, sh.indptr, counts, indptr, out)
    return indptr, out


def sketch_texts(texts: Iterable, ids: Optional[Iterable], config: BuildConfig, *, id_offset: int = 0,
                 chunk_size: int = 16384, progress: bool = False, timings: dict) -> Sketches:
    """Normalize, shingle and MinHash documents chunk by chunk (memory: one chunk of shingles)."""
    from ..minhash import minhash_signatures

    mh_cfg = config.minhash
    n_hint = len(texts) if hasattr(texts, "__len__") else None
    id_iter = iter(ids) if ids is not None else None
    all_ids: list = []
    lengths, exact, empty, sigs, sh_ptrs, sh_vals, fps = [], [], [], [], [], [], []
    bar = _progress(n_hint, "sketching", progress)
    t_shingle = t_minhash = 0.0
    sig_buf = None
    if mh_cfg is not None and n_hint is not None:
        sig_buf = np.empty((n_hint, mh_cfg.num_perm), dtype=np.uint32)
    # the fused kernel goes from bytes to signatures in one pass; other settings need the shingles
    fused = mh_cfg is not None and mh_cfg.method == "oph" and mh_cfg.verify != "exact"
    def compute(buf, offsets):
        """Kernel work for one encoded chunk (runs in a worker thread; the kernels release the GIL)."""
        t0 = time.perf_counter()
        fp = None
        if config.text_simhash is not None:
            from .._kernels.text import fill_unit_simhash
            from ..text import _CLASSES, _LOWER

            fp = np.empty(offsets.size - 1, dtype=np.uint64)
            fill_unit_simhash(buf, offsets, _LOWER, _CLASSES, fp)
        return _compute(buf, offsets, t0) + (fp,)

    def _compute(buf, offsets, t0):
        if fused:
            sig, n_sh, blk_len, blk_exact = sketch_oph_buffer(buf, offsets, config.text, config.seed, mh_cfg.num_perm)
            return sig, blk_len, blk_exact, n_sh == 0, None, time.perf_counter() - t0, 0.0
        sh = shingle_buffer(buf, offsets, config.text, config.seed)
        t1 = time.perf_counter()
        sig = csr = None
        if mh_cfg is not None:
            sig = minhash_signatures(sh, num_perm=mh_cfg.num_perm, method=mh_cfg.method, seed=config.seed)
            if mh_cfg.verify == "exact":
                csr = _unique_shingles(sh)
        return sig, sh.lengths, sh.exact, np.diff(sh.indptr) == 0, csr, t1 - t0, time.perf_counter() - t1

    def collect(result, start, count):
        nonlocal t_shingle, t_minhash
        sig, blk_len, blk_exact, blk_empty, csr, dt_sketch, dt_sig, fp = result
        if fp is not None:
            fps.append(fp)
        lengths.append(blk_len)
        exact.append(blk_exact)
        empty.append(blk_empty)
        if csr is not None:
            sh_ptrs.append(csr[0])
            sh_vals.append(csr[1])
        if sig is not None:
            if sig_buf is not None and start + count <= sig_buf.shape[0]:
                sig_buf[start : start + count] = sig
            else:
                sigs.append(sig)
        t_shingle += dt_sketch
        t_minhash += dt_sig
        if bar is not None:
            bar.update(count)

    # One-deep pipeline: the main thread reads and encodes chunk i+1 (Python, holds the GIL) while a
    # worker runs the kernels on chunk i. Results are collected in input order: deterministic.
    from concurrent.futures import ThreadPoolExecutor

    done = 0
    pending = None
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="diversify-sketch") as pool:
        for block in chunks(texts, chunk_size):
            if id_iter is not None:
                block_ids = []
                for _ in range(len(block)):
                    try:
                        block_ids.append(next(id_iter))
                    except StopIteration:
                        raise InputError(
                            f"`ids` must have one id per text; ids ran out after {done + len(block_ids)} items while "
                            "texts continue. Pass as many ids as texts (or ids=None)."
                        ) from None
            else:
                block_ids = list(range(id_offset + done, id_offset + done + len(block)))
            all_ids.extend(block_ids)
            t0 = time.perf_counter()
            buf, offsets = encode_batch(block, start_index=done)
            t_encode_local = time.perf_counter() - t0
            timings["encode"] = timings.get("encode", 0.0) + t_encode_local
            if pending is not None:
                collect(pending[0].result(), pending[1], pending[2])
            pending = (pool.submit(compute, buf, offsets), done, len(block))
            del buf, offsets
            done += len(block)
        if pending is not None:
            collect(pending[0].result(), pending[1], pending[2])
    if bar is not None:
        bar.close()
    if id_iter is not None:
        extra = next(id_iter, _SENTINEL)
        if extra is not _SENTINEL:
            raise InputError(
                f"`ids` must have one id per text; got more ids than the {done} texts. Pass as many ids as texts."
            )
    timings["sketch"] = timings.get("sketch", 0.0) + t_shingle
    if t_minhash > 0.001:
        timings["signatures"] = timings.get("signatures", 0.0) + t_minhash
    sk = Sketches(
        ids=all_ids,
        texts=texts if isinstance(texts, Sequence) and not isinstance(texts, (str, bytes)) else None,
        text_offset=id_offset,
        lengths=np.concatenate(lengths) if lengths else np.zeros(0, np.uint32),
        exact=np.concatenate(exact) if exact else np.zeros(0, np.uint64),
        empty=np.concatenate(empty) if empty else np.zeros(0, bool),
    )
    if config.text_simhash is not None:
        sk.text_simhash = np.concatenate(fps) if fps else np.zeros(0, np.uint64)
    if mh_cfg is not None:
        if sig_buf is not None and not sigs:
            sk.minhash = sig_buf[:done]
        else:
            parts = ([sig_buf[: min(done, sig_buf.shape[0])]] if sig_buf is not None else []) + sigs
            sk.minhash = np.concatenate(parts) if parts else np.zeros((0, mh_cfg.num_perm), np.uint32)
        if mh_cfg.verify == "exact":
            sk.sh_indptr, sk.sh_hashes = _concat_csr(sh_ptrs, sh_vals)
    return sk


_SENTINEL = object()


def _concat_csr(ptrs: list, vals: list) -> tuple[np.ndarray, np.ndarray]:
    if not ptrs:
        return np.zeros(1, np.int64), np.zeros(0, np.uint64)
    sizes = np.concatenate([np.diff(p) for p in ptrs])
    indptr = np.zeros(sizes.size + 1, dtype=np.int64)
    np.cumsum(sizes, out=indptr[1:])
    return indptr, np.concatenate(vals)


def sketch_vectors(vectors, n: int, config: BuildConfig, timings: dict) -> tuple[np.ndarray, np.ndarray]:
    """Validate, normalize and SimHash the vectors. Returns (signatures, normalized vectors)."""
    from ..simhash import normalize_vectors, simhash_vectors

    t0 = time.perf_counter()
    vecs = normalize_vectors(vectors)
    if vecs.shape[0] != n:
        raise InputError(
            f"`vectors` must have one row per document ({n}); got {vecs.shape[0]} rows. "
            "Pass vectors aligned with texts/ids."
        )
    sc = config.simhash
    sigs = simhash_vectors(vecs, seed=config.seed, bits=sc.bits, families=sc.families, normalized=True)
    timings["simhash"] = timings.get("simhash", 0.0) + time.perf_counter() - t0
    return sigs, vecs


# --------------------------------------------------------------------------------------------
# linking


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
    from .._kernels.lsh import link_scan

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
    from .._kernels.lsh import link_pairs_accept, link_pairs_exact_rows
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
    from .._kernels import lsh as kl
    from ..minhash import mixed_seed

    stats = LinkStats()
    has_text = sk.minhash is not None or config.exact or sk.text_simhash is not None
    text_ok = ~sk.empty
    seed_h = mixed_seed(config.seed ^ 0x6C7368)  # "lsh"

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
        kl.fill_simhash_band_keys(fps2, docs, 64, starts, np.uint64(seed_h ^ np.uint64(0x545348)), keys)
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
        kl.fill_simhash_band_keys(sk.simhash, docs, sc.bits, starts, np.uint64(seed_h ^ np.uint64(0x53494D)), keys)
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


def representatives(cluster_ids: np.ndarray, rule: str, lengths: np.ndarray, keys: Optional[np.ndarray]) -> np.ndarray:
    """Boolean mask: one representative per cluster.

    - ``longest``: the longest normalized text; ties go to the first seen (lowest index)
    - ``first``: the first seen
    - ``key``: the largest user key; ties go to the first seen
    """
    n = cluster_ids.size
    idx = np.arange(n)
    if rule == "first":
        order = np.lexsort((idx, cluster_ids))
    elif rule == "longest":
        order = np.lexsort((idx, -lengths.astype(np.int64), cluster_ids))
    else:
        order = np.lexsort((idx, -keys, cluster_ids))
    c = cluster_ids[order]
    first = np.ones(n, dtype=bool)
    first[1:] = c[1:] != c[:-1]
    mask = np.zeros(n, dtype=bool)
    mask[order[first]] = True
    return mask
