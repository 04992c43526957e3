"""Small side inputs of the command line: ``.npy`` vectors with their ids, and tables of labels
or labeled pairs (JSONL, CSV, TSV) read whole."""

from __future__ import annotations

import csv
import io
import os
import sys
from collections.abc import Sequence
from typing import Optional

import numpy as np

from ..errors import InputError
from .inputs import check_input_file, detect_format, open_input
from .jsonl import jsonl_records

__all__ = ["read_vectors", "read_table", "column"]


def read_vectors(path: str, ids_path: Optional[str] = None, *, param: str = "--vectors"):
    """Load ``.npy`` vectors (never pickled objects; memory-mapped) and optional ids (one per line).

    The array's values are checked where they are used (:func:`diversify.sketches.simhash.normalize_vectors`:
    real numbers, 2-D, finite, nonzero).
    """
    check_input_file(path, param)
    try:
        vecs = np.load(path, allow_pickle=False, mmap_mode="r")
    except (ValueError, EOFError, OSError, SyntaxError, TypeError, UnicodeError) as exc:
        raise InputError(f"`{param}` {path!r} is not a numeric .npy array ({exc}). Save it with "
                         "np.save(path, array).") from None
    if not isinstance(vecs, np.ndarray):  # an .npz archive
        raise InputError(f"`{param}` {path!r} is an .npz archive, not one .npy array. Save the vectors with "
                         "np.save(path, array).")
    ids = None
    if ids_path:
        with open_input(ids_path, "--ids") as f:
            data = f.read()
        try:
            lines = data.decode("utf-8").split("\n")
        except UnicodeDecodeError as exc:
            raise InputError(f"`--ids` {ids_path!r}: not valid UTF-8 at byte {exc.start}. Re-encode the file as "
                             "UTF-8 (one id per line).") from None
        ids = [line.rstrip("\r") for line in lines if line.strip()]
    return vecs, ids


def read_table(path: str, columns: Optional[Sequence[str]] = None, delimiter: Optional[str] = None,
               *, param: str = "--pairs") -> list[dict]:
    """All records of a small JSONL / CSV / TSV file as dicts (for labels and labeled pairs).

    TSV is read without quote processing (as MRPC and STS-B need); a UTF-8 BOM is ignored.
    ``columns`` names the columns of a CSV/TSV file that has no header row; ``delimiter`` overrides
    the one implied by the extension (``,`` for .csv, a tab for .tsv).
    """
    if not os.path.exists(path):
        raise InputError(f"`{param}` file {path!r} does not exist. Check the path.")
    fmt = detect_format(path, param=param)
    if fmt not in ("jsonl", "csv"):
        raise InputError(f"`{param}` must be JSONL, CSV or TSV; got {path!r}.")
    if delimiter is not None and len(delimiter) != 1:
        raise InputError(f"`--delimiter` must be one character (e.g. ',' or '\\t'); got {delimiter!r}.")
    with open_input(path, param) as f:
        if fmt == "jsonl":
            return [rec for _, rec in jsonl_records(f, path)]
        csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
        tsv = path.lower().endswith(".tsv")
        text = io.TextIOWrapper(f, encoding="utf-8-sig", newline="")
        reader = csv.DictReader(text, fieldnames=list(columns) if columns else None,
                                delimiter=delimiter or ("\t" if tsv else ","),
                                quoting=csv.QUOTE_NONE if tsv else csv.QUOTE_MINIMAL)
        rows = []
        try:
            for row in reader:
                if None in row:
                    n = len(reader.fieldnames or [])
                    raise InputError(f"{path}:{reader.line_num} has more fields than the {n} columns "
                                     f"{'of --columns' if columns else 'of the header'}; columns: "
                                     f"{list(reader.fieldnames or [])[:12]}. Name every column, or fix the row.")
                rows.append(row)
        except UnicodeDecodeError as exc:
            raise InputError(f"`{param}` {path!r}: not valid UTF-8 ({exc}). Re-encode the file as UTF-8.") from None
        except csv.Error as exc:
            raise InputError(f"{path}:{reader.line_num}: not a valid CSV row ({exc}).") from None
        return rows


def column(rows: list[dict], name: str, path: str, flag: str = "the matching --*-field/--label option") -> list:
    """The values of column ``name`` in every row; refused when a row lacks it (``flag`` names the option)."""
    if not rows:
        raise InputError(f"{path} holds no records{' after its header row' if path.lower().endswith(('.csv', '.tsv')) else ''}. "
                         "Give a file with one labeled record per line or row.")
    out = []
    for i, r in enumerate(rows):
        v = r.get(name)
        if v is None:
            have = sorted(k for k in r if isinstance(k, str))[:12]
            what = "is missing" if name not in r else "has no value"
            raise InputError(f"column {name!r} {what} in {path} (record {i}); columns: {have}. Name it with "
                             f"{flag}, or fill it in.")
        out.append(v)
    return out
