"""Export of a cluster map: one record per document (id, cluster_id, is_representative), for a
vector store's metadata. Written atomically (temp file + rename)."""

from __future__ import annotations

import csv
import json
from typing import Optional

import numpy as np

from ..errors import InputError, require
from ..files import atomic_replace, atomic_write_text
from .readers import detect_format

__all__ = ["write_export"]


def write_export(cmap, path: str, fmt: Optional[str] = None) -> int:
    """Write one record per document: id, cluster_id, is_representative. Returns the row count."""
    fmt = fmt or detect_format(path)
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
            wr.writerows(zip(ids, clusters, [int(r) for r in reps]))
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
