"""Document ids: the one home of their rules and of their fixed, platform-independent 64-bit keys.

Rules (checked here and nowhere else): an id is a ``str`` or an ``int`` (never ``bool``, which
would collide with 0/1); ints lie in the int64 range; strs are encodable as UTF-8 (no lone
surrogates); the ids of one corpus are all of one kind and unique. :func:`check_ids` applies
them to a corpus, :func:`check_id` to one id, :func:`check_id_type` only the type rule (the
online side treats an int outside int64 or an unencodable str as simply unknown).

The artifact looks documents up by a 64-bit key instead of the id itself, so the online
lookup table is two flat arrays (sorted keys + cluster ids, 16 bytes per document).

The key scheme is part of the artifact format (``id_key_scheme`` = ``"diversify.idkey.v1"``)
and is pinned by golden tests; changing it is a breaking format change.

* ``int`` ids (any value in the int64 range): the int64 value itself, reinterpreted as an
  unsigned 64-bit integer (two's complement). Exact: distinct ints never share a key.
* ``str`` ids: ``hashlib.blake2b(id.encode("utf-8"), digest_size=8).digest()`` read as a
  little-endian unsigned 64-bit integer. Distinct strings share a key with probability 2**-64
  per pair; :meth:`ClusterMap.from_arrays` refuses a corpus where that happens
  (:func:`check_distinct_keys`), so keys of the ids *in* an artifact are always distinct.

Never Python's ``hash()``: it is salted per process.

Nothing here keeps shared mutable state (no cache), so it is trivially thread-safe and cannot
go stale across artifact reloads. A memo ``str -> key`` was measured: 2.4x faster on hits but
1.25x slower on misses (fresh strings from a store must be hashed for the dict anyway), so it
only pays above a ~30% hit rate, which the online path cannot count on.
"""

from __future__ import annotations

import hashlib
import sys
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from diversify.errors import DuplicateIdError, InputError, InputTypeError

__all__ = [
    "ID_KEY_SCHEME",
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
    "id_key",
    "id_keys",
    "utf8_id_keys",
    "check_distinct_keys",
    "PackedIds",
    "query_keys",
    "lookup_id",
    "UUID_FORMS",
    "uuid_form",
    "format_uuid",
    "parse_uuid",
]

ID_KEY_SCHEME = "diversify.idkey.v1"
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
_U64_MASK = 2**64 - 1

_BLAKE_BASE = hashlib.blake2b(digest_size=8)

_INT_TYPES = (int, np.integer)
_LITTLE = sys.byteorder == "little"


# --------------------------------------------------------------------------- messages (one template each)


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


class PackedIds(Sequence):
    """The ids of a corpus gathered block by block (a streamed build), held as an artifact stores
    them rather than as Python objects: str ids as their UTF-8 bytes and offsets (~20 bytes an
    id of ten characters, where a list of ``str`` costs ~70), int ids as int64.

    :meth:`extend` applies every rule but uniqueness to each block as it comes, so a bad id stops
    a streamed build at its block; :meth:`check_unique` applies that one over all of them, by
    their 64-bit keys (:meth:`keys`, kept for the artifact). Indexing decodes one id.
    """

    def __init__(self, *, param: str = "ids") -> None:
        self.param = param
        self.kind: str | None = None  # of the first id
        self._n = 0
        self._parts: list[bytes] = []  # str ids: each block's UTF-8 bytes, joined
        self._lengths: list[np.ndarray] = []  # str ids: the byte length of each id (uint64)
        self._ints: list[np.ndarray] = []  # int ids: int64 per block
        self._done: tuple[np.ndarray, np.ndarray] | None = None  # (values, offsets) once joined
        self._keys: np.ndarray | None = None
        self._unique = False  # check_unique passed

    def extend(self, block: list) -> None:
        """Append a block of ids (the rules of :func:`check_ids`, uniqueness aside)."""
        if not block:
            return
        if self._done is not None:
            raise RuntimeError("PackedIds.extend after its ids were joined")
        if self.kind is not None:  # the corpus's kind is its first id's: name the first id of another
            exact = str if self.kind == "str" else int
            for i, x in enumerate(block):
                if type(x) is not exact:
                    k = check_id_type(x, param=self.param, position=self._n + i)
                    if k != self.kind:
                        raise _mixed_kinds(self.kind, 0, k, x, self._n + i, self.param)
        kind = check_ids(block, param=self.param, offset=self._n, unique=False)
        if self.kind is None:
            self.kind = kind
        if kind == "int":
            self._ints.append(np.array([int(x) for x in block], dtype=np.int64))
        else:
            encoded = [s.encode("utf-8") for s in block]
            self._parts.append(b"".join(encoded))
            self._lengths.append(np.fromiter(map(len, encoded), dtype=np.uint64, count=len(encoded)))
        self._n += len(block)

    def _joined(self) -> tuple[np.ndarray, np.ndarray]:
        """(int64 values, or the UTF-8 bytes as uint8; for str ids their offsets, uint64 (n+1,))."""
        if self._done is None:
            if self.kind == "int":
                values = np.concatenate(self._ints) if self._ints else np.zeros(0, np.int64)
                offsets = np.zeros(0, np.uint64)
            else:
                values = np.frombuffer(b"".join(self._parts), dtype=np.uint8)
                offsets = np.zeros(self._n + 1, dtype=np.uint64)
                if self._n:
                    np.cumsum(np.concatenate(self._lengths), out=offsets[1:])
            self._parts, self._lengths, self._ints = [], [], []
            self._done = (values, offsets)
        return self._done

    def arrays(self) -> dict[str, np.ndarray]:
        """The artifact's id arrays: ``ids/int``, or ``ids/str_offsets`` and ``ids/str_bytes``."""
        values, offsets = self._joined()
        if self.kind == "int":
            return {"ids/int": values}
        return {"ids/str_offsets": offsets, "ids/str_bytes": values}

    def keys(self) -> np.ndarray:
        """The ids' keys (uint64 (n,), :data:`ID_KEY_SCHEME`), computed once."""
        if self._keys is None:
            values, offsets = self._joined()
            if self.kind == "int":
                self._keys = values.view(np.uint64)
            else:
                raw = values.data
                bounds = offsets.tolist()
                self._keys = utf8_id_keys(map(raw.__getitem__, map(slice, bounds[:-1], bounds[1:])))
        return self._keys

    def check_unique(self) -> None:
        """Raise :class:`DuplicateIdError` for an id that occurs twice (the message names the
        earliest repeat and where the id came first, as :func:`check_ids` does); refuse two ids
        that share a key (:func:`check_distinct_keys`)."""
        if self._unique:
            return
        keys = self.keys()
        repeat = _first_repeat(keys)
        if repeat is None:
            self._unique = True
            return
        first, second = repeat
        if self[first] != self[second]:  # pragma: no cover - needs a 64-bit blake2b collision
            order = np.argsort(keys, kind="stable")
            check_distinct_keys(keys[order], order, self.__getitem__, param=self.param)
        raise _duplicate(self[second], first, second, self.param)

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self._n))]
        i = int(i)
        if not -self._n <= i < self._n:
            raise IndexError(f"id position {i} is out of range ({self._n} ids)")
        i %= self._n
        values, offsets = self._joined()
        if self.kind == "int":
            return int(values[i])
        return bytes(values[int(offsets[i]): int(offsets[i + 1])]).decode("utf-8")


# --------------------------------------------------------------------------- keys


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


# --------------------------------------------------------------------------- UUID forms (online matching)

#: How a UUID can be written as a str id: ``canonical`` is ``str(uuid.UUID)`` (lower case,
#: hyphenated, what Qdrant returns); ``upper`` the same in upper case; ``hex`` / ``HEX`` the 32
#: digits without hyphens; ``urn`` ``urn:uuid:`` + canonical; ``braces`` / ``BRACES`` ``{...}``.
UUID_FORMS = ("canonical", "upper", "hex", "HEX", "urn", "braces", "BRACES")


def format_uuid(u: uuid.UUID, form: str) -> str:
    """``u`` written in one of :data:`UUID_FORMS`."""
    s = str(u)
    if form == "canonical":
        return s
    if form == "upper":
        return s.upper()
    if form == "hex":
        return u.hex
    if form == "HEX":
        return u.hex.upper()
    if form == "urn":
        return u.urn
    if form == "braces":
        return "{" + s + "}"
    if form == "BRACES":
        return "{" + s.upper() + "}"
    raise ValueError(f"unknown UUID form {form!r}; expected one of {UUID_FORMS}")


def parse_uuid(x: Any) -> uuid.UUID | None:
    """``x`` as a UUID when it is one (a ``uuid.UUID``, or a str in any form ``uuid.UUID`` reads), else None."""
    if isinstance(x, uuid.UUID):
        return x
    if not isinstance(x, str) or not 32 <= len(x) <= 45:
        return None
    try:
        return uuid.UUID(x)
    except ValueError:
        return None


def uuid_form(s: Any) -> str | None:
    """Which of :data:`UUID_FORMS` the str id ``s`` is written in; None when it is not a UUID in one of them."""
    u = parse_uuid(s) if isinstance(s, str) else None
    if u is None:
        return None
    return next((form for form in UUID_FORMS if format_uuid(u, form) == s), None)
