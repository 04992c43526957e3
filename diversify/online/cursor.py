"""Stateless pagination cursor: an opaque, URL-safe token the caller hands back.

What it carries (format version 2), so that the server keeps no per-user state:

* ``a`` (anchors): for every cluster shown on earlier pages, the id of one hit that showed it,
  and every shown (or folded on the fly) hit that has no cluster. The next page looks the
  anchors up in the artifact answering *then*, so a cursor stays right across a reload that
  renumbers clusters; anchors themselves are never shown again.
* ``p``: cluster ids that came from the payload field (``cluster_field``), carried as values.
* ``o`` (offset): how far down the store's ranking earlier pages used every hit (a hint for
  the first request of the next page, so a search without exclusion filters is asked for
  ``o + fetch_k`` at once instead of doubling its way down, and its first ``o`` hits are not
  looked at again). Only a hint: every hit looked at is still checked against the anchors and
  their clusters, and no page goes deeper than ``MAX_CURSOR_PAGES * max_fetch_k``.

Nothing else: not the ids that were folded or fetched, so the token grows by one id per
cluster shown (its UTF-8 length + 2 bytes, or 1-9 bytes for an int id) and by the cluster
value for payload clusters, never with what was fetched. See :data:`MAX_CURSOR_CHARS`, and
:func:`cursor_id_limit` for the ids a request for ``k`` results accepts (a page adds at most
``2 * k``), so what a page looks up because of its cursor is bounded by the request.

The token comes from the client, so decoding treats it as hostile: size-bounded, exact
structure, type-checked, and any failure is an :class:`~diversify.errors.InputError`, never a
crash. Tokens of format version 1 (which listed every id shown or folded) are still read.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Optional

import msgpack
import numpy as np

from ..errors import InputError

__all__ = ["CursorState", "EMPTY", "encode_cursor", "decode_cursor", "MAX_CURSOR_CHARS", "MAX_CURSOR_OFFSET",
           "MAX_CURSOR_PAGES", "MAX_CURSOR_IDS", "cursor_id_limit"]

_VERSION = 2
#: Largest token accepted (characters): about 48 KB of state, some 4,000 clusters shown with
#: 10-character string ids. The ids a token may carry are bounded by the request too
#: (:func:`cursor_id_limit`).
MAX_CURSOR_CHARS = 65_536
#: Deepest pagination a cursor stands for: each page adds at most ``2 * k`` ids (one per cluster
#: shown, and at most ``k`` hits without a cluster folded on the fly), so a request for ``k``
#: results accepts a token of at most ``MAX_CURSOR_PAGES * 2 * k`` ids (and ``MAX_CURSOR_IDS``).
MAX_CURSOR_PAGES = 200
#: Most ids (anchors and payload cluster values) any token may carry, whatever ``k``: what one
#: page looks up because of its cursor is bounded by this, not only by the token's length.
MAX_CURSOR_IDS = 10_000
#: Largest offset a token may carry: a search without exclusion filters is never asked for
#: more than ``MAX_CURSOR_OFFSET + max_fetch_k`` results because of a cursor.
MAX_CURSOR_OFFSET = 100_000

_INT64_MIN, _UINT64_MAX = -(2**63), 2**64 - 1


def cursor_id_limit(k: Optional[int]) -> int:
    """The most ids an honest cursor can carry into a request for ``k`` results (None: any k):
    ``min(MAX_CURSOR_IDS, MAX_CURSOR_PAGES * 2 * k)``. A token carrying more is refused."""
    if k is None:
        return MAX_CURSOR_IDS
    return min(MAX_CURSOR_IDS, MAX_CURSOR_PAGES * 2 * max(int(k), 1))


@dataclass(frozen=True, slots=True)
class CursorState:
    """What a cursor says the earlier pages showed."""

    anchors: tuple       # one shown id per cluster shown, and every shown hit without a cluster
    ids: frozenset       # the same ids, as a set
    clusters: frozenset  # cluster ids carried as values (payload clusters; every cluster for v1 tokens)
    offset: int          # hits of the store's ranking that earlier pages used up (a hint)
    legacy: bool = False  # a version-1 token: ``clusters`` were numbered by the artifact that answered then


#: The state of page 1 (no cursor).
EMPTY = CursorState((), frozenset(), frozenset(), 0)


def _wire(v: Any) -> Any:
    """An id or cluster value as it travels: int, or str as UTF-8 bytes (lone surrogates kept); None if neither."""
    t = type(v)
    if t is str or isinstance(v, str):
        return v.encode("utf-8", "surrogatepass")
    if (t is int or isinstance(v, (int, np.integer))) and not isinstance(v, (bool, np.bool_)):
        v = int(v)
        return v if _INT64_MIN <= v <= _UINT64_MAX else None
    return None


def _pack_values(values: Iterable[Any]) -> list:
    out = []
    for v in values:
        w = _wire(v)
        if w is not None:
            out.append(w)
    return out


def encode_cursor(anchors: Sequence[Any], clusters: Iterable[Any], offset: int) -> str:
    """The token for ``anchors`` (see the module docstring), payload ``clusters`` and ``offset``.

    Values that are neither int (int64 / uint64 range) nor str (e.g. tuples) are left out:
    a hit with such an id may show again on a later page. Deterministic: the same arguments
    give the same token (``clusters`` are sorted).
    """
    if all(type(a) is str for a in anchors):  # the common case, without a call per id
        a: list = [s.encode("utf-8", "surrogatepass") for s in anchors]
    else:
        a = _pack_values(anchors)
    p = sorted(_pack_values(clusters), key=lambda w: (type(w) is bytes, w))
    raw = msgpack.packb({"v": _VERSION, "o": max(0, min(int(offset), MAX_CURSOR_OFFSET)), "a": a, "p": p})
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _bad(token: str, why: str) -> InputError:
    return InputError(f"`cursor` is not a valid diversify cursor ({why}); got {token[:40]!r}... "
                      "Pass result.cursor unchanged, or None for page 1.")


def _values(token: str, items: Any, what: str) -> list:
    """Decoded ``int`` / UTF-8 bytes values of a version-2 list (anything else is refused)."""
    if not isinstance(items, list):
        raise _bad(token, f"`{what}` is not a list")
    out: list[Any] = []
    for x in items:
        if type(x) is int:
            out.append(x)
        elif type(x) is bytes:
            try:
                out.append(x.decode("utf-8", "surrogatepass"))
            except UnicodeDecodeError:
                raise _bad(token, f"`{what}` holds bytes that are not UTF-8") from None
        else:
            raise _bad(token, f"`{what}` holds a {type(x).__name__}")
    return out


def decode_cursor(token: Optional[str], k: Optional[int] = None) -> CursorState:
    """Decode a token from :func:`encode_cursor`; ``None`` or ``""`` is page 1 (:data:`EMPTY`).

    Raises :class:`~diversify.errors.InputError` for anything else that is not a valid token
    (also for one longer than :data:`MAX_CURSOR_CHARS`, with an offset over
    :data:`MAX_CURSOR_OFFSET`, or carrying more ids than :func:`cursor_id_limit` allows for a
    request for ``k`` results: counted before any id is converted or looked up).
    """
    if token is None or token == "":
        return EMPTY
    if not isinstance(token, str):
        raise InputError(f"`cursor` must be the string token of a previous result (result.cursor); "
                         f"got {type(token).__name__}. Pass result.cursor unchanged, or None for page 1.")
    if len(token) > MAX_CURSOR_CHARS:
        raise InputError(f"`cursor` is too long ({len(token)} characters, limit {MAX_CURSOR_CHARS}): "
                         "pagination this deep is not supported. Start again from page 1 (cursor=None).")
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        obj = msgpack.unpackb(raw, raw=False, strict_map_key=True, max_bin_len=len(raw), max_str_len=len(raw),
                              max_ext_len=0, max_array_len=len(raw), max_map_len=8)
    except (ValueError, binascii.Error, msgpack.UnpackException, TypeError) as exc:
        raise _bad(token, type(exc).__name__) from None
    if not isinstance(obj, dict) or type(obj.get("v")) is not int:
        raise _bad(token, "wrong structure")
    if obj["v"] == 1:
        _check_count(token, obj.get("i"), obj.get("c"), k)
        return _decode_v1(token, obj)
    if obj["v"] != _VERSION or set(obj) != {"v", "o", "a", "p"}:
        raise _bad(token, "wrong structure or version")
    offset = obj["o"]
    if type(offset) is not int or not 0 <= offset <= MAX_CURSOR_OFFSET:
        raise _bad(token, f"offset must be an int in [0, {MAX_CURSOR_OFFSET}]")
    _check_count(token, obj["a"], obj["p"], k)
    anchors = tuple(_values(token, obj["a"], "a"))
    return CursorState(anchors, frozenset(anchors), frozenset(_values(token, obj["p"], "p")), offset)


def _check_count(token: str, ids: Any, values: Any, k: Optional[int]) -> None:
    """Refuse a token carrying more ids than any honest cursor of a request for ``k`` results."""
    n = (len(ids) if isinstance(ids, list) else 0) + (len(values) if isinstance(values, list) else 0)
    limit = cursor_id_limit(k)
    if n > limit:
        for_k = f"a request for k={k}" if k is not None else "any request"
        raise InputError(f"`cursor` carries {n} ids, more than any cursor of {for_k} can (at most {limit}: "
                         f"{MAX_CURSOR_PAGES} pages of 2 * k ids, and never over {MAX_CURSOR_IDS}); pagination "
                         "this deep is not supported, or the token was not made by diversify. Start again from "
                         "page 1 (cursor=None).")


def _ok_v1(v: Any) -> bool:
    return (type(v) is int) or isinstance(v, str)


def _decode_v1(token: str, obj: dict) -> CursorState:
    """A version-1 token (every id shown or folded, every cluster shown, a fingerprint)."""
    ids, clusters = obj.get("i"), obj.get("c")
    if (set(obj) != {"v", "i", "c", "f"} or not isinstance(ids, list) or not isinstance(clusters, list)
            or not isinstance(obj["f"], str) or not all(map(_ok_v1, ids)) or not all(map(_ok_v1, clusters))):
        raise _bad(token, "wrong structure or version")
    return CursorState(tuple(ids), frozenset(ids), frozenset(clusters), 0, legacy=True)
