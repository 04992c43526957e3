"""LlamaIndex rows over a ``VectorStoreIndex`` on the default in-memory ``SimpleVectorStore``
(nodes built with their vectors, so nothing is embedded at index time):

- the index's plain retriever (``similarity_top_k=10``);
- ``DiversifyRetriever(index, filters=..., exclude_key="chunk_id")`` (refill: a ``NIN`` filter
  AND-ed to the caller's ``filters``);
- the same with the filter in ``retriever_kwargs={"filters": ...}`` (as ``as_retriever`` takes it);
- ``DiversifyRetriever(index.as_retriever(filters=..., similarity_top_k=10))`` (any retriever:
  refilled by asking a copy for a larger ``similarity_top_k``; its filters travel with the copy),
  and the same with ``exclude_key`` (the ``NIN`` AND-ed to the copy's filters, where the
  measured commit supports it);
- LlamaIndex's own MMR (``vector_store_query_mode="mmr"``, default threshold).

The tenant filter is ``MetadataFilters([MetadataFilter(key="tenant", value=t)])``.
"""

from __future__ import annotations

from .systems import K, Outcome, Setup, System, guarded, ids_of


def _chunk_id(n) -> int:
    return n.node.metadata["chunk_id"]


def rows(s: Setup) -> list[System]:
    from llama_index.core import VectorStoreIndex
    from llama_index.core.schema import TextNode
    from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters
    from llama_index.retrievers.diversify import DiversifyRetriever

    from .embed import llamaindex_embedding

    nodes = [TextNode(text=c.text, id_=str(c.id), metadata={"chunk_id": c.id, "tenant": c.tenant},
                      embedding=s.vectors[c.id].tolist()) for c in s.corpus.chunks]
    index = VectorStoreIndex(nodes, embed_model=llamaindex_embedding(s.embedder))
    s.probe.patch(index.vector_store, "query")

    def filters(t):
        return None if t is None else MetadataFilters(filters=[MetadataFilter(key="tenant", value=t)])

    plain = s.per_tenant(lambda t: index.as_retriever(similarity_top_k=K, filters=filters(t)))
    mmr = s.per_tenant(lambda t: index.as_retriever(similarity_top_k=K, filters=filters(t),
                                                    vector_store_query_mode="mmr"))

    def top(retrievers):
        return lambda q, t: Outcome(ids_of(retrievers[t].retrieve(q.text), _chunk_id))

    def diversified(make_one):
        def make():
            retrievers = s.per_tenant(make_one)

            def call(q, t):
                nodes, res = retrievers[t].retrieve_with_result(q.text)
                return Outcome(ids_of(nodes, _chunk_id), res.backend_calls, res.exhausted)
            return call
        return make

    common = {"cluster_map": s.cluster_map, "id_field": "chunk_id"}
    over_index = diversified(lambda t: DiversifyRetriever(index, similarity_top_k=K, filters=filters(t),
                                                          exclude_key="chunk_id", **common))
    in_kwargs = diversified(lambda t: DiversifyRetriever(
        index, similarity_top_k=K, exclude_key="chunk_id", **common,
        retriever_kwargs=None if t is None else {"filters": filters(t)}))
    over_retriever = diversified(lambda t: DiversifyRetriever(plain[t], **common))
    retriever_exclusion = diversified(lambda t: DiversifyRetriever(plain[t], exclude_key="chunk_id", **common))

    store = "SimpleVectorStore (in-memory)"
    return [System("LlamaIndex", store, "as_retriever(similarity_top_k=10)", "baseline", top(plain), "filters="),
            guarded("LlamaIndex", store, "DiversifyRetriever(index, exclude_key)", "diversify", over_index,
                    "DiversifyRetriever(filters=...)"),
            guarded("LlamaIndex", store, "DiversifyRetriever(index, exclude_key), filters in retriever_kwargs",
                    "diversify", in_kwargs, "retriever_kwargs={'filters': ...}"),
            guarded("LlamaIndex", store, "DiversifyRetriever(retriever)", "diversify", over_retriever,
                    "the wrapped retriever's filters=", "refill: a larger similarity_top_k on a copy"),
            guarded("LlamaIndex", store, "DiversifyRetriever(retriever, exclude_key)", "diversify",
                    retriever_exclusion, "the wrapped retriever's filters=", "refill: NIN AND-ed on the copy"),
            System("LlamaIndex", store, "MMR (vector_store_query_mode='mmr')", "peer", top(mmr), "filters=",
                   "SimpleVectorStore's MMR scores every stored vector in Python", slow=True)]


ROWS = (("llamaindex", rows),)
