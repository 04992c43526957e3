"""Linking: LSH band keys -> candidate pairs -> verification -> union-find edges.

Stages run cheap first: the exact-hash stage, MinHash bands (Jaccard), text SimHash bands, vector
SimHash bands. Every candidate is verified (estimate, exact, or exact for the borderline band of
``verify="auto"``) before it joins two components; clusters are the connected components of the
union of verified edges from every stage. :func:`link` returns what it made as a :class:`Linked`:
the forest, each document's stage bits, the counts and the exact-check memo.

The pieces both engines use: :func:`make_verifier` (how a stage verifies a pair) and
:func:`scan_buckets` (the bounded, resumable bucket scan); the band keys and buckets are in
:mod:`.keys`, the exact check of borderline pairs in :mod:`.exact`, a spilled build's bands in
:mod:`.spilled`.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple, Optional, Union

import numpy as np

from ..config import BuildConfig
from ..sketches.batch import Sketches
from ..sketches.memo import ExactMemo
from ..sketches.source import TextSource
from ..stages import STAGE_EXACT, STAGE_MINHASH, STAGE_SIMHASH, STAGE_TEXT_SIMHASH
from ..staging import agreement_band
from .bands import hamming_cutoff, hamming_radius
from .exact import decide_deferred
from .keys import (
    Part,
    _minhash_config,
    _simhash_config,
    band_by_band,
    minhash_params,
    simhash_band_keys,
    simhash_band_starts,
    simhash_params,
    sorted_buckets,
    text_simhash_band_keys,
)
from .spilled import spilled_bands

if TYPE_CHECKING:  # the kernels' records; imported lazily at run time (they load numba)
    from .._kernels.linking import Buckets, Forest, ShingleRows, Verifier

__all__ = ["LinkStats", "Linked", "link", "make_forest", "make_verifier", "scan_buckets"]

_DEFER_CAPACITY = 1 << 16  # borderline pairs buffered before the scan pauses for exact checks


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


class Linked(NamedTuple):
    """What :func:`link` returns: the union-find forest of the verified edges, each document's
    stage bits, the counts per stage, and the exact Jaccard of the pairs it checked from
    re-shingled texts (for the cut of components into clusters)."""

    parent: np.ndarray  # int64 (n,) union-find forest: component_roots(parent) are the components
    flags: np.ndarray  # uint8 (n,) the stages whose edges joined each document
    stats: LinkStats
    memo: ExactMemo


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
    ``max_hamming`` overrides the radius derived from the SimHash threshold (for the exact check
    of vectors: :func:`~.bands.hamming_cutoff`, beyond which a pair is rejected unchecked). Arrays a kind does not
    read may be omitted. Every document's signature is its own row of ``minhash`` (a spilled build
    replaces ``minhash`` and ``sig_rows`` with the rows it holds: :class:`diversify._spill.HeldRows`).
    """
    from .._kernels.linking import KIND_SIMHASH_EXACT, ShingleRows, Verifier

    agree_lo = agree_hi = 0
    jaccard_t = cosine_t = 0.0
    radius = 0
    if cfg.minhash is not None:
        agree_lo, agree_hi = agreement_band(cfg, auto=auto)
        jaccard_t = cfg.minhash.threshold
    if cfg.simhash is not None:
        radius = hamming_radius(cfg.simhash.threshold, cfg.simhash.bits * cfg.simhash.families)
        cosine_t = cfg.simhash.threshold - 1e-12
    if cfg.simhash is not None and kind == KIND_SIMHASH_EXACT:  # beyond this, no exact check is needed
        radius = hamming_cutoff(cfg.simhash.threshold, cfg.simhash.bits * cfg.simhash.families)
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


def link(sk: Sketches, config: BuildConfig, *, source: Optional[TextSource] = None, parent: Optional[np.ndarray] = None,
         flags: Optional[np.ndarray] = None, new_start: int = 0, timings: dict, progress: bool = False) -> Linked:
    """Run every enabled stage, cheap first, and return the forest they joined (:class:`Linked`).

    ``source``: the texts at hand (:class:`~diversify.sketches.source.TextSource`), from which the
    MinHash stage decides borderline pairs by exact Jaccard under ``verify="auto"``; None: the
    estimate decides them (or the stored shingle sets, ``sk.sets32``). ``parent`` and ``flags``:
    the forest and stage bits to start from (``add``: the artifact's components and stages; taken
    over, not copied), else every document on its own. ``progress``: a bar on stderr while the
    MinHash stage scans its bands."""
    out = Linked(parent if parent is not None else np.arange(sk.n, dtype=np.int64),
                 flags if flags is not None else np.zeros(sk.n, dtype=np.uint8), LinkStats(), ExactMemo(sk.n))
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
            stages.append(("lsh_minhash", functools.partial(_minhash_stage, source=source, progress=progress),
                           lsh_docs))
        if config.text_simhash is not None and sk.text_simhash is not None and lsh_docs.size:
            stages.append(("lsh_text_simhash", _text_simhash_stage, lsh_docs))
    if config.simhash is not None and sk.simhash is not None:
        stages.append(("lsh_simhash", _simhash_stage, np.arange(sk.n, dtype=np.int64)))
    for timing, stage, docs in stages:
        t0 = time.perf_counter()
        stage(sk, config, docs, out, new_start)
        timings[timing] = timings.get(timing, 0.0) + time.perf_counter() - t0
    return out


def _exact_stage(sk: Sketches, config: BuildConfig, docs: np.ndarray, out: Linked,
                 new_start: int) -> None:
    from .._kernels.linking import KIND_ACCEPT

    forest = make_forest(out.parent, out.flags, STAGE_EXACT)
    # window=2 chains each run of equal hashes: m identical documents cost m-1 unions
    buckets = sorted_buckets(sk.exact[docs], docs, window=2, new_start=new_start)
    scan_buckets(buckets, make_verifier(KIND_ACCEPT, config, auto=False), forest)
    _record(out.stats, "exact", forest.counters)


def _minhash_stage(sk: Sketches, config: BuildConfig, docs: np.ndarray, out: Linked,
                 new_start: int, *, source: Optional[TextSource], progress: bool = False) -> None:
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
    verifier = make_verifier(kind, config, auto=source is not None or sk.sets32 is not None, minhash=sk.minhash,
                             shingles=shingles)
    forest = make_forest(out.parent, out.flags, STAGE_MINHASH)
    n_exact = n_rechecked = 0

    def on_borderline(pairs: np.ndarray) -> None:
        nonlocal n_exact, n_rechecked
        before = int(forest.counters[1])  # the exact checks are the only verifications decide_deferred counts
        n_exact += decide_deferred(pairs, sk, config, forest, out.memo, source)
        n_rechecked += int(forest.counters[1]) - before

    parts: Iterator[Union[Buckets, Part]]
    if sk.spill is None:
        parts = band_by_band(sk.minhash, docs, config, new_start)
    else:  # signatures on disk: only those of the documents the scan compares are read back, in bounded groups
        parts = spilled_bands(sk.minhash, docs, config, new_start, sk.spill, out.parent, verifier)
    scan_buckets(_counted(parts, p.bands, "linking", progress), verifier, forest, on_borderline=on_borderline)
    _record(out.stats, "minhash", forest.counters)
    out.stats.exact_checks["minhash"] = n_exact
    out.stats.rechecked["minhash"] = n_rechecked
    out.stats.lsh["minhash"] = p.as_dict()


def _counted(parts: Iterator, total: int, desc: str, progress: bool) -> Iterator:
    """``parts``, with a progress bar of ``total`` bands on stderr when ``progress``: a large
    build's linking takes seconds after the sketching bar has gone."""
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


def _text_simhash_stage(sk: Sketches, config: BuildConfig, docs: np.ndarray, out: Linked,
                 new_start: int) -> None:
    from .._kernels import linking as kl

    assert sk.text_simhash is not None and config.text_simhash is not None
    radius = config.text_simhash.max_hamming
    fps = np.ascontiguousarray(sk.text_simhash.reshape(-1, 1))
    verifier = make_verifier(kl.KIND_SIMHASH_ESTIMATE, config, auto=False, simhash=fps, max_hamming=radius)
    forest = make_forest(out.parent, out.flags, STAGE_TEXT_SIMHASH)
    buckets = sorted_buckets(text_simhash_band_keys(sk.text_simhash, docs, config), docs,
                             window=config.bucket_window, new_start=new_start)
    scan_buckets(buckets, verifier, forest)
    _record(out.stats, "text_simhash", forest.counters)
    out.stats.lsh["text_simhash"] = {"bands": radius + 1, "rows": 64 // (radius + 1), "recall_at_threshold": 1.0,
                                 "method": "pigeonhole", "max_hamming": radius}


def _simhash_stage(sk: Sketches, config: BuildConfig, docs: np.ndarray, out: Linked,
                 new_start: int) -> None:
    from .._kernels import linking as kl

    assert sk.simhash is not None
    sc = _simhash_config(config)
    p = simhash_params(config)
    starts = simhash_band_starts(config)
    keys = simhash_band_keys(sk.simhash, docs, config)
    kind = kl.KIND_SIMHASH_EXACT if sc.verify == "exact" else kl.KIND_SIMHASH_ESTIMATE
    verifier = make_verifier(kind, config, auto=False, simhash=sk.simhash, vectors=sk.vectors)
    forest = make_forest(out.parent, out.flags, STAGE_SIMHASH)
    buckets = sorted_buckets(keys, docs, window=config.bucket_window, new_start=new_start,
                             order_by=sk.simhash[docs, 0])
    scan_buckets(buckets, verifier, forest)
    _record(out.stats, "simhash", forest.counters)
    d = p.as_dict()
    d["families"] = sc.families
    # a pair is a candidate when any family's bands collide: the recall actually used
    d["recall_per_family"] = d["recall_at_threshold"]
    d["recall_at_threshold"] = float(1.0 - (1.0 - float(d["recall_per_family"])) ** int(sc.families))  # C pow
    d["band_widths"] = sorted(set(np.diff(starts).tolist()))
    d["hamming_radius"] = hamming_radius(sc.threshold, sc.bits)
    out.stats.lsh["simhash"] = d



def _record(stats: LinkStats, name: str, counters: np.ndarray) -> None:
    stats.candidates[name] = int(counters[0])
    stats.verified[name] = int(counters[1])
    stats.merged[name] = int(counters[2])
