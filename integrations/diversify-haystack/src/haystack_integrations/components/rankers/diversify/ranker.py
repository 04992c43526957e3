"""`DiversifyRanker`: a Haystack component keeping at most n documents per near-duplicate cluster."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Optional, Union

from haystack import Document, component, default_from_dict, default_to_dict

from diversify.errors import ConfigError, InputError
from diversify.online import Diversifier, LazyDiversifier, Result, annotation, serializable_cluster_map
from diversify.online.plugins import check_settings, cluster_map_setting

__all__ = ["DiversifyRanker", "annotated_copies"]


@component
class DiversifyRanker:
    """Keep at most ``max_per_cluster`` documents per cluster, in the incoming order.

    Put it after a retriever (ask the retriever for about 3 x ``top_k`` candidates, since a
    component sees a fixed list and cannot fetch more) or after another ranker. Cluster ids
    come from ``cluster_map`` (the path of a diversify artifact, or a ``{id: cluster_id}``
    mapping) looked up by ``Document.id`` (or by ``meta[id_field]``), and/or from
    ``meta[cluster_field]`` when the documents already carry them. The artifact is loaded in
    :meth:`warm_up` (or on the first run), never in the constructor.

    Returned documents are copies (same ``id``, content, score and embedding) whose ``meta``
    gains ``meta["diversify"] = {"cluster_id", "omitted", "omitted_ids"}``; incoming
    documents are never modified.

    Usage example:

    ```python
    from haystack import Document
    from haystack_integrations.components.rankers.diversify import DiversifyRanker

    ranker = DiversifyRanker(cluster_map={"a": 0, "a-copy": 0}, top_k=2)  # default top_k=10
    docs = [Document(id="a", content="x"), Document(id="a-copy", content="x!"), Document(id="b", content="y")]
    assert [d.id for d in ranker.run(documents=docs)["documents"]] == ["a", "b"]
    ```
    """

    def __init__(
        self,
        cluster_map: Union[str, os.PathLike, Mapping, Any, None] = None,
        cluster_field: Optional[str] = None,
        id_field: Optional[str] = None,
        max_per_cluster: int = 1,
        top_k: Optional[int] = 10,
        meta_key: str = "diversify",
        fold_threshold: Optional[float] = None,
    ) -> None:
        """
        :param cluster_map:
            Path of a diversify artifact (``diversify build ... -o clusters.dvf``), a
            ``{document id: cluster id}`` mapping (a list of ``[id, cluster_id]`` pairs is read
            as one: that is how a mapping with non-string ids, e.g. int ``meta`` ids, is
            serialized), or a loaded ``ClusterMap`` (serialized by its path). None when
            ``cluster_field`` is enough.
        :param cluster_field:
            Meta field that holds each document's cluster id; wins over ``cluster_map`` for
            documents that carry it.
        :param id_field:
            Meta field holding the id the artifact knows; default ``Document.id``.
        :param max_per_cluster:
            At most this many documents per cluster; higher -> more near-duplicates allowed.
        :param top_k:
            Return at most this many (default 10, like Haystack's other rankers); None keeps
            every survivor. Overridable per run.
        :param meta_key:
            Meta key of the annotation on returned copies.
        :param fold_threshold:
            On-the-fly mode for documents the artifact does not know (added after the last
            build): one whose ``embedding`` has at least this cosine similarity with a kept
            document is folded into it; higher -> only closer copies are folded. None disables it.
            Needs embeddings on the documents (e.g. ``return_embedding=True`` on the retriever).
        """
        cluster_map = cluster_map_setting(cluster_map)
        _check_top_k(top_k)
        check_settings(cluster_map, cluster_field=cluster_field, k=10 if top_k is None else top_k,
                       max_per_cluster=max_per_cluster, fold_threshold=fold_threshold)
        self.cluster_map = os.fspath(cluster_map) if isinstance(cluster_map, os.PathLike) else cluster_map
        self.cluster_field = cluster_field
        self.id_field = id_field
        self.max_per_cluster = max_per_cluster
        self.top_k = top_k
        self.meta_key = meta_key
        self.fold_threshold = fold_threshold
        self._lazy = LazyDiversifier()

    def warm_up(self) -> None:
        """Load the artifact (Haystack calls this before the first run of a pipeline)."""
        _ = self.diversifier

    @property
    def diversifier(self) -> Diversifier:
        """The :class:`diversify.Diversifier` behind this component (``stats()``, ``reload()``)."""
        return self._lazy.get(self.cluster_map, cluster_field=self.cluster_field,
                              max_per_cluster=self.max_per_cluster, fold_threshold=self.fold_threshold)

    def to_dict(self) -> dict[str, Any]:
        """Serialize to a dictionary (the artifact by its path, a mapping as a dict, or as
        ``[id, cluster_id]`` pairs when its ids are not all strings)."""
        return default_to_dict(self, cluster_map=serializable_cluster_map(self.cluster_map), cluster_field=self.cluster_field, id_field=self.id_field,
                               max_per_cluster=self.max_per_cluster, top_k=self.top_k, meta_key=self.meta_key,
                               fold_threshold=self.fold_threshold)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DiversifyRanker:
        """Deserialize from a dictionary made by :meth:`to_dict`."""
        return default_from_dict(cls, data)

    @component.output_types(documents=list[Document])
    def run(self, documents: list[Document], top_k: Optional[int] = None) -> dict[str, list[Document]]:
        """
        Keep at most ``max_per_cluster`` documents per cluster, in the incoming order.

        :param documents:
            Ranked documents, best first.
        :param top_k:
            Return at most this many (overrides the init value; None: the init value).
        :returns:
            ``{"documents": [...]}``: annotated copies, in the incoming order.
        """
        _check_top_k(top_k)
        top_k = self.top_k if top_k is None else top_k
        if not documents:
            return {"documents": []}
        ids = []
        for j, doc in enumerate(documents):
            value = doc.id if self.id_field is None else (doc.meta or {}).get(self.id_field)
            if value is None:
                raise InputError(f"document {j} has no id: meta[{self.id_field!r}] is None. Set id_field to a "
                                 "meta key every document carries, or leave it None to use Document.id.")
            ids.append(value)
        result = self.diversifier.select_items(
            documents, ids=ids, scores=[d.score for d in documents], payloads=[d.meta or {} for d in documents],
            vectors=[d.embedding for d in documents] if self.fold_threshold is not None else None,
            k=len(documents) if top_k is None else top_k)
        return {"documents": annotated_copies(result, self.meta_key)}


def annotated_copies(result: Result, meta_key: str) -> list[Document]:
    """One copy per kept hit (same id, content, score, embedding), rank order; its new ``meta``
    dict gains ``meta[meta_key] = {"cluster_id", "omitted", "omitted_ids"}``."""
    out = []
    for kept in result:
        doc: Document = kept.hit.item
        meta = dict(doc.meta or {})
        meta[meta_key] = annotation(kept)
        out.append(replace(doc, meta=meta))
    return out


def _check_top_k(top_k: Any) -> None:
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
        raise ConfigError(f"`top_k` must be None or an int >= 1; got top_k={top_k!r}. "
                          "Use None to keep every document that survives diversification.")
