"""What the retriever and the compressor share: settings, the lazy Diversifier, Document copies."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from langchain_core.documents import Document
from pydantic import BaseModel, ConfigDict, PrivateAttr

from diversify.errors import InputError
from diversify.online import Diversifier, LazyDiversifier, Result, annotation
from diversify.online.plugins import check_arguments

#: Both classes refuse unknown keyword arguments (LangChain's models ignore them by default).
MODEL_CONFIG = ConfigDict(arbitrary_types_allowed=True, extra="forbid")


class DiversifySettings(BaseModel):
    """Fields common to :class:`DiversifyRetriever` and :class:`DiversifyCompressor`.

    Cluster ids come from ``cluster_map`` (a :class:`diversify.ClusterMap`, a path to an
    artifact file, or a plain ``{id: cluster_id}`` mapping), looked up by ``Document.id`` (or by
    ``metadata[id_field]``), and/or from ``metadata[cluster_field]`` when the store already
    carries them. The artifact is loaded on first use, never in the constructor.
    """

    model_config = MODEL_CONFIG

    cluster_map: Any = None
    """ClusterMap, path to an artifact file, ``{id: cluster_id}`` mapping, or None."""
    cluster_field: Optional[str] = None
    """Metadata field holding a cluster id; wins over ``cluster_map`` for documents that carry it."""
    id_field: Optional[str] = None
    """Metadata field holding the id the artifact knows; default ``Document.id``."""
    max_per_cluster: int = 1
    """At most this many documents per cluster; higher -> more near-duplicates allowed."""
    metadata_key: str = "diversify"
    """Key under which each returned copy's metadata reports its cluster and what was omitted."""

    _lazy: LazyDiversifier = PrivateAttr(default_factory=LazyDiversifier)

    @classmethod
    def _check_arguments(cls, data: Mapping[str, Any], hints: Optional[Mapping[str, str]] = None) -> None:
        """Refuse a keyword this class does not take, with a clear ConfigError (not pydantic's)."""
        accepted = set(cls.model_fields) | {f.alias for f in cls.model_fields.values() if f.alias}
        check_arguments(cls.__name__, data, accepted, hints=hints)

    def _diversifier_kwargs(self) -> dict:
        return {}

    @property
    def diversifier(self) -> Diversifier:
        """The :class:`diversify.Diversifier` behind this object (created, and the artifact
        loaded, on first use). Use it for ``stats()`` or ``reload(new_artifact)``."""
        return self._lazy.get(self.cluster_map, cluster_field=self.cluster_field,
                              max_per_cluster=self.max_per_cluster, **self._diversifier_kwargs())

    def _doc_id(self, doc: Document, position: int, error: type = InputError):
        if self.id_field is not None:
            value = doc.metadata.get(self.id_field)
            where = f"metadata[{self.id_field!r}]"
        else:
            value = doc.id
            where = "Document.id"
        if value is None:
            hint = ""
            if self.id_field is None and isinstance(doc.metadata, Mapping) and "_id" in doc.metadata:
                # langchain-qdrant returns Documents without an id and the point id in metadata["_id"]
                hint = (" This store puts its own id in metadata['_id'] (langchain-qdrant does): set "
                        "id_field='_id' if the artifact knows those ids, or id_field='<your id key>'.")
            raise error(
                f"document {position} has no id: {where} is None. Diversification needs an id per document "
                "(to look up its cluster and to not repeat it). Add documents with ids "
                "(`vectorstore.add_documents(docs, ids=...)`) or set id_field='<metadata key with the id>'." + hint)
        return value


def annotated_copies(result: Result, metadata_key: str) -> list[Document]:
    """One new Document per kept hit, in rank order; the caller's documents stay unchanged.

    The copy keeps ``id`` and ``page_content`` and gets a *new* metadata dict with
    ``metadata[metadata_key] = {"cluster_id", "omitted", "omitted_ids", "score"}``.
    """
    out = []
    for kept in result:
        doc: Document = kept.hit.item
        meta = dict(doc.metadata) if isinstance(doc.metadata, Mapping) else {}
        meta[metadata_key] = annotation(kept, with_score=True)
        out.append(doc.model_copy(update={"metadata": meta}))
    return out
