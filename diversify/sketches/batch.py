"""Sketching: from documents to the per-document state every linking stage needs.

Texts are encoded in chunks into one UTF-8 buffer and offsets, then shingled and MinHashed by the
kernels (one fused pass when the config allows it); vectors are validated, normalized and
SimHashed. The result, :class:`Sketched`, holds the :class:`Sketches` (what the local and Dask
engines link and what ``add`` keeps in the artifact) and, beside them, the texts at hand
(:class:`~diversify.sketches.source.TextSource`) that the exact checks re-shingle: the stages that
re-shingle take it as an argument of its own.
"""

from __future__ import annotations

import itertools
import operator
import sys
import time
from collections.abc import Iterable, Iterator, Sequence, Sized
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import NamedTuple, Optional

import numpy as np

from .._spill import Spill
from .._tuning import allocator_tuned
from ..config import BuildConfig
from ..errors import ConfigError, InputError
from ..ids import PackedIds
from ..text import (
    encode_batch_scripts,
    shingle_buffer,
    unique_shingles,
    unspaced_docs,
)
from .minhash import minhash_signatures, sketch_oph_buffer, sketch_oph_sets_buffer
from .simhash import text_simhash_buffer
from .source import EncodedTexts, TextSource

__all__ = ["Sketches", "Sketched", "sketch_texts", "sketch_vectors", "chunks", "progress_bar"]


@dataclass
class Sketches:
    """Per-document state the linking stages need (and that `add` keeps in the artifact)."""

    ids: list | PackedIds  # packed in a streamed build (build(spill_dir=...))
    lengths: np.ndarray  # uint32 (n,)
    exact: np.ndarray  # uint64 (n,)
    empty: np.ndarray  # bool (n,) no words (or no text)
    minhash: Optional[np.ndarray] = None  # uint32 (n, P)
    # each document's sorted distinct shingle hashes, CSR (verify="exact"): the artifact's
    # shingle_indptr / shingle_hashes
    shingle_indptr: Optional[np.ndarray] = None  # int64 (n+1,)
    shingle_hashes: Optional[np.ndarray] = None  # uint64 (nnz,)
    simhash: Optional[np.ndarray] = None  # uint64 (n, W)
    text_simhash: Optional[np.ndarray] = None  # uint64 (n,) Charikar fingerprints of the texts
    vectors: Optional[np.ndarray] = None  # float32/64 (n, d), L2-normalized
    keys: Optional[np.ndarray] = None  # float64 (n,) or (n, m) representative keys
    char_docs: Optional[np.ndarray] = None  # bool (n,) documents shingle="auto" shingled by character
    # each document's sorted distinct shingle hashes cut to their high 32 bits, CSR over ALL
    # documents (the live index stores them so that borderline pairs with stored documents are
    # decided by exact Jaccard; see diversify.index.payload)
    sets32_indptr: Optional[np.ndarray] = None  # int64 (n+1,)
    sets32: Optional[np.ndarray] = None  # uint32 (nnz,)
    has_text: bool = True  # False for a vectors-only build
    # where the signatures and the band keys are kept on disk (build(spill_dir=...)): ``minhash`` is
    # then a mapping of its file, which the stages read back in blocks (see diversify._spill)
    spill: Optional[Spill] = None

    @property
    def n(self) -> int:
        return len(self.ids)


class Sketched(NamedTuple):
    """What sketching returns: the documents' sketches, and the texts at hand for re-shingling
    (verify="auto"/"exact" checks; None unless a sequence of texts was given), which the linking's
    exact checks and the cut into clusters take as an argument."""

    sketches: Sketches
    source: Optional[TextSource]


def chunks(iterable: Iterable, size: int) -> Iterator[list]:
    """Lists of up to ``size`` consecutive items of ``iterable``."""
    it = iter(iterable)
    while True:
        block = list(itertools.islice(it, size))
        if not block:
            return
        yield block


def progress_bar(total: Optional[int], desc: str, enabled: bool, unit: str = "doc"):
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover - tqdm is a dependency
        return None
    return tqdm(total=total, desc=desc, unit=unit, unit_scale=unit == "doc", file=sys.stderr, leave=False)


def _add_seconds(timings: dict, key: str, seconds: float) -> None:
    timings[key] = timings.get(key, 0.0) + seconds


@dataclass
class _ChunkSketch:
    """What the kernels computed for one encoded chunk of documents."""

    lengths: np.ndarray  # uint32 (m,)
    exact: np.ndarray  # uint64 (m,)
    n_shingles: np.ndarray  # int64 (m,) shingles of each document, repeats included (0: empty)
    signatures: Optional[np.ndarray]  # uint32 (m, P) when MinHash is on
    unique_shingles: Optional[tuple[np.ndarray, np.ndarray]]  # CSR (indptr, hashes) for verify="exact"
    fingerprints: Optional[np.ndarray]  # uint64 (m,) when the text SimHash stage is on
    seconds_sketch: float
    seconds_signatures: float
    char_docs: Optional[np.ndarray] = None  # bool (m,) shingled by character under shingle="auto"
    sets32: Optional[tuple[np.ndarray, np.ndarray]] = None  # CSR (indptr, uint32 values), see Sketches.sets32


def _sketch_chunk(buf: np.ndarray, offsets: np.ndarray, config: BuildConfig, sets32: bool = False,
                  char_docs: Optional[np.ndarray] = None) -> _ChunkSketch:
    """Kernel work for one encoded chunk (runs in a worker thread; the kernels release the GIL).

    The fused kernel goes from bytes to signatures in one pass; other settings need the shingles.
    ``sets32``: also each document's 32-bit shingle set, from the same pass where the fused
    kernel runs (:class:`Sketches` ``.sets32``; left unset otherwise). ``char_docs``:
    :func:`unspaced_docs` of the chunk when the encoder counted it already.
    """

    t0 = time.perf_counter()
    # which documents shingle="auto" shingles by character: found once, for the kernels and the artifact
    if config.text.shingle != "auto":
        char_docs = None
    elif char_docs is None:
        char_docs = unspaced_docs(buf, offsets)
    chunk = _sketch_chunk_kernels(buf, offsets, config, t0, sets32, char_docs)
    chunk.char_docs = char_docs
    return chunk


def _sketch_chunk_kernels(buf: np.ndarray, offsets: np.ndarray, config: BuildConfig, t0: float,
                          sets32: bool, char_docs: Optional[np.ndarray]) -> _ChunkSketch:
    fingerprints = text_simhash_buffer(buf, offsets) if config.text_simhash is not None else None
    mh_cfg = config.minhash
    if mh_cfg is not None and mh_cfg.method == "oph" and mh_cfg.verify != "exact":
        sets: Optional[tuple[np.ndarray, np.ndarray]] = None
        if sets32:
            sigs, n_shingles, lengths, exact, *csr = sketch_oph_sets_buffer(buf, offsets, config.text, config.seed,
                                                                             mh_cfg.num_perm, char_docs)
            sets = (csr[0], csr[1])
        else:
            sigs, n_shingles, lengths, exact = sketch_oph_buffer(buf, offsets, config.text, config.seed,
                                                                 mh_cfg.num_perm, char_docs)
        return _ChunkSketch(lengths=lengths, exact=exact, n_shingles=n_shingles, signatures=sigs, unique_shingles=None,
                            fingerprints=fingerprints, seconds_sketch=time.perf_counter() - t0, seconds_signatures=0.0,
                            sets32=sets)
    shingles = shingle_buffer(buf, offsets, config.text, config.seed, char_docs)
    t1 = time.perf_counter()
    signatures: Optional[np.ndarray] = None
    unique: Optional[tuple[np.ndarray, np.ndarray]] = None
    if mh_cfg is not None:
        signatures = minhash_signatures(shingles, num_perm=mh_cfg.num_perm, method=mh_cfg.method, seed=config.seed)
        if mh_cfg.verify == "exact":
            unique = unique_shingles(shingles)
    return _ChunkSketch(lengths=shingles.lengths, exact=shingles.exact, n_shingles=np.diff(shingles.indptr),
                        signatures=signatures, unique_shingles=unique, fingerprints=fingerprints,
                        seconds_sketch=t1 - t0, seconds_signatures=time.perf_counter() - t1)


class _Gathered:
    """Chunk results in input order, concatenated into one :class:`Sketches` at the end.

    When the number of texts is known, signatures go straight into one preallocated array (no
    final copy); rows that do not fit (an iterable whose ``len`` was wrong) are kept aside.
    """

    def __init__(self, config: BuildConfig, n_hint: Optional[int], spill: Optional[Spill] = None):
        self.config = config
        self.spill = spill
        self.sig_file = spill.new_file() if spill is not None and config.minhash is not None else None
        self.lengths: list[np.ndarray] = []
        self.exact: list[np.ndarray] = []
        self.empty: list[np.ndarray] = []
        self.n_shingles: list[np.ndarray] = []
        self.fingerprints: list[np.ndarray] = []
        self.char_docs: list[np.ndarray] = []
        self.unique_indptrs: list[np.ndarray] = []
        self.unique_hashes: list[np.ndarray] = []
        self.sets32_indptrs: list[np.ndarray] = []
        self.sets32_values: list[np.ndarray] = []
        self.sig_rows = 0  # rows of sig_buf written, a prefix
        self.sig_parts: list[np.ndarray] = []  # signatures that did not fit sig_buf
        self.sig_buf: Optional[np.ndarray] = None
        if config.minhash is not None and n_hint is not None and self.sig_file is None:
            self.sig_buf = np.empty((n_hint, config.minhash.num_perm), dtype=np.uint32)
        self.seconds_sketch = 0.0
        self.seconds_signatures = 0.0

    def add(self, chunk: _ChunkSketch, start: int) -> None:
        """Keep the results of the chunk of documents ``start, start + 1, ...``."""
        if chunk.fingerprints is not None:
            self.fingerprints.append(chunk.fingerprints)
        self.lengths.append(chunk.lengths)
        self.exact.append(chunk.exact)
        self.empty.append(chunk.n_shingles == 0)
        self.n_shingles.append(np.minimum(chunk.n_shingles, np.iinfo(np.uint32).max).astype(np.uint32))
        if chunk.char_docs is not None:
            self.char_docs.append(chunk.char_docs)
        if chunk.unique_shingles is not None:
            self.unique_indptrs.append(chunk.unique_shingles[0])
            self.unique_hashes.append(chunk.unique_shingles[1])
        if chunk.sets32 is not None:
            self.sets32_indptrs.append(chunk.sets32[0])
            self.sets32_values.append(chunk.sets32[1])
        sigs = chunk.signatures
        if sigs is not None and self.sig_file is not None:
            assert self.spill is not None
            self.spill.append(self.sig_file, sigs)
            self.sig_rows = start + sigs.shape[0]
        elif sigs is not None:
            stop = start + sigs.shape[0]
            if self.sig_buf is not None and not self.sig_parts and stop <= self.sig_buf.shape[0]:
                self.sig_buf[start:stop] = sigs
                self.sig_rows = stop
            else:
                self.sig_parts.append(sigs)
        self.seconds_sketch += chunk.seconds_sketch
        self.seconds_signatures += chunk.seconds_signatures

    def sketches(self, ids: list | PackedIds, texts: Iterable, id_offset: int,
                 encoded: Optional[EncodedTexts]) -> Sketched:
        config = self.config
        sk = Sketches(
            ids=ids,
            spill=self.spill,
            lengths=np.concatenate(self.lengths) if self.lengths else np.zeros(0, np.uint32),
            exact=np.concatenate(self.exact) if self.exact else np.zeros(0, np.uint64),
            empty=np.concatenate(self.empty) if self.empty else np.zeros(0, bool),
        )
        source = None
        if isinstance(texts, Sequence) and not isinstance(texts, (str, bytes)):
            counts = np.concatenate(self.n_shingles) if self.n_shingles else np.zeros(0, np.uint32)
            source = TextSource(texts, id_offset, encoded, counts)
        if config.text_simhash is not None:
            sk.text_simhash = np.concatenate(self.fingerprints) if self.fingerprints else np.zeros(0, np.uint64)
        if config.minhash is not None:
            sk.minhash = self._signatures(config.minhash.num_perm)
            if config.minhash.verify == "exact":
                sk.shingle_indptr, sk.shingle_hashes = _concat_csr(self.unique_indptrs, self.unique_hashes)
        if self.char_docs:
            sk.char_docs = np.concatenate(self.char_docs)
        if self.sets32_indptrs:
            sk.sets32_indptr, sets = _concat_csr(self.sets32_indptrs, self.sets32_values)
            sk.sets32 = sets.astype(np.uint32, copy=False)
        return Sketched(sk, source)

    def _signatures(self, num_perm: int) -> np.ndarray:
        if self.sig_file is not None:
            assert self.spill is not None
            return self.spill.mapped(self.sig_file, np.uint32, (self.sig_rows, num_perm))
        if self.sig_buf is not None and not self.sig_parts:
            return self.sig_buf[: self.sig_rows]
        parts = ([self.sig_buf[: self.sig_rows]] if self.sig_buf is not None else []) + self.sig_parts
        self.sig_buf, self.sig_parts = None, []
        out = np.empty((sum(p.shape[0] for p in parts), num_perm), dtype=np.uint32)
        row = 0
        while parts:  # each part released once copied: the peak is one copy, not two
            part = parts.pop(0)
            out[row: row + part.shape[0]] = part
            row += part.shape[0]
        return out


def _ids_of_block(id_iter: Optional[Iterator], size: int, start: int, id_offset: int) -> list:
    """The ids of the ``size`` documents from ``start`` on: the caller's, or their positions."""
    if id_iter is None:
        return list(range(id_offset + start, id_offset + start + size))
    block_ids = list(itertools.islice(id_iter, size))
    if len(block_ids) < size:
        raise InputError(
            f"`ids` must have one id per text; ids ran out after {start + len(block_ids)} items while "
            "texts continue. Pass as many ids as texts (or ids=None)."
        )
    return block_ids


def _check_no_ids_left(id_iter: Optional[Iterator], n_texts: int) -> None:
    if id_iter is not None and next(id_iter, _SENTINEL) is not _SENTINEL:
        raise InputError(
            f"`ids` must have one id per text; got more ids than the {n_texts} texts. Pass as many ids as texts."
        )


def sketch_texts(texts: Iterable, ids: Optional[Iterable], config: BuildConfig, *, id_offset: int = 0,
                 chunk_size: int = 16384, progress: bool = False, timings: dict, sets32: bool = False,
                 spill: Optional[Spill] = None) -> Sketched:
    """Normalize, shingle and MinHash documents chunk by chunk (memory: one chunk of shingles);
    the sketches, and the texts at hand when ``texts`` is a sequence (:class:`Sketched`).

    ``sets32``: also each document's 32-bit shingle set where the fused kernel runs (see
    :func:`_sketch_chunk`). ``spill``: the signatures are written there chunk by chunk and read
    back through a file mapping (:mod:`diversify._spill`).

    A one-deep pipeline: the main thread reads and encodes chunk i+1 (Python, holds the GIL) while
    a worker runs the kernels on chunk i. Results are gathered in input order: deterministic.
    """
    # a sequence read from a file knows its length only once read (diversify.corpus.filetexts)
    n_hint = len(texts) if isinstance(texts, Sized) and getattr(texts, "length_known", True) else None
    id_iter = iter(ids) if ids is not None else None
    # a file-backed sequence estimates its length from the file's size (its __length_hint__): the
    # signatures then go into one array as they come, without a final copy, when the estimate holds
    gathered = _Gathered(config, n_hint if n_hint is not None else (operator.length_hint(texts, 0) or None), spill)
    # re-shingled by the exact checks of verify="auto" (texts at hand only for a sequence)
    keep = config.minhash is not None and config.minhash.verify == "auto" and isinstance(texts, Sequence) \
        and not isinstance(texts, (str, bytes))
    encoded = EncodedTexts() if keep else None
    # a streamed build holds its ids packed (about 20 bytes an id, not 70), checked block by block
    all_ids: list | PackedIds = [] if spill is None else PackedIds()
    bar = progress_bar(n_hint, "sketching", progress)
    if n_hint is not None and n_hint <= chunk_size and isinstance(texts, Sequence):
        # one chunk: nothing to overlap, so no worker thread (a thread per call is most of the cost
        # of sketching one document, as the live index's query does)
        block = list(texts)
        if block:
            all_ids.extend(_ids_of_block(id_iter, len(block), 0, id_offset))
            t0 = time.perf_counter()
            buf, offsets, char_docs = encode_batch_scripts(block, start_index=0)
            _add_seconds(timings, "encode", time.perf_counter() - t0)
            gathered.add(_sketch_chunk(buf, offsets, config, sets32, char_docs), 0)
            if encoded is not None:
                encoded.keep(0, block, buf, offsets)
            del buf, offsets
        done = len(block)
        if bar is not None:
            bar.update(done)
    else:
        _sketch_pipelined(texts, id_iter, config, chunk_size, id_offset, gathered, all_ids, bar, timings, encoded,
                          sets32)
        done = len(all_ids)
    if bar is not None:
        bar.close()
    _check_no_ids_left(id_iter, done)
    _add_seconds(timings, "sketch", gathered.seconds_sketch)
    if gathered.seconds_signatures > 0.001:
        _add_seconds(timings, "signatures", gathered.seconds_signatures)
    return gathered.sketches(all_ids, texts, id_offset, encoded)


def _sketch_pipelined(texts: Iterable, id_iter, config: BuildConfig, chunk_size: int, id_offset: int,
                      gathered: _Gathered, all_ids: list | PackedIds, bar, timings: dict,
                      encoded: Optional[EncodedTexts], sets32: bool = False) -> None:
    """The one-deep pipeline of :func:`sketch_texts` (module docstring there)."""
    done = 0
    pending: Optional[tuple[Future, int, int]] = None  # (kernel work, first document, documents)

    def collect(job: tuple[Future, int, int]) -> None:
        future, start, count = job
        gathered.add(future.result(), start)
        if bar is not None:
            bar.update(count)

    # where the allocator keeps freed memory (the console script), a join reuses heap memory and is
    # the faster copy for a chunk of documents just decoded (docs/building.md has the figures)
    lend = None if allocator_tuned() else _BufferRing().lend
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="diversify-sketch") as pool:
        for block in chunks(texts, chunk_size):
            all_ids.extend(_ids_of_block(id_iter, len(block), done, id_offset))
            t0 = time.perf_counter()
            buf, offsets, char_docs = encode_batch_scripts(block, start_index=done, into=lend)
            _add_seconds(timings, "encode", time.perf_counter() - t0)
            if pending is not None:
                collect(pending)
            pending = (pool.submit(_sketch_chunk, buf, offsets, config, sets32, char_docs), done, len(block))
            if encoded is not None:
                encoded.keep(done, block, buf, offsets)
            del buf, offsets
            done += len(block)
        if pending is not None:
            collect(pending)


_SENTINEL = object()


class _BufferRing:
    """Two buffers lent in turn to :func:`diversify.text.encode_batch_scripts` for the ASCII chunks
    of :func:`_sketch_pipelined`, so that each chunk is written into memory that the chunk two
    before used, instead of a fresh join: glibc maps a joined chunk afresh each time unless told
    to keep freed memory, and faulting those pages in again made library builds and ``build
    --stream`` (whose allocator the console script leaves alone) markedly slower, mostly in
    system time (docs/building.md, "Scale and memory", has the figures).

    Two suffice: chunk i+2 is encoded after chunk i's kernel work has been collected (the pipeline
    is one deep), and nothing keeps a view of an ASCII chunk's bytes past its kernel work (its
    sketches are new arrays; :class:`EncodedTexts` keeps non-ASCII chunks only). A buffer too
    small for a chunk is replaced by one a quarter larger than the chunk.
    """

    def __init__(self) -> None:
        self._bufs: list[np.ndarray] = [np.empty(0, np.uint8), np.empty(0, np.uint8)]
        self._turn = 0

    def lend(self, size: int) -> np.ndarray:
        self._turn ^= 1
        if self._bufs[self._turn].size < size:
            self._bufs[self._turn] = np.empty(size + size // 4, dtype=np.uint8)
        return self._bufs[self._turn]


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
    if sc is None:
        raise ConfigError("vectors were given but `simhash=None` disables the vector stage. Set simhash=SimHashConfig().")
    sigs = simhash_vectors(vecs, seed=config.seed, bits=sc.bits, families=sc.families, normalized=True)
    timings["simhash"] = timings.get("simhash", 0.0) + time.perf_counter() - t0
    return sigs, vecs
