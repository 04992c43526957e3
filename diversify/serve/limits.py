"""What one request may carry, and the JSON reader that holds a body to it.

Every bound is a field of :class:`Limits`; :func:`parse_body` enforces the byte size, the nesting
depth and the well-formedness of every string (UTF-8 with no lone surrogate, ``"\\ud800"`` written
as an escape included) before a handler sees the body, and :class:`RequestError` is the one error a
handler raises for a bad request: it names the field, the rule, what was received and the fix, and
becomes a 4xx JSON answer (never a traceback).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, Optional

from ..errors import InputError

__all__ = ["Limits", "RequestError", "parse_body", "field_path", "need_list", "need_int", "need_number",
           "need_str", "need_bool", "need_id", "check_keys"]


@dataclass(frozen=True)
class Limits:
    """Bounds on one request (every one is checked before any work on the request starts)."""

    #: bytes of a request body
    max_body_bytes: int = 4 << 20
    #: nesting depth of a body's JSON (objects and arrays)
    max_json_depth: int = 16
    #: hits in one ``/v1/diversify`` request
    max_hits: int = 1000
    #: ``k`` of one ``/v1/diversify`` request
    max_k: int = 1000
    #: ids in one ``/v1/clusters`` request; documents in one index add / query / delete
    max_ids: int = 10_000
    #: documents in one ``/v1/index/add`` or ``/v1/index/query`` request
    max_docs: int = 1000
    #: characters of one text (a hit's ``text``, a document of the live index)
    max_text_chars: int = 200_000
    #: characters of one id
    max_id_chars: int = 1024
    #: entries of one hit's ``vector``
    max_vector_dim: int = 4096
    #: members one ``GET /v1/clusters/{id}`` lists (the rest are counted in ``more``)
    max_members: int = 1000
    #: seconds a client may take to send a request's body (then 408)
    body_timeout: float = 10.0
    #: seconds a client may take to send a request's headers (then the connection is closed)
    header_timeout: float = 10.0


class RequestError(InputError):
    """A bad request: ``field`` names the part of the body at fault (``hits[3].score``), ``status``
    is the HTTP status it is answered with (400, 401, 404, 408, 413, 415, 422...)."""

    def __init__(self, message: str, *, field: Optional[str] = None, status: int = 400) -> None:
        super().__init__(message)
        self.field, self.status = field, status

    def body(self) -> dict:
        return {"error": {"status": self.status, "field": self.field, "message": str(self)}}


def field_path(parent: str, key: Any) -> str:
    """``hits`` + 3 -> ``hits[3]``; ``hits[3]`` + ``"id"`` -> ``hits[3].id``."""
    if isinstance(key, int):
        return f"{parent}[{key}]"
    return f"{parent}.{key}" if parent else str(key)


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=True, default=str) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _kind(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", int: "integer", float: "number",
            type(None): "null"}.get(type(value), type(value).__name__)


def parse_body(raw: bytes, limits: Limits) -> Any:
    """The JSON value of a request body, within ``limits`` (RequestError 413 / 400 otherwise)."""
    if len(raw) > limits.max_body_bytes:
        raise RequestError(f"the request body must be at most {limits.max_body_bytes:,} bytes; got {len(raw):,}. "
                           "Send fewer hits or ids per request.", status=413)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RequestError(f"the request body must be UTF-8; byte {exc.start} is not. Encode the JSON as "
                           "UTF-8.") from None
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except RequestError:
        raise
    except RecursionError:
        raise RequestError(f"the request body's JSON must nest at most {limits.max_json_depth} levels deep; it "
                           "nests far deeper. Send a flat request as docs/serve.md shows.") from None
    except ValueError as exc:
        raise RequestError(f"the request body must be one JSON value; {exc}. Send a JSON object.") from None
    if _levels_over(value, limits.max_json_depth) or _SURROGATE_ESCAPE.search(text):
        _check_tree(value, limits.max_json_depth)  # the walk that names the field at fault
    return value


#: how a lone surrogate gets into a str: an escape (strict UTF-8 decoding refuses encoded ones)
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_CONTAINERS = (list, dict)


def _levels_over(value: Any, limit: int) -> bool:
    """Does ``value`` nest containers more than ``limit`` levels deep? (level by level, no paths)"""
    level = [value] if type(value) in _CONTAINERS else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return True
        inner = []
        for v in level:
            inner += [x for x in (v.values() if type(v) is dict else v) if type(x) in _CONTAINERS]
        level = inner
    return False


def _no_constant(name: str) -> Any:
    raise RequestError(f"JSON numbers must be finite; got {name}. Send a finite number.")


def _check_tree(value: Any, limit: int) -> None:
    """Nesting at most ``limit`` deep, and every string (object keys too) valid Unicode text: no
    lone surrogate. One walk over the parsed value, without recursion."""
    stack = [(value, "", 0)]
    while stack:
        v, p, depth = stack.pop()
        if isinstance(v, str):
            _check_text(v, p)
            continue
        if not isinstance(v, (list, dict)):
            continue
        if depth >= limit:
            raise RequestError(f"the request body's JSON must nest at most {limit} levels deep; `{p or '(body)'}` "
                               "nests deeper. Send a flat request as docs/serve.md shows.", field=p or None)
        if isinstance(v, list):
            stack.extend((x, field_path(p, i), depth + 1) for i, x in enumerate(v))
        else:
            for key, x in v.items():
                _check_text(key, p)
                stack.append((x, field_path(p, key), depth + 1))


def _check_text(s: str, path: str) -> None:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise RequestError(f"`{path or '(body)'}` must be valid Unicode text; it holds a lone surrogate "
                           f"(\\u{ord(s[exc.start]):04x}) at character {exc.start}. Send well-formed "
                           "text.", field=path or None) from None


def check_keys(obj: Any, path: str, allowed: frozenset, required: frozenset = frozenset()) -> dict:
    """``obj`` must be a JSON object with only ``allowed`` keys and every ``required`` one."""
    if not isinstance(obj, dict):
        raise RequestError(f"`{path or '(body)'}` must be a JSON object; got {_kind(obj)}. Send "
                           "{...} as docs/serve.md shows.", field=path or None, status=422)
    extra = sorted(set(obj) - allowed)
    if extra:
        name = field_path(path, extra[0])
        raise RequestError(f"`{name}` is not a field of this request (fields: {', '.join(sorted(allowed))}). "
                           "Remove it or check its spelling.", field=name, status=422)
    missing = sorted(required - set(obj))
    if missing:
        name = field_path(path, missing[0])
        raise RequestError(f"`{name}` is required. Add it.", field=name, status=422)
    return obj


def need_list(value: Any, path: str, *, most: int, what: str = "entries", least: int = 0) -> list:
    if not isinstance(value, list):
        raise RequestError(f"`{path}` must be an array; got {_kind(value)}. Send a JSON array.", field=path,
                           status=422)
    if len(value) > most:
        raise RequestError(f"`{path}` may hold at most {most:,} {what}; got {len(value):,}. Split the request.",
                           field=path, status=413)
    if len(value) < least:
        raise RequestError(f"`{path}` must hold at least {least} {what}; got {len(value)}.", field=path,
                           status=422)
    return value


def need_int(value: Any, path: str, *, least: int, most: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestError(f"`{path}` must be an integer; got {_kind(value)} {_shown(value)}. Send a whole number.",
                           field=path, status=422)
    if not least <= value <= most:
        raise RequestError(f"`{path}` must be in [{least}, {most:,}]; got {_shown(value)}.", field=path, status=422)
    return value


def need_number(value: Any, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RequestError(f"`{path}` must be a number; got {_kind(value)} {_shown(value)}. Send the hit's score "
                           "as a JSON number.", field=path, status=422)
    if isinstance(value, int):
        if abs(value) > 2**53:
            raise RequestError(f"`{path}` must be a number within ±2**53; got {_shown(value)}.", field=path,
                               status=422)
        return float(value)
    if not math.isfinite(value):
        raise RequestError(f"`{path}` must be finite; got {value}.", field=path, status=422)
    return value


def need_str(value: Any, path: str, *, most: int) -> str:
    if not isinstance(value, str):
        raise RequestError(f"`{path}` must be a string; got {_kind(value)} {_shown(value)}.", field=path, status=422)
    if len(value) > most:
        raise RequestError(f"`{path}` may hold at most {most:,} characters; got {len(value):,}. Send a shorter "
                           "text (or cut it into chunks).", field=path, status=413)
    return value


def need_bool(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise RequestError(f"`{path}` must be true or false; got {_kind(value)} {_shown(value)}.", field=path,
                           status=422)
    return value


def need_id(value: Any, path: str, limits: Limits) -> Any:
    """A document id: a string (at most ``max_id_chars``) or an integer in the int64 range."""
    if isinstance(value, str):
        return need_str(value, path, most=limits.max_id_chars)
    if isinstance(value, int) and not isinstance(value, bool):
        if -(2**63) <= value < 2**63:
            return value
        raise RequestError(f"`{path}` must be an integer in the int64 range or a string; got {_shown(value)}.",
                           field=path, status=422)
    raise RequestError(f"`{path}` must be a document id (a string or an integer); got {_kind(value)} "
                       f"{_shown(value)}. Send the id as the artifact knows it.", field=path, status=422)
