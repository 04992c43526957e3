"""Milvus adapter (Milvus Lite, standalone, Zilliz Cloud): a boolean ``filter`` expression
``<id> not in [...]`` excludes seen ids, AND-ed to the caller's own filter."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any, Optional

from ..errors import ConfigError, InputTypeError, StoreError, require
from ..ids import INT64_MAX, INT64_MIN, id_kind_of
from ..online import Hit
from ._base import Store, check_k, query_vector, representative_flags
from .scan import DEFAULT_SCAN_BATCH, Batch, check_scan, text_list, vector_block

__all__ = ["MilvusStore", "compose_filter", "exclusion_expr"]

#: Milvus's default ``topk`` ceiling (``quotaAndLimits.limits.topK``); larger requests are refused
MAX_TOPK = 16384

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,254}$")
_INT_TYPES = {"INT8": 2**7, "INT16": 2**15, "INT32": 2**31, "INT64": 2**63}
_VECTOR_TYPES = ("FLOAT_VECTOR", "FLOAT16_VECTOR", "BFLOAT16_VECTOR", "INT8_VECTOR", "BINARY_VECTOR",
                 "SPARSE_FLOAT_VECTOR")
_NOT_FOUND = 100  # Milvus error code "collection not found"


def _pymilvus():
    return require("pymilvus", extra="milvus", purpose="MilvusStore")


# ---------------------------------------------------------------------- filter expressions


def _string_literal(s: str) -> str:
    """A Milvus expression string literal: double-quoted, C escapes for backslash, quote, CR, LF."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r") + '"'


def _literals(ids: Iterable[Any], param: str) -> tuple[list[str], list[str]]:
    """Milvus literals of the int ids and of the str ids that can exist in a store (int64, UTF-8)."""
    ints: list[str] = []
    strs: list[str] = []
    for i in ids:
        k = id_kind_of(i)
        if k == "int":
            if INT64_MIN <= i <= INT64_MAX:
                ints.append(str(int(i)))
        elif k == "str":
            try:
                i.encode("utf-8")
            except UnicodeEncodeError:
                continue
            strs.append(_string_literal(i))
        else:
            raise InputTypeError(f"`{param}`: document ids must be str or int; got {type(i).__name__} "
                                 f"{i!r:.60}. Pass the ids of the hits the store returned.")
    return ints, strs


def _membership(field: str, ids: Iterable[Any], kind: Optional[str], *, negate: bool, param: str) -> str:
    ints, strs = _literals(ids, param)
    op, join = (" not in ", " and ") if negate else (" in ", " or ")
    clauses = [f"{field}{op}[{', '.join(lits)}]" for lits, k in ((ints, "int"), (strs, "str"))
               if lits and kind in (None, k)]
    return join.join(clauses)


def exclusion_expr(field: str, exclude_ids: Iterable[Any], kind: Optional[str] = None) -> str:
    """``field not in [...]`` over ``exclude_ids`` (``""`` when there is nothing to exclude).

    ``kind`` is the id field's type (``"int"``, ``"str"``, or None when unknown, e.g. a dynamic
    field). Ids that can never match a field of that kind are left out (an int against a VARCHAR
    key, an int outside int64, a str that is not valid UTF-8); Milvus refuses mixed-type lists, so
    with an unknown kind ints and strs get one clause each.
    """
    return _membership(field, exclude_ids, kind, negate=True, param="exclude_ids")


def compose_filter(user_filter: Optional[str], exclusion: str) -> str:
    """The caller's filter AND the exclusion; the caller's filter is always kept, in parentheses."""
    parts = [f"({user_filter})"] if user_filter else []
    if exclusion:
        parts.append(exclusion)
    return " and ".join(parts)


def check_filter(value: Any, name: str = "filter") -> Optional[str]:
    """A user filter expression: None, or a str whose parentheses and quotes balance.

    An unbalanced expression could close the parentheses it is wrapped in and so escape the AND
    with the exclusion (``"a == 1) or (b == 2"``); it is refused instead.
    """
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ConfigError(f"`{name}` must be a Milvus boolean expression (str) or None; got "
                          f"{type(value).__name__}. E.g. {name}='tenant == \"acme\"'.")
    depth, quote, j = 0, "", 0
    while j < len(value):
        ch = value[j]
        if quote:
            if ch == "\\":
                j += 1
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
            if depth < 0:
                break
        j += 1
    if quote or depth != 0:
        what = "an unterminated string literal" if quote else "unbalanced parentheses or brackets"
        raise ConfigError(f"`{name}` must be one complete boolean expression; {value!r:.120} has {what}. "
                          "Balance every '(' / '[' and close every string literal.")
    return value


# ---------------------------------------------------------------------- the collection's schema


@dataclass(frozen=True)
class _Schema:
    pk: str
    pk_kind: str                  # "int" or "str"
    vector: str                   # the searched vector field
    dim: Optional[int]
    types: dict                   # field name -> DataType name
    dynamic: bool
    metric: str                   # COSINE, IP, L2, ...
    output_fields: tuple          # every non-vector field (+ "$meta" for dynamic ones)

    def kind_of(self, field: str) -> Optional[str]:
        t = self.types.get(field)
        if t in _INT_TYPES:
            return "int"
        if t == "VARCHAR":
            return "str"
        return None


def _type_name(t: Any) -> str:
    return str(getattr(t, "name", t)).upper()


class MilvusStore(Store):
    """Search a Milvus collection; refetches exclude seen ids with ``<id> not in [...]``.

    Works with every ``pymilvus.MilvusClient``: Milvus Lite (``MilvusClient("./docs.db")``, a
    real embedded Milvus), a Milvus server or Zilliz Cloud.

    Parameters
    ----------
    client : pymilvus.MilvusClient
        Not touched until the first call.
    collection : str
        Collection name.
    id_field : str, optional
        A scalar field (declared or dynamic) holding the document id, when the primary key is not
        the document id (e.g. an auto-id key, or several chunks per document). Default: the
        primary key. Every row must carry it.
    filter : str, optional
        A Milvus boolean expression every search must satisfy (``'tenant == "acme"'``); the
        exclusion is AND-ed to it, never replacing it.
    anns_field : str, optional
        The vector field to search; needed only when the collection has several.
    search_params : dict, optional
        Passed through (``{"params": {"ef": 64}}`` for HNSW, ``{"params": {"nprobe": 16}}`` for IVF).
    with_vectors : bool
        Return stored vectors (needed only for on-the-fly folding).
    scores_are : {"similarity", "distance"}, optional
        Default: from the vector index's metric (L2 -> distance, COSINE / IP -> similarity).

    Hits carry every non-vector field (declared and dynamic) as their payload.
    """

    extra = "milvus"

    def __init__(self, client, collection: str, *, id_field: Optional[str] = None, filter: Optional[str] = None,
                 anns_field: Optional[str] = None, search_params: Optional[dict] = None,
                 with_vectors: bool = False, scores_are: Optional[str] = None):
        if not isinstance(collection, str) or not collection:
            raise ConfigError(f"`collection` must be a non-empty string; got collection={collection!r}.")
        for name, value in (("id_field", id_field), ("anns_field", anns_field)):
            if value is not None and (not isinstance(value, str) or not _IDENT.match(value)):
                raise ConfigError(f"`{name}` must be a plain field name ([A-Za-z_][A-Za-z0-9_]*) or None; "
                                  f"got {value!r}.")
        if search_params is not None and not isinstance(search_params, dict):
            raise ConfigError(f"`search_params` must be a dict or None; got {type(search_params).__name__}.")
        if scores_are not in (None, "similarity", "distance"):
            raise ConfigError(f"`scores_are` must be 'similarity', 'distance' or None (read from the index); "
                              f"got {scores_are!r}.")
        self.client = client
        self.collection = collection
        self.id_field = id_field
        self.filter = check_filter(filter)
        self.anns_field = anns_field
        self.search_params = dict(search_params) if search_params else None
        self.with_vectors = bool(with_vectors)
        self._scores_are = scores_are
        self._schema: Optional[_Schema] = None

    # ------------------------------------------------------------------ schema (read once)

    def _call(self, what: str, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # MilvusException and transport errors
            code = getattr(exc, "code", None)
            msg = str(getattr(exc, "message", None) or exc)
            low = msg.lower()
            if code == _NOT_FOUND or ("collection" in low and ("not exist" in low or "not found" in low)):
                raise StoreError(f"`collection`: Milvus has no collection {self.collection!r} ({what}: {msg}). "
                                 "Create it first, or check the name and the client's database.") from exc
            hint = ""
            if what == "search" and self.filter:
                hint = (f" If the expression is at fault, fix `filter` ({self.filter!r:.120}): it must be a "
                        "Milvus boolean expression over the collection's fields.")
            raise StoreError(f"Milvus {what} on collection {self.collection!r} failed: "
                             f"{type(exc).__name__}: {msg}.{hint}") from exc

    def _info(self) -> _Schema:
        if self._schema is not None:
            return self._schema
        _pymilvus()
        desc = self._call("describe_collection", self.client.describe_collection, self.collection)
        types: dict = {}
        pk = pk_type = None
        vectors: dict = {}
        for f in desc.get("fields", []):
            t = _type_name(f.get("type"))
            types[f["name"]] = t
            if f.get("is_primary"):
                pk, pk_type = f["name"], t
            if t in _VECTOR_TYPES:
                vectors[f["name"]] = (f.get("params") or {}).get("dim")
        if pk is None or not vectors:
            raise StoreError(f"Milvus collection {self.collection!r} has no primary key or no vector field "
                             f"(fields: {sorted(types)}).")
        if self.anns_field is not None:
            if self.anns_field not in vectors:
                raise ConfigError(f"`anns_field`: collection {self.collection!r} has no vector field "
                                  f"{self.anns_field!r}; its vector fields are {sorted(vectors)}.")
            vector = self.anns_field
        elif len(vectors) == 1:
            vector = next(iter(vectors))
        else:
            raise ConfigError(f"`anns_field`: collection {self.collection!r} has several vector fields "
                              f"{sorted(vectors)}; name the one to search, e.g. anns_field={sorted(vectors)[0]!r}.")
        dynamic = bool(desc.get("enable_dynamic_field"))
        if self.id_field is not None and self.id_field not in types and not dynamic:
            raise ConfigError(f"`id_field`: collection {self.collection!r} has no field {self.id_field!r} and no "
                              f"dynamic fields; its fields are {sorted(types)}.")
        metric = ""
        if self._scores_are is None:
            metric = self._metric(vector)
        dim = vectors[vector]
        outputs = tuple(n for n in types if n not in vectors) + (("$meta",) if dynamic else ())
        self._schema = _Schema(pk, "int" if pk_type in _INT_TYPES else "str", vector,
                               int(dim) if dim is not None else None, types, dynamic, metric, outputs)
        return self._schema

    def _metric(self, vector: str) -> str:
        names = self._call("list_indexes", self.client.list_indexes, self.collection, field_name=vector)
        for name in names or ():
            info = self._call("describe_index", self.client.describe_index, self.collection, name)
            metric = str((info or {}).get("metric_type", "")).upper()
            if metric:
                return metric
        raise StoreError(f"Milvus collection {self.collection!r} has no index on vector field {vector!r}, so "
                         "its metric is unknown. Create the index (client.create_index) or pass scores_are=.")

    @property
    def scores_are(self) -> str:
        if self._scores_are is None:
            metric = self._info().metric
            self._scores_are = "distance" if metric in ("L2", "HAMMING", "JACCARD") else "similarity"
        return self._scores_are

    # ------------------------------------------------------------------ search

    def _key(self) -> str:
        return self.id_field or self._info().pk

    def _filter(self, exclude_ids) -> str:
        info = self._info()
        key = self._key()
        excl = exclusion_expr(key, exclude_ids, info.kind_of(key)) if exclude_ids else ""
        return compose_filter(self.filter, excl)

    def _hit_id(self, hit, info: _Schema):
        pk = hit.get(info.pk)
        if self.id_field is None:
            return pk
        ent = hit.get("entity") or {}
        if self.id_field not in ent or ent[self.id_field] is None:
            raise StoreError(f"`id_field`: Milvus row with {info.pk}={pk!r} in {self.collection!r} has no "
                             f"{self.id_field!r} value. Write the document id into every row, or use "
                             "id_field=None to take the primary key as the id.")
        return ent[self.id_field]

    def search(self, query, k: int, exclude_ids: Optional[Iterable[Any]] = None) -> list[Hit]:
        _pymilvus()  # the pip hint when pymilvus is missing, before anything else
        k = check_k(k)
        if k > MAX_TOPK:
            raise ConfigError(f"`k` must be <= {MAX_TOPK} (Milvus's topk limit); got k={k}. "
                              f"Lower fetch_k / max_fetch_k.")
        info = self._info()
        q = query_vector(query, info.dim)
        outputs = list(info.output_fields) + ([info.vector] if self.with_vectors else [])
        kwargs: dict = {"anns_field": info.vector}
        if self.search_params:
            kwargs["search_params"] = self.search_params
        res = self._call("search", self.client.search, self.collection, [q.tolist()],
                         filter=self._filter(list(exclude_ids) if exclude_ids else None), limit=k,
                         output_fields=outputs, **kwargs)
        out = []
        for h in islice(res[0], k) if res else ():  # never more than asked, whatever the server answers
            ent = dict(h.get("entity") or {})
            vec = ent.pop(info.vector, None)
            out.append(Hit(self._hit_id(h, info), float(h.get("distance")), ent,
                           list(vec) if self.with_vectors and vec is not None else None, h))
        return out

    # ------------------------------------------------------------------ scan

    def scan(self, *, batch_size: int = DEFAULT_SCAN_BATCH, with_vectors: bool = True,
             text_field: Optional[str] = None) -> Iterator[Batch]:
        """Every row of the collection, ``batch_size`` (at most 16384) per ``query_iterator`` page
        (:mod:`.scan`): its document id as hits name it (``id_field``, else the primary key), its
        vector (``anns_field``) and its ``text_field`` value (declared or dynamic)."""
        size = min(check_scan(batch_size, with_vectors, text_field), MAX_TOPK)
        _pymilvus()
        info = self._info()
        if text_field is not None and text_field not in info.types and not info.dynamic:
            raise ConfigError(f"`text_field`: collection {self.collection!r} has no field {text_field!r} and no "
                              f"dynamic fields; its fields are {sorted(info.types)}. Name the field holding the texts.")
        fields = [info.pk, self._key()] + ([info.vector] if with_vectors else []) + ([text_field] if text_field else [])
        it = self._call("query_iterator", self.client.query_iterator, self.collection, batch_size=size,
                        output_fields=list(dict.fromkeys(fields)))
        where = f"Milvus collection {self.collection!r}"
        try:
            while True:
                rows = self._call("query_iterator.next", it.next)
                if not rows:
                    return
                ids = [self._hit_id({info.pk: r.get(info.pk), "entity": r}, info) for r in rows]
                block = vector_block([r.get(info.vector) for r in rows], ids, where) if with_vectors else None
                texts = text_list([r.get(text_field) for r in rows], ids, text_field, where) if text_field else None
                yield Batch(ids, block, texts)
        finally:
            it.close()

    def _scan_size(self) -> Optional[int]:
        """The number of rows (``count(*)``; a hint for the reader's buffer), None when it fails."""
        try:
            return int(self.client.query(self.collection, filter="", output_fields=["count(*)"])[0]["count(*)"])
        except Exception:
            return None

    # ------------------------------------------------------------------ write-back

    def _writable(self, info: _Schema, name: str, field: Optional[str], want: str) -> None:
        if field is None:
            return
        if not isinstance(field, str) or not _IDENT.match(field):
            raise ConfigError(f"`{name}` must be a plain field name ([A-Za-z_][A-Za-z0-9_]*); got {field!r}.")
        if field in (info.pk, info.vector, self.id_field):
            raise ConfigError(f"`{name}` must not be the primary key, the vector or the id field; got {field!r}.")
        t = info.types.get(field)
        ok = t == "BOOL" if want == "BOOL" else t in _INT_TYPES
        if t is None and not info.dynamic:
            raise ConfigError(
                f"`{name}`: collection {self.collection!r} has no field {field!r} and no dynamic fields, so it "
                f"cannot be written. Declare it when creating the collection (schema.add_field({field!r}, "
                f"DataType.{'BOOL' if want == 'BOOL' else 'INT64'}, ...)) or enable_dynamic_field=True.")
        if t is not None and not ok:
            raise ConfigError(f"`{name}`: field {field!r} of {self.collection!r} is {t}; it must be "
                              f"{'BOOL' if want == 'BOOL' else 'an integer type (INT64)'}.")

    def _batches(self, info: _Schema, ids: Optional[list], fields: list, batch_size: int):
        """Batches of rows ``{pk, id field, current values}``: every row, or the rows of ``ids``."""
        key = self._key()
        if ids is None:
            # the widest pages Milvus allows: in Milvus Lite each page is one pass over the segments
            it = self._call("query_iterator", self.client.query_iterator, self.collection,
                            batch_size=MAX_TOPK, output_fields=fields)
            try:
                while True:
                    batch = self._call("query_iterator.next", it.next)
                    if not batch:
                        return
                    yield batch
            finally:
                it.close()
        kind = info.kind_of(key)
        for s in range(0, len(ids), batch_size):
            expr = _membership(key, ids[s:s + batch_size], kind, negate=False, param="ids")
            if expr:
                yield self._call("query", self.client.query, self.collection, filter=expr, output_fields=fields)

    def write_clusters(self, cluster_map, *, ids: Optional[Sequence[Any]] = None,
                       cluster_field: str = "cluster_id",
                       representative_field: Optional[str] = "is_representative",
                       batch_size: int = 4000, flush: bool = True) -> int:
        """Set ``cluster_field`` (and ``representative_field``) on each known document's row.

        Reads the rows with their current values (all rows, in pages of 16384, or the rows of
        ``ids``, document ids, i.e. ``id_field`` values, ``batch_size`` at a time), then upserts
        ``{pk, cluster_field, representative_field}`` with ``partial_update=True``, ``batch_size``
        rows per call, so the other fields are kept; rows that already hold the artifact's values
        are not rewritten (a rerun after a rebuild rewrites only what changed). Ends with one
        ``flush`` (sealed segments search faster in Milvus Lite) unless ``flush=False``.

        The fields must be declared in the schema (an integer type and BOOL; ``group_by_field``
        search needs declared fields) or the collection must have dynamic fields. Returns how many
        rows carry the artifact's values afterwards. A failing upsert leaves earlier batches
        written; rerunning finishes the job.
        """
        _pymilvus()
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 1 <= batch_size <= MAX_TOPK:
            raise ConfigError(f"`batch_size` must be an int in [1, {MAX_TOPK}]; got {batch_size!r}.")
        info = self._info()
        self._writable(info, "cluster_field", cluster_field, "INT")
        if representative_field is not None and representative_field == cluster_field:
            raise ConfigError(f"`representative_field` must differ from `cluster_field`; both are {cluster_field!r}.")
        self._writable(info, "representative_field", representative_field, "BOOL")
        key = self._key()
        fields = list(dict.fromkeys([info.pk, key, cluster_field] + [f for f in (representative_field,) if f]))
        limit = _INT_TYPES.get(info.types.get(cluster_field, "INT64"), 2**63)
        stream = limit == 2**63  # a narrower field is checked for every row before anything is written
        carried, upserted, todo = 0, 0, []
        for batch in self._batches(info, None if ids is None else list(ids), fields, batch_size):
            rows = [r for r in batch if r.get(key) is not None]
            cids, flags = representative_flags(cluster_map, [r[key] for r in rows])
            if len(cids) and int(cids.max()) >= limit:
                raise ConfigError(f"`cluster_field`: field {cluster_field!r} is {info.types[cluster_field]}, too "
                                  f"small for cluster id {int(cids.max())}. Declare it INT64.")
            for r, c, f in zip(rows, cids.tolist(), flags.tolist() if flags is not None else [None] * len(rows)):
                if c < 0:
                    continue
                carried += 1
                new = {cluster_field: c}
                if representative_field and f is not None:
                    new[representative_field] = bool(f)
                if any(r.get(name) != v for name, v in new.items()):
                    new[info.pk] = r[info.pk]
                    todo.append(new)
            while stream and len(todo) >= batch_size:
                upserted += self._upsert(todo[:batch_size])
                del todo[:batch_size]
        while todo:
            upserted += self._upsert(todo[:batch_size])
            del todo[:batch_size]
        if upserted and flush:
            self._call("flush", self.client.flush, self.collection)
        return carried

    def _upsert(self, rows: list) -> int:
        self._call("upsert", self.client.upsert, self.collection, rows, partial_update=True)
        return len(rows)
