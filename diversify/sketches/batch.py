"""Sketching: from documents to the per-document state every linking stage needs.

Texts are encoded in chunks into one UTF-8 buffer and offsets, then shingled and MinHashed by the
kernels (one fused pass when the config allows it); vectors are validated, normalized and
SimHashed. The result, :class:`Sketches`, is what the local and Dask engines link and what ``add``
keeps in the artifact.
"""

from __future__ import annotations

import itertools
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..config import BuildConfig
from ..errors import InputError
from ..text import encode_batch, shingle_buffer, sketch_oph_buffer, text_simhash_buffer

__all__ = ["Sketches", "sketch_texts", "sketch_vectors", "unique_shingles", "chunks", "progress_bar"]


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
    keys: Optional[np.ndarray] = None  # float64 (n,) or (n, m) representative keys
    doc_threshold: Optional[np.ndarray] = None  # float64 (n,) Jaccard threshold of each document's source
    has_text: bool = True  # False for a vectors-only build
    texts: Optional[Sequence] = None  # random-access texts of documents text_offset.. (for verify="auto")
    text_offset: int = 0

    @property
    def n(self) -> int:
        return len(self.ids)


def chunks(iterable: Iterable, size: int) -> Iterator[list]:
    """Lists of up to ``size`` consecutive items of ``iterable``."""
    it = iter(iterable)
    while True:
        block = list(itertools.islice(it, size))
        if not block:
            return
        yield block


def progress_bar(total: Optional[int], desc: str, enabled: bool):
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover - tqdm is a dependency
        return None
    return tqdm(total=total, desc=desc, unit="doc", unit_scale=True, file=sys.stderr, leave=False)


def unique_shingles(sh) -> tuple[np.ndarray, np.ndarray]:
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
    from .minhash import minhash_signatures

    mh_cfg = config.minhash
    n_hint = len(texts) if hasattr(texts, "__len__") else None
    id_iter = iter(ids) if ids is not None else None
    all_ids: list = []
    lengths, exact, empty, sigs, sh_ptrs, sh_vals, fps = [], [], [], [], [], [], []
    bar = progress_bar(n_hint, "sketching", progress)
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
            fp = text_simhash_buffer(buf, offsets)
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
                csr = unique_shingles(sh)
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
    from .simhash import normalize_vectors, simhash_vectors

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
