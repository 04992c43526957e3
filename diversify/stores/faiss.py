"""FAISS adapter: ``IDSelectorNot`` over seen ids via ``SearchParameters``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Optional

import numpy as np

from ..errors import DuplicateIdError, InputError, StoreError, require
from ..online import Hit
from ._base import Store, check_field, check_k, query_vector, representative_flags

__all__ = ["FaissStore"]


def _faiss():
    return require("faiss", extra="faiss", purpose="FaissStore")


class FaissStore(Store):
    """Search a FAISS index; refetches exclude seen ids with ``IDSelectorNot``.

    Parameters
    ----------
    index : faiss.Index
        A flat or IVF/HNSW index that accepts ``SearchParameters(sel=...)``.
    ids : sequence, optional
        External id of each FAISS label (label ``j`` -> ``ids[j]``). Default: labels are the ids.
    payloads : sequence of Mapping, optional
        One per label; FAISS holds no payload, so the adapter keeps (copies of) them;
        ``write_clusters`` writes into those copies (also without ``payloads``, for an
        ``IndexIDMap`` too).

    ``scores_are`` follows the index metric: inner product -> similarity, L2 -> distance.
    """

    extra = "faiss"

    def __init__(self, index, *, ids: Optional[Sequence[Any]] = None,
                 payloads: Optional[Sequence[Mapping]] = None):
        self.index = index
        self._ids = None if ids is None else list(ids)
        self._label: Optional[dict[Any, int]] = None
        if self._ids is not None:
            label: dict[Any, int] = {}
            for j, i in enumerate(self._ids):
                if i in label:
                    raise DuplicateIdError(f"`ids` must be unique; id {i!r} occurs at labels "
                                           f"{label[i]} and {j}.")
                label[i] = j
            self._label = label
        if payloads is not None and self._ids is not None and len(payloads) != len(self._ids):
            raise InputError(f"`payloads` must have one entry per id ({len(self._ids)}); got {len(payloads)}.")
        # label -> payload (a private copy); FAISS itself stores none
        self._payloads = None if payloads is None else {j: dict(p or {}) for j, p in enumerate(payloads)}

    @property
    def scores_are(self) -> str:
        faiss = _faiss()
        return "similarity" if self.index.metric_type == faiss.METRIC_INNER_PRODUCT else "distance"

    def _external(self, label: int):
        return label if self._ids is None else self._ids[label]

    def _labels(self, exclude_ids) -> np.ndarray:
        if self._label is None:
            return np.fromiter((int(i) for i in exclude_ids), dtype=np.int64)
        return np.fromiter((self._label[i] for i in exclude_ids if i in self._label), dtype=np.int64)

    def search(self, query, k: int, exclude_ids: Optional[Iterable[Any]] = None) -> list[Hit]:
        faiss = _faiss()
        k = check_k(k)
        q = query_vector(query, self.index.d).reshape(1, -1)
        q = np.ascontiguousarray(q, dtype=np.float32)
        try:
            if exclude_ids:
                labels = self._labels(exclude_ids)
                batch = faiss.IDSelectorBatch(labels)  # must outlive the search call
                sel = faiss.IDSelectorNot(batch)
                params = faiss.SearchParameters(sel=sel)
                dist, lab = self.index.search(q, k, params=params)
            else:
                dist, lab = self.index.search(q, k)
        except Exception as exc:
            raise StoreError(f"FAISS search failed: {type(exc).__name__}: {exc}") from exc
        out = []
        for d, label in zip(dist[0].tolist(), lab[0].tolist()):
            if label < 0:
                break  # fewer than k vectors passed the selector
            payload = None
            if self._payloads is not None:
                p = self._payloads.get(label)
                payload = None if p is None else MappingProxyType(p)
            out.append(Hit(self._external(label), float(d), payload, None, None))
        return out

    def _all_labels(self) -> list:
        if self._ids is not None:
            return list(range(len(self._ids)))
        id_map = getattr(self.index, "id_map", None)  # IndexIDMap / IndexIDMap2
        if id_map is not None:
            return _faiss().vector_to_array(id_map).tolist()
        return list(range(self.index.ntotal))

    def write_clusters(self, cluster_map, *, ids=None, cluster_field="cluster_id",
                       representative_field="is_representative") -> int:
        """Keep cluster ids (and representative flags) in the adapter's payloads, by label."""
        check_field("cluster_field", cluster_field)
        if self._payloads is None:
            self._payloads = {}
        if ids is None:
            ids = [self._external(label) for label in self._all_labels()]
        ids = list(ids)
        cids, flags = representative_flags(cluster_map, ids)
        written = 0
        for j, (i, c) in enumerate(zip(ids, cids.tolist())):
            if c < 0:
                continue
            label = self._label.get(i) if self._label is not None else int(i)
            if label is None:
                continue
            p = dict(self._payloads.get(label, {}))  # copy-on-write: hits handed out stay consistent
            p[cluster_field] = c
            if representative_field and flags is not None:
                p[representative_field] = bool(flags[j])
            self._payloads[label] = p
            written += 1
        return written
