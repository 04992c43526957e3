"""What the retriever and the compressor share: settings, the lazy Diversifier, Document copies."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any, Optional

from langchain_core.documents import Document
from pydantic import BaseModel, ConfigDict, PrivateAttr

from diversify.errors import ConfigError, InputError


class DiversifySettings(BaseModel):
    """Fields common to :class:`DiversifyRetriever` and :class:`DiversifyCompressor`.

    Cluster ids come from ``cluster_map`` (a :class:`diversify.ClusterMap`, a path to an
    artifact file, or a plain ``{id: cluster_id}`` mapping), looked up by ``Document.id`` (or by
    ``metadata[id_field]``), and/or from ``metadata[cluster_field]`` when the store already
    carries them. The artifact is loaded on first use, never in the constructor.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

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

    _diversifier: Any = PrivateAttr(default=None)
    _init_lock: Any = PrivateAttr(default_factory=threading.Lock)

    def _diversifier_kwargs(self) -> dict:
        return {}

    @property
    def diversifier(self):
        """The :class:`diversify.Diversifier` behind this object (created, and the artifact
        loaded, on first use). Use it for ``stats()`` or ``reload(new_artifact)``."""
        d = self._diversifier
        if d is None:
            with self._init_lock:
                d = self._diversifier
                if d is None:
                    from diversify.online import Diversifier

                    if self.cluster_map is None and self.cluster_field is None:
                        raise ConfigError(
                            "`cluster_map` and `cluster_field` are both None, so no document has a cluster "
                            "and nothing would be diversified; got cluster_map=None, cluster_field=None. "
                            "Pass cluster_map='clusters.dvf' (from `diversify build`) or "
                            "cluster_field='cluster_id' if the store's metadata carries cluster ids.")
                    d = Diversifier(self.cluster_map, cluster_field=self.cluster_field,
                                    max_per_cluster=self.max_per_cluster, **self._diversifier_kwargs())
                    self._diversifier = d
        return d

    def _doc_id(self, doc: Document, position: int, error: type = InputError):
        if self.id_field is not None:
            value = doc.metadata.get(self.id_field)
            where = f"metadata[{self.id_field!r}]"
        else:
            value = doc.id
            where = "Document.id"
        if value is None:
            raise error(
                f"document {position} has no id: {where} is None. Diversification needs an id per document "
                "(to look up its cluster and to not repeat it). Add documents with ids "
                "(`vectorstore.add_documents(docs, ids=...)`) or set id_field='<metadata key with the id>'.")
        return value


def annotated_copies(result, metadata_key: str) -> list[Document]:
    """One new Document per kept hit, in rank order; the caller's documents stay unchanged.

    The copy keeps ``id`` and ``page_content`` and gets a *new* metadata dict with
    ``metadata[metadata_key] = {"cluster_id", "omitted", "omitted_ids", "score"}``.
    """
    out = []
    for kept in result.hits:
        doc: Document = kept.hit.item
        info = {
            "cluster_id": kept.cluster_id,
            "omitted": kept.omitted,
            "omitted_ids": [f.id for f in kept.folded],
            "score": kept.hit.score,
        }
        meta = dict(doc.metadata) if isinstance(doc.metadata, Mapping) else {}
        meta[metadata_key] = info
        out.append(doc.model_copy(update={"metadata": meta}))
    return out
