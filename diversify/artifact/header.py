"""The container's msgpack header: plain values in canonical form, packed deterministically, decoded strictly.

Writing: :func:`canonical` turns the caller's header into plain msgpack data with every map's
keys sorted, so the same header always packs to the same bytes. Reading: :func:`unpack_header`
refuses ext types (where msgpack libraries plug in object construction), duplicate keys (readers
could disagree on the value), non-str keys, length claims beyond the header and nesting deeper
than :data:`~diversify.artifact.layout.MAX_DEPTH`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgpack
import numpy as np

from diversify.artifact.layout import MAX_DEPTH, MAX_HEADER_BYTES, artifact_error
from diversify.errors import InputError, InputTypeError

__all__ = ["canonical", "pack_header", "unpack_header"]


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
    """msgpack bytes of canonical data (str and bin distinct, floats as float64)."""
    return msgpack.packb(obj, use_bin_type=True, use_single_float=False)


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
    _check_plain(obj, path, "header", 0)
    return obj


def _check_plain(obj: Any, path: str, where: str, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise artifact_error(
            path, f"`{where}` is nested deeper than {MAX_DEPTH} levels. The file is hostile or corrupt."
        )
    if isinstance(obj, dict):
        for k, v in obj.items():
            if not isinstance(k, str):
                raise artifact_error(path, f"`{where}` has a non-str key {k!r}. The file is corrupt.")
            _check_plain(v, path, f"{where}.{k}", depth + 1)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            _check_plain(v, path, f"{where}[{i}]", depth + 1)
    elif not (obj is None or isinstance(obj, (bool, int, float, str, bytes))):
        raise artifact_error(
            path,
            f"`{where}` holds a {type(obj).__name__}, which the format does not allow. The file is hostile or corrupt.",
        )
