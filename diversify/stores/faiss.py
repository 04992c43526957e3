"""FAISS adapter: the user's filter and the exclusion as ``IDSelector``s in the index type's own ``SearchParameters``."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Optional

import numpy as np

from ..errors import ConfigError, DuplicateIdError, InputError, StoreError, require
from ..online import Fetched, Hit
from ._base import Store, check_field, check_where, query_vector, representative_flags
from .scan import DEFAULT_SCAN_BATCH, Batch, check_scan, field_value, text_list, vector_block

__all__ = ["FaissStore"]


def _faiss():
    return require("faiss", extra="faiss", purpose="FaissStore")


def _unwrap(index):
    """The index as its concrete FAISS class (SWIG returns the base class for nested indexes)."""
    return _faiss().downcast_index(index)


def search_params(index, sel, widen: int = 1) -> tuple[Any, list, bool]:
    """``SearchParameters`` carrying ``sel`` (may be None) of the type ``index`` takes, the objects
    that must outlive the search call (SWIG does not keep them alive), and whether ``widen`` could
    still grow (the index visits less than all of itself).

    IVF indexes take ``SearchParametersIVF`` (the index's ``nprobe`` times ``widen``, at most
    ``nlist``), HNSW ``SearchParametersHNSW`` (its ``efSearch`` times ``widen``, at most
    ``ntotal``); ``IndexIDMap`` / ``IndexIDMap2`` pass them to the index they wrap (the selector
    then sees external ids), ``IndexPreTransform`` through ``SearchParametersPreTransform``; any
    other index gets plain ``SearchParameters``.
    """
    faiss = _faiss()
    idx = _unwrap(index)
    if isinstance(idx, (faiss.IndexIDMap, faiss.IndexIDMap2)):
        inner, keep, more = search_params(idx.index, sel, widen)
        return inner, keep + [idx], more
    if isinstance(idx, faiss.IndexPreTransform):
        inner, keep, more = search_params(idx.index, sel, widen)
        params = faiss.SearchParametersPreTransform()
        params.index_params = inner
        return params, keep + [inner, idx], more
    more = False
    if isinstance(idx, faiss.IndexIVF):
        nprobe = min(idx.nlist, idx.nprobe * widen)
        params = faiss.SearchParametersIVF(nprobe=nprobe, max_codes=0 if widen > 1 else idx.max_codes)
        more = nprobe < idx.nlist
    elif isinstance(idx, faiss.IndexHNSW):
        ef = min(max(idx.ntotal, 1), idx.hnsw.efSearch * widen)
        params = faiss.SearchParametersHNSW(efSearch=ef)
        more = ef < idx.ntotal
    else:
        params = faiss.SearchParameters()
    if sel is not None:
        params.sel = sel
    return params, [sel, idx], more


def _is_flat(index) -> bool:
    faiss = _faiss()
    idx = _unwrap(index)
    while isinstance(idx, (faiss.IndexIDMap, faiss.IndexIDMap2, faiss.IndexPreTransform)):
        idx = _unwrap(idx.index)
    return isinstance(idx, faiss.IndexFlat)


class FaissStore(Store):
    """Search a FAISS index under the user's filter; refetches skip seen ids (``IDSelectorNot``
    or a larger k).

    Parameters
    ----------
    index : faiss.Index
        Flat, IVF (``IndexIVFFlat``, ``IVF...,PQ...``) or HNSW, bare or in an ``IndexIDMap`` /
        ``IndexIDMap2`` / ``IndexPreTransform``. Selectors go in the search parameters of the
        index's own type (see :func:`search_params`), so IVF keeps its ``nprobe`` and HNSW its
        ``efSearch``. An approximate index answers only from what it visits (IVF: the ``nprobe``
        nearest lists), so there ``exhausted`` means "this index has no more for this query".
    ids : sequence, optional
        External id of each FAISS label (label ``j`` -> ``ids[j]``). Default: labels are the ids.
    payloads : sequence of Mapping, or Mapping {label: payload}, optional
        One per label (a sequence, in label order) or keyed by label (for an ``IndexIDMap``,
        whose labels are the ids). FAISS holds no payload, so the adapter keeps copies;
        ``write_clusters`` writes into those copies.
    where : callable, optional
        ``where(payload) -> bool``: the user's filter (a tenant, an access rule), applied in the
        index as an ``IDSelectorBatch`` of the accepted labels (AND-ed with the exclusion) on
        every call, refetches included. Needs ``payloads``.
    refill : {"auto", "exclude", "grow"}
        How refetches skip seen ids (see :mod:`diversify.stores.exclusion`); ``auto`` = the
        measured choice for the index type (docs/online.md).
    max_exclude : int, optional
        Ids pushed down per call (default 256); the rest is answered by a larger k.

    ``scores_are`` follows the index metric: inner product -> similarity, L2 -> distance.
    """

    extra = "faiss"
    exclusion_fallback = True  # an index type without selector support: grow k instead

    def __init__(self, index, *, ids: Optional[Sequence[Any]] = None,
                 payloads: Optional[Sequence[Mapping] | Mapping[Any, Mapping]] = None,
                 where: Optional[Callable[[Mapping], Any]] = None, refill: str = "auto",
                 max_exclude: Optional[int] = None):
        check_where(where)
        self._setup_refill(refill, max_exclude)
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
        # label -> payload (a private copy); FAISS itself stores none
        self._payloads: Optional[dict[int, dict]] = None
        if isinstance(payloads, Mapping):
            self._payloads = {int(lab): dict(p or {}) for lab, p in payloads.items()}
        elif payloads is not None:
            if self._ids is not None and len(payloads) != len(self._ids):
                raise InputError(f"`payloads` must have one entry per id ({len(self._ids)}); got {len(payloads)}.")
            self._payloads = {j: dict(p or {}) for j, p in enumerate(payloads)}
        if where is not None and self._payloads is None:
            raise ConfigError("`where` filters on payloads, but this FaissStore has none; got payloads=None. "
                              "Pass payloads=[...] (one per label) or {label: payload}.")
        self.where = where
        self._allowed: Optional[Any] = None  # IDSelectorBatch of the labels `where` accepts

    def _auto_refill(self) -> str:
        return "exclude"

    def _exact_exclusion(self) -> bool:
        return _is_flat(self.index)

    @property
    def scores_are(self) -> str:
        faiss = _faiss()
        return "similarity" if self.index.metric_type == faiss.METRIC_INNER_PRODUCT else "distance"

    def _external(self, label: int):
        return label if self._ids is None else self._ids[label]

    def _labels(self, exclude_ids) -> np.ndarray:
        if self._label is None:  # labels are the ids: ints only (anything else is in no index)
            return np.fromiter((int(i) for i in exclude_ids
                                if isinstance(i, (int, np.integer)) and not isinstance(i, bool)), dtype=np.int64)
        return np.fromiter((self._label[i] for i in exclude_ids if i in self._label), dtype=np.int64)

    def _allowed_selector(self):
        if self.where is None:
            return None
        sel = self._allowed
        if sel is None:
            assert self._payloads is not None  # checked in __init__
            labels = [lab for lab, p in self._payloads.items() if self.where(MappingProxyType(p))]
            sel = _faiss().IDSelectorBatch(np.asarray(labels, dtype=np.int64))
            self._allowed = sel
        return sel

    def _query(self, query):
        q = query_vector(query, self.index.d).reshape(1, -1)
        return np.ascontiguousarray(q, dtype=np.float32)

    def _search(self, q, k: int, exclude: Optional[list]) -> list[Hit]:
        faiss = _faiss()
        sel, keep = self._allowed_selector(), []
        if exclude:
            batch = faiss.IDSelectorBatch(self._labels(exclude))
            not_seen = faiss.IDSelectorNot(batch)
            keep += [batch, not_seen]
            if sel is not None:
                both = faiss.IDSelectorAnd(sel, not_seen)
                keep += [sel]
                sel = both
            else:
                sel = not_seen
        # an approximate index answers from what it visits: a short answer is widened (IVF
        # nprobe, HNSW efSearch x4 per step) until k come back or it visits everything, so that
        # short means "no more matching vectors", as for a flat index
        widen, calls = 1, 0
        try:
            while True:
                calls += 1
                if sel is None and widen == 1:
                    dist, lab = self.index.search(q, k)
                    more = search_params(self.index, None)[2]  # IVF / HNSW: could visit more
                else:
                    params, held, more = search_params(self.index, sel, widen)
                    keep += held
                    dist, lab = self.index.search(q, k, params=params)
                if not more or (lab[0] >= 0).sum() >= min(k, self.index.ntotal):
                    break
                widen *= 4
        except Exception as exc:
            raise StoreError(f"FAISS search on {type(_unwrap(self.index)).__name__} failed: "
                             f"{type(exc).__name__}: {exc}") from exc
        del keep  # the selectors were needed until here
        out = []
        for d, label in zip(dist[0].tolist(), lab[0].tolist()):
            if label < 0:
                break  # fewer than k vectors passed the selector
            payload = None
            if self._payloads is not None:
                p = self._payloads.get(label)
                payload = None if p is None else MappingProxyType(p)
            out.append(Hit(self._external(label), float(d), payload, None, None))
        return Fetched(out, calls)

    def _all_labels(self) -> list:
        if self._ids is not None:
            return list(range(len(self._ids)))
        id_map = getattr(self.index, "id_map", None)  # IndexIDMap / IndexIDMap2
        if id_map is not None:
            return _faiss().vector_to_array(id_map).tolist()
        return list(range(self.index.ntotal))

    def scan(self, *, batch_size: int = DEFAULT_SCAN_BATCH, with_vectors: bool = True,
             text_field: Optional[str] = None) -> Iterator[Batch]:
        """Every vector of the index, ``batch_size`` per ``reconstruct_n`` call (:mod:`.scan`),
        with its id (``ids[label]``, or the label; an ``IndexIDMap``'s labels are its id map)
        and its ``text_field`` payload value. A compressed index (PQ, SQ, LSH) gives back its
        approximations of the vectors, not the vectors."""
        size = check_scan(batch_size, with_vectors, text_field)
        faiss = _faiss()
        idx = _unwrap(self.index)
        id_map = None
        if isinstance(idx, (faiss.IndexIDMap, faiss.IndexIDMap2)):
            id_map = faiss.vector_to_array(idx.id_map)
            idx = idx.index
        where = f"the FAISS index ({type(_unwrap(self.index)).__name__})"
        for start in range(0, idx.ntotal, size):
            m = min(size, idx.ntotal - start)
            labels = range(start, start + m) if id_map is None else id_map[start:start + m].tolist()
            ids = [self._external(label) for label in labels]
            block = None
            if with_vectors:
                try:
                    block = vector_block(idx.reconstruct_n(start, m), ids, where)
                except RuntimeError as exc:
                    raise StoreError(f"`store`: {where} cannot give its vectors back ({exc}). Build from the "
                                     "vectors you indexed: diversify.build(vectors=..., ids=...).") from exc
            texts = None
            if text_field is not None:
                payloads = self._payloads or {}
                texts = text_list([field_value(payloads.get(label), text_field) for label in labels], ids,
                                  text_field, where)
            yield Batch(ids, block, texts)

    def _scan_size(self) -> Optional[int]:
        return int(self.index.ntotal)

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
        self._allowed = None  # `where` may read the fields just written
        return written
