"""Where record ``i`` of an input is (``more.jsonl:14``, ``part-1.parquet row 3``), for messages
that name a record by its place in the user's file rather than in the list the reader made.

Only called when a message needs it (a refused id): the input is read again up to that record.
"""

from __future__ import annotations

import csv
import io
from typing import Optional

from .inputs import STDIN, detect_format, dir_files, open_input
from .jsonl import jsonl_records
from .shards import expand_shards

__all__ = ["record_location"]


def record_location(path: str, index: int, *, fmt: Optional[str] = None) -> str:
    """Record ``index`` (0-based, in reading order) of ``path`` as the user finds it: the file and
    line for JSONL (blank lines counted) and CSV, the file and row for Parquet, the file for a
    directory of documents; ``"record N"`` when the input cannot be read again (stdin)."""
    fallback = f"record {index}" + (" of stdin" if path == STDIN else f" of {path}")
    if path == STDIN:
        return fallback
    try:
        shards = expand_shards(path, fmt=fmt)
        files, kind = (list(shards.paths), shards.fmt) if shards else ([path], fmt or detect_format(path))
        for p in files:
            found, index = _in_file(p, kind, index)
            if found is not None:
                return found
    except (OSError, ValueError, UnicodeDecodeError):  # changed or unreadable since: the plain number
        return fallback
    return fallback


def _in_file(path: str, kind: str, index: int) -> tuple[Optional[str], int]:
    """(location, None) when record ``index`` is in this file, else (None, index less its records)."""
    if kind == "dir":
        files = dir_files(path)
        return (str(files[index]) if index < len(files) else None), index - len(files)
    with open_input(path, "input") as f:
        if kind == "jsonl":
            n = 0
            for lineno, _ in jsonl_records(f, path):
                if n == index:
                    return f"{path}:{lineno}", 0
                n += 1
            return None, index - n
        if kind == "csv":
            reader = csv.reader(io.TextIOWrapper(f, encoding="utf-8-sig", errors="replace", newline=""),
                                delimiter="\t" if path.lower().endswith(".tsv") else ",")
            next(reader, None)  # the header
            n = 0
            for _ in reader:
                if n == index:
                    return f"{path}:{reader.line_num}", 0
                n += 1
            return None, index - n
        import pyarrow.parquet as pq

        rows = pq.ParquetFile(f).metadata.num_rows
        return (f"{path} row {index}" if index < rows else None), index - rows
