"""LanceDB adapters (sync, and async over ``lancedb.connect_async``): a ``NOT IN (...)`` prefilter
excludes seen ids. Both share every request and parse (:class:`_LanceCommon`)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any, Optional

import numpy as np

from ..errors import ConfigError, InputError, InputTypeError, StoreError, require
from ..online import Hit
from ._base import AsyncStore, Store, representative_flags
from .scan import DEFAULT_SCAN_BATCH, Batch, check_scan, no_vectors, text_list, vector_block, vendor_failed

__all__ = ["LanceDBStore", "AsyncLanceDBStore"]

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_WHAT = {"id_column": "the document ids", "vector_column": "the vectors", "text_field": "the texts"}


def _sql_literal(v) -> str:
    if isinstance(v, (bool, np.bool_)):
        raise InputTypeError(f"LanceDB ids must be int or str; got {v!r} (bool).")
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"  # SQL string literal; quotes doubled
    raise InputTypeError(f"LanceDB ids must be int or str; got {type(v).__name__} {v!r}.")


class _LanceCommon:
    """The requests and parses both LanceDB adapters make (no I/O here)."""

    scores_are = "distance"
    extra = "lancedb"

    def __init__(self, table, *, id_column: str = "id", vector_column: str = "vector",
                 distance_type: Optional[str] = None, where: Optional[str] = None,
                 with_vectors: bool = False, refill: str = "auto", max_exclude: Optional[int] = None):
        self._setup_refill(refill, max_exclude)  # type: ignore[attr-defined]
        for name, value in (("id_column", id_column), ("vector_column", vector_column)):
            if not isinstance(value, str) or not _IDENT.match(value):
                raise ConfigError(f"`{name}` must be a plain column identifier ([A-Za-z_][A-Za-z0-9_]*); "
                                  f"got {value!r}.")
        if distance_type not in (None, "l2", "cosine", "dot"):
            raise ConfigError(f"`distance_type` must be 'l2', 'cosine', 'dot' or None; got {distance_type!r}.")
        self.table = table
        self.id_column = id_column
        self.vector_column = vector_column
        self.distance_type = distance_type
        self.where = where
        self.with_vectors = with_vectors

    def _where(self, exclude_ids) -> Optional[str]:
        parts = []
        if self.where:
            parts.append(f"({self.where})")
        if exclude_ids:
            parts.append(f"{self.id_column} NOT IN ({', '.join(_sql_literal(i) for i in exclude_ids)})")
        return " AND ".join(parts) or None

    def _failed(self, exc: Exception) -> StoreError:
        return StoreError(f"LanceDB search failed: {type(exc).__name__}: {exc}")

    def _hits(self, rows, k: int) -> list[Hit]:
        out = []
        for row in rows[:k]:  # never more than asked
            vec = row.get(self.vector_column) if self.with_vectors else None
            payload = {key: v for key, v in row.items() if key != self.vector_column and key != "_distance"}
            out.append(Hit(row[self.id_column], float(row["_distance"]), payload,
                           None if vec is None else list(vec), row))
        return out

    @staticmethod
    def _check_fields(cluster_field: str, representative_field: Optional[str]) -> None:
        for name, value in (("cluster_field", cluster_field), ("representative_field", representative_field)):
            if value is not None and not _IDENT.match(value):
                raise ConfigError(f"`{name}` must be a plain column identifier; got {value!r}.")

    def _new_columns(self, names, cluster_field: str, representative_field: Optional[str], flags) -> dict:
        """The columns ``write_clusters`` adds (SQL defaults), given the table's column names."""
        new_cols = {}
        if cluster_field not in names:
            new_cols[cluster_field] = "CAST(-1 AS BIGINT)"
        if representative_field and flags is not None and representative_field not in names:
            new_cols[representative_field] = "false"
        return new_cols

    def _merge_source(self, pa, ids: list, cids, flags, id_type, cluster_field: str,
                      representative_field: Optional[str]):
        """The arrow table ``merge_insert`` reads (known ids only), or None when none is known."""
        known = cids >= 0
        if not known.any():
            return None
        cols = {self.id_column: pa.array([i for i, ok in zip(ids, known) if ok], type=id_type),
                cluster_field: pa.array(cids[known], type=pa.int64())}
        if representative_field and flags is not None:
            cols[representative_field] = pa.array(flags[known], type=pa.bool_())
        return pa.table(cols)


class LanceDBStore(_LanceCommon, Store):
    """Search a LanceDB table; refetches exclude seen ids with ``id NOT IN (...)`` (prefilter).

    Parameters
    ----------
    table : lancedb Table
        E.g. ``lancedb.connect(tmpdir).create_table(...)``; not touched until the first call.
    id_column, vector_column : str
        Column names (plain identifiers).
    distance_type : {"l2", "cosine", "dot"}, optional
        Passed to the search; LanceDB reports ``_distance`` (lower is better) for all of them,
        so ``scores_are = "distance"``.
    where : str, optional
        The user's SQL filter (a tenant, an access rule): every call, refetches included,
        applies it (as a prefilter); a pushed-down exclusion is ``AND``-ed to it.
    refill : {"auto", "exclude", "grow"}
        How refetches skip seen ids (see :mod:`diversify.stores.exclusion`); ``auto`` = the
        measured choice (docs/online.md).
    max_exclude : int, optional
        Ids pushed down per call (default 256); the rest is answered by a larger k.
    """

    def _search(self, q, k: int, exclude: Optional[list]) -> list[Hit]:
        require("lancedb", extra="lancedb", purpose="LanceDBStore")
        where = self._where(exclude)  # may raise InputTypeError (an id that is no SQL literal)
        try:
            s = self.table.search(q, vector_column_name=self.vector_column)
            if self.distance_type:
                s = s.distance_type(self.distance_type)
            if where:
                s = s.where(where, prefilter=True)
            rows = s.limit(k).to_list()
        except Exception as exc:
            raise self._failed(exc) from exc
        return self._hits(rows, k)

    def write_clusters(self, cluster_map, *, ids: Optional[Sequence[Any]] = None,
                       cluster_field: str = "cluster_id",
                       representative_field: Optional[str] = "is_representative") -> int:
        """Add / update ``cluster_field`` (int64, -1 = unknown) and ``representative_field``
        (bool) columns with one ``merge_insert`` on ``id_column``."""
        pa = require("pyarrow", extra="lancedb", purpose="LanceDBStore")
        self._check_fields(cluster_field, representative_field)
        if ids is None:
            ids = self.table.to_arrow().column(self.id_column).to_pylist()
        ids = list(ids)
        cids, flags = representative_flags(cluster_map, ids)
        schema = self.table.schema
        new_cols = self._new_columns(set(schema.names), cluster_field, representative_field, flags)
        if new_cols:
            self.table.add_columns(new_cols)
        source = self._merge_source(pa, ids, cids, flags, schema.field(self.id_column).type, cluster_field,
                                    representative_field)
        if source is None:
            return 0
        self.table.merge_insert(self.id_column).when_matched_update_all().execute(source)
        return source.num_rows


    def scan(self, *, batch_size: int = DEFAULT_SCAN_BATCH, with_vectors: bool = True,
             text_field: Optional[str] = None) -> Iterator[Batch]:
        """Every row of the table, ``batch_size`` per record batch of LanceDB's reader
        (``search().select(...).to_batches``; :mod:`.scan`): ``id_column``, ``vector_column``
        and the ``text_field`` column."""
        size = check_scan(batch_size, with_vectors, text_field)
        require("lancedb", extra="lancedb", purpose="LanceDBStore")
        where = f"LanceDB table {getattr(self.table, 'name', '?')!r}"
        names = set(self.table.schema.names)
        wanted = [("id_column", self.id_column)] + ([("vector_column", self.vector_column)] if with_vectors else [])
        wanted += [("text_field", text_field)] if text_field is not None else []
        for param, col in wanted:
            if col not in names:
                raise ConfigError(f"`{param}`: {where} has no column {col!r}; its columns are {sorted(names)}. "
                                  f"Name the column that holds {_WHAT[param]}.")
        cols = list(dict.fromkeys(col for _, col in wanted))
        try:
            reader = self.table.search().select(cols).to_batches(size)
            for rb in reader:
                if rb.num_rows:
                    yield self._scan_batch(rb, with_vectors, text_field, where)
        except (ConfigError, InputError, InputTypeError):
            raise
        except Exception as exc:
            raise vendor_failed("the batch reader", where, exc) from exc

    def _scan_size(self) -> Optional[int]:
        try:
            return int(self.table.count_rows())
        except Exception:
            return None

    def _scan_batch(self, rb, with_vectors: bool, text_field: Optional[str], where: str) -> Batch:
        ids = rb.column(self.id_column).to_pylist()
        block = None
        if with_vectors:
            col = rb.column(self.vector_column)
            if col.null_count:
                raise no_vectors(where, ids[col.is_null().to_pylist().index(True)],
                                 "Fill the vector column on every row, or build from texts only (vectors=False).")
            kind = str(col.type)
            if kind.startswith("fixed_size_list"):
                values = col.flatten().to_numpy(zero_copy_only=False)
                block = vector_block(values.reshape(len(ids), col.type.list_size), ids, where)
            elif kind.startswith(("list", "large_list")):
                block = vector_block(col.to_pylist(), ids, where)
            else:
                raise InputTypeError(f"`vector_column`: column {self.vector_column!r} of {where} is {kind}, not a "
                                     "list of floats; name the column that holds the vectors.")
        texts = text_list(rb.column(text_field).to_pylist(), ids, text_field, where) if text_field else None
        return Batch(ids, block, texts)


class AsyncLanceDBStore(_LanceCommon, AsyncStore):
    """Search a LanceDB ``AsyncTable`` (``await (await lancedb.connect_async(uri)).open_table(name)``):
    ``await store.search(query, k)``; pass it to :meth:`diversify.Diversifier.awrap`.

    Same parameters, SQL filter composition (prefilter), ids and refill as :class:`LanceDBStore`.
    LanceDB runs the search on its own threads; the event loop only awaits the answer.
    """

    async def _search(self, q, k: int, exclude: Optional[list]) -> list[Hit]:
        require("lancedb", extra="lancedb", purpose="AsyncLanceDBStore")
        where = self._where(exclude)
        try:
            s = self.table.vector_search(q).column(self.vector_column)
            if self.distance_type:
                s = s.distance_type(self.distance_type)
            if where:
                s = s.where(where)  # the async query filters before the search (prefilter) by default
            rows = await s.limit(k).to_list()
        except Exception as exc:
            raise self._failed(exc) from exc
        return self._hits(rows, k)

    async def write_clusters(self, cluster_map, *, ids: Optional[Sequence[Any]] = None,
                             cluster_field: str = "cluster_id",
                             representative_field: Optional[str] = "is_representative") -> int:
        """``await store.write_clusters(cluster_map)``: as :meth:`LanceDBStore.write_clusters`."""
        pa = require("pyarrow", extra="lancedb", purpose="AsyncLanceDBStore")
        self._check_fields(cluster_field, representative_field)
        if ids is None:
            ids = (await self.table.query().select([self.id_column]).to_arrow()).column(self.id_column).to_pylist()
        ids = list(ids)
        cids, flags = representative_flags(cluster_map, ids)
        schema = await self.table.schema()
        new_cols = self._new_columns(set(schema.names), cluster_field, representative_field, flags)
        if new_cols:
            await self.table.add_columns(new_cols)
        source = self._merge_source(pa, ids, cids, flags, schema.field(self.id_column).type, cluster_field,
                                    representative_field)
        if source is None:
            return 0
        await self.table.merge_insert(self.id_column).when_matched_update_all().execute(source)
        return source.num_rows
