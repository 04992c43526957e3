"""The one JSONL parser of both engines (:func:`jsonl_records`) and its JSON value reader (:func:`loads`)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

import msgspec

from ..errors import InputError

__all__ = ["loads", "jsonl_records"]

_fast_decode = msgspec.json.Decoder().decode


def loads(raw: bytes) -> Any:
    """One JSON value from ``raw``, as :func:`json.loads` reads it, at msgspec's speed.

    msgspec gives the values ``json.loads`` gives (ints of any size exactly, the same floats and
    strings) and refuses a superset of what ``json.loads`` refuses (NaN, Infinity, numbers out of
    float range, lone surrogates, a byte-order mark): those lines go to ``json.loads``, whose
    answer, value or error, is the answer. So the values and errors are the standard library's.
    """
    try:
        return _fast_decode(raw)
    except (msgspec.DecodeError, RecursionError):
        return json.loads(raw)


def jsonl_records(lines: Iterable[bytes], where: str, *, start: int = 1) -> Iterator[tuple[int, dict]]:
    """(line number, record) of every non-blank JSONL line; the one JSONL parser of both engines.

    ``where`` names the source in errors (``"{where}:{lineno}: ..."``); ``start`` is the number of
    the first line.
    """
    for lineno, raw in enumerate(lines, start):
        if not raw.strip():
            continue
        try:
            rec = loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError, or an int of > 4300 digits
            raise InputError(f"{where}:{lineno}: not valid JSON ({exc}). Each line must be one JSON object.") from None
        except RecursionError:
            raise InputError(f"{where}:{lineno}: the JSON value is nested too deeply to read. Each line must be one "
                             "JSON object of a record's fields.") from None
        if not isinstance(rec, dict):
            raise InputError(f"{where}:{lineno}: each line must be a JSON object; got {type(rec).__name__}.")
        yield lineno, rec
