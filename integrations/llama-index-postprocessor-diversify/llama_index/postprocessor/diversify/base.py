"""`DiversifyPostprocessor`: at most n nodes per near-duplicate cluster, in retrieval order."""

from __future__ import annotations

import warnings
from typing import Any, Literal, Optional

from llama_index.core.bridge.pydantic import ConfigDict, Field, PrivateAttr, field_serializer
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle

from diversify.errors import ConfigError, InputError
from diversify.online import Diversifier, LazyDiversifier, Result, annotation, serializable_cluster_map
from diversify.online.plugins import check_arguments, check_settings, cluster_map_setting, take_deprecated

__all__ = ["DiversifyPostprocessor", "annotated_copies", "node_id_of"]


class DiversifyPostprocessor(BaseNodePostprocessor):
    """Keep at most ``max_per_cluster`` nodes per cluster, preserving the retrieval order.

    Cluster ids come from ``cluster_map`` (a :class:`diversify.ClusterMap`, a path to an
    artifact file, or a ``{id: cluster_id}`` mapping) looked up by ``node.node_id`` (or by
    ``node.ref_doc_id`` with ``id_source="ref_doc_id"``, or by ``node.metadata[id_field]``),
    and/or from ``node.metadata[cluster_field]``. The artifact is
    loaded on first use, not in the constructor.

    A postprocessor sees a fixed list and cannot fetch more, so retrieve with a larger
    ``similarity_top_k`` (e.g. 3 x top_n) and let this cut to ``top_n``; when fewer distinct
    clusters were retrieved, fewer nodes come back.

    ``top_n`` is the name LlamaIndex's rerankers use (``SentenceTransformerRerank``,
    ``LLMRerank``...); ``top_k`` is a deprecated alias. Unknown or mistyped arguments and bad
    values raise :class:`~diversify.errors.ConfigError` when the object is built.

    Returned nodes are copies (same ``node_id``, text and score) whose metadata gains
    ``metadata["diversify"] = {"cluster_id", "omitted", "omitted_ids"}``; that key is added to
    the copy's ``excluded_llm_metadata_keys`` and ``excluded_embed_metadata_keys`` so it never
    reaches the prompt or the embedding. The input nodes are never modified.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    cluster_map: Any = Field(default=None, description="ClusterMap, artifact path, or {id: cluster_id} mapping "
                             "(or the [id, cluster_id] pairs it is serialized as when ids are not strings).")
    cluster_field: Optional[str] = Field(default=None, description="Metadata field that holds a cluster id.")
    id_source: Literal["node_id", "ref_doc_id"] = Field(
        default="node_id", description="Which id the artifact is keyed by: the node's or its source document's.")
    id_field: Optional[str] = Field(default=None, description="Metadata field with the artifact's id (wins over id_source).")
    max_per_cluster: int = Field(default=1, description="At most this many per cluster; higher -> more near-duplicates.")
    top_n: Optional[int] = Field(default=None, description="Return at most this many; None keeps every survivor.")
    metadata_key: str = Field(default="diversify", description="Metadata key of the annotation on returned copies.")
    fold_threshold: Optional[float] = Field(
        default=None, description="On-the-fly folding of nodes the artifact does not know, by the cosine of "
        "node.embedding; higher -> only closer copies are folded; None disables it.")

    _lazy: LazyDiversifier = PrivateAttr(default_factory=lambda: LazyDiversifier("node"))

    def __init__(self, **data: Any) -> None:
        take_deprecated(data, "top_k", "top_n", owner="DiversifyPostprocessor")
        check_arguments("DiversifyPostprocessor", data, type(self).model_fields,
                        hints={"k": "top_n", "similarity_top_k": "top_n"})
        if "cluster_map" in data:
            data["cluster_map"] = cluster_map_setting(data["cluster_map"])
        top_n = data.get("top_n")
        if top_n is not None and (isinstance(top_n, bool) or not isinstance(top_n, int) or top_n < 1):
            raise ConfigError(f"`top_n` must be None or an int >= 1; got top_n={top_n!r}. "
                              "Use None to keep every node that survives diversification.")
        check_settings(data.get("cluster_map"), cluster_field=data.get("cluster_field"), subject="node",
                       k=10 if top_n is None else top_n, max_per_cluster=data.get("max_per_cluster", 1),
                       fold_threshold=data.get("fold_threshold"))
        super().__init__(**data)

    @property
    def top_k(self) -> Optional[int]:
        """Deprecated alias of :attr:`top_n`."""
        warnings.warn("DiversifyPostprocessor.top_k is deprecated; use top_n.", DeprecationWarning, stacklevel=2)
        return self.top_n

    @field_serializer("cluster_map")
    def _serialize_cluster_map(self, value: Any) -> Any:
        # A loaded ClusterMap is referred to by its file; a mapping with non-string ids becomes
        # [id, cluster_id] pairs (JSON keys are strings, and "1" would no longer match the id 1).
        return serializable_cluster_map(value)

    @classmethod
    def class_name(cls) -> str:
        return "DiversifyPostprocessor"

    @property
    def diversifier(self) -> Diversifier:
        """The :class:`diversify.Diversifier` behind this postprocessor (created on first use)."""
        return self._lazy.get(self.cluster_map, cluster_field=self.cluster_field,
                              max_per_cluster=self.max_per_cluster, fold_threshold=self.fold_threshold)

    def _node_id(self, nws: NodeWithScore, position: int):
        return node_id_of(nws, position, id_field=self.id_field, id_source=self.id_source)

    def _postprocess_nodes(self, nodes: list[NodeWithScore],
                           query_bundle: Optional[QueryBundle] = None) -> list[NodeWithScore]:
        nodes = list(nodes)
        if not nodes:
            return []
        k = len(nodes) if self.top_n is None else self.top_n
        result = self.diversifier.select_items(
            nodes,
            ids=[self._node_id(n, j) for j, n in enumerate(nodes)],
            scores=[n.score for n in nodes],
            payloads=[n.node.metadata for n in nodes],
            vectors=[n.node.embedding for n in nodes] if self.fold_threshold is not None else None,
            k=k,
        )
        return annotated_copies(result, self.metadata_key)


def node_id_of(nws: NodeWithScore, position: int, *, id_field: Optional[str], id_source: str,
               error: type = InputError):
    """The id the artifact knows for a node: ``metadata[id_field]``, else node_id or ref_doc_id."""
    if id_field is not None:
        value, where = nws.node.metadata.get(id_field), f"metadata[{id_field!r}]"
    elif id_source == "ref_doc_id":
        value, where = nws.node.ref_doc_id, "ref_doc_id"
    else:
        value, where = nws.node.node_id, "node_id"
    if value is None:
        raise error(f"node {position} has no id: its {where} is None. Set id_field to a metadata key "
                    "every node carries, or id_source='node_id' / 'ref_doc_id' to an id that is set.")
    return value


def annotated_copies(result: Result, metadata_key: str) -> list[NodeWithScore]:
    """One new NodeWithScore per kept hit (a copied node, same node_id, text and score).

    The copy's metadata gains ``metadata[metadata_key] = {"cluster_id", "omitted",
    "omitted_ids"}``, and the key is excluded from what the LLM and the embedder see.
    """
    out = []
    for kept in result:
        nws: NodeWithScore = kept.hit.item
        meta = dict(nws.node.metadata)
        meta[metadata_key] = annotation(kept)
        update: dict[str, Any] = {"metadata": meta}
        for attr in ("excluded_llm_metadata_keys", "excluded_embed_metadata_keys"):
            current = list(getattr(nws.node, attr, None) or [])
            update[attr] = current if metadata_key in current else current + [metadata_key]
        out.append(NodeWithScore(node=nws.node.model_copy(update=update), score=nws.score))
    return out
