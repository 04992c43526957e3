"""Linking: LSH band keys -> candidate pairs -> verification -> union-find edges.

Stages run cheap first: the exact-hash stage, MinHash bands (Jaccard), text SimHash bands, vector
SimHash bands. Every candidate is verified (estimate, exact, or exact for the borderline band of
``verify="auto"``) before it joins two components; clusters are the connected components of the
union of verified edges from every stage.

The pieces both engines use: :func:`make_verifier` (how a stage verifies a pair),
:func:`scan_buckets` (the bounded, resumable bucket scan), :func:`shingle_rows` and :func:`link_exact` (the exact check of
borderline pairs).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple, Optional, Union

import numpy as np

from ..config import BuildConfig, MinHashConfig, SimHashConfig
from ..hashing import SALT_LSH_SIMHASH, SALT_LSH_TEXT_SIMHASH, lsh_seed
from ..sketches.batch import Sketches
from ..stages import STAGE_EXACT, STAGE_MINHASH, STAGE_SIMHASH, STAGE_TEXT_SIMHASH
from ..staging import agreement_band
from .bands import (
    LSHParams,
    band_starts,
    fixed_params,
    hamming_radius,
    optimal_params,
    pigeonhole_params,
    simhash_bit_similarity,
)

if TYPE_CHECKING:  # the kernels' records; imported lazily at run time (they load numba)
    from .._kernels.linking import Buckets, Forest, ShingleRows, Verifier
    from .._spill import Spill

__all__ = [
    "LinkStats",
    "link",
    "minhash_params",
    "simhash_params",
    "decide_deferred",
    "make_forest",
    "make_verifier",
    "sorted_buckets",
    "scan_buckets",
    "shingle_rows",
    "compact_rows",
    "link_exact",
    "minhash_band_keys",
    "minhash_band_rows",
    "band_by_band",
    "spilled_bands",
    "text_simhash_band_keys",
    "simhash_band_starts",
    "simhash_band_keys",
]

#: documents whose band keys a spilled build makes at a time (their signatures: 32 MB)
_SPILL_BLOCK = 65536
_DEFER_CAPACITY = 1 << 16  # borderline pairs buffered before the scan pauses for exact checks
#: borderline pairs checked per batch of re-shingled documents (~4,000 documents: with the next batch
#: read ahead, two batches of texts, encodings and sets are held during the scan, ~100 MB at 1M)
_EXACT_BATCH = 2048


@dataclass
class LinkStats:
    """Counts per stage (see :class:`diversify.engines.finish.BuildStats` for what each counts)."""

    candidates: dict = field(default_factory=dict)  # stage -> candidate pairs the buckets proposed
    verified: dict = field(default_factory=dict)  # stage -> checks run: the scan's plus the exact re-checks
    merged: dict = field(default_factory=dict)  # stage -> edges that merged two components
    lsh: dict = field(default_factory=dict)  # stage -> chosen params
    exact_checks: dict = field(default_factory=dict)  # stage -> borderline pairs checked exactly
    #: stage -> exact Jaccard re-checks run on borderline pairs and counted in ``verified`` (the
    #: local engine counts them there; absent: none counted there)
    rechecked: dict = field(default_factory=dict)


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


# ----------------------------------------------------------------------------- kernel records


def make_forest(parent: np.ndarray, flags: np.ndarray, stage_bit: int) -> Forest:
    """The forest a stage joins into, with fresh counters [candidates, verifications, merges]."""
    from .._kernels.linking import Forest

    return Forest(parent, flags, np.uint8(stage_bit), np.zeros(3, dtype=np.int64))


def make_verifier(kind: int, cfg: BuildConfig, *, auto: bool, minhash: Optional[np.ndarray] = None,
                  shingles: Optional[ShingleRows] = None, simhash: Optional[np.ndarray] = None,
                  vectors: Optional[np.ndarray] = None, max_hamming: Optional[int] = None) -> Verifier:
    """How a stage verifies its candidate pairs (``kind`` = ``KIND_*`` of :mod:`._kernels.linking`).

    Thresholds come from ``cfg``; ``auto`` says whether borderline MinHash pairs can be checked
    exactly (the texts are at hand), which widens the agreement band of ``verify="auto"``.
    ``max_hamming`` overrides the radius derived from the SimHash threshold. Arrays a kind does not
    read may be omitted. Every document's signature is its own row of ``minhash`` (a spilled build
    replaces ``minhash`` and ``sig_rows`` with the rows it holds: :class:`diversify._spill.HeldRows`).
    """
    from .._kernels.linking import ShingleRows, Verifier

    agree_lo = agree_hi = 0
    jaccard_t = cosine_t = 0.0
    radius = 0
    if cfg.minhash is not None:
        agree_lo, agree_hi = agreement_band(cfg, auto=auto)
        jaccard_t = cfg.minhash.threshold
    if cfg.simhash is not None:
        radius = hamming_radius(cfg.simhash.threshold, cfg.simhash.bits * cfg.simhash.families)
        cosine_t = cfg.simhash.threshold - 1e-12
    if max_hamming is not None:
        radius = max_hamming
    if shingles is None:
        shingles = ShingleRows(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.uint64))
    return Verifier(
        kind=int(kind),
        minhash=minhash if minhash is not None else np.zeros((1, 1), np.uint32),
        sig_rows=np.zeros(0, np.int64),
        agree_lo=int(agree_lo),
        agree_hi=int(agree_hi),
        shingles=shingles,
        jaccard_threshold=float(jaccard_t),
        simhash=simhash if simhash is not None else np.zeros((1, 1), np.uint64),
        max_hamming=int(radius),
        vectors=vectors if vectors is not None else np.zeros((1, 1), np.float64),
        cosine_threshold=float(cosine_t),
    )


def stable_argsort(keys: np.ndarray) -> np.ndarray:
    """``np.argsort(keys, kind="stable")`` as int64 (see :func:`sort_keys`)."""
    return sort_keys(keys, with_sorted=False)[0]


def sort_keys(keys: np.ndarray, *, with_sorted: bool = True) -> tuple[np.ndarray, Optional[np.ndarray]]:
    """``np.argsort(keys, kind="stable")`` as int64, and ``keys`` in that order (if ``with_sorted``);
    hash keys (uint64) by two bucket passes (:func:`diversify._kernels.linking.argsort_hashes`), the
    same permutation, ~15x faster, the sorted keys written on the way."""
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
    else:
        perm = np.lexsort((np.repeat(order_by, stride), flat)).astype(np.int64)
        ordered = flat[perm]
    assert ordered is not None
    return Buckets(perm, ordered, docs, int(stride), int(window), int(new_start))


class Part(NamedTuple):
    """Buckets scanned with a verifier of their own (a spilled build's: the signatures it holds
    for them); ``band_done``: the last part of a band (the progress bar counts bands)."""

    buckets: Buckets
    verifier: Verifier
    band_done: bool


def scan_buckets(buckets: Union[Buckets, Iterable[Union[Buckets, Part]]], verifier: Verifier, forest: Forest, *,
                 on_borderline: Optional[Callable[[np.ndarray], None]] = None,
                 capacity: int = _DEFER_CAPACITY) -> None:
    """Verify and join the candidate pairs of every bucket, handing borderline pairs out.

    ``buckets`` may be one :class:`Buckets` or several scanned one after the other (e.g. one per
    band, made as they are needed: only one is held at a time); a :class:`Part` brings the
    verifier its buckets are scanned with. Borderline pairs are buffered
    across them; when the buffer (``capacity`` pairs) fills, the scan pauses, ``on_borderline``
    gets a copy of the buffered pairs (int64 (m, 2)), and the scan resumes where it stopped:
    memory stays bounded and every borderline pair reaches ``on_borderline`` whatever the buffer
    size. Without ``on_borderline`` a pair that finds the buffer full is decided by the
    estimate's midpoint.
    """
    from .._kernels.linking import Borderline, Buckets, link_scan

    borderline = Borderline(np.empty((max(1, capacity), 2), dtype=np.int64), np.zeros(1, dtype=np.int64),
                            np.array([0, -1, -1], dtype=np.int64))

    def hand_out() -> None:
        n = int(borderline.n_pairs[0])
        if n and on_borderline is not None:
            on_borderline(borderline.pairs[:n].copy())
            borderline.n_pairs[0] = 0

    for part in ([buckets] if isinstance(buckets, Buckets) else buckets):
        bk, v = (part.buckets, part.verifier) if isinstance(part, Part) else (part, verifier)
        borderline.position[:] = (0, -1, -1)
        while not link_scan(bk, v, forest, borderline, on_borderline is not None):
            hand_out()  # the buffer is full: the scan paused and resumes where it stopped
    hand_out()


# ----------------------------------------------------------------------------- borderline pairs


def shingle_rows(texts: Sequence[str], cfg: BuildConfig) -> ShingleRows:
    """Sorted unique shingles of ``texts``, one row each (the input of the exact Jaccard check)."""
    from .._kernels.linking import ShingleRows
    from ..text import sorted_unique_shingles

    return ShingleRows(*sorted_unique_shingles(texts, cfg.text, cfg.seed))


def compact_rows(rows: ShingleRows) -> ShingleRows:
    """The same rows without gaps between them (CSR order), e.g. to send them elsewhere."""
    from .._kernels.linking import ShingleRows

    starts = np.zeros(rows.counts.size, dtype=np.int64)
    np.cumsum(rows.counts[:-1], out=starts[1:])
    src = np.repeat(rows.starts - starts, rows.counts) + np.arange(int(rows.counts.sum()), dtype=np.int64)
    return ShingleRows(starts, rows.counts.astype(np.int64), rows.hashes[src])


def link_exact(pairs: np.ndarray, rows: np.ndarray, shingles: ShingleRows, cfg: BuildConfig, forest: Forest,
               known: Optional[np.ndarray] = None) -> np.ndarray:
    """Join the document pairs ``pairs`` (int64 (m, 2)) whose exact Jaccard reaches the threshold.

    ``rows`` (int64 (m, 2)) are the rows of the two documents in ``shingles``. ``known`` (float64
    (m,), optional): a pair's exact Jaccard where it was computed before (>= 0; its rows are then
    not read), else -1.0. Pairs already in one component are skipped; ``forest.counters[1]``
    counts the checks made, known or computed. Returns each pair's exact Jaccard (float64 (m,)),
    -1.0 for a skipped pair.
    """
    from .._kernels.linking import link_pairs_exact

    jaccard = np.empty(pairs.shape[0], dtype=np.float64)
    if known is None:
        known = np.full(pairs.shape[0], -1.0)
    link_pairs_exact(np.ascontiguousarray(pairs), np.ascontiguousarray(rows, dtype=np.int64), shingles,
                     _minhash_config(cfg).threshold, forest, np.ascontiguousarray(known, dtype=np.float64), jaccard)
    return jaccard


def decide_deferred(pairs: np.ndarray, sk: Sketches, cfg: BuildConfig, parent: np.ndarray, flags: np.ndarray,
                    counters: np.ndarray) -> int:
    """Exact Jaccard for borderline pairs whose texts are at hand; the estimate decides the rest."""
    from .._kernels.linking import Forest, ShingleRows, link_pairs_accept
    from ..sketches.batch import reshingled

    if pairs.size == 0:
        return 0
    forest = Forest(parent, flags, np.uint8(STAGE_MINHASH), counters)
    # a borderline pair is deferred once per band it shares; check it once
    pairs = np.unique(np.sort(pairs, axis=1), axis=0)
    if sk.sets32 is not None:  # the live index: every document's (32-bit) shingle set is at hand
        from .._kernels.linking import ShingleRows

        assert sk.sets32_indptr is not None
        ptr = sk.sets32_indptr
        rows = ShingleRows(ptr[:-1].copy(), np.diff(ptr), sk.sets32.astype(np.uint64))
        link_exact(np.ascontiguousarray(pairs), np.ascontiguousarray(pairs), rows, cfg, forest)
        return int(pairs.shape[0])
    off = sk.text_offset
    texts = sk.texts
    have = (pairs >= off).all(axis=1) if texts is not None else np.zeros(len(pairs), bool)
    exact_pairs = pairs[have]
    known = known_jaccard_of(sk, exact_pairs)
    # in batches, so that only a bounded number of documents is re-shingled at a time (the next
    # batch's texts are read while this one is shingled and checked); a document is re-shingled
    # for the pairs whose Jaccard is not known yet
    batches = [(exact_pairs[lo : lo + _EXACT_BATCH], known[lo : lo + _EXACT_BATCH])
               for lo in range(0, exact_pairs.shape[0], _EXACT_BATCH)]
    split = [_batch_rows(batch, kn) for batch, kn in batches]
    for (batch, kn), (_, pair_rows), sets in zip(batches, split, reshingled(sk, (docs.tolist() for docs, _ in split), cfg)):
        jaccard = link_exact(batch, pair_rows, ShingleRows(*sets), cfg, forest, known=kn)
        new = kn < 0
        sk.remember_jaccard(batch[new], jaccard[new])
    rest = pairs[~have]
    if rest.size:
        assert sk.minhash is not None, "borderline pairs come from the MinHash stage"
        lo, hi = agreement_band(cfg, auto=True)
        agree = (sk.minhash[rest[:, 0]] == sk.minhash[rest[:, 1]]).sum(axis=1)
        ok = rest[2 * agree >= lo + hi]
        if ok.size:
            link_pairs_accept(np.ascontiguousarray(ok), forest)
    return int(exact_pairs.shape[0])


def known_jaccard_of(sk: Sketches, pairs: np.ndarray) -> np.ndarray:
    """The exact Jaccard of each pair (int64 (m, 2)) where an earlier exact check of this build
    computed it (:meth:`Sketches.remember_jaccard`), else -1.0. A scan hands its borderline pairs
    out in several calls, and a pair that shares several bands may come again in a later call: at
    1M generated documents 26,258 of the 108,821 pairs checked, whose 50,683 documents no other
    pair of their call needed. The same sets give the same value; only the re-shingling is saved."""
    out = np.full(pairs.shape[0], -1.0)
    keys, vals = sk.known_jaccard()
    if keys.size and pairs.size:
        want = sk.pair_keys(pairs[:, 0], pairs[:, 1])
        at = np.minimum(np.searchsorted(keys, want), keys.size - 1)
        hit = keys[at] == want
        out[hit] = vals[at[hit]]
    return out


def _batch_rows(batch: np.ndarray, known: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the documents to re-shingle for ``batch``: those of its pairs whose Jaccard is not
    ``known``, sorted; each pair's two rows among them, 0 for a known pair, whose rows the check
    does not read)."""
    need = known < 0
    docs, inv = np.unique(batch[need], return_inverse=True)
    rows = np.zeros(batch.shape, dtype=np.int64)
    rows[need] = inv.reshape(-1, 2)
    return docs, rows


# ----------------------------------------------------------------------------- the stages


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


def link(sk: Sketches, config: BuildConfig, parent: np.ndarray, flags: np.ndarray, *, new_start: int = 0,
         timings: dict, progress: bool = False) -> LinkStats:
    """Run every enabled stage, cheap first, updating the union-find forest ``parent``; ``progress``:
    a bar on stderr while the MinHash stage scans its bands."""
    stats = LinkStats()
    has_text = sk.minhash is not None or config.exact or sk.text_simhash is not None
    text_ok = ~sk.empty
    stages = []
    if config.exact and text_ok.any():
        stages.append(("exact", _exact_stage, np.flatnonzero(text_ok).astype(np.int64)))
    if has_text:
        # with the exact stage on, one document per exact group is enough for LSH (the others are
        # already joined to it); with it off, every document must enter LSH
        lsh_mask = _first_of_exact(sk.exact, text_ok) if config.exact else text_ok
        lsh_docs = np.flatnonzero(lsh_mask).astype(np.int64)
        if config.minhash is not None and sk.minhash is not None and lsh_docs.size:
            stages.append(("lsh_minhash", functools.partial(_minhash_stage, progress=progress), lsh_docs))
        if config.text_simhash is not None and sk.text_simhash is not None and lsh_docs.size:
            stages.append(("lsh_text_simhash", _text_simhash_stage, lsh_docs))
    if config.simhash is not None and sk.simhash is not None:
        stages.append(("lsh_simhash", _simhash_stage, np.arange(sk.n, dtype=np.int64)))
    for timing, stage, docs in stages:
        t0 = time.perf_counter()
        stage(sk, config, docs, parent, flags, new_start, stats)
        timings[timing] = timings.get(timing, 0.0) + time.perf_counter() - t0
    return stats


def _exact_stage(sk: Sketches, config: BuildConfig, docs: np.ndarray, parent: np.ndarray, flags: np.ndarray,
                 new_start: int, stats: LinkStats) -> None:
    from .._kernels.linking import KIND_ACCEPT

    forest = make_forest(parent, flags, STAGE_EXACT)
    # window=2 chains each run of equal hashes: m identical documents cost m-1 unions
    buckets = sorted_buckets(sk.exact[docs], docs, window=2, new_start=new_start)
    scan_buckets(buckets, make_verifier(KIND_ACCEPT, config, auto=False), forest)
    _record(stats, "exact", forest.counters)


def _minhash_stage(sk: Sketches, config: BuildConfig, docs: np.ndarray, parent: np.ndarray, flags: np.ndarray,
                   new_start: int, stats: LinkStats, *, progress: bool = False) -> None:
    from .._kernels import linking as kl

    assert sk.minhash is not None
    mc = _minhash_config(config)
    p = minhash_params(config)
    kind = kl.KIND_MINHASH_EXACT if mc.verify == "exact" else kl.KIND_MINHASH_ESTIMATE
    shingles = None
    if sk.sets32 is not None and sk.sets32_indptr is not None:  # the live index's stored sets
        shingles = kl.ShingleRows(sk.sets32_indptr[:-1].copy(), np.diff(sk.sets32_indptr), sk.sets32.astype(np.uint64))
    elif sk.shingle_indptr is not None and sk.shingle_hashes is not None:
        shingles = kl.ShingleRows(sk.shingle_indptr[:-1], np.diff(sk.shingle_indptr), sk.shingle_hashes)
    verifier = make_verifier(kind, config, auto=sk.texts is not None or sk.sets32 is not None, minhash=sk.minhash,
                             shingles=shingles)
    forest = make_forest(parent, flags, STAGE_MINHASH)
    n_exact = n_rechecked = 0

    def on_borderline(pairs: np.ndarray) -> None:
        nonlocal n_exact, n_rechecked
        before = int(forest.counters[1])  # the exact checks are the only verifications decide_deferred counts
        n_exact += decide_deferred(pairs, sk, config, parent, flags, forest.counters)
        n_rechecked += int(forest.counters[1]) - before

    parts: Iterator[Union[Buckets, Part]]
    if sk.spill is None:
        parts = band_by_band(sk.minhash, docs, config, new_start)
    else:  # signatures on disk: only those of the documents the scan compares are read back, in bounded groups
        parts = spilled_bands(sk.minhash, docs, config, new_start, sk.spill, parent, verifier)
    scan_buckets(_counted(parts, p.bands, "linking", progress), verifier, forest, on_borderline=on_borderline)
    _record(stats, "minhash", forest.counters)
    stats.exact_checks["minhash"] = n_exact
    stats.rechecked["minhash"] = n_rechecked
    stats.lsh["minhash"] = p.as_dict()


def _counted(parts: Iterator, total: int, desc: str, progress: bool) -> Iterator:
    """``parts``, with a progress bar of ``total`` bands on stderr when ``progress``: a large
    build's linking takes seconds (at 1M documents 2-5 s) after the sketching bar has gone."""
    from ..sketches.batch import progress_bar

    bar = progress_bar(total, desc, progress, unit="band")
    try:
        for part in parts:
            yield part
            if bar is not None and (not isinstance(part, Part) or part.band_done):
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()


def _text_simhash_stage(sk: Sketches, config: BuildConfig, docs: np.ndarray, parent: np.ndarray, flags: np.ndarray,
                        new_start: int, stats: LinkStats) -> None:
    from .._kernels import linking as kl

    assert sk.text_simhash is not None and config.text_simhash is not None
    radius = config.text_simhash.max_hamming
    fps = np.ascontiguousarray(sk.text_simhash.reshape(-1, 1))
    verifier = make_verifier(kl.KIND_SIMHASH_ESTIMATE, config, auto=False, simhash=fps, max_hamming=radius)
    forest = make_forest(parent, flags, STAGE_TEXT_SIMHASH)
    buckets = sorted_buckets(text_simhash_band_keys(sk.text_simhash, docs, config), docs,
                             window=config.bucket_window, new_start=new_start)
    scan_buckets(buckets, verifier, forest)
    _record(stats, "text_simhash", forest.counters)
    stats.lsh["text_simhash"] = {"bands": radius + 1, "rows": 64 // (radius + 1), "recall_at_threshold": 1.0,
                                 "method": "pigeonhole", "max_hamming": radius}


def _simhash_stage(sk: Sketches, config: BuildConfig, docs: np.ndarray, parent: np.ndarray, flags: np.ndarray,
                   new_start: int, stats: LinkStats) -> None:
    from .._kernels import linking as kl

    assert sk.simhash is not None
    sc = _simhash_config(config)
    p = simhash_params(config)
    starts = simhash_band_starts(config)
    keys = simhash_band_keys(sk.simhash, docs, config)
    kind = kl.KIND_SIMHASH_EXACT if sc.verify == "exact" else kl.KIND_SIMHASH_ESTIMATE
    verifier = make_verifier(kind, config, auto=False, simhash=sk.simhash, vectors=sk.vectors)
    forest = make_forest(parent, flags, STAGE_SIMHASH)
    buckets = sorted_buckets(keys, docs, window=config.bucket_window, new_start=new_start,
                             order_by=sk.simhash[docs, 0])
    scan_buckets(buckets, verifier, forest)
    _record(stats, "simhash", forest.counters)
    d = p.as_dict()
    d["families"] = sc.families
    # a pair is a candidate when any family's bands collide: the recall actually used
    d["recall_per_family"] = d["recall_at_threshold"]
    d["recall_at_threshold"] = float(1.0 - (1.0 - float(d["recall_per_family"])) ** int(sc.families))  # C pow
    d["band_widths"] = sorted(set(np.diff(starts).tolist()))
    d["hamming_radius"] = hamming_radius(sc.threshold, sc.bits)
    stats.lsh["simhash"] = d


# ----------------------------------------------------------------------------- band keys


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


def spilled_bands(minhash: np.ndarray, docs: np.ndarray, config: BuildConfig, new_start: int, spill: Spill,
                  parent: np.ndarray, verifier: Verifier) -> Iterator[Part]:
    """:func:`band_by_band` for signatures kept on disk (``build(spill_dir=...)``): the buckets,
    band by band, each part with a verifier holding the signatures its pairs need.

    The keys go to one file per band, made from the signatures a block of documents at a time.
    Each band is then sorted on its own, and only its buckets of two or more keys (those that can
    make a pair) are written back, as (key, document) in scan order (at 1M documents 1.8M of the
    16M keys). Held at once: one band's keys and their sort (24 bytes a document), never the
    signatures of every document. The scan's pairs and their order are those of
    :func:`band_by_band`: a bucket of one key makes no pair.

    The signatures are then read back for the scan a group of bands at a time (:func:`_held_groups`):
    at most :data:`diversify._spill.HELD_BYTES` of them, only those of documents a pair still
    compares. ``parent`` is the forest the scan joins (read, to leave out documents already joined
    to every partner); ``verifier`` the scan's, given each group's rows.
    """
    from .._kernels.linking import Buckets
    from .._spill import row_blocks

    bands = minhash_params(config).bands
    key_files = [spill.new_file() for _ in range(bands)]
    at = 0  # docs are sorted: each block of signatures holds the next run of them
    for lo, sigs in row_blocks(minhash, _SPILL_BLOCK):
        end = int(np.searchsorted(docs, lo + sigs.shape[0], side="left"))
        if end > at:
            block = minhash_band_rows(sigs, docs[at:end] - lo, config)
            for band, f in enumerate(key_files):
                spill.append(f, block[band])
            at = end
    shared_files = []
    # the documents the scan may compare (in a shared bucket), and those already joined to another
    # (the exact stage's): the fold check's members are among them unless a later stage joins more
    keep = parent != np.arange(parent.size, dtype=parent.dtype)
    keep[parent[keep]] = True
    for f in key_files:
        perm, ordered = sort_keys(spill.read(f, np.uint64))
        assert ordered is not None
        same = ordered[1:] == ordered[:-1]
        shared = np.zeros(ordered.size, dtype=bool)
        shared[1:] |= same
        shared[:-1] |= same
        g = spill.new_file()
        held = docs[perm[shared]]
        spill.append(g, ordered[shared])
        spill.append(g, held.view(np.uint64))
        shared_files.append(g)
        keep[held] = True
        del perm, ordered, same, shared, held

    def buckets_of(b: int) -> Buckets:
        both = spill.read(shared_files[b], np.uint64)
        k = both.size // 2
        return Buckets(np.arange(k, dtype=np.int64), both[:k], both[k:].view(np.int64), 1,
                       int(config.bucket_window), int(new_start))

    return _held_groups(minhash, buckets_of, len(shared_files), parent, verifier, spill, np.flatnonzero(keep))


def _held_groups(minhash: np.ndarray, buckets_of: Callable[[int], Buckets], bands: int, parent: np.ndarray,
                 verifier: Verifier, spill: Optional[Spill] = None, keep: Optional[np.ndarray] = None
                 ) -> Iterator[Part]:
    """The parts of :func:`spilled_bands`: bands taken in order into a group while the documents
    their pairs compare fit :data:`diversify._spill.HELD_BYTES` of signatures (a band that alone
    does not is cut between buckets; a bucket that alone does not is a group of its own), those
    signatures read in one pass, the group's parts scanned, the next group formed.

    Which documents a group needs is decided before it is scanned, from the forest as it stands
    (:func:`diversify._kernels.linking.mark_apart`): the scan only ever joins, so it cannot compare
    a pair whose documents were already one component then. The later bands mostly meet pairs
    the earlier ones joined: at 1M generated documents every band's buckets held ~112,000
    documents, 318,000 over all bands, and four groups of 112,000, 115,000, 129,000 and 28,000
    held what bands 1, 2-4, 5-14 and 15-16 compared.
    """
    from .. import _spill
    from .._kernels.linking import Buckets, mark_apart

    held = _spill.HeldRows(minhash, spill)
    budget = held.budget
    mark = np.zeros(minhash.shape[0], dtype=bool)
    # (band, its buckets once read, the first key not yet scanned)
    pending: list[tuple[int, Optional[Buckets], int]] = [(b, None, 0) for b in range(bands)]
    while pending:
        group: list[tuple[Buckets, int, int]] = []
        total = 0
        while pending:
            b, bk, lo = pending[0]
            if bk is None:
                bk = buckets_of(b)
            size = bk.keys.size
            before = mark.copy()
            gain = np.zeros(size, dtype=np.int64)
            k = int(mark_apart(bk, lo, size, parent, mark, gain))
            if total + k <= budget:
                group.append((bk, lo, size))
                total += k
                pending.pop(0)
                continue
            mark[:] = before
            if group:  # left for the next group, decided again from the forest as it will be then
                pending[0] = (b, bk, lo)
                break
            # alone it needs more than the budget: its buckets up to the budget (at least one)
            starts = lo + np.flatnonzero(np.r_[True, bk.keys[lo + 1: size] != bk.keys[lo: size - 1]])
            upto = np.cumsum(gain[starts])  # documents needed through each bucket
            ends = np.r_[starts[1:], size]
            e = int(ends[max(0, int(np.searchsorted(upto, budget, side="right")) - 1)])
            total = int(mark_apart(bk, lo, e, parent, mark, gain))
            group.append((bk, lo, e))
            pending[0] = (b, bk, e)
            break
        rows = np.flatnonzero(mark)
        # the first pass keeps the rows of every document a group may compare in a file of their own
        v = verifier._replace(minhash=held.hold(rows, keep), sig_rows=held.sig_rows)
        keep = None
        for bk, lo, hi in group:
            yield Part(Buckets(bk.perm[lo:hi], bk.keys[lo:hi], bk.docs, bk.stride, bk.window, bk.new_start), v,
                       hi == bk.keys.size)
        mark[rows] = False
        del group
    held.release()


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


def _record(stats: LinkStats, name: str, counters: np.ndarray) -> None:
    stats.candidates[name] = int(counters[0])
    stats.verified[name] = int(counters[1])
    stats.merged[name] = int(counters[2])
