"""Stateless pagination cursor: an opaque, URL-safe token the caller hands back.

It carries what page 1..p showed (ids of kept and folded hits, and their cluster ids) plus the
fingerprint of the artifact that answered, so the server keeps no per-user state. The token
comes from the client, so decoding treats it as hostile: size-bounded, type-checked, and any
failure is an :class:`~diversify.errors.InputError`, never a crash.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Optional

import msgpack
import numpy as np

from ..errors import InputError

__all__ = ["CursorState", "encode_cursor", "decode_cursor", "MAX_CURSOR_CHARS"]

_VERSION = 1
#: Largest token accepted (characters); a cursor grows by roughly 10 bytes per shown hit.
MAX_CURSOR_CHARS = 4_000_000


@dataclass(frozen=True)
class CursorState:
    ids: frozenset            # ids already shown or folded on earlier pages
    clusters: frozenset       # cluster ids already shown on earlier pages
    fingerprint: str          # fingerprint of the artifact that assigned ``clusters``
    order: tuple              # ids in the order they were seen (for store-side exclusion)


EMPTY = CursorState(frozenset(), frozenset(), "", ())


def _ok_key(v) -> bool:
    return (isinstance(v, int) and not isinstance(v, bool)) or isinstance(v, str)


def _plain(v):
    # numpy integers (from a store's label array) travel as plain ints
    return int(v) if isinstance(v, np.integer) else v


_PLAIN_TYPES = frozenset((int, str))


def encode_cursor(ids: Iterable[Hashable], clusters: Iterable[Hashable], fingerprint: str) -> str:
    """Ids and cluster ids that are neither int nor str (e.g. tuples) are left out."""
    ids = list(ids)
    clusters = list(clusters)
    types = set(map(type, ids))
    ctypes = set(map(type, clusters))
    if not (types <= _PLAIN_TYPES and len(ctypes) <= 1 and ctypes <= _PLAIN_TYPES):
        ids = [i for i in map(_plain, ids) if _ok_key(i)]
        clusters = [c for c in map(_plain, clusters) if _ok_key(c)]
        clusters.sort(key=lambda c: (isinstance(c, str), c))
    else:
        clusters.sort()
    raw = msgpack.packb({"v": _VERSION, "i": ids, "c": clusters, "f": fingerprint or ""},
                        use_bin_type=True)
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_cursor(token: Optional[str]) -> CursorState:
    if token is None or token == "":
        return EMPTY
    if not isinstance(token, str):
        raise InputError(f"`cursor` must be the string token of a previous result (result.cursor); "
                         f"got {type(token).__name__}. Pass result.cursor unchanged, or None for page 1.")
    if len(token) > MAX_CURSOR_CHARS:
        raise InputError(f"`cursor` is too long ({len(token)} characters, limit {MAX_CURSOR_CHARS}). "
                         "Start again from page 1 (cursor=None).")
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        obj = msgpack.unpackb(raw, raw=False, strict_map_key=True,
                              max_bin_len=0, max_ext_len=0, max_array_len=len(raw), max_map_len=8)
    except (ValueError, binascii.Error, msgpack.UnpackException, TypeError) as exc:
        raise InputError(f"`cursor` is not a valid diversify cursor ({type(exc).__name__}); got "
                         f"{token[:40]!r}... Pass result.cursor unchanged, or None for page 1.") from None
    if (not isinstance(obj, dict) or obj.get("v") != _VERSION or not isinstance(obj.get("i"), list)
            or not isinstance(obj.get("c"), list) or not isinstance(obj.get("f"), str)
            or not all(_ok_key(x) for x in obj["i"]) or not all(_ok_key(x) for x in obj["c"])):
        raise InputError(f"`cursor` is not a valid diversify cursor (wrong structure or version); got "
                         f"{token[:40]!r}... Pass result.cursor unchanged, or None for page 1.")
    return CursorState(frozenset(obj["i"]), frozenset(obj["c"]), obj["f"], tuple(obj["i"]))
