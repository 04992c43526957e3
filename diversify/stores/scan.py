"""Reading a store's documents back out, a batch at a time: what every adapter's ``scan`` yields.

``store.scan(batch_size=4096, with_vectors=True, text_field=None)`` walks the whole collection
with the vendor's own paging call (Qdrant ``scroll``, Chroma ``get(limit, offset)``, LanceDB's
batch reader, Milvus ``query_iterator``, FAISS ``reconstruct_n``) and yields :class:`Batch` es:
the document ids as the adapter's hits name them (so an artifact built from them matches the
hits and ``write_clusters``), the vectors as one float32 matrix per batch, and the texts when a
payload / metadata field holds them. Each batch is checked here (one dimension, a text on every
document); :func:`diversify.build_from` checks what spans batches (:mod:`.building`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, Optional

import numpy as np

from ..errors import ConfigError, InputError, InputTypeError, StoreError

__all__ = ["Batch", "DEFAULT_SCAN_BATCH", "check_scan", "vector_block", "text_list", "no_vectors", "field_value",
           "vendor_failed"]

#: documents per page when the caller does not say
DEFAULT_SCAN_BATCH = 4096


class Batch(NamedTuple):
    """One page of a store: ``ids`` (list), ``vectors`` (float32 (len(ids), d), or None when not
    asked for) and ``texts`` (list of str, or None when no ``text_field`` was given)."""

    ids: list
    vectors: Optional[np.ndarray]
    texts: Optional[list]


def check_scan(batch_size, with_vectors, text_field) -> int:
    """The scan arguments' rules; returns ``batch_size`` as an int."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise ConfigError(f"`batch_size` must be an int >= 1 (documents per page read from the store); got "
                          f"{batch_size!r}. The default {DEFAULT_SCAN_BATCH} suits most stores.")
    if text_field is not None and (not isinstance(text_field, str) or not text_field):
        raise ConfigError(f"`text_field` must be a non-empty string naming the payload / metadata field that "
                          f"holds each document's text, or None (vectors only); got text_field={text_field!r}.")
    if not with_vectors and text_field is None:
        raise ConfigError("a scan must read vectors, texts or both; got with_vectors=False and text_field=None. "
                          "Pass with_vectors=True, or text_field='text' (the field holding the text).")
    return int(batch_size)


def no_vectors(where: str, doc_id: Any, fix: str) -> InputError:
    """The error for a document the store holds no vector for (a collection without vectors)."""
    return InputError(f"`store`: {where} holds no vector for document {doc_id!r}; a build from the store's "
                      f"vectors needs one on every document. {fix}")


def vector_block(rows: Sequence[Any], ids: Sequence[Any], where: str) -> np.ndarray:
    """The vectors of one page as a float32 (len(rows), d) matrix; ragged rows (mixed
    dimensions) and rows that are not numbers are errors naming the first document at fault."""
    if isinstance(rows, np.ndarray) and rows.ndim == 2:
        return _real(rows, ids, where).astype(np.float32, copy=False)
    dims = [_length(r, i, where) for r, i in zip(rows, ids)]
    if dims and min(dims) != max(dims):
        first = dims[0]
        j = next(j for j, d in enumerate(dims) if d != first)
        raise InputError(f"`store`: {where} holds vectors of mixed dimensions: document {ids[0]!r} has {first}, "
                         f"document {ids[j]!r} has {dims[j]}. One embedding model per collection: re-embed the "
                         "odd ones, or build from one dimension at a time (a filter or another collection).")
    if not dims:
        return np.zeros((0, 0), np.float32)
    try:
        block = np.asarray(rows, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise InputTypeError(f"`store`: {where} holds vectors that are not numbers ({exc}). Store float vectors.") \
            from None
    return block.reshape(len(dims), dims[0])


def _length(row: Any, doc_id: Any, where: str) -> int:
    try:
        return len(row)
    except TypeError:
        raise InputTypeError(f"`store`: {where} holds {type(row).__name__} {row!r:.60} as the vector of document "
                             f"{doc_id!r}; a vector is a sequence of floats.") from None


def _real(block: np.ndarray, ids: Sequence[Any], where: str) -> np.ndarray:
    if block.dtype.kind not in "biuf":
        raise InputTypeError(f"`store`: {where} holds vectors of dtype {block.dtype} (document {ids[0]!r}); a "
                             "vector is a sequence of floats.")
    return block


def text_list(values: Sequence[Any], ids: Sequence[Any], text_field: str, where: str) -> list:
    """The texts of one page: every document must hold a str in ``text_field``."""
    out = list(values)
    for i, t in zip(ids, out):
        if not isinstance(t, str):
            missing = t is None
            what = "has no" if missing else f"holds {type(t).__name__} {t!r:.40} in its"
            raise InputError(f"`text_field`: document {i!r} of {where} {what} {text_field!r} field; a build from "
                             "the store's texts needs a string there on every document. Fill it in, name another "
                             "field, or drop `text_field` to build from the vectors only.")
    return out


def field_value(payload: Any, name: str) -> Any:
    """``payload[name]``, or for a dotted name absent as a key the nested value
    (``"metadata.text"`` -> ``payload["metadata"]["text"]``); None when absent."""
    if not payload:
        return None
    if name in payload:
        return payload[name]
    value = payload
    for part in name.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def vendor_failed(what: str, where: str, exc: Exception) -> StoreError:
    """A vendor call of a scan failed (transport, permissions, a schema the call refused)."""
    return StoreError(f"`store`: {what} on {where} failed: {type(exc).__name__}: {exc}")
