"""``diversify.build_from(store)``: build from the documents a vector store already holds.

The store adapter's ``scan`` (:mod:`.scan`) pages through the collection with the vendor's own
call; each page's vectors are checked (one dimension, finite, not zero) and copied into one
float32 matrix sized from the store's count, its ids and texts appended to lists, and the page
is dropped: what the reading holds beyond one page is what the build is then handed. The build
is :func:`diversify.build` with the same config and defaults, on the documents in id order (the
order a store pages in can change with its writes; the artifact should not), so its artifact is
byte for byte the one ``diversify.build`` makes of the same ids, vectors and texts in that order.
Writing the clusters back stays the adapter's ``write_clusters(result.cluster_map)``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Optional, Union

import numpy as np

from ..config import BuildConfig, resolve_config
from ..errors import ConfigError, InputError, InputTypeError, StoreError
from ..ids import check_ids
from .scan import DEFAULT_SCAN_BATCH, Batch

__all__ = ["build_from"]


def build_from(
    store: Any,
    *,
    text_field: Optional[str] = None,
    vectors: bool = True,
    batch_size: int = DEFAULT_SCAN_BATCH,
    config: Union[BuildConfig, Mapping, None] = None,
    metadata: Optional[Mapping] = None,
    progress: bool = False,
    chunk_size: int = 16384,
    created_at: Optional[str] = None,
    spill_dir: Union[str, os.PathLike, None] = None,
):
    """Cluster the documents of a vector store: read them out in pages, then build.

    Parameters
    ----------
    store : a store adapter of :mod:`diversify.stores`
        ``QdrantStore``, ``ChromaStore``, ``LanceDBStore``, ``MilvusStore``, ``FaissStore`` or
        ``NumpyStore``; its ``id_field`` / ``id_column`` names the documents as its hits do, so
        the artifact answers for them online and ``store.write_clusters`` finds them.
    text_field : str, optional
        The payload / metadata field (LanceDB: column) holding each document's text: the text
        stages (exact, MinHash) then run too. Every document must hold a string there. Chroma's
        own documents: ``"#document"``. A dotted name reaches into a nested payload
        (``"metadata.text"``). Default: none, vectors only.
    vectors : bool
        Read the stored vectors (the SimHash stage at ``config.simhash.threshold``); False builds
        from the texts of ``text_field`` alone.
    batch_size : int
        Documents per page read from the store (Milvus: at most 16384).
    config, metadata, progress, chunk_size, created_at, spill_dir
        As :func:`diversify.build`, whose defaults apply.

    Returns
    -------
    BuildResult
        Save it (``result.save(path)``) and write the clusters back with
        ``store.write_clusters(result.cluster_map)``.

    Raises
    ------
    InputError
        A document without a vector, vectors of mixed dimensions, a NaN / inf or zero vector, a
        document without its text (``text_field``), an empty collection.
    StoreError
        The store failed, or has no such collection.
    """
    from ..engines.local import build

    scan = getattr(store, "scan", None)
    if not callable(scan):
        raise InputTypeError(f"`store` must be a store adapter of diversify.stores (QdrantStore, ChromaStore, "
                             f"LanceDBStore, MilvusStore, FaissStore, NumpyStore); got {type(store).__name__}. Wrap "
                             "the client first, e.g. QdrantStore(client, 'docs').")
    _check_config(config, text_field, vectors)
    ids, vecs, texts = _read(store, batch_size=batch_size, vectors=vectors, text_field=text_field, progress=progress)
    check_ids(ids, param="store")
    ids, vecs, texts = _in_id_order(ids, vecs, texts)
    return build(texts, ids=ids, vectors=vecs, config=config, metadata=metadata, progress=progress,
                 chunk_size=chunk_size, created_at=created_at, spill_dir=spill_dir)


def _check_config(config, text_field: Optional[str], vectors: bool) -> None:
    """The config's conflicts with what will be read, before anything is read."""
    cfg = resolve_config(config)
    if vectors and cfg.simhash is None:
        raise ConfigError("`config`: simhash=None turns the vector stage off, but build_from reads the store's "
                          "vectors (vectors=True). Keep SimHashConfig(), or pass vectors=False with text_field=.")
    if text_field is not None and cfg.minhash is None and not cfg.exact and cfg.text_simhash is None:
        raise ConfigError(f"`text_field` {text_field!r} reads texts, but every text stage of `config` is off "
                          "(minhash=None, exact=False, text_simhash=None). Turn one on, or drop text_field.")


class _Matrix:
    """The vectors read so far: one float32 matrix, allocated from the store's count (grown
    when the store holds more), checked page by page."""

    def __init__(self, hint: Optional[int]):
        self.hint = max(int(hint or 0), 0)
        self.buf: Optional[np.ndarray] = None
        self.n = 0

    def add(self, block: np.ndarray, ids: list) -> None:
        m, d = block.shape
        if self.buf is None:
            self.buf = np.empty((max(self.hint, m), d), np.float32)
        elif d != self.buf.shape[1]:
            raise InputError(f"`store` holds vectors of mixed dimensions: the first documents have "
                             f"{self.buf.shape[1]}, document {ids[0]!r} has {d}. One embedding model per "
                             "collection: re-embed the odd ones, or build from one dimension at a time.")
        _check_rows(block, ids)
        if self.n + m > self.buf.shape[0]:
            grown = np.empty((max(self.n + m, self.buf.shape[0] * 3 // 2), d), np.float32)
            grown[:self.n] = self.buf[:self.n]
            self.buf = grown
        self.buf[self.n:self.n + m] = block
        self.n += m

    def array(self) -> Optional[np.ndarray]:
        return None if self.buf is None else self.buf[:self.n]


def _check_rows(block: np.ndarray, ids: list) -> None:
    finite = np.isfinite(block).all(axis=1)
    if not finite.all():
        j = int(np.argmin(finite))
        raise InputError(f"`store`: the vector of document {ids[j]!r} holds NaN or inf; every vector must be "
                         "finite. Re-embed that document or delete it from the collection.")
    zero = ~block.any(axis=1)
    if zero.any():
        j = int(np.argmax(zero))
        raise InputError(f"`store`: the vector of document {ids[j]!r} is all zeros (cosine is undefined for "
                         "it). Re-embed that document or delete it from the collection.")


def _read(store, *, batch_size: int, vectors: bool, text_field: Optional[str],
          progress: bool) -> tuple[list, Optional[np.ndarray], Optional[list]]:
    """Every document of the store: (ids, float32 vectors or None, texts or None)."""
    from ..sketches.batch import progress_bar

    size = getattr(store, "_scan_size", None)
    hint = size() if callable(size) and vectors else None
    matrix = _Matrix(hint)
    ids: list = []
    texts: Optional[list] = [] if text_field is not None else None
    bar = progress_bar(hint, "read", progress)
    try:
        for batch in store.scan(batch_size=batch_size, with_vectors=vectors, text_field=text_field):
            _take(batch, matrix, ids, texts, vectors)
            if bar is not None:
                bar.update(len(batch.ids))
    finally:
        if bar is not None:
            bar.close()
    if not ids:
        raise InputError(f"`store`: the collection holds no documents ({type(store).__name__}); there is nothing "
                         "to build. Check the collection name and that it was written to.")
    return ids, matrix.array() if vectors else None, texts


def _take(batch: Batch, matrix: _Matrix, ids: list, texts: Optional[list], vectors: bool) -> None:
    n = len(batch.ids)
    if vectors:
        if batch.vectors is None or batch.vectors.ndim != 2 or batch.vectors.shape[0] != n:
            raise StoreError(f"`store`: its scan gave a page of {n} ids without one vector each (got "
                             f"{None if batch.vectors is None else batch.vectors.shape}); a scan yields Batch(ids, "
                             "vectors (n, d), texts).")
        matrix.add(batch.vectors, batch.ids)
    if texts is not None:
        if batch.texts is None or len(batch.texts) != n:
            raise StoreError(f"`store`: its scan gave a page of {n} ids without one text each; a scan yields "
                             "Batch(ids, vectors, texts (n,)) when asked for a text_field.")
        texts.extend(batch.texts)
    ids.extend(batch.ids)


def _in_id_order(ids: list, vecs: Optional[np.ndarray],
                 texts: Optional[list]) -> tuple[list, Optional[np.ndarray], Optional[list]]:
    """The documents sorted by id (all int or all str: ``check_ids`` held); untouched when the
    store paged in that order already (Qdrant, Milvus)."""
    if all(a < b for a, b in zip(ids, ids[1:])):
        return ids, vecs, texts
    order = sorted(range(len(ids)), key=ids.__getitem__)
    ids = [ids[j] for j in order]
    if vecs is not None:
        vecs = vecs[np.asarray(order, dtype=np.intp)]
    if texts is not None:
        texts = [texts[j] for j in order]
    return ids, vecs, texts
