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
from typing import Any, Optional

import msgpack
import numpy as np

from ..errors import InputError

__all__ = ["CursorState", "EMPTY", "encode_cursor", "decode_cursor", "next_cursor", "MAX_CURSOR_CHARS"]

_VERSION = 1
#: Largest token accepted (characters); a cursor grows by roughly 10 bytes per shown hit.
MAX_CURSOR_CHARS = 4_000_000


@dataclass(frozen=True)
class CursorState:
    """What a cursor says the earlier pages showed."""

    ids: frozenset            # ids already shown or folded on earlier pages
    clusters: frozenset       # cluster ids already shown on earlier pages
    fingerprint: str          # fingerprint of the artifact that assigned ``clusters``
    order: tuple              # ids in the order they were seen (for store-side exclusion)


#: The state of page 1 (no cursor).
EMPTY = CursorState(frozenset(), frozenset(), "", ())


def _ok_key(v: Any) -> bool:
    return (isinstance(v, int) and not isinstance(v, bool)) or isinstance(v, str)


def _plain(v: Any) -> Any:
    # numpy integers (from a store's label array) travel as plain ints
    return int(v) if isinstance(v, np.integer) else v


_PLAIN_TYPES = frozenset((int, str))


def encode_cursor(ids: Iterable[Hashable], clusters: Iterable[Hashable], fingerprint: str) -> str:
    """The token for ``ids`` shown so far and their ``clusters``, answered by ``fingerprint``.

    Ids and cluster ids that are neither int nor str (e.g. tuples) are left out.
    """
    id_list: list[Any] = list(ids)
    cluster_list: list[Any] = list(clusters)
    types = set(map(type, id_list))
    ctypes = set(map(type, cluster_list))
    if not (types <= _PLAIN_TYPES and len(ctypes) <= 1 and ctypes <= _PLAIN_TYPES):
        id_list = [i for i in map(_plain, id_list) if _ok_key(i)]
        cluster_list = [c for c in map(_plain, cluster_list) if _ok_key(c)]
        cluster_list.sort(key=lambda c: (isinstance(c, str), c))
    else:
        cluster_list.sort()
    raw = msgpack.packb({"v": _VERSION, "i": id_list, "c": cluster_list, "f": fingerprint or ""},
                        use_bin_type=True)
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def next_cursor(previous: CursorState, kept: Iterable[Any], fingerprint: str) -> str:
    """The token for the page after this one: what earlier pages and this page's ``kept`` hits
    (each a :class:`~diversify.online.Kept`, with what was folded into it) showed."""
    shown = list(previous.order)
    clusters = set(previous.clusters)
    for kp in kept:
        shown.append(kp.hit.id)
        shown.extend(f.id for f in kp.folded)
        if kp.cluster_id is not None:
            clusters.add(kp.cluster_id)
    return encode_cursor(shown, clusters, fingerprint)


def decode_cursor(token: Optional[str]) -> CursorState:
    """Decode a token from :func:`encode_cursor`; ``None`` or ``""`` is page 1 (:data:`EMPTY`).

    Raises :class:`~diversify.errors.InputError` for anything else that is not a valid token.
    """
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
