"""Qdrant adapter: ``query_points`` with a ``must_not`` ``HasIdCondition`` on seen ids."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Optional

from ..errors import StoreError, require
from ..online import Hit
from ._base import Store, check_field, check_k, query_vector, representative_flags

__all__ = ["QdrantStore"]


def _models():
    return require("qdrant_client.models", extra="qdrant", purpose="QdrantStore")


class QdrantStore(Store):
    """Search a Qdrant collection; refetches exclude seen ids server-side.

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
        A filter every search must satisfy; the exclusion is added next to it.
    with_vectors : bool
        Return stored vectors (needed only for on-the-fly folding).
    scores_are : {"similarity", "distance"}, optional
        Default: read from the collection's distance on first use (Euclid / Manhattan ->
        distance, Cosine / Dot -> similarity).
    """

    extra = "qdrant"

    def __init__(self, client, collection: str, *, using: Optional[str] = None, query_filter=None,
                 with_vectors: bool = False, scores_are: Optional[str] = None):
        check_field("collection", collection)
        self.client = client
        self.collection = collection
        self.using = using
        self.query_filter = query_filter
        self.with_vectors = with_vectors
        self._scores_are = scores_are

    @property
    def scores_are(self) -> str:
        if self._scores_are is None:
            info = self.client.get_collection(self.collection)
            vectors = info.config.params.vectors
            params = vectors[self.using] if isinstance(vectors, dict) else vectors
            name = str(getattr(params.distance, "value", params.distance)).lower()
            self._scores_are = "distance" if name in ("euclid", "manhattan") else "similarity"
        return self._scores_are

    def _filter(self, exclude_ids):
        models = _models()
        if not exclude_ids:
            return self.query_filter
        cond = models.HasIdCondition(has_id=list(exclude_ids))
        if self.query_filter is None:
            return models.Filter(must_not=[cond])
        return models.Filter(must=[self.query_filter], must_not=[cond])

    def search(self, query, k: int, exclude_ids: Optional[Iterable[Any]] = None) -> list[Hit]:
        _models()  # the pip hint when qdrant-client is missing, before anything else
        k = check_k(k)
        q = query_vector(query)
        try:
            resp = self.client.query_points(self.collection, query=q.tolist(), using=self.using,
                                            query_filter=self._filter(exclude_ids), limit=k,
                                            with_payload=True, with_vectors=self.with_vectors)
        except Exception as exc:  # vendor errors vary by transport (local, REST, gRPC)
            raise StoreError(f"Qdrant query_points on collection {self.collection!r} failed: "
                             f"{type(exc).__name__}: {exc}") from exc
        out = []
        for p in resp.points:
            vec = p.vector
            if isinstance(vec, dict):
                vec = vec.get(self.using) if self.using else None
            out.append(Hit(p.id, p.score, p.payload, vec if isinstance(vec, list) else None, p))
        return out

    def _all_ids(self) -> list:
        ids: list = []
        offset = None
        while True:
            points, offset = self.client.scroll(self.collection, limit=1024, offset=offset,
                                                with_payload=False, with_vectors=False)
            ids.extend(p.id for p in points)
            if offset is None:
                return ids

    def write_clusters(self, cluster_map, *, ids: Optional[Sequence[Any]] = None,
                       cluster_field: str = "cluster_id",
                       representative_field: Optional[str] = "is_representative",
                       batch_size: int = 256) -> int:
        """Set ``cluster_field`` (and ``representative_field``) in each point's payload.

        One ``batch_update_points`` per ``batch_size`` points (a ``SetPayloadOperation`` per
        distinct value pair), so the store keeps its other payload keys.
        """
        models = _models()
        check_field("cluster_field", cluster_field)
        ids = self._all_ids() if ids is None else list(ids)
        cids, flags = representative_flags(cluster_map, ids)
        written = 0
        for start in range(0, len(ids), batch_size):
            by_value: dict = {}
            for j in range(start, min(start + batch_size, len(ids))):
                c = int(cids[j])
                if c < 0:
                    continue
                payload = {cluster_field: c}
                if representative_field and flags is not None:
                    payload[representative_field] = bool(flags[j])
                by_value.setdefault(tuple(sorted(payload.items())), []).append(ids[j])
                written += 1
            if by_value:
                ops = [models.SetPayloadOperation(set_payload=models.SetPayload(payload=dict(key), points=pts))
                       for key, pts in by_value.items()]
                self.client.batch_update_points(self.collection, ops, wait=True)
        return written
