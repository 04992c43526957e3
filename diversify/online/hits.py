"""What a search returns, or a caller passes in, as :class:`~diversify.online.Hit` objects.

A search callable may return hits in many shapes (:func:`as_hit`); a framework plugin hands a
list of its own objects to :meth:`Diversifier.select_items` (:func:`hits_from_items`). Either
way the caller's object is kept, untouched, as ``Hit.item``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Optional, Union

import numpy as np

from ..errors import InputError, InputTypeError, StoreError
from .types import Hit

__all__ = ["as_hit", "hits_from_items", "payload_of", "text_of", "with_text", "IdSource"]

#: ``ids=`` of :func:`hits_from_items`: one id per item, or ``ids(item) -> id``.
IdSource = Union[Sequence[Any], Callable[[Any], Any]]


def payload_of(obj: Any) -> Optional[Mapping]:
    """``obj.payload`` (or ``obj.metadata``) when it is a mapping, else None."""
    p = getattr(obj, "payload", None)
    if p is None:
        p = getattr(obj, "metadata", None)
    return p if isinstance(p, Mapping) else None


def text_of(item: Any) -> Optional[str]:
    """The text of a mapping (``"text"`` / ``"content"``) or object (``.text`` / ``.page_content``
    / ``.content``), or None."""
    if isinstance(item, Mapping):
        t = item.get("text", item.get("content"))
    else:
        t = None
        for attr in ("text", "page_content", "content"):
            t = getattr(item, attr, None)
            if isinstance(t, str):
                break
    return t if isinstance(t, str) else None


def with_text(hit: Hit) -> Hit:
    """``hit`` with ``text`` read from its item or payload (for text folding), if it has one."""
    t = text_of(hit.item) if hit.item is not None else None
    if t is None and hit.payload is not None:
        t = text_of(hit.payload)
    return hit if t is None else Hit(hit.id, hit.score, hit.payload, hit.vector, hit.item, t)


def _vector(value: Any) -> Optional[Union[list, np.ndarray]]:
    return value if isinstance(value, (list, np.ndarray)) else None


def as_hit(raw: Any) -> Hit:
    """Normalize one result of a search callable to a :class:`Hit` (the original kept as ``item``).

    Accepts a :class:`Hit`, an ``(id, score)`` / ``(id, score, payload)`` tuple, an
    ``(object, score)`` tuple (e.g. LangChain's ``(Document, score)``; ``item`` is the object),
    a mapping with ``id`` (and ``score``, ``payload`` or ``metadata``, ``vector``) keys, or an
    object with ``.id`` (and ``.score``, ``.payload`` or ``.metadata``) attributes.
    """
    if isinstance(raw, Hit):
        return raw
    if isinstance(raw, tuple) and 1 <= len(raw) <= 3:
        first = raw[0]
        score = raw[1] if len(raw) > 1 else None
        if isinstance(first, (str, int, np.integer)) and not isinstance(first, bool):
            payload = raw[2] if len(raw) == 3 else None
            return Hit(first, score, payload if isinstance(payload, Mapping) else None, None, raw)
        # (object, score), e.g. LangChain's (Document, score): the id comes from the object
        inner = as_hit(first)
        return Hit(inner.id, score, inner.payload, inner.vector, first)
    if isinstance(raw, Mapping):
        if "id" not in raw:
            raise StoreError(f"a search result mapping must have an 'id' key; got keys {sorted(map(str, raw))[:8]}. "
                             "Return Hit objects, (id, score) tuples or mappings with 'id' and 'score'.")
        payload = raw.get("payload", raw.get("metadata"))
        return Hit(raw["id"], raw.get("score"), payload if isinstance(payload, Mapping) else None,
                   _vector(raw.get("vector")), raw)
    hid = getattr(raw, "id", None)
    if hid is None:
        raise StoreError(f"cannot read an id from a search result of type {type(raw).__name__}. "
                         "Return Hit objects, (id, score) tuples, mappings with 'id', or objects with .id.")
    return Hit(hid, getattr(raw, "score", None), payload_of(raw), _vector(getattr(raw, "vector", None)), raw)


def _check_columns(items: Any, ids: Optional[IdSource], columns: dict[str, Optional[Sequence[Any]]]) -> int:
    if isinstance(items, (str, bytes)) or not hasattr(items, "__len__"):
        raise InputTypeError(f"`items` must be a sequence; got {type(items).__name__}. Pass a list.")
    size = len(items)
    for name, seq in columns.items():
        if seq is not None and len(seq) != size:
            raise InputError(f"`{name}` must have one entry per item ({size}); got {len(seq)}.")
    if ids is not None and not callable(ids) and len(ids) != size:
        raise InputError(f"`ids` must have one entry per item ({size}); got {len(ids)}.")
    return size


def _get(item: Any, name: str, is_map: bool) -> Any:
    return item.get(name) if is_map else getattr(item, name, None)


def hits_from_items(items: Sequence[Any], *, ids: Optional[IdSource] = None,
                    scores: Optional[Sequence[Any]] = None, payloads: Optional[Sequence[Any]] = None,
                    vectors: Optional[Sequence[Any]] = None, texts: Optional[Sequence[Optional[str]]] = None,
                    want_vectors: bool = False, want_texts: bool = False) -> list[Hit]:
    """One :class:`Hit` per item, each field from its column when given, else from the item.

    See :meth:`Diversifier.select_items` for where each field is read from. ``want_vectors`` /
    ``want_texts`` read vectors / texts from the items (only on-the-fly folding needs them).
    """
    _check_columns(items, ids, {"scores": scores, "payloads": payloads, "vectors": vectors, "texts": texts})
    hits = []
    for j, item in enumerate(items):
        is_map = isinstance(item, Mapping)
        if ids is None:
            hid = _get(item, "id", is_map)
        else:
            hid = ids(item) if callable(ids) else ids[j]
        if hid is None:
            raise InputError(f"item {j} has no id; got {type(item).__name__} without .id. "
                             "Pass ids=[...] or ids=lambda item: ..., e.g. from its metadata.")
        if payloads is not None:
            p = payloads[j]
        else:
            p = item.get("payload", item.get("metadata")) if is_map else payload_of(item)
        v = vectors[j] if vectors is not None else (_get(item, "vector", is_map) if want_vectors else None)
        t = texts[j] if texts is not None else (text_of(item) if want_texts else None)
        s = scores[j] if scores is not None else _get(item, "score", is_map)
        hits.append(Hit(hid, s, p if isinstance(p, Mapping) else None, v, item, t))
    return hits
