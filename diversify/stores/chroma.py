"""Chroma adapters (sync, and async over ``chromadb.AsyncHttpClient``): a ``$nin`` where-filter on
an id metadata field excludes seen ids. Both share every request and parse (:class:`_ChromaCommon`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Optional

from ..errors import StoreError, require
from ..online import Hit
from ._base import AsyncStore, Store, check_field, representative_flags
from .scan import DEFAULT_SCAN_BATCH, Batch, check_scan, field_value, no_vectors, text_list, vector_block, vendor_failed

__all__ = ["ChromaStore", "AsyncChromaStore"]


#: records per ``update`` when the client does not say (chromadb 1.5 takes 5,461)
_DEFAULT_BATCH = 5000

#: ``text_field`` naming the record's own document (Chroma's key for it), not a metadata field
DOCUMENT = "#document"


class _ChromaCommon:
    """The requests and parses both Chroma adapters make (no I/O here)."""

    scores_are = "distance"
    extra = "chroma"
    #: measured (docs/online.md): a ``$nin`` of ids made a query several times slower than asking
    #: for k + that many more hits; with a where-filter of its own both cost about the same
    auto_refill = "grow"

    def __init__(self, collection, *, id_field: str = "doc_id", where: Optional[Mapping] = None,
                 with_vectors: bool = False, refill: str = "auto", max_exclude: Optional[int] = None):
        check_field("id_field", id_field)
        self._setup_refill(refill, max_exclude)  # type: ignore[attr-defined]
        self.collection = collection
        self.id_field = id_field
        self.where = dict(where) if where else None
        self.with_vectors = with_vectors

    def _where(self, exclude_ids):
        if not exclude_ids:
            return self.where
        excl = {self.id_field: {"$nin": list(exclude_ids)}}
        return excl if self.where is None else {"$and": [self.where, excl]}

    def _request(self, q, k: int, exclude: Optional[list]) -> dict:
        """The ``query`` keyword arguments of one call."""
        require("chromadb", extra="chroma", purpose=type(self).__name__)
        include = ["metadatas", "distances"] + (["embeddings"] if self.with_vectors else [])
        return {"query_embeddings": [q.tolist()], "n_results": k, "where": self._where(exclude), "include": include}

    def _failed(self, exc: Exception) -> StoreError:
        return StoreError(f"Chroma query on collection {getattr(self.collection, 'name', '?')!r} failed: "
                          f"{type(exc).__name__}: {exc}")

    def _hits(self, res, k: int) -> list[Hit]:
        ids = res["ids"][0][:k]  # never more than asked, whatever the server answers
        metas = (res.get("metadatas") or [[None] * len(ids)])[0]
        dists = (res.get("distances") or [[None] * len(ids)])[0]
        embs = res.get("embeddings")
        embs = embs[0] if embs is not None and len(embs) else [None] * len(ids)
        out = []
        for cid, meta, dist, emb in zip(ids, metas, dists, embs):
            doc_id = meta.get(self.id_field, cid) if meta else cid
            out.append(Hit(doc_id, None if dist is None else float(dist), meta,
                           None if emb is None else list(emb), cid))
        return out

    def _updates(self, got, cluster_map, ids: Optional[Sequence[Any]], cluster_field: str,
                 representative_field: Optional[str]) -> tuple[list, list, int]:
        """(Chroma ids, metadata to merge, records carrying the values afterwards) for
        ``write_clusters``, from ``get(include=["metadatas"])``. Records that already hold the
        artifact's values (types checked: a stored True or 1.0 is no cluster id 1) are skipped."""
        chroma_ids, doc_ids, metas = [], [], []
        wanted = None if ids is None else set(ids)
        for cid, meta in zip(got["ids"], got["metadatas"]):
            doc_id = meta.get(self.id_field, cid) if meta else cid
            if wanted is None or doc_id in wanted:
                chroma_ids.append(cid)
                doc_ids.append(doc_id)
                metas.append(meta or {})
        cids, flags = representative_flags(cluster_map, doc_ids)
        upd_ids, upd_meta = [], []
        carried = 0
        for j, c in enumerate(cids.tolist()):
            if c < 0:
                continue
            carried += 1
            m = {cluster_field: c}
            if representative_field and flags is not None:
                m[representative_field] = bool(flags[j])
            old = metas[j]
            if all(type(old.get(key)) is type(v) and old.get(key) == v for key, v in m.items()):
                continue
            upd_ids.append(chroma_ids[j])
            upd_meta.append(m)
        return upd_ids, upd_meta, carried


class ChromaStore(_ChromaCommon, Store):
    """Search a Chroma collection; refetches ask for a larger k, or (``refill="exclude"``) exclude
    seen ids with ``{id_field: {"$nin": [...]}}``.

    Chroma's where-filters cannot address the record id itself, so each record carries its
    document id in a metadata field (``id_field``, default ``"doc_id"``), written when the
    documents are added (``metadatas=[{"doc_id": i, ...}]``). Hits report that value as their
    id (falling back to the Chroma id when the field is absent).

    Parameters
    ----------
    collection : chromadb Collection
        E.g. ``chromadb.EphemeralClient().get_or_create_collection(...)``; not touched until the
        first call.
    id_field : str
        Metadata field holding the document id.
    where : dict, optional
        The user's where-filter (a tenant, an access rule): every call, refetches included,
        applies it; a pushed-down exclusion is ``$and``-ed to it.
    refill : {"auto", "exclude", "grow"}
        How refetches skip seen ids (see :mod:`diversify.stores.exclusion`); ``auto`` = ``grow``
        (measured: docs/online.md).
    max_exclude : int, optional
        Ids pushed down per call (default 256); the rest is answered by a larger k.

    Chroma always returns distances (``scores_are = "distance"``), whatever the space.
    """

    def _search(self, q, k: int, exclude: Optional[list]) -> list[Hit]:
        request = self._request(q, k, exclude)
        try:
            res = self.collection.query(**request)
        except Exception as exc:
            raise self._failed(exc) from exc
        return self._hits(res, k)

    def write_clusters(self, cluster_map, *, ids: Optional[Sequence[Any]] = None,
                       cluster_field: str = "cluster_id",
                       representative_field: Optional[str] = "is_representative",
                       batch_size: Optional[int] = None) -> int:
        """Merge ``cluster_field`` (and ``representative_field``) into each record's metadata.

        ``ids`` are document ids (the ``id_field`` values); default: every record. Records that
        already hold the artifact's values are not updated again (Chroma's ``update`` is slow per
        record, docs/online.md, so a rerun after a rebuild writes only what changed). Returns how many
        records carry the artifact's values afterwards.
        """
        require("chromadb", extra="chroma", purpose="ChromaStore")
        check_field("cluster_field", cluster_field)
        got = self.collection.get(include=["metadatas"])
        upd_ids, upd_meta, carried = self._updates(got, cluster_map, ids, cluster_field, representative_field)
        if batch_size is None:  # as many per update as the client takes (5,461 for chromadb 1.5)
            limit = getattr(getattr(self.collection, "_client", None), "get_max_batch_size", None)
            batch_size = int(limit()) if callable(limit) else _DEFAULT_BATCH
        for s in range(0, len(upd_ids), batch_size):
            self.collection.update(ids=upd_ids[s:s + batch_size], metadatas=upd_meta[s:s + batch_size])
        return carried


    def scan(self, *, batch_size: int = DEFAULT_SCAN_BATCH, with_vectors: bool = True,
             text_field: Optional[str] = None) -> Iterator[Batch]:
        """Every record of the collection, ``batch_size`` per ``get(limit, offset)`` page
        (:mod:`.scan`): its document id as hits name it (the ``id_field`` metadata value, else
        the Chroma id), its embedding and its text: ``text_field="#document"`` reads the record's
        own document, any other name a metadata field."""
        size = check_scan(batch_size, with_vectors, text_field)
        require("chromadb", extra="chroma", purpose="ChromaStore")
        include = ["metadatas"] + (["embeddings"] if with_vectors else []) + (["documents"] if text_field == DOCUMENT
                                                                             else [])
        where = f"Chroma collection {getattr(self.collection, 'name', '?')!r}"
        offset = 0
        while True:
            try:
                got = self.collection.get(limit=size, offset=offset, include=include)
            except Exception as exc:
                raise vendor_failed("get", where, exc) from exc
            n = len(got["ids"])
            if n:
                yield self._scan_batch(got, with_vectors, text_field, where)
            if n < size:
                return
            offset += n

    def _scan_size(self) -> Optional[int]:
        try:
            return int(self.collection.count())
        except Exception:
            return None

    def _scan_batch(self, got, with_vectors: bool, text_field: Optional[str], where: str) -> Batch:
        metas = got.get("metadatas") or [None] * len(got["ids"])
        ids = [meta.get(self.id_field, cid) if meta else cid for cid, meta in zip(got["ids"], metas)]
        block = None
        if with_vectors:
            embs = got.get("embeddings")
            missing = [0] if embs is None or len(embs) != len(ids) else [j for j, e in enumerate(embs) if e is None]
            if missing:
                raise no_vectors(where, ids[missing[0]], "Add the records with their embeddings, or build from texts only "
                                                "(text_field='#document', vectors=False).")
            block = vector_block(embs, ids, where)
        texts = None
        if text_field is not None:
            values = got.get("documents") if text_field == DOCUMENT else [field_value(m, text_field) for m in metas]
            texts = text_list(values or [None] * len(ids), ids, text_field, where)
        return Batch(ids, block, texts)


class AsyncChromaStore(_ChromaCommon, AsyncStore):
    """Search a Chroma collection of an async client (``await chromadb.AsyncHttpClient(...)``,
    then ``await client.get_collection(name)``): ``await store.search(query, k)``; pass it to
    :meth:`diversify.Diversifier.awrap`.

    Same parameters, where-filter composition, ids and refill as :class:`ChromaStore`, with
    ``collection`` an ``AsyncCollection``. Every call is awaited HTTP I/O: the event loop runs
    other work while the server searches.
    """

    async def _search(self, q, k: int, exclude: Optional[list]) -> list[Hit]:
        request = self._request(q, k, exclude)
        try:
            res = await self.collection.query(**request)
        except Exception as exc:
            raise self._failed(exc) from exc
        return self._hits(res, k)

    async def write_clusters(self, cluster_map, *, ids: Optional[Sequence[Any]] = None,
                             cluster_field: str = "cluster_id",
                             representative_field: Optional[str] = "is_representative",
                             batch_size: Optional[int] = None) -> int:
        """``await store.write_clusters(cluster_map)``: as :meth:`ChromaStore.write_clusters`."""
        require("chromadb", extra="chroma", purpose="AsyncChromaStore")
        check_field("cluster_field", cluster_field)
        got = await self.collection.get(include=["metadatas"])
        upd_ids, upd_meta, carried = self._updates(got, cluster_map, ids, cluster_field, representative_field)
        if batch_size is None:
            limit = getattr(getattr(self.collection, "_client", None), "get_max_batch_size", None)
            batch_size = int(await limit()) if callable(limit) else _DEFAULT_BATCH
        for s in range(0, len(upd_ids), batch_size):
            await self.collection.update(ids=upd_ids[s:s + batch_size], metadatas=upd_meta[s:s + batch_size])
        return carried
