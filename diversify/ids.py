"""Document id keys: a fixed, platform-independent 64-bit key per document id.

The artifact looks documents up by a 64-bit key instead of the id itself, so the online
lookup table is two flat arrays (sorted keys + cluster ids, 16 bytes per document).

The key scheme is part of the artifact format (``id_key_scheme`` = ``"diversify.idkey.v1"``)
and is pinned by golden tests; changing it is a breaking format change.

* ``int`` ids (any value in the int64 range): the int64 value itself, reinterpreted as an
  unsigned 64-bit integer (two's complement). Exact: distinct ints never share a key.
* ``str`` ids: ``hashlib.blake2b(id.encode("utf-8"), digest_size=8).digest()`` read as a
  little-endian unsigned 64-bit integer. Distinct strings share a key with probability 2**-64
  per pair; :meth:`ClusterMap.from_arrays` refuses a corpus where that happens, so keys of
  the ids *in* an artifact are always distinct.

Never Python's ``hash()``: it is salted per process.

Nothing here keeps shared mutable state (no cache), so it is trivially thread-safe and cannot
go stale across artifact reloads. A memo ``str -> key`` was measured: 2.4x faster on hits but
1.25x slower on misses (fresh strings from a store must be hashed for the dict anyway), so it
only pays above a ~30% hit rate, which the online path cannot count on.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterable
from typing import Any

import numpy as np

from diversify.errors import DuplicateIdError, InputError, InputTypeError

__all__ = [
    "ID_KEY_SCHEME",
    "INT64_MIN",
    "INT64_MAX",
    "id_key",
    "id_keys",
    "query_keys",
    "id_kind_of",
]

ID_KEY_SCHEME = "diversify.idkey.v1"
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
_U64_MASK = 2**64 - 1

_BLAKE_BASE = hashlib.blake2b(digest_size=8)

_INT_TYPES = (int, np.integer)
_LITTLE = sys.byteorder == "little"


def _digest(s: str) -> bytes:
    h = _BLAKE_BASE.copy()
    h.update(s.encode("utf-8"))
    return h.digest()


def _bad_type(x: Any, position: int | None, param: str) -> InputTypeError:
    where = f" at position {position}" if position is not None else ""
    return InputTypeError(
        f"`{param}`: document ids must be str or int; got {type(x).__name__} {x!r}{where}. "
        "Convert ids to str (e.g. str(id)) or to int before passing them."
    )


def id_kind_of(x: Any) -> str | None:
    """Return ``"str"`` or ``"int"`` for a valid id, ``None`` for any other type.

    ``bool`` is not an id (it would silently collide with 0/1).
    """
    if isinstance(x, str):
        return "str"
    if isinstance(x, _INT_TYPES) and not isinstance(x, (bool, np.bool_)):
        return "int"
    return None


def id_key(x: str | int) -> int:
    """Return the 64-bit key of one document id as a Python int in ``[0, 2**64)``.

    Parameters
    ----------
    x : str or int
        A document id. ints must lie in the int64 range.

    Raises
    ------
    InputTypeError
        ``x`` is neither str nor int (float, None, bool, bytes...).
    InputError
        ``x`` is an int outside the int64 range, or a str that is not valid UTF-8
        (lone surrogates).
    """
    kind = id_kind_of(x)
    if kind == "str":
        try:
            return int.from_bytes(_digest(x), "little")
        except UnicodeEncodeError as exc:
            raise InputError(
                f"`id` must be encodable as UTF-8; got {x!r} ({exc.reason}). "
                "Remove lone surrogates from the id (e.g. id.encode('utf-8', 'replace').decode())."
            ) from None
    if kind == "int":
        v = int(x)
        if not INT64_MIN <= v <= INT64_MAX:
            raise InputError(
                f"`id` must fit in int64 [{INT64_MIN}, {INT64_MAX}]; got {v}. "
                "Use a smaller integer or a str id."
            )
        return v & _U64_MASK
    raise _bad_type(x, None, "id")


def id_keys(ids: Iterable[str | int] | np.ndarray, *, param: str = "ids") -> np.ndarray:
    """Return the keys of many ids as a ``uint64`` array of shape ``(n,)``.

    All ids must be valid (see :func:`id_key`); the first invalid one raises, naming its
    position. An int64/uint-safe integer ndarray is converted without a Python loop.
    """
    if isinstance(ids, np.ndarray):
        if ids.ndim != 1:
            raise InputError(f"`{param}` must be one-dimensional; got shape {ids.shape}. Pass a flat list or array.")
        if ids.dtype.kind in "iu":
            if ids.dtype.kind == "u" and ids.size and int(ids.max()) > INT64_MAX:
                pos = int(np.argmax(ids > INT64_MAX))
                raise InputError(
                    f"`{param}`: int ids must fit in int64; got {int(ids[pos])} at position {pos}. "
                    "Use smaller integers or str ids."
                )
            return ids.astype(np.int64).view(np.uint64)
        if ids.dtype.kind == "U":
            ids = ids.tolist()
        elif ids.dtype.kind == "O":
            ids = ids.tolist()
        else:
            raise InputTypeError(
                f"`{param}`: document ids must be str or int; got an array of dtype {ids.dtype}. "
                "Convert ids to str or int64 first."
            )
    ids = list(ids)
    out = np.empty(len(ids), dtype=np.uint64)
    for i, x in enumerate(ids):
        kind = id_kind_of(x)
        if kind is None:
            raise _bad_type(x, i, param)
        try:
            out[i] = id_key(x)
        except InputError as exc:
            raise type(exc)(f"`{param}` position {i}: {exc}") from None
    return out


def query_keys(ids: Any, kind: str) -> tuple[np.ndarray, np.ndarray | None]:
    """Keys for an online lookup against an artifact whose ids are of ``kind``.

    Returns ``(keys, valid)``: ``keys`` is ``uint64 (m,)``; ``valid`` is ``None`` when every
    id is of the right kind, else a bool mask (ids of the other kind, ints outside int64
    and unencodable strs are simply unknown, not errors). A float, None, bool or other
    non-id value raises :class:`InputTypeError`.

    Hot path: a list of str against a str artifact costs one blake2b per id (~0.35 us).
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
            if kind != "int":
                return np.zeros(ids.size, np.uint64), np.zeros(ids.size, bool)
            if ids.dtype.kind == "u" and ids.size:
                valid = ids <= INT64_MAX
                return ids.astype(np.uint64), (None if valid.all() else valid)
            return ids.astype(np.int64).view(np.uint64), None
        if ids.dtype.kind in "UO":
            ids = ids.tolist()
        else:
            raise InputTypeError(
                f"`ids` must hold str or int ids; got an array of dtype {ids.dtype}. "
                "Convert ids to str or int64 first."
            )
    if kind == "str":
        # Fast path: every element is exactly str and encodable. Inlined: this loop is most of
        # the cost of an online lookup.
        copy = _BLAKE_BASE.copy
        parts = []
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
    # Slow path: per element, with type checks.
    m = len(ids)
    keys = np.zeros(m, dtype=np.uint64)
    valid = np.zeros(m, dtype=bool)
    for i, x in enumerate(ids):
        k = id_kind_of(x)
        if k is None:
            raise _bad_type(x, i, "ids")
        if k != kind:
            continue
        if k == "str":
            try:
                keys[i] = int.from_bytes(_digest(x), "little")
            except UnicodeEncodeError:
                continue
        else:
            v = int(x)
            if not INT64_MIN <= v <= INT64_MAX:
                continue
            keys[i] = v & _U64_MASK
        valid[i] = True
    return keys, (None if valid.all() else valid)


def check_ids(ids: Sequence, *, offset: int = 0) -> None:
    """All str or all int (not bool), unique. Raises naming the first offender."""
    kind = None
    for pos, x in enumerate(ids):
        if isinstance(x, bool) or not isinstance(x, (str, int, np.integer)):
            raise InputTypeError(
                f"`ids` must be str or int; item {offset + pos} is {type(x).__name__} ({x!r:.60}). "
                "Convert ids with str(x) (or int(x)) before building."
            )
        k = str if isinstance(x, str) else int
        if kind is None:
            kind = k
        elif k is not kind:
            raise InputTypeError(
                f"`ids` must be all str or all int; item {offset + pos} is {k.__name__} ({x!r:.60}) but earlier ids are "
                f"{kind.__name__}. Convert every id with str(x)."
            )
        if k is int and not (-(2**63) <= int(x) < 2**63):
            raise InputError(f"`ids` ints must fit in int64; item {offset + pos} is {x}. Use str ids for larger values.")
    if len(set(ids)) != len(ids):
        seen: dict = {}
        for pos, x in enumerate(ids):
            if x in seen:
                raise DuplicateIdError(
                    f"`ids` must be unique; id {x!r} occurs at positions {seen[x] + offset} and {pos + offset}. "
                    "Deduplicate the ids (or build with ids=None to number documents 0..n-1)."
                )
            seen[x] = pos


def normalize_ids(ids: list) -> list:
    return [int(x) for x in ids] if ids and isinstance(ids[0], (int, np.integer)) else list(ids)
