"""Input partitions: files, DataFrames, Bags or a sequence of texts, cut into :class:`Part` s.

Every reader here is a pure function of its inputs (a retry re-reads the same rows). JSONL lines
are parsed by :func:`diversify.corpus.readers.jsonl_records`, the local reader's own parser.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from ...corpus.readers import jsonl_records
from ...corpus.shards import COMPRESSED, expand_shards
from ...errors import ConfigError, InputError, InputTypeError, require

__all__ = ["Part", "input_partitions", "DEFAULT_PARTITION_DOCS"]

#: documents per input partition when texts are handed in as a Python sequence
DEFAULT_PARTITION_DOCS = 20_000
_COMPRESSED = COMPRESSED


@dataclass
class Part:
    """One input partition: texts, optional ids (None -> global index) and optional keys."""

    texts: list
    ids: Optional[list] = None
    keys: Optional[np.ndarray] = None

    def __sizeof__(self) -> int:
        """What Dask weighs a scattered partition by (its default would see a few dozen bytes)."""
        from .texts import texts_bytes

        ids = texts_bytes(self.ids) if self.ids is not None else 0
        return object.__sizeof__(self) + texts_bytes(self.texts) + ids + (self.keys.nbytes if self.keys is not None else 0)


def texts_of(values: Iterable, where: str) -> list:
    """The texts of a partition as str; a missing text (None, NaN) is an empty document."""
    out = []
    for i, t in enumerate(values):
        if t is None or (isinstance(t, float) and math.isnan(t)):
            out.append("")  # as the local Parquet reader: a missing text is an empty document
        elif isinstance(t, str):
            out.append(t)
        else:
            raise InputTypeError(
                f"texts must be str; {where} row {i} is {type(t).__name__} ({t!r:.60}). "
                "Convert the text column to strings before building."
            )
    return out


def _missing_id(id_field: str, where: str, have) -> InputError:
    return InputError(f"`id_field` {id_field!r} is missing in {where}; fields present: {sorted(have)[:12]}. Every "
                      "document needs its id when id_field is given: fill it in, or pass id_field=NAME (the CLI's "
                      "--id-field) with the field that holds the ids.")


def _no_value(v) -> bool:
    """None, "", NaN and pandas' missing markers (pd.NA, NaT) are no id."""
    if v is None or type(v).__name__ in ("NAType", "NaTType"):
        return True
    if isinstance(v, str):
        return v == ""
    return isinstance(v, float) and math.isnan(v)


def _check_ids(ids: Optional[list], id_field: Optional[str], required: bool, where: str, have) -> None:
    if not required or id_field is None:
        return
    if ids is None:
        raise _missing_id(id_field, where, have)
    for i, v in enumerate(ids):
        if _no_value(v):
            raise InputError(f"`id_field` {id_field!r}: {where} row {i} has no value there (got {v!r}); every "
                             "document needs its id when id_field is given. Fill it in.")


def part_from_pandas(df, text_field: str, id_field: Optional[str], key_field: Optional[str],
                     id_required: bool = False) -> Part:
    texts = texts_of(df[text_field].tolist(), "a partition")
    ids = df[id_field].tolist() if id_field and id_field in df.columns else None
    _check_ids(ids, id_field, id_required, "a DataFrame partition", df.columns)
    keys = df[key_field].to_numpy(np.float64) if key_field and key_field in df.columns else None
    return Part(texts, ids, keys)


def _fields_of(rec: Mapping, text_field: str, id_field: Optional[str], key_field: Optional[str],
               where: str, id_required: bool = False) -> tuple:
    if text_field not in rec:
        raise InputError(f"`text_field` {text_field!r} is missing in {where}; fields present: {sorted(rec)[:12]}. "
                         "Pass text_field=NAME.")
    if id_required and id_field is not None:
        _check_ids([rec.get(id_field)] if id_field in rec else None, id_field, True, where, rec)
    return rec[text_field], rec.get(id_field) if id_field else None, rec.get(key_field) if key_field else None


def part_from_records(items, text_field: str, id_field: Optional[str], key_field: Optional[str],
                      id_required: bool = False) -> Part:
    items = list(items)
    if all(isinstance(x, str) for x in items) and not (id_required and items):
        return Part(items)
    texts: list = []
    ids: list = []
    keys: list = []
    for i, rec in enumerate(items):
        if isinstance(rec, str):
            if id_required and id_field is not None:
                raise _missing_id(id_field, f"bag record {i} (a plain str)", [])
            text, id_, key = rec, None, None
        elif isinstance(rec, Mapping):
            text, id_, key = _fields_of(rec, text_field, id_field, key_field, f"bag record {i}", id_required)
        else:
            raise InputTypeError(f"bag items must be str or dict records; item {i} is {type(rec).__name__}.")
        texts.append(text)
        ids.append(id_)
        keys.append(key)
    has_ids = any(x is not None for x in ids)
    has_keys = key_field is not None and any(x is not None for x in keys)
    return Part(texts_of(texts, "a bag partition"), ids if has_ids else None,
                np.asarray(keys, dtype=np.float64) if has_keys else None)


def part_from_jsonl(block: bytes, where: str, text_field: str, id_field: Optional[str],
                    key_field: Optional[str], id_required: bool = False) -> Part:
    """One block of a JSONL file (whole lines), parsed by the local reader's line parser."""
    texts: list = []
    ids: list = []
    keys: list = []
    for lineno, rec in jsonl_records(block.splitlines(), where):
        text, id_, key = _fields_of(rec, text_field, id_field, key_field, f"{where}:{lineno}", id_required)
        texts.append(text)
        ids.append(id_)
        keys.append(key)
    has_ids = any(x is not None for x in ids)
    return Part(texts_of(texts, where), ids if has_ids else None,
                np.asarray(keys, dtype=np.float64) if key_field else None)


def part_from_parquet(fs, path: str, row_groups: list, text_field: str, id_field: Optional[str],
                      key_field: Optional[str], id_required: bool = False) -> Part:
    import pyarrow.parquet as pq

    with fs.open(path, "rb") as f:
        pf = pq.ParquetFile(f)
        names = pf.schema_arrow.names
        cols = [c for c in (id_field, text_field, key_field) if c and c in names]
        table = pf.read_row_groups(row_groups, columns=cols)
    d = table.to_pydict()
    keys = np.asarray(d[key_field], dtype=np.float64) if key_field and key_field in d else None
    ids = d.get(id_field) if id_field else None
    _check_ids(ids, id_field, id_required, f"{path} (row groups {row_groups[0]}-{row_groups[-1]})", names)
    return Part(texts_of(d[text_field], path), ids, keys)


# ----------------------------------------------------------------------------- client side


def _expand_paths(source, fmt: Optional[str]) -> tuple[Any, list, Optional[str]]:
    """(file system, paths, format or None). A local glob or directory of shards expands as the
    local engine's (diversify.corpus.shards); URLs and lists go through fsspec."""
    fsspec = require("fsspec", extra="dask", purpose="Reading partitioned input")
    if isinstance(source, (list, tuple)):
        paths = [os.fspath(p) for p in source]
        fs, _, _ = fsspec.core.get_fs_token_paths(paths[0])
        return fs, paths, None
    if "://" not in os.fspath(source):
        shards = expand_shards(source, fmt=fmt, param="texts_or_paths")
        if shards is not None:
            return fsspec.filesystem("file"), list(shards.paths), shards.fmt
        if os.path.isdir(source):
            raise InputError(f"`texts_or_paths` {os.fspath(source)!r} is a directory of documents (no JSONL or "
                             "Parquet file in it): the Dask engine reads JSONL or Parquet files. Build it with the "
                             "local engine, or convert it to JSONL.")
    fs, _, paths = fsspec.core.get_fs_token_paths(os.fspath(source))
    return fs, sorted(paths), None


def _format_of(path: str, fmt: Optional[str]) -> str:
    if fmt:
        if fmt not in ("jsonl", "parquet"):
            raise ConfigError(f"`format` must be 'jsonl' or 'parquet'; got {fmt!r}.")
        return fmt
    p = path.lower()
    for suf in _COMPRESSED:
        if p.endswith(suf):
            p = p[: -len(suf)]
    if p.endswith((".parquet", ".pq")):
        return "parquet"
    if p.endswith((".jsonl", ".ndjson", ".json")):
        return "jsonl"
    raise InputError(f"input format could not be told from the name {path!r} (expected .jsonl/.ndjson or .parquet). "
                     "Pass format='jsonl' or format='parquet'.")


def _is_path_list(src) -> bool:
    return isinstance(src, (list, tuple)) and bool(src) and all(isinstance(p, os.PathLike) for p in src)


def input_partitions(src, *, ids, keys, client, npartitions: Optional[int], text_field: str,
                     id_field: Optional[str], key_field: Optional[str], fmt: Optional[str], blocksize: int,
                     id_required: bool = False) -> list:
    """Input partitions as a list of Delayed/Futures of :class:`Part`, in global document order."""
    import dask.bag as db
    import dask.dataframe as dd

    is_texts = not isinstance(src, (dd.DataFrame, db.Bag, str, bytes, os.PathLike)) and not _is_path_list(src)
    if not is_texts and (ids is not None or keys is not None):
        raise InputError("`ids` and `keys` go with a sequence of texts; with files, a DataFrame or a Bag name their "
                         "columns instead: id_field=..., key_field=...")
    fields = (text_field, id_field, key_field, id_required)
    if isinstance(src, dd.DataFrame):
        return _frame_parts(src, *fields)
    if isinstance(src, db.Bag):
        from dask import delayed

        return [delayed(part_from_records, pure=True)(p, *fields) for p in src.to_delayed()]
    if isinstance(src, (str, os.PathLike)) or _is_path_list(src):
        return _file_parts(src, fields, fmt, blocksize)
    if isinstance(src, bytes):
        raise InputError("`texts_or_paths` must be texts or paths, not bytes. Decode it first.")
    return _sequence_parts(src, ids, keys, client, npartitions)


def _frame_parts(src, text_field: str, id_field: Optional[str], key_field: Optional[str], id_required: bool) -> list:
    from dask import delayed

    if text_field not in src.columns:
        raise InputError(f"`text_field` {text_field!r} is not a column of the DataFrame; columns: "
                         f"{list(src.columns)[:12]}. Pass text_field=NAME.")
    if key_field and key_field not in src.columns:
        raise InputError(f"`key_field` {key_field!r} is not a column of the DataFrame.")
    if id_required and id_field is not None and id_field not in src.columns:
        raise _missing_id(id_field, "the DataFrame's columns", src.columns)
    cols = [c for c in (id_field, text_field, key_field) if c and c in src.columns]
    return [delayed(part_from_pandas, pure=True)(p, text_field, id_field, key_field, id_required)
            for p in src[cols].to_delayed()]


def _file_parts(src, fields: tuple, fmt: Optional[str], blocksize: int) -> list:
    fs, paths, found = _expand_paths(src, fmt)
    if not paths:
        raise InputError(f"no file matches {os.fspath(src) if not isinstance(src, (list, tuple)) else src!r}. "
                         "Check the path or glob (to build from one text, pass a list: [text]).")
    if (found or _format_of(paths[0], fmt)) == "jsonl":
        return _jsonl_parts(paths, fields, blocksize)
    return _parquet_parts(fs, paths, fields, blocksize)


def _jsonl_parts(paths: list, fields: tuple, blocksize: int) -> list:
    from dask import delayed
    from dask.bytes import read_bytes

    compressed = any(p.lower().endswith(_COMPRESSED) for p in paths)
    _, blocks = read_bytes(paths, delimiter=b"\n", blocksize=None if compressed else blocksize,
                           compression="infer" if compressed else None)
    out = []
    for p, file_blocks in zip(paths, blocks):
        for j, b in enumerate(file_blocks):
            out.append(delayed(part_from_jsonl, pure=True)(b, f"{p} (block {j})", *fields))
    return out


def _parquet_parts(fs, paths: list, fields: tuple, blocksize: int) -> list:
    """Row groups of each file, grouped up to ``blocksize`` bytes per partition."""
    import pyarrow.parquet as pq
    from dask import delayed

    out = []
    for p in paths:
        with fs.open(p, "rb") as f:
            md = pq.ParquetFile(f).metadata
        group: list = []
        size = 0
        for rg in range(md.num_row_groups):
            group.append(rg)
            size += md.row_group(rg).total_byte_size
            if size >= blocksize:
                out.append(delayed(part_from_parquet, pure=True)(fs, p, group, *fields))
                group, size = [], 0
        if group:
            out.append(delayed(part_from_parquet, pure=True)(fs, p, group, *fields))
    return out


def _sequence_parts(src, ids, keys, client, npartitions: Optional[int]) -> list:
    """A sequence or iterable of texts: cut into partitions and scattered to the workers."""
    seq = src if isinstance(src, Sequence) else list(src)
    id_list = list(ids) if ids is not None else None
    key_arr = np.asarray(keys, dtype=np.float64) if keys is not None else None
    n = len(seq)
    if id_list is not None and len(id_list) != n:
        raise InputError(f"`ids` must have one id per text; got {len(id_list)} ids for {n} texts.")
    if key_arr is not None and key_arr.shape != (n,):
        raise InputError(f"`keys` must have one number per text (shape ({n},)); got shape {key_arr.shape}.")
    nparts = npartitions or max(1, math.ceil(n / DEFAULT_PARTITION_DOCS))
    bounds = np.linspace(0, n, max(1, min(nparts, n)) + 1).astype(np.int64)
    parts = []
    for a, b in zip(bounds[:-1], bounds[1:]):
        parts.append(Part(list(seq[a:b]), id_list[a:b] if id_list is not None else None,
                          key_arr[a:b] if key_arr is not None else None))
    # unique keys: a build that ends releases its partitions, never those of a build of the same texts after it
    return client.scatter(parts, hash=False)
