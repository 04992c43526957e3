"""Export of a cluster map: one record per document (id, cluster_id, is_representative), for a
vector store's metadata. Written atomically (temp file + rename).

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

import numpy as np

from ..errors import InputError, require
from ..files import atomic_replace, atomic_write_text
from .readers import detect_format

__all__ = ["write_export", "csv_cell", "csv_cell_id", "FORMULA_PREFIXES"]

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



def write_export(cmap, path: str, fmt: Optional[str] = None) -> int:
    """Write one record per document: id, cluster_id, is_representative. Returns the row count."""
    fmt = fmt or detect_format(path, param="--output")
    ids = cmap.ids
    ids = ids.tolist() if isinstance(ids, np.ndarray) else list(ids)
    clusters = np.asarray(cmap.cluster_ids).tolist()
    reps = np.asarray(cmap.is_representative).tolist()
    if fmt == "jsonl":
        def w(f):
            for i, c, r in zip(ids, clusters, reps):
                f.write(json.dumps({"id": i, "cluster_id": c, "is_representative": r}, ensure_ascii=False) + "\n")
        atomic_write_text(path, w, what="the export", param="--output")
    elif fmt == "csv":
        def w(f):
            wr = csv.writer(f)
            wr.writerow(["id", "cluster_id", "is_representative"])
            wr.writerows(zip(map(csv_cell, ids), clusters, [int(r) for r in reps]))
        atomic_write_text(path, w, what="the export", param="--output")
    elif fmt == "parquet":
        pa = require("pyarrow", extra="parquet", purpose="Writing Parquet")
        pq = require("pyarrow.parquet", extra="parquet", purpose="Writing Parquet")
        table = pa.table({"id": ids, "cluster_id": clusters, "is_representative": reps})
        with atomic_replace(path, what="the export", param="--output") as f:
            pq.write_table(table, f)
    else:
        raise InputError(f"export format must be jsonl, csv or parquet; got {fmt!r}.")
    return len(ids)
