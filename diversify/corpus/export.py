"""Export of a cluster map: one record per document (id, cluster_id, is_representative,
representative_id, similarity, stages: see :mod:`diversify.artifact.views`), for a vector store's
metadata or a log of what was deduplicated. Written atomically (temp file + rename).

CSV exports are opened in spreadsheets, which run a cell that starts with ``=``, ``+``, ``-`` or
``@`` (and, in some, a tab or a carriage return) as a formula. A string id that starts with one of
these, or with a single quote, is written with one extra leading single quote (``=1+2`` is
written ``'=1+2``, ``'x`` is written ``''x``); to read the ids back, drop one leading quote from a
string id cell that has one (:func:`csv_cell_id` undoes :func:`csv_cell`). Int ids are numbers,
not formulas: they are written as they are (``-5``). JSONL and Parquet hold the ids unchanged.
"""

from __future__ import annotations

import csv
import json
from typing import Optional

from ..errors import InputError, require
from ..files import atomic_replace, atomic_write_text
from .inputs import detect_format

__all__ = ["write_export", "csv_cell", "csv_cell_id", "FORMULA_PREFIXES", "COLUMNS"]

# what makes a spreadsheet read a cell as a formula (OWASP "CSV injection"), and the escape itself
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value):
    """The CSV cell of an id: a str that a spreadsheet would run (or that starts with ``'``) gets a ``'`` prefix."""
    if isinstance(value, str) and value.startswith((*FORMULA_PREFIXES, "'")):
        return "'" + value
    return value


def csv_cell_id(cell: str) -> str:
    """The str id of a CSV cell written by :func:`csv_cell` (one leading ``'`` dropped)."""
    return cell[1:] if cell.startswith("'") else cell



#: the columns of an export, in order (diversify.artifact.views.document_columns)
COLUMNS = ("id", "cluster_id", "is_representative", "representative_id", "similarity", "stages")
#: how a CSV cell lists several stage names
STAGE_SEPARATOR = ";"


def _csv_bool(value: bool) -> str:
    return "true" if value else "false"  # the spelling of JSON, so CSV and JSONL read alike


def write_export(cmap, path: str, fmt: Optional[str] = None) -> int:
    """Write one record per document (:data:`COLUMNS`). Returns the row count.

    ``is_representative`` is ``true``/``false`` in CSV and JSONL, a boolean in Parquet;
    ``similarity`` (verified, to the representative) is empty in CSV, ``null`` in JSONL and Parquet
    where the artifact stores none; ``stages`` is a list of names in JSONL and Parquet, the names
    joined by ``;`` in CSV (empty for a document that is alone).
    """
    from ..artifact.views import document_columns

    fmt = fmt or detect_format(path, param="--output")
    if fmt not in ("jsonl", "csv", "parquet"):
        raise InputError(f"export format must be jsonl, csv or parquet; got {fmt!r}.")
    cols = document_columns(cmap)
    rows = zip(*(cols[c] for c in COLUMNS))
    if fmt == "jsonl":
        def w(f):
            for row in rows:
                f.write(json.dumps(dict(zip(COLUMNS, row)), ensure_ascii=False) + "\n")
        atomic_write_text(path, w, what="the export", param="--output")
    elif fmt == "csv":
        def w(f):
            wr = csv.writer(f)
            wr.writerow(COLUMNS)
            wr.writerows((csv_cell(i), c, _csv_bool(r), csv_cell(rep), "" if s is None else s,
                          STAGE_SEPARATOR.join(st)) for i, c, r, rep, s, st in rows)
        atomic_write_text(path, w, what="the export", param="--output")
    else:
        pa = require("pyarrow", extra="parquet", purpose="Writing Parquet")
        pq = require("pyarrow.parquet", extra="parquet", purpose="Writing Parquet")
        table = pa.table({c: cols[c] for c in COLUMNS}, schema=_parquet_schema(pa, cmap.id_kind))
        with atomic_replace(path, what="the export", param="--output") as f:
            pq.write_table(table, f)
    return len(cols["id"])


def _parquet_schema(pa, id_kind: str):
    ident = pa.int64() if id_kind == "int" else pa.string()
    return pa.schema([("id", ident), ("cluster_id", pa.int64()), ("is_representative", pa.bool_()),
                      ("representative_id", ident), ("similarity", pa.float64()),
                      ("stages", pa.list_(pa.string()))])
