"""Reading corpora for the CLI (JSONL, CSV, Parquet, a directory of text files, .npy vectors)
and writing per-document exports. Everything streams record by record; writes are atomic."""

from __future__ import annotations

import csv
import json
import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Optional

import numpy as np

from ..errors import InputError, require

__all__ = ["detect_format", "read_records", "read_vectors", "read_table", "column", "jsonl_records"]

FORMATS = ("jsonl", "csv", "parquet", "dir")


def detect_format(path: str) -> str:
    p = Path(path)
    if p.is_dir():
        return "dir"
    suffix = "".join(p.suffixes[-2:]).lower() if p.suffix.lower() == ".gz" else p.suffix.lower()
    for fmt, exts in (("jsonl", (".jsonl", ".ndjson", ".json")), ("csv", (".csv", ".tsv")), ("parquet", (".parquet", ".pq"))):
        if suffix in exts:
            return fmt
    raise InputError(
        f"`input` format could not be told from its name {path!r} (expected .jsonl, .csv, .parquet or a directory). "
        "Pass --format jsonl|csv|parquet|dir."
    )


def _missing_field(field: str, which: str, where: str, have) -> InputError:
    return InputError(
        f"`--{which}-field` {field!r} is missing in {where}; fields present: {sorted(have)[:12]}. "
        f"Pass --{which}-field NAME to use another field."
    )


def read_records(path: str, *, fmt: Optional[str] = None, id_field: str = "id", text_field: str = "text",
                 key_field: Optional[str | Sequence[str]] = None, encoding_errors: str = "strict") -> Iterator[tuple]:
    """Yield (id, text, key) per record. ``id`` may be absent (then the record number is used).

    ``key_field`` names one field (key = its value) or several (key = a tuple of their values).
    """
    if not os.path.exists(path):
        raise InputError(f"`input` path {path!r} does not exist. Check the path.")
    fmt = fmt or detect_format(path)
    if fmt == "jsonl":
        yield from _read_jsonl(path, id_field, text_field, key_field)
    elif fmt == "csv":
        yield from _read_csv(path, id_field, text_field, key_field)
    elif fmt == "parquet":
        yield from _read_parquet(path, id_field, text_field, key_field)
    elif fmt == "dir":
        yield from _read_dir(path, encoding_errors)
    else:
        raise InputError(f"`--format` must be one of {FORMATS}; got {fmt!r}.")


def _key_of(get, key_field):
    """The record's key: None, one value, or a tuple of values for several key fields (in order)."""
    if not key_field:
        return None
    if isinstance(key_field, str):
        return get(key_field)
    return tuple(get(f) for f in key_field)


def _read_jsonl(path, id_field, text_field, key_field):
    for lineno, rec in _jsonl_dicts(path):
        if text_field not in rec:
            raise _missing_field(text_field, "text", f"{path}:{lineno}", rec.keys())
        text = rec[text_field]
        if not isinstance(text, str):
            raise InputError(f"{path}:{lineno}: field {text_field!r} must be a string; got {type(text).__name__}.")
        yield rec.get(id_field, lineno - 1), text, _key_of(rec.get, key_field)


def _read_csv(path, id_field, text_field, key_field):
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    delim = "\t" if path.lower().endswith(".tsv") else ","
    with open(path, newline="", encoding="utf-8", errors="strict") as f:
        try:
            reader = csv.DictReader(f, delimiter=delim)
            if reader.fieldnames is None or text_field not in reader.fieldnames:
                raise _missing_field(text_field, "text", path, reader.fieldnames or [])
            has_id = id_field in reader.fieldnames
            for rowno, row in enumerate(reader):
                key = _key_of(row.get, key_field)
                yield (row[id_field] if has_id else rowno), row[text_field] or "", key
        except UnicodeDecodeError as exc:
            raise InputError(f"{path}: not valid UTF-8 ({exc}). Re-encode the file as UTF-8.") from None


def _read_parquet(path, id_field, text_field, key_field):
    pq = require("pyarrow.parquet", extra="parquet", purpose="Reading Parquet")
    pf = pq.ParquetFile(path)
    names = pf.schema_arrow.names
    if text_field not in names:
        raise _missing_field(text_field, "text", path, names)
    key_fields = [key_field] if isinstance(key_field, str) else list(key_field or [])
    cols = [c for c in (id_field, text_field, *key_fields) if c and c in names]
    row = 0
    for batch in pf.iter_batches(columns=cols, batch_size=65536):
        d = batch.to_pydict()
        texts = d[text_field]
        ids = d.get(id_field) or list(range(row, row + len(texts)))
        for i, t in enumerate(texts):
            yield ids[i], t if t is not None else "", _key_of(lambda f: d.get(f, [None] * len(texts))[i], key_field)
        row += len(texts)


def _read_dir(path, encoding_errors):
    root = Path(path)
    files = sorted(p for p in root.rglob("*") if p.is_file() and not p.name.startswith("."))
    for p in files:
        data = p.read_bytes()
        try:
            text = data.decode("utf-8", errors=encoding_errors)
        except UnicodeDecodeError as exc:
            raise InputError(
                f"{p}: not valid UTF-8 at byte {exc.start} ({data[exc.start:exc.start + 4]!r}). Re-encode the file, or "
                "pass --encoding-errors replace to substitute U+FFFD for bad bytes."
            ) from None
        yield p.relative_to(root).as_posix(), text, None


def read_vectors(path: str, ids_path: Optional[str] = None):
    """Load ``.npy`` vectors (never pickled objects) and optional ids (one per line)."""
    if not os.path.exists(path):
        raise InputError(f"`--vectors` file {path!r} does not exist.")
    try:
        vecs = np.load(path, allow_pickle=False, mmap_mode="r")
    except ValueError as exc:
        raise InputError(f"`--vectors` {path!r} is not a numeric .npy array ({exc}). Save it with np.save(path, array).") from None
    ids = None
    if ids_path:
        with open(ids_path, encoding="utf-8") as f:
            ids = [line.rstrip("\n") for line in f if line.strip()]
    return vecs, ids


def read_table(path: str, columns: Optional[Sequence[str]] = None, delimiter: Optional[str] = None) -> list[dict]:
    """All records of a small JSONL / CSV / TSV file as dicts (for labels and labeled pairs).

    TSV is read without quote processing (as MRPC and STS-B need); a UTF-8 BOM is ignored.
    ``columns`` names the columns of a CSV/TSV file that has no header row; ``delimiter`` overrides
    the one implied by the extension (``,`` for .csv, a tab for .tsv).
    """
    if not os.path.exists(path):
        raise InputError(f"file {path!r} does not exist. Check the path.")
    fmt = detect_format(path)
    if fmt == "jsonl":
        return [rec for _, rec in _jsonl_dicts(path)]
    if fmt != "csv":
        raise InputError(f"labels/pairs must be JSONL, CSV or TSV; got {path!r}.")
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    tsv = path.lower().endswith(".tsv")
    if delimiter is not None and len(delimiter) != 1:
        raise InputError(f"`--delimiter` must be one character (e.g. ',' or '\\t'); got {delimiter!r}.")
    with open(path, newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f, fieldnames=list(columns) if columns else None,
                                delimiter=delimiter or ("\t" if tsv else ","),
                                quoting=csv.QUOTE_NONE if tsv else csv.QUOTE_MINIMAL)
        return list(reader)


def _jsonl_dicts(path):
    with open(path, "rb") as f:
        yield from jsonl_records(f, path)


def jsonl_records(lines: Iterable[bytes], where: str) -> Iterator[tuple[int, dict]]:
    """(line number, record) of every non-blank JSONL line; the one JSONL parser of both engines.

    ``where`` names the source in errors (``"{where}:{lineno}: ..."``).
    """
    for lineno, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            rec = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise InputError(f"{where}:{lineno}: not valid JSON ({exc}). Each line must be one JSON object.") from None
        if not isinstance(rec, dict):
            raise InputError(f"{where}:{lineno}: each line must be a JSON object; got {type(rec).__name__}.")
        yield lineno, rec


def column(rows: list[dict], name: str, path: str) -> list:
    if rows and name not in rows[0]:
        raise InputError(f"column {name!r} is missing in {path}; columns: {sorted(rows[0])[:12]}. Name it with the matching --*-field/--label option.")
    return [r.get(name) for r in rows]
