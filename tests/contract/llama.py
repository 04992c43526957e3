"""LlamaIndex fixtures shared by the LlamaIndex plugin tests and the filter contract.

Import only after ``pytest.importorskip("llama_index.core")``: ``from contract.llama import ...``.
The plugins are put on ``sys.path`` from their source folders (in CI they may also be installed
with ``pip install -e integrations/llama-index-...``).
"""

from __future__ import annotations

import pathlib
import sys
from collections.abc import Mapping, Sequence
from typing import Any

_INTEGRATIONS = pathlib.Path(__file__).resolve().parents[2] / "integrations"
for _src in ("llama-index-postprocessor-diversify", "llama-index-retrievers-diversify"):
    if str(_INTEGRATIONS / _src) not in sys.path:
        sys.path.insert(0, str(_INTEGRATIONS / _src))

from llama_index.core import StorageContext, VectorStoreIndex  # noqa: E402
from llama_index.core.embeddings import MockEmbedding  # noqa: E402

__all__ = ["TableEmbedding", "table_embedding", "vector_index"]


class TableEmbedding(MockEmbedding):
    """llama-index-core's MockEmbedding, but each text maps to its own fixed vector."""

    table: dict = {}

    def _vec(self, text):
        return [float(x) for x in self.table[text]]

    def _get_text_embedding(self, text):
        return self._vec(text)

    def _get_query_embedding(self, query):
        return self._vec(query)

    async def _aget_text_embedding(self, text):
        return self._vec(text)

    async def _aget_query_embedding(self, query):
        return self._vec(query)


def table_embedding(table: Mapping[str, Sequence[float]]) -> TableEmbedding:
    """The embedding of a fixed text -> vector table (every vector of one dimension)."""
    table = dict(table)
    return TableEmbedding(embed_dim=len(next(iter(table.values()))), table=table)


def vector_index(nodes: list, table: Mapping[str, Sequence[float]], vector_store: Any = None) -> VectorStoreIndex:
    """A real ``VectorStoreIndex`` over ``nodes`` embedded by ``table`` (in memory, or ``vector_store``)."""
    kwargs: dict[str, Any] = {"embed_model": table_embedding(table)}
    if vector_store is not None:
        kwargs["storage_context"] = StorageContext.from_defaults(vector_store=vector_store)
    return VectorStoreIndex(nodes, **kwargs)
