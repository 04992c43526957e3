"""Qdrant adapters (sync and async): ``query_points`` under the user's filter; refetches exclude
seen ids or ask a larger k.

:class:`QdrantStore` (``QdrantClient``) and :class:`AsyncQdrantStore` (``AsyncQdrantClient``)
share every request and every parse (:class:`_QdrantCommon`); they differ only in awaiting the
client."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Optional

import numpy as np

from ..errors import ConfigError, StoreError, require
from ..online import Hit
from ._base import AsyncStore, Store, check_field, representative_flags
from .exclusion import backed_by_local_qdrant
from .scan import DEFAULT_SCAN_BATCH, Batch, check_scan, field_value, no_vectors, text_list, vector_block, vendor_failed

__all__ = ["QdrantStore", "AsyncQdrantStore", "canonical_point_id"]


def _models():
    return require("qdrant_client.models", extra="qdrant", purpose="QdrantStore")


def canonical_point_id(x: Any) -> Optional[Any]:
    """``x`` as Qdrant spells a point id: an unsigned int, or a UUID in its canonical form
    (lower case, hyphenated: what Qdrant returns for any UUID spelling it accepts, hex, upper
    case, ``urn:uuid:``, braces). None when ``x`` cannot be a point id (then no point has it)."""
    if isinstance(x, (bool, np.bool_)):
        return None
    if isinstance(x, (int, np.integer)):
        return int(x) if x >= 0 else None
    if isinstance(x, uuid.UUID):
        return str(x)
    if isinstance(x, str):
        try:
            return str(uuid.UUID(x))
        except ValueError:
            return None
    return None


class _QdrantCommon:
    """The requests and parses both Qdrant adapters make (no I/O here)."""

    extra = "qdrant"
    exact_exclusion = True

    def __init__(self, client, collection: str, *, using: Optional[str] = None, query_filter=None,
                 id_field: Optional[str] = None, with_vectors: bool = False, scores_are: Optional[str] = None,
                 refill: str = "auto", max_exclude: Optional[int] = None):
        check_field("collection", collection)
        if id_field is not None:
            check_field("id_field", id_field)
        self._setup_refill(refill, max_exclude)  # type: ignore[attr-defined]
        self.client = client
        self.collection = collection
        self.using = using
        self.query_filter = query_filter
        self.id_field = id_field
        self.with_vectors = with_vectors
        self._scores_are = scores_are

    @property
    def local(self) -> bool:
        """Is the client Qdrant's local mode (in memory or a path), not a server?"""
        return backed_by_local_qdrant(self.client, depth=1)

    def _auto_refill(self) -> str:
        return "grow" if self.local else "exclude"

    def _learn_scores(self, info) -> str:
        """``scores_are`` from the collection's description (``get_collection``)."""
        vectors = info.config.params.vectors
        params = vectors[self.using] if isinstance(vectors, dict) else vectors
        name = str(getattr(params.distance, "value", params.distance)).lower()
        self._scores_are = "distance" if name in ("euclid", "manhattan") else "similarity"
        return self._scores_are

    def _exclude_ids(self, ids) -> list:
        if self.id_field is not None:
            return list(ids)
        # point ids as Qdrant returns them; anything else is no point's id
        return [p for p in (canonical_point_id(i) for i in ids) if p is not None]

    def _exclusion_conditions(self, exclude: list) -> list:
        models = _models()
        if self.id_field is None:
            return [models.HasIdCondition(has_id=list(exclude))]
        # MatchAny takes one type at a time
        strs = [i for i in exclude if isinstance(i, str)]
        ints = [int(i) for i in exclude if isinstance(i, (int, np.integer)) and not isinstance(i, bool)]
        return [models.FieldCondition(key=self.id_field, match=models.MatchAny(any=vals))
                for vals in (strs, ints) if vals]

    def _filter(self, exclude: Optional[list]):
        if not exclude:
            return self.query_filter
        conds = self._exclusion_conditions(exclude)
        if not conds:
            return self.query_filter
        models = _models()
        return models.Filter(must=None if self.query_filter is None else [self.query_filter], must_not=conds)

    def _request(self, q, k: int, exclude: Optional[list]) -> dict:
        """The ``query_points`` keyword arguments of one call."""
        _models()  # the pip hint when qdrant-client is missing, before anything else
        return {"collection_name": self.collection, "query": q.tolist(), "using": self.using,
                "query_filter": self._filter(exclude), "limit": k, "with_payload": True,
                "with_vectors": self.with_vectors}

    def _failed(self, exc: Exception) -> StoreError:
        # vendor errors vary by transport (local, REST, gRPC)
        return StoreError(f"Qdrant query_points on collection {self.collection!r} failed: "
                          f"{type(exc).__name__}: {exc}")

    def _hit_id(self, p) -> Any:
        if self.id_field is not None and p.payload:
            value = p.payload.get(self.id_field)
            if value is not None:
                return value
        return p.id

    def _hits(self, resp, k: int) -> list[Hit]:
        out = []
        for p in resp.points[:k]:  # never more than asked, whatever the server answers
            vec = p.vector
            if isinstance(vec, dict):
                vec = vec.get(self.using) if self.using else None
            out.append(Hit(self._hit_id(p), p.score, p.payload, vec if isinstance(vec, list) else None, p))
        return out

    def _scan_failed(self, exc: Exception) -> Exception:
        if "not found" in str(exc).lower() or getattr(exc, "status_code", None) == 404:
            return StoreError(f"`collection`: Qdrant has no collection {self.collection!r} ({exc}). Check the "
                              "name (client.get_collections() lists them) and the client's path or URL.")
        return vendor_failed("scroll", f"Qdrant collection {self.collection!r}", exc)

    def _check_using(self, params: Any) -> None:
        """``using`` against the collection's vectors (a dict of named ones, or one unnamed)."""
        where = f"Qdrant collection {self.collection!r}"
        named = sorted(params) if isinstance(params, dict) else None
        if self.using is None and named:
            raise ConfigError(f"`using`: {where} has named vectors {named}; name the one to read, "
                              f"e.g. QdrantStore(client, {self.collection!r}, using={named[0]!r}).")
        if self.using is not None and (named is None or self.using not in named):
            has = "one unnamed vector" if named is None else f"the named vectors {named}"
            raise ConfigError(f"`using`: {where} has no vector named {self.using!r}; it has {has}. "
                              + ("Drop using." if named is None else f"Pick one, e.g. using={named[0]!r}."))

    def _scan_batch(self, points: list, with_vectors: bool, text_field: Optional[str]) -> Batch:
        where = f"Qdrant collection {self.collection!r}"
        ids = [self._hit_id(p) for p in points]
        block = None
        if with_vectors:
            rows = []
            for p, i in zip(points, ids):
                vec = p.vector
                if isinstance(vec, dict):
                    vec = vec.get(self.using) if self.using else None
                if vec is None:
                    raise no_vectors(where, i, "Upsert the points with their vectors (or name the vector with "
                                               "`using=`), or build from texts only (text_field=..., vectors=False).")
                rows.append(vec)
            block = vector_block(rows, ids, where)
        texts = None
        if text_field is not None:
            texts = text_list([field_value(p.payload, text_field) for p in points], ids, text_field, where)
        return Batch(ids, block, texts)

    def _scroll_request(self, offset, fields: Sequence[str] = ()) -> dict:
        # few large pages: the local mode sorts every id on each page
        keys = ([self.id_field] if self.id_field is not None else []) + list(fields)
        payload: Any = keys or False
        return {"collection_name": self.collection, "limit": 65536, "offset": offset, "with_payload": payload,
                "with_vectors": False}

    def _needs_scroll(self, ids: Optional[Sequence[Any]]) -> bool:
        """Does ``write_clusters`` need to read the points (else the ids are the point ids)?"""
        return self.id_field is not None or ids is None

    def _targets(self, ids: Optional[Sequence[Any]], points: Optional[list],
                 fields: Sequence[str]) -> tuple[list, list, Optional[list]]:
        """(document ids, point id of each, each point's current ``fields`` values or None when
        they were not read) for ``write_clusters``; ``points`` are the scrolled points (read with
        ``fields``) when :meth:`_needs_scroll`."""
        if self.id_field is None:
            if ids is None:
                read = list(points or ())
                pids = [p.id for p in read]
                return pids, pids, [_values(p, fields) for p in read]
            docs = list(ids)
            pids = [canonical_point_id(i) for i in docs]
            keep = [j for j, p in enumerate(pids) if p is not None]
            return [docs[j] for j in keep], [pids[j] for j in keep], None
        by_doc: dict = {}
        for p in points or ():
            value = (p.payload or {}).get(self.id_field)
            if value is not None:
                by_doc.setdefault(value, []).append((p.id, _values(p, fields)))
        wanted = list(by_doc) if ids is None else [i for i in dict.fromkeys(ids) if i in by_doc]
        docs, pids, now = [], [], []
        for i in wanted:
            for pid, values in by_doc[i]:
                docs.append(i)
                pids.append(pid)
                now.append(values)
        return docs, pids, now

    def _update_batches(self, cluster_map, ids: Optional[Sequence[Any]], points: Optional[list], cluster_field: str,
                        representative_field: Optional[str], batch_size: int) -> tuple[list[list], int]:
        """(``batch_update_points`` operation lists, points carrying the values afterwards) for
        ``write_clusters``: points sharing a value pair in one ``SetPayloadOperation``,
        ``batch_size`` points per request; points read already holding the values are skipped."""
        models = _models()
        check_field("cluster_field", cluster_field)
        docs, pids, now = self._targets(ids, points, _fields(cluster_field, representative_field))
        cids, flags = representative_flags(cluster_map, docs)
        with_flag = bool(representative_field) and flags is not None
        flag_list = flags.tolist() if with_flag else [None] * len(docs)
        by_value: dict = {}
        written = 0
        for j, (c, flag, point) in enumerate(zip(cids.tolist(), flag_list, pids)):
            if c < 0:
                continue
            written += 1
            if now is not None and type(now[j][0]) is int and now[j][0] == c and (flag is None or now[j][1] is flag):
                continue  # already written (types checked: a payload's True or 1.0 is no cluster id 1)
            by_value.setdefault((c, flag), []).append(point)
        # built without validation (model_construct, every field given): the values are ints,
        # bools and point ids we just read or checked, and validating ~one operation per cluster
        # was half the time
        batches: list[list] = []
        ops: list = []
        in_batch = 0
        for (c, flag), pts in by_value.items():
            payload: dict = {cluster_field: c}
            if flag is not None:
                payload[representative_field] = flag
            ops.append(models.SetPayloadOperation.model_construct(
                set_payload=models.SetPayload.model_construct(payload=payload, points=pts, filter=None,
                                                              shard_key=None, key=None)))
            in_batch += len(pts)
            if in_batch >= batch_size:
                batches.append(ops)
                ops, in_batch = [], 0
        if ops:
            batches.append(ops)
        return batches, written


class QdrantStore(_QdrantCommon, Store):
    """Search a Qdrant collection; refetches skip seen ids (server-side filter, or a larger k).

    Parameters
    ----------
    client : qdrant_client.QdrantClient
        Any client (``QdrantClient(":memory:")``, a path, or a server). Not touched until the
        first call.
    collection : str
        Collection name.
    using : str, optional
        Named vector to search.
    query_filter : qdrant_client.models.Filter, optional
        The user's filter (a tenant, an access rule): every call, refetches included, applies it;
        a pushed-down exclusion is AND-ed to it (``must=[query_filter], must_not=[...]``).
    id_field : str, optional
        Payload field holding the document id the artifact knows (for ids Qdrant cannot take as
        point ids, e.g. ``"doc-17"``, or langchain-qdrant's ``metadata.doc_id``). Hits report it
        (the point id when a point lacks it); exclusion and ``write_clusters`` go through it.
        Default: the point id, in Qdrant's canonical form (see :func:`canonical_point_id`).
    with_vectors : bool
        Return stored vectors (needed only for on-the-fly folding).
    scores_are : {"similarity", "distance"}, optional
        Default: read from the collection's distance on first use (Euclid / Manhattan ->
        distance, Cosine / Dot -> similarity).
    refill : {"auto", "exclude", "grow"}
        How refetches skip seen ids (see :mod:`diversify.stores.exclusion`). ``auto``: ``grow``
        for the local mode (``QdrantClient(":memory:")`` / ``path=``), whose ``HasIdCondition``
        is evaluated point by point (measured: docs/online.md); ``exclude`` for a server.
    max_exclude : int, optional
        Ids pushed down per call (default 256); the rest is answered by a larger k.
    """

    @property
    def scores_are(self) -> str:
        if self._scores_are is None:
            return self._learn_scores(self.client.get_collection(self.collection))
        return self._scores_are

    def _search(self, q, k: int, exclude: Optional[list]) -> list[Hit]:
        request = self._request(q, k, exclude)
        try:
            resp = self.client.query_points(**request)
        except Exception as exc:
            raise self._failed(exc) from exc
        return self._hits(resp, k)

    def _scroll(self, fields: Sequence[str] = ()) -> Iterable:
        offset = None
        while True:
            points, offset = self.client.scroll(**self._scroll_request(offset, fields))
            yield from points
            if offset is None:
                return

    def scan(self, *, batch_size: int = DEFAULT_SCAN_BATCH, with_vectors: bool = True,
             text_field: Optional[str] = None) -> Iterator[Batch]:
        """Every point of the collection, ``batch_size`` per ``scroll`` page (:mod:`.scan`): its
        document id as hits name it (the ``id_field`` value, else the point id), its ``using``
        vector and its ``text_field`` payload value (a dotted name reaches into nested payloads)."""
        size = check_scan(batch_size, with_vectors, text_field)
        _models()
        keys = [k for k in (self.id_field, text_field) if k is not None]
        vectors: Any = ([self.using] if self.using else True) if with_vectors else False
        if with_vectors:
            try:
                info = self.client.get_collection(self.collection)
            except Exception as exc:
                raise self._scan_failed(exc) from exc
            self._check_using(info.config.params.vectors)
        offset = None
        while True:
            try:
                points, offset = self.client.scroll(collection_name=self.collection, limit=size, offset=offset,
                                                    with_payload=keys or False, with_vectors=vectors)
            except Exception as exc:
                raise self._scan_failed(exc) from exc
            if points:
                yield self._scan_batch(points, with_vectors, text_field)
            if offset is None:
                return

    def _scan_size(self) -> Optional[int]:
        """The number of points (a hint for the reader's buffer), None when the count fails."""
        try:
            return int(self.client.count(self.collection, exact=True).count)
        except Exception:
            return None

    def write_clusters(self, cluster_map, *, ids: Optional[Sequence[Any]] = None,
                       cluster_field: str = "cluster_id",
                       representative_field: Optional[str] = "is_representative",
                       batch_size: int = 4096) -> int:
        """Set ``cluster_field`` (and ``representative_field``) in each point's payload.

        ``ids`` are document ids (point ids, or ``id_field`` values); default: every point.
        Points sharing a value pair are written by one ``SetPayloadOperation``, ``batch_size``
        points per ``batch_update_points`` request, so the store keeps its other payload keys.
        When the points are read (``ids`` not given, or ``id_field`` set), those that already
        hold the artifact's values are not written again (a rerun after a rebuild writes only what
        changed: Qdrant's local mode on disk commits every point written to SQLite; docs/online.md).
        Returns how many points carry the artifact's values afterwards.
        """
        _models()
        check_field("cluster_field", cluster_field)
        fields = _fields(cluster_field, representative_field)
        points = list(self._scroll(fields)) if self._needs_scroll(ids) else None
        batches, written = self._update_batches(cluster_map, ids, points, cluster_field, representative_field,
                                                batch_size)
        for ops in batches:
            self.client.batch_update_points(self.collection, ops, wait=True)
        return written


class AsyncQdrantStore(_QdrantCommon, AsyncStore):
    """Search a Qdrant collection through ``qdrant_client.AsyncQdrantClient``: ``await
    store.search(query, k)``; pass it to :meth:`diversify.Diversifier.awrap`.

    Same parameters, filter composition, ids and refill as :class:`QdrantStore`, with ``client``
    an ``AsyncQdrantClient`` (a server, or the local mode: ``AsyncQdrantClient(":memory:")`` /
    ``path=``). Without ``scores_are=``, ``await store.ascores_are()`` reads it from the
    collection once. The local mode runs each search in the event loop's thread (it is an
    in-process store: each call is CPU work, short for a small collection); a server's calls are
    awaited I/O.
    """

    @property
    def scores_are(self) -> str:
        if self._scores_are is None:
            raise ConfigError(f"AsyncQdrantStore has not read the distance of collection {self.collection!r} yet "
                              "(a property cannot await the client); got scores_are=None. Call "
                              "`await store.ascores_are()` once, or pass scores_are='similarity' / 'distance'.")
        return self._scores_are

    async def ascores_are(self) -> str:
        """``scores_are``, read from the collection's distance when it was not given."""
        if self._scores_are is None:
            return self._learn_scores(await self.client.get_collection(self.collection))
        return self._scores_are

    async def _search(self, q, k: int, exclude: Optional[list]) -> list[Hit]:
        request = self._request(q, k, exclude)
        try:
            resp = await self.client.query_points(**request)
        except Exception as exc:
            raise self._failed(exc) from exc
        return self._hits(resp, k)

    async def _points(self, fields: Sequence[str] = ()) -> list:
        out: list = []
        offset = None
        while True:
            points, offset = await self.client.scroll(**self._scroll_request(offset, fields))
            out.extend(points)
            if offset is None:
                return out

    async def write_clusters(self, cluster_map, *, ids: Optional[Sequence[Any]] = None,
                             cluster_field: str = "cluster_id",
                             representative_field: Optional[str] = "is_representative",
                             batch_size: int = 4096) -> int:
        """``await store.write_clusters(cluster_map)``: as :meth:`QdrantStore.write_clusters`."""
        _models()
        check_field("cluster_field", cluster_field)
        fields = _fields(cluster_field, representative_field)
        points = await self._points(fields) if self._needs_scroll(ids) else None
        batches, written = self._update_batches(cluster_map, ids, points, cluster_field, representative_field,
                                                batch_size)
        for ops in batches:
            await self.client.batch_update_points(self.collection, ops, wait=True)
        return written


def _fields(cluster_field: str, representative_field: Optional[str]) -> list:
    """The payload keys ``write_clusters`` writes (and reads, to skip points already holding them)."""
    return [cluster_field] + ([representative_field] if representative_field else [])


def _values(point: Any, fields: Sequence[str]) -> tuple:
    """The point's current values of ``fields`` (None where absent)."""
    payload = point.payload or {}
    return tuple(payload.get(f) for f in fields) + (None,) * (2 - len(fields))
