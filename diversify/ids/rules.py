"""The id rules, checked here and nowhere else (see :mod:`diversify.ids`): a document id is a
``str`` or an ``int``, never ``bool``; ints lie in int64; strs encode as UTF-8; the ids of one corpus
share one kind and are unique. Also the id rules of a live index (its byte limit, cluster ids).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from diversify.errors import DuplicateIdError, InputError, InputTypeError

__all__ = [
    "INT64_MIN",
    "INT64_MAX",
    "id_kind_of",
    "check_id_type",
    "check_id",
    "check_ids",
    "check_cluster_id",
    "check_index_ids",
    "storable_index_id",
    "INDEX_ID_MAX_BYTES",
    "normalize_ids",
]

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

_INT_TYPES = (int, np.integer)


def _at(position: int | None) -> str:
    return "" if position is None else f" at position {position}"


def _not_an_id(x: Any, param: str, position: int | None) -> InputTypeError:
    return InputTypeError(
        f"`{param}`: document ids must be str or int; got {type(x).__name__} {x!r:.60}{_at(position)}. "
        "Convert each id with str(x) (or int(x))."
    )


def _out_of_int64(value: int, param: str, position: int | None) -> InputError:
    return InputError(
        f"`{param}`: int ids must fit in int64 [{INT64_MIN}, {INT64_MAX}]; got {value}{_at(position)}. "
        "Use smaller integers or str ids."
    )


def _not_utf8(s: str, exc: UnicodeEncodeError, param: str, position: int | None) -> InputError:
    return InputError(
        f"`{param}`: str ids must be encodable as UTF-8; got {s!r:.60}{_at(position)} ({exc.reason}). "
        "Remove lone surrogates from the id (e.g. s.encode('utf-8', 'replace').decode())."
    )


def _mixed_kinds(first: str, pos0: int, kind: str, x: Any, pos: int, param: str) -> InputTypeError:
    return InputTypeError(
        f"`{param}` must be all str or all int; position {pos0} is {first} but position {pos} is {kind} ({x!r:.60}). "
        "Convert every id to one type, e.g. [str(x) for x in ids]."
    )


def _duplicate(x: Any, first: int, second: int, param: str) -> DuplicateIdError:
    err = DuplicateIdError(
        f"`{param}` must be unique; id {x!r:.60} occurs at positions {first} and {second}. "
        "Deduplicate the ids, or give each document a distinct id."
    )
    err.positions = (first, second)  # type: ignore[attr-defined]  # for a caller that can name them in a file
    err.id = x  # type: ignore[attr-defined]
    return err


# --------------------------------------------------------------------------- the rules


def id_kind_of(x: Any) -> str | None:
    """Return ``"str"`` or ``"int"`` for a value of an id type, ``None`` for any other type.

    Classification only (no range or encoding check). ``bool`` is not an id (it would silently
    collide with 0/1).
    """
    if isinstance(x, str):
        return "str"
    if isinstance(x, _INT_TYPES) and not isinstance(x, (bool, np.bool_)):
        return "int"
    return None


def check_id_type(x: Any, *, param: str = "id", position: int | None = None) -> str:
    """Return the kind of ``x`` (``"str"`` or ``"int"``); raise :class:`InputTypeError` for any other type."""
    kind = id_kind_of(x)
    if kind is None:
        raise _not_an_id(x, param, position)
    return kind


def check_id(x: Any, *, param: str = "id", position: int | None = None) -> str:
    """Apply every rule for one id and return its kind (``"str"`` or ``"int"``).

    Raises
    ------
    InputTypeError
        ``x`` is neither str nor int (float, None, bool, bytes...).
    InputError
        ``x`` is an int outside the int64 range, or a str that is not valid UTF-8 (lone surrogates).
    """
    kind = check_id_type(x, param=param, position=position)
    if kind == "int":
        v = int(x)
        if not INT64_MIN <= v <= INT64_MAX:
            raise _out_of_int64(v, param, position)
    else:
        try:
            x.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise _not_utf8(x, exc, param, position) from None
    return kind


def check_cluster_id(x: Any, *, param: str = "cluster") -> int:
    """The one rule for a cluster id given to a lookup (``Index.members``, ``Diversifier.expand``
    over a live index): an ``int`` or numpy integer (not ``bool``) in the int64 range, returned as a
    plain ``int``. Checked before any backend sees it, so every backend answers alike.

    Raises
    ------
    InputTypeError
        ``x`` is not an int (float, str, None, bool...).
    InputError
        ``x`` is outside int64: no cluster has such an id (an in-range id that names no cluster is
        not an error: the lookup answers that it has no members).
    """
    if id_kind_of(x) != "int":
        raise InputTypeError(f"`{param}` must be an int cluster id; got {type(x).__name__} {x!r:.60}. Use a cluster "
                             "id returned by add(), query() or cluster_of().")
    v = int(x)
    if not INT64_MIN <= v <= INT64_MAX:
        raise InputError(f"`{param}` must be a cluster id in the int64 range [{INT64_MIN}, {INT64_MAX}]; got {v}. "
                         "Use a cluster id returned by add(), query() or cluster_of().")
    return v


#: the longest str id the live index stores, in bytes of UTF-8 (PostgreSQL's unique B-tree on the
#: id refuses entries of ~2.7 KB; one limit for every backend, so an index can move between them).
#: Artifacts take longer ids: the limit is the live index's.
INDEX_ID_MAX_BYTES = 2048


def check_index_ids(ids: Sequence[Any], *, param: str = "ids") -> None:
    """The live index's own id rule, on top of :func:`check_ids`: a str id is at most
    :data:`INDEX_ID_MAX_BYTES` bytes of UTF-8 (checked before any write, on every backend)."""
    if isinstance(ids, np.ndarray) and ids.dtype.kind in "iub":
        return
    if max((len(x) for x in ids if isinstance(x, str)), default=0) * 4 <= INDEX_ID_MAX_BYTES:
        return  # a character is at most 4 bytes of UTF-8: no id can be too long
    for pos, x in enumerate(ids):
        if isinstance(x, str) and len(x) * 4 > INDEX_ID_MAX_BYTES:  # cheap bound first: most ids are short
            n = len(x.encode("utf-8", "surrogatepass"))
            if n > INDEX_ID_MAX_BYTES:
                raise InputError(f"`{param}`: a live index stores str ids of at most {INDEX_ID_MAX_BYTES} bytes of "
                                 f"UTF-8; got {n} bytes at position {pos} ({x!r:.40}...). Use a shorter id, e.g. a "
                                 "hash of it (hashlib.sha256(id.encode()).hexdigest()) with the long id kept in your "
                                 "own store.")


def storable_index_id(x: Any) -> bool:
    """Whether ``x`` could be an id of a live index (every rule of :func:`check_id` and the length
    limit hold); lookups answer "unknown" for any other value instead of asking the backend."""
    kind = id_kind_of(x)
    if kind == "int":
        return INT64_MIN <= int(x) <= INT64_MAX
    if kind != "str":
        return False
    try:
        return len(x.encode("utf-8")) <= INDEX_ID_MAX_BYTES
    except UnicodeEncodeError:
        return False


def _id_items(ids: Any, param: str) -> list | np.ndarray:
    """``ids`` as a list, or as a new int64 array when an integer array is given."""
    if isinstance(ids, np.ndarray):
        if ids.ndim != 1:
            raise InputError(f"`{param}` must be one-dimensional; got shape {ids.shape}. Pass a flat list or array.")
        if ids.dtype.kind in "iu":
            if ids.dtype.kind == "u" and ids.size and int(ids.max()) > INT64_MAX:
                pos = int(np.flatnonzero(ids > INT64_MAX)[0])
                raise _out_of_int64(int(ids[pos]), param, pos)
            return ids.astype(np.int64)
        if ids.dtype.kind in "UO":
            return ids.tolist()
        raise InputTypeError(
            f"`{param}` must hold str or int document ids; got an array of dtype {ids.dtype}. "
            "Convert ids to str or int64 first."
        )
    if isinstance(ids, (str, bytes)) or not hasattr(ids, "__len__"):
        raise InputTypeError(
            f"`{param}` must be a list of str or int document ids (or an int64 array); got {type(ids).__name__}. "
            "Pass a list in document order."
        )
    return list(ids)


def check_ids(ids: Sequence[Any] | np.ndarray, *, param: str = "ids", offset: int = 0, unique: bool = True) -> str:
    """Apply every rule to a corpus' ids and return their kind (``"str"`` when empty).

    Parameters
    ----------
    ids : sequence of str/int, or 1-D integer/str/object array
        Document ids in document order.
    param : str
        The parameter name used in messages.
    offset : int
        Added to the positions named in messages (ids that continue an earlier list).
    unique : bool
        False: every rule but uniqueness (:class:`PackedIds` checks that over all its blocks).

    Raises
    ------
    InputTypeError
        ``ids`` is not a sequence, holds a non-id, or mixes str and int ids.
    InputError
        An int outside int64 or a str that is not valid UTF-8.
    DuplicateIdError
        An id occurs twice (the message names both positions).
    """
    items = _id_items(ids, param)
    if isinstance(items, np.ndarray):
        if unique:
            _check_unique_ints(items, param, offset)
        return "int"
    if not items:
        return "str"
    kind = check_id(items[0], param=param, position=offset)
    exact, same = (str if kind == "str" else int), type(items[0])
    for i, x in enumerate(items):
        t = type(x)
        if t is not exact and t is not same:  # a list of one type costs a type() per id; range/UTF-8 in bulk below
            k = check_id(x, param=param, position=offset + i)
            if k != kind:
                raise _mixed_kinds(kind, offset, k, x, offset + i, param)
    if kind == "int":
        if not (INT64_MIN <= min(map(int, items)) and max(map(int, items)) <= INT64_MAX):
            for i, x in enumerate(items):
                check_id(x, param=param, position=offset + i)
    else:
        try:
            "".join(items).encode("utf-8")
        except UnicodeEncodeError:
            for i, x in enumerate(items):
                check_id(x, param=param, position=offset + i)
    if unique:
        _check_unique(items, param, offset)
    return kind


def _check_unique(items: list, param: str, offset: int) -> None:
    if len(set(items)) == len(items):
        return
    seen: dict[Any, int] = {}
    for pos, x in enumerate(items):
        if x in seen:
            raise _duplicate(x, seen[x] + offset, pos + offset, param)
        seen[x] = pos


def _check_unique_ints(values: np.ndarray, param: str, offset: int) -> None:
    repeat = _first_repeat(values)
    if repeat is not None:
        raise _duplicate(int(values[repeat[1]]), repeat[0] + offset, repeat[1] + offset, param)


def _first_repeat(values: np.ndarray) -> tuple[int, int] | None:
    """(the first position of the value repeated earliest, that earliest repeat) among ``values``
    (a 1-D array), or None when they are distinct."""
    order = np.argsort(values, kind="stable")
    same = values[order[1:]] == values[order[:-1]]
    if not same.any():
        return None
    second = int(order[1:][same].min())  # the earliest position that repeats a value
    return int(np.flatnonzero(values == values[second])[0]), second


def normalize_ids(ids: list) -> list:
    """Checked ids as plain Python values: numpy integers become ``int``; strs are kept."""
    return [int(x) for x in ids] if ids and isinstance(ids[0], _INT_TYPES) else list(ids)

