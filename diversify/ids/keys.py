"""The ids' fixed, platform-independent 64-bit keys (:data:`ID_KEY_SCHEME`, part of the artifact
format; see :mod:`diversify.ids`) and the online lookup of ids by key.
"""

from __future__ import annotations

import hashlib
import sys
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from diversify.errors import InputError, InputTypeError

from .rules import _INT_TYPES, INT64_MAX, INT64_MIN, _id_items, check_id, check_id_type, id_kind_of

__all__ = ["ID_KEY_SCHEME", "id_key", "id_keys", "utf8_id_keys", "check_distinct_keys", "query_keys", "lookup_id"]

ID_KEY_SCHEME = "diversify.idkey.v1"
_U64_MASK = 2**64 - 1

_BLAKE_BASE = hashlib.blake2b(digest_size=8)

_LITTLE = sys.byteorder == "little"


def _str_key(s: str) -> int:
    h = _BLAKE_BASE.copy()
    h.update(s.encode("utf-8"))
    return int.from_bytes(h.digest(), "little")


def id_key(x: str | int) -> int:
    """Return the 64-bit key of one document id as a Python int in ``[0, 2**64)``.

    Parameters
    ----------
    x : str or int
        A document id. ints must lie in the int64 range.

    Raises
    ------
    InputTypeError, InputError
        ``x`` breaks a rule of :func:`check_id`.
    """
    check_id(x, param="id")
    return _str_key(x) if isinstance(x, str) else int(x) & _U64_MASK


def id_keys(ids: Iterable[str | int] | np.ndarray, *, param: str = "ids") -> np.ndarray:
    """Return the keys of many ids as a ``uint64`` array of shape ``(n,)``.

    Every id must pass :func:`check_id` (kinds may mix); the first that does not raises, naming
    its position. An integer ndarray is converted without a Python loop.
    """
    items = _id_items(ids if isinstance(ids, (np.ndarray, str, bytes)) else list(ids), param)
    if isinstance(items, np.ndarray):
        return items.view(np.uint64)
    out = np.empty(len(items), dtype=np.uint64)
    for i, x in enumerate(items):
        check_id(x, param=param, position=i)
        out[i] = _str_key(x) if isinstance(x, str) else int(x) & _U64_MASK
    return out


def utf8_id_keys(encoded: Iterable[bytes | memoryview]) -> np.ndarray:
    """Keys of str ids given as their UTF-8 bytes (already checked): ``uint64`` array of shape ``(n,)``."""
    copy = _BLAKE_BASE.copy
    digests: list[bytes] = []
    append = digests.append
    for b in encoded:
        h = copy()
        h.update(b)
        append(h.digest())
    return np.frombuffer(b"".join(digests), dtype="<u8").astype(np.uint64)


def check_distinct_keys(
    sorted_keys: np.ndarray, order: np.ndarray, id_at: Callable[[int], Any], *, param: str = "ids"
) -> None:
    """Refuse (unique) ids of which two share a 64-bit key.

    Parameters
    ----------
    sorted_keys : numpy.ndarray[uint64], shape (n,)
        The ids' keys, or any bijective image of them (the artifact's slot keys), ascending.
    order : numpy.ndarray[int], shape (n,)
        The position of the id of each sorted key.
    id_at : callable
        ``id_at(position)`` returns the id, for the message.
    """
    same = np.flatnonzero(sorted_keys[1:] == sorted_keys[:-1])
    if same.size:  # pragma: no cover - needs a 64-bit blake2b collision
        a, b = sorted((int(order[same[0]]), int(order[same[0] + 1])))
        raise InputError(
            f"`{param}` must have distinct 64-bit keys ({ID_KEY_SCHEME}); got {id_at(a)!r} (position {a}) and "
            f"{id_at(b)!r} (position {b}) sharing one, which happens with probability ~2**-64 per pair. "
            "Rename one of them."
        )


def query_keys(ids: Any, kind: str) -> tuple[np.ndarray, np.ndarray | None]:
    """Keys for an online lookup against an artifact whose ids are of ``kind``.

    Returns ``(keys, valid)``: ``keys`` is ``uint64 (m,)``; ``valid`` is ``None`` when every
    id is of the right kind, else a bool mask (ids of the other kind, ints outside int64
    and unencodable strs are simply unknown, not errors). A float, None, bool or other
    non-id value raises :class:`InputTypeError` (:func:`check_id_type`).

    Hot path: a list of str against a str artifact costs one blake2b per id.
    """
    if isinstance(ids, (str, bytes)) or not hasattr(ids, "__len__"):
        if id_kind_of(ids) is not None:
            raise InputTypeError(
                f"`ids` must be a sequence of ids; got a single {type(ids).__name__} {ids!r}. "
                "Wrap it in a list (lookup([id])) or use cluster_of(id)."
            )
        raise InputTypeError(
            f"`ids` must be a sequence (list, tuple or 1-D array) of str or int ids; "
            f"got {type(ids).__name__}. Pass a list of ids."
        )
    if isinstance(ids, np.ndarray):
        if ids.ndim != 1:
            raise InputTypeError(f"`ids` must be one-dimensional; got shape {ids.shape}. Pass a flat list or array.")
        if ids.dtype.kind in "iu":
            return _int_array_query_keys(ids, kind)
        if ids.dtype.kind not in "UO":
            raise InputTypeError(
                f"`ids` must hold str or int ids; got an array of dtype {ids.dtype}. "
                "Convert ids to str or int64 first."
            )
        ids = ids.tolist()
    if kind == "str":
        # Fast path: every element is exactly str and encodable. Inlined: this loop is most of
        # the cost of an online lookup.
        copy = _BLAKE_BASE.copy
        parts: list[bytes] = []
        append = parts.append
        try:
            for s in ids:
                if type(s) is not str:
                    break
                h = copy()
                h.update(s.encode("utf-8"))
                append(h.digest())
            else:
                keys = np.frombuffer(b"".join(parts), dtype="<u8")
                return (keys if _LITTLE else keys.astype(np.uint64)), None
        except UnicodeEncodeError:
            pass
    elif kind == "int":
        if all(type(x) is int for x in ids):
            try:
                return np.array(ids, dtype=np.int64).view(np.uint64), None
            except OverflowError:
                pass
    return _query_keys_slow(ids, kind)


def _int_array_query_keys(ids: np.ndarray, kind: str) -> tuple[np.ndarray, np.ndarray | None]:
    if kind != "int":
        return np.zeros(ids.size, np.uint64), np.zeros(ids.size, bool)
    if ids.dtype.kind == "u" and ids.size:
        valid = ids <= INT64_MAX
        return ids.astype(np.uint64), (None if valid.all() else valid)
    return ids.astype(np.int64).view(np.uint64), None


def _query_keys_slow(ids: Sequence[Any], kind: str) -> tuple[np.ndarray, np.ndarray | None]:
    """Per element, with type checks: ids of another kind, ints outside int64, unencodable strs are unknown."""
    m = len(ids)
    keys = np.zeros(m, dtype=np.uint64)
    valid = np.zeros(m, dtype=bool)
    for i, x in enumerate(ids):
        if check_id_type(x, param="ids", position=i) != kind:
            continue
        if isinstance(x, str):
            try:
                keys[i] = _str_key(x)
            except UnicodeEncodeError:
                continue
        else:
            v = int(x)
            if not INT64_MIN <= v <= INT64_MAX:
                continue
            keys[i] = v & _U64_MASK
        valid[i] = True
    return keys, (None if valid.all() else valid)


def lookup_id(x: Any, kind: str | None) -> str | int | None:
    """``x`` as a corpus of ``kind`` ids (``"str"`` / ``"int"``; None: no ids yet) holds it, or
    None when it cannot be one of them. The online rule, the same for an artifact and a live index.

    A str must be encodable as UTF-8 (no lone surrogates) and ``kind`` ``"str"``; an int (a numpy
    integer too, never a bool) must lie in int64 and ``kind`` be ``"int"``, so ``1`` never
    matches ``"1"``; a ``uuid.UUID`` matches a corpus of str ids in its canonical form. Anything
    else (float, bytes, None, a tuple...) is no id. Never raises: an id no corpus can hold is
    simply unknown.
    """
    if isinstance(x, str):
        if kind != "str":
            return None
        if not x.isascii():
            try:
                x.encode("utf-8")
            except UnicodeEncodeError:
                return None
        return str(x)
    if isinstance(x, _INT_TYPES) and not isinstance(x, (bool, np.bool_)):
        v = int(x)
        return v if kind == "int" and INT64_MIN <= v <= INT64_MAX else None
    if isinstance(x, uuid.UUID) and kind == "str":
        return str(x)
    return None
