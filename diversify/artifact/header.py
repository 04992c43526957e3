"""The container's msgpack header: plain values in canonical form, packed deterministically, decoded strictly.

Writing: :func:`canonical` turns the caller's header into plain msgpack data with every map's
keys sorted, so the same header always packs to the same bytes, and :func:`pack_header` refuses
a header that a reader would refuse for its size. Reading: :func:`unpack_header` first walks the
bytes without building anything (:func:`count_values`: length claims beyond the header, ext types,
where msgpack libraries plug in object construction, nesting deeper than
:data:`~diversify.artifact.layout.MAX_DEPTH`, more than
:data:`~diversify.artifact.layout.MAX_HEADER_VALUES` values), so that decoding costs a bounded
amount of memory and time whatever the bytes; then it decodes strictly, refusing duplicate keys
(readers could disagree on the value) and non-str keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgpack
import numpy as np

from diversify.artifact.layout import MAX_DEPTH, MAX_HEADER_BYTES, MAX_HEADER_VALUES, artifact_error
from diversify.errors import InputError, InputTypeError

__all__ = ["canonical", "pack_header", "unpack_header", "count_values", "HeaderBytesError"]


def canonical(obj: Any, *, path: str = "header", depth: int = 0) -> Any:
    """Return ``obj`` as plain msgpack-able data with every map's keys sorted.

    Accepts None, bool, int (-2**63 .. 2**64-1), float, str, bytes, list/tuple and dicts with
    str keys; numpy scalars are converted to the matching Python type. Anything else raises
    :class:`InputTypeError` naming the path of the offending value.
    """
    if depth > MAX_DEPTH:
        raise InputError(
            f"`{path}` is nested deeper than {MAX_DEPTH} levels. Flatten the structure before storing it."
        )
    if obj is None or isinstance(obj, (bool, str, bytes)):
        return obj
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        v = int(obj)
        if not -(2**63) <= v < 2**64:
            raise InputError(
                f"`{path}` must be an integer in [-2**63, 2**64); got {v}. Store it as a str instead."
            )
        return v
    if isinstance(obj, (float, np.floating)):
        return float(obj)
    if isinstance(obj, (list, tuple)):
        return [canonical(v, path=f"{path}[{i}]", depth=depth + 1) for i, v in enumerate(obj)]
    if isinstance(obj, Mapping):
        out = {}
        for k in sorted(obj, key=lambda k: (not isinstance(k, str), str(k))):
            if not isinstance(k, str):
                raise InputTypeError(
                    f"`{path}` keys must be str; got {type(k).__name__} {k!r}. Convert the key with str()."
                )
            out[k] = canonical(obj[k], path=f"{path}.{k}", depth=depth + 1)
        return out
    raise InputTypeError(
        f"`{path}` must hold only None/bool/int/float/str/bytes/list/dict values; got {type(obj).__name__}. "
        "Convert it (e.g. arrays with .tolist(), paths with str())."
    )


def pack_header(obj: Any) -> bytes:
    """msgpack bytes of canonical data (str and bin distinct, floats as float64).

    Raises :class:`InputError` when the bytes exceed what a reader accepts (``MAX_HEADER_BYTES``,
    ``MAX_HEADER_VALUES``): nothing is written that :func:`unpack_header` would refuse.
    """
    raw = msgpack.packb(obj, use_bin_type=True, use_single_float=False)
    if len(raw) > MAX_HEADER_BYTES:
        raise InputError(
            f"`header` packs to {len(raw)} bytes; the limit is {MAX_HEADER_BYTES}. Move large values into arrays."
        )
    try:
        count_values(raw)
    except HeaderBytesError as exc:
        raise InputError(f"`header` {exc}. Move long lists and large maps into arrays.") from None
    return raw


# --------------------------------------------------------------------------- walking the bytes

# first byte -> bytes that follow it, for the fixed-size scalars (nil, bools, floats, ints)
_FIXED = {0xC0: 0, 0xC2: 0, 0xC3: 0, 0xCA: 4, 0xCB: 8, 0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8, 0xD0: 1, 0xD1: 2, 0xD2: 4, 0xD3: 8}
# bin8/16/32 and str8/16/32 -> width of their big-endian byte length
_SIZED = {0xC4: 1, 0xC5: 2, 0xC6: 4, 0xD9: 1, 0xDA: 2, 0xDB: 4}
# array16/32 and map16/32 -> (width of their big-endian length, values per entry)
_CONTAINERS = {0xDC: (2, 1), 0xDD: (4, 1), 0xDE: (2, 2), 0xDF: (4, 2)}


class HeaderBytesError(ValueError):
    """msgpack bytes refused before decoding; ``kind`` is ``"malformed"``, ``"deep"`` or ``"values"``."""

    def __init__(self, kind: str, what: str):
        super().__init__(what)
        self.kind = kind


def count_values(raw: bytes) -> int:
    """Walk the one msgpack value in ``raw`` without building it; return how many values it holds.

    Every scalar, array and map counts as one value, and so does each map key. Cost: one Python
    step per value, stopped after :data:`MAX_HEADER_VALUES`, and no allocation beyond a stack of
    at most :data:`MAX_DEPTH` + 1 ints.

    Raises
    ------
    HeaderBytesError
        ``kind="malformed"``: a length runs past the end, a container claims more values than
        bytes are left, an ext type or the reserved byte 0xc1, trailing bytes;
        ``kind="deep"``: values nested deeper than ``MAX_DEPTH`` (the root is at depth 0);
        ``kind="values"``: more than ``MAX_HEADER_VALUES`` values.
    """
    end = len(raw)
    pos = 0
    values = 0
    todo = [1]  # values still to read in each open container, innermost last (the root first)
    while todo:
        if not todo[-1]:
            todo.pop()
            continue
        todo[-1] -= 1
        if pos >= end:
            raise HeaderBytesError("malformed", "the bytes end inside a value")
        b = raw[pos]
        pos += 1
        values += 1
        if values > MAX_HEADER_VALUES:
            raise HeaderBytesError(
                "values",
                f"holds more than {MAX_HEADER_VALUES} msgpack values, the limit (a decoded value costs up to "
                "~100 bytes of memory however few bytes encode it)",
            )
        if b < 0x80 or b >= 0xE0:  # positive / negative fixint
            continue
        if b < 0xA0:  # fixmap 0x80-0x8f (two values per entry), fixarray 0x90-0x9f
            count = (b & 0x0F) * (2 if b < 0x90 else 1)
        elif b < 0xC0:  # fixstr
            pos += b & 0x1F
            if pos > end:
                raise HeaderBytesError("malformed", "a str runs past the end")
            continue
        elif b in _FIXED:
            pos += _FIXED[b]
            if pos > end:
                raise HeaderBytesError("malformed", "a number runs past the end")
            continue
        elif b in _SIZED:
            w = _SIZED[b]
            pos += w + int.from_bytes(raw[pos : pos + w], "big")
            if pos > end:
                raise HeaderBytesError("malformed", "a str or bin claims more bytes than are left")
            continue
        elif b in _CONTAINERS:
            w, per = _CONTAINERS[b]
            count = int.from_bytes(raw[pos : pos + w], "big") * per
            pos += w
        else:
            raise HeaderBytesError("malformed", f"byte {b:#04x} at offset {pos - 1} is an ext type or reserved")
        if count:
            if count > end - pos:  # every value takes at least one byte
                raise HeaderBytesError("malformed", f"a container claims {count} values with {max(end - pos, 0)} bytes left")
            if len(todo) > MAX_DEPTH:
                raise HeaderBytesError("deep", f"is nested deeper than {MAX_DEPTH} levels")
            todo.append(count)
    if pos != end:
        raise HeaderBytesError("malformed", f"{end - pos} bytes follow the value")
    return values


def _ext_hook(code: int, data: bytes) -> Any:
    raise ValueError(f"msgpack extension type {code} is not allowed")


def _no_duplicate_keys(pairs: list[tuple[Any, Any]]) -> dict:
    out = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate map key {k!r} (readers could disagree on its value)")
        out[k] = v
    return out


def unpack_header(raw: bytes, path: str) -> dict:
    """Decode the header bytes of the artifact at ``path`` strictly; raise :class:`ArtifactError` otherwise."""
    try:
        count_values(raw)
    except HeaderBytesError as exc:
        if exc.kind == "malformed":
            raise artifact_error(
                path, f"the msgpack header is malformed ({exc}). The file is corrupt or not a diversify artifact; rebuild it."
            ) from None
        raise artifact_error(path, f"`header` {exc}. The file is hostile or corrupt.") from None
    try:
        obj = msgpack.unpackb(
            raw,
            raw=False,
            strict_map_key=True,
            use_list=True,
            object_pairs_hook=_no_duplicate_keys,
            ext_hook=_ext_hook,
            max_str_len=MAX_HEADER_BYTES,
            max_bin_len=MAX_HEADER_BYTES,
            max_array_len=1 << 20,
            max_map_len=1 << 20,
            max_ext_len=0,
        )
    except Exception as exc:  # msgpack raises ValueError, ExtraData, FormatError, StackError...
        raise artifact_error(
            path,
            f"the msgpack header is malformed ({type(exc).__name__}: {exc}). "
            "The file is corrupt or not a diversify artifact; rebuild it.",
        ) from None
    if not isinstance(obj, dict):
        raise artifact_error(
            path,
            f"the header must be a msgpack map; got {type(obj).__name__}. "
            "The file is corrupt or not a diversify artifact; rebuild it.",
        )
    _check_plain(obj, path)
    return obj


_SCALARS = (type(None), bool, int, float, str, bytes)


def _check_plain(obj: Any, path: str) -> None:
    """Only plain values and str keys (iterative, one step per value; :func:`count_values` bounded the depth)."""
    stack = [obj]
    while stack:
        o = stack.pop()
        values = o.values() if type(o) is dict else o
        if type(o) is dict:
            for k in o:
                if type(k) is not str:
                    raise artifact_error(path, f"the header has a non-str map key {k!r:.60}. The file is corrupt.")
        for v in values:
            if type(v) is dict or type(v) is list:
                stack.append(v)
            elif not isinstance(v, _SCALARS):
                raise artifact_error(
                    path, f"the header holds a {type(v).__name__}, which the format does not allow. The file is hostile or corrupt."
                )
