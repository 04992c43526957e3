"""LangChain rows: ``DiversifyRetriever`` over four vector stores and over ``BM25Retriever``,
next to each store's plain ``similarity_search_with_score``, its ``max_marginal_relevance_search``
(LangChain's defaults: fetch_k=20, lambda_mult=0.5) and ``EmbeddingsRedundantFilter`` (default
threshold 0.95) on the top-25 (what diversify fetches first), first 10 kept.

Every Document carries ``metadata["chunk_id"]`` (the artifact's int id) and the retriever is built
with ``id_field="chunk_id"`` (langchain-qdrant Documents have no ``id``). The tenant filter is the
store's own ``filter`` in ``as_retriever(search_kwargs=...)``; the refill's exclusion is the
documented ``exclude_filter`` recipe for that store (``seen ids -> {"filter": ...}``).
"""

from __future__ import annotations

import warnings
from typing import Optional

from .systems import FETCH_K, K, Outcome, Setup, Skip, System, guarded, ids_of
from .systems_core import COLLECTION, chroma_collection, qdrant_client, qdrant_tenant

#: The VectorStore methods counted as store calls (by text, by vector; nested calls count once).
SEARCH_METHODS = ("similarity_search_with_score", "similarity_search", "max_marginal_relevance_search",
                  "similarity_search_with_score_by_vector", "similarity_search_by_vector_with_relevance_scores",
                  "similarity_search_by_vector", "max_marginal_relevance_search_by_vector")


def _docs(s: Setup):
    from langchain_core.documents import Document

    return [Document(page_content=c.text, metadata={"chunk_id": c.id, "tenant": c.tenant}, id=str(c.id))
            for c in s.corpus.chunks]


def _chunk_id(d) -> int:
    return d.metadata["chunk_id"]


def _embeddings(s: Setup):
    from .embed import langchain_embeddings

    return langchain_embeddings(s.embedder)


def _vector_rows(s: Setup, vs, store: str, user_filter, exclude_filter, how: str, note: str = "") -> list[System]:
    """Baseline, DiversifyRetriever, MMR and EmbeddingsRedundantFilter over one LangChain VectorStore."""
    from langchain_diversify import DiversifyRetriever

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from langchain_community.document_transformers import EmbeddingsRedundantFilter
    for method in SEARCH_METHODS:
        if callable(getattr(type(vs), method, None)):
            s.probe.patch(vs, method)
    kw = {t: {} if t is None else {"filter": user_filter(t)} for t in (None, *s.tenants)}

    def retriever(t):
        source = vs if t is None else vs.as_retriever(search_kwargs=kw[t])
        return DiversifyRetriever(retriever=source, cluster_map=s.cluster_map, id_field="chunk_id", k=K,
                                  exclude_filter=exclude_filter)

    def make_diversify():
        diversified = s.per_tenant(retriever)

        def call(q, t):
            docs, res = diversified[t].retrieve_with_result(q.text)
            return Outcome(ids_of(docs, _chunk_id), res.backend_calls, res.exhausted)
        return call

    erf = EmbeddingsRedundantFilter(embeddings=_embeddings(s))

    def plain(q, t):
        return Outcome(ids_of(vs.similarity_search_with_score(q.text, k=K, **kw[t]), lambda p: _chunk_id(p[0])))

    def mmr(q, t):
        return Outcome(ids_of(vs.max_marginal_relevance_search(q.text, k=K, **kw[t]), _chunk_id))

    def redundant(q, t):
        docs = erf.transform_documents(vs.similarity_search(q.text, k=FETCH_K, **kw[t]))
        return Outcome(ids_of(list(docs)[:K], _chunk_id))

    return [System("LangChain", store, "similarity_search_with_score k=10", "baseline", plain, how),
            guarded("LangChain", store, "DiversifyRetriever(exclude_filter)", "diversify", make_diversify,
                    f"as_retriever(search_kwargs={{'filter': {how}}})", note),
            System("LangChain", store, "max_marginal_relevance_search k=10", "peer", mmr, how),
            System("LangChain", store, f"EmbeddingsRedundantFilter on top-{FETCH_K}, first 10", "peer", redundant, how)]


def inmemory_rows(s: Setup) -> list[System]:
    from langchain_core.vectorstores import InMemoryVectorStore

    vs = InMemoryVectorStore(embedding=_embeddings(s))
    vs.add_documents(_docs(s), ids=[str(c.id) for c in s.corpus.chunks])

    def tenant(t):
        return lambda doc: doc.metadata["tenant"] == t

    def exclude(ids):
        seen = frozenset(ids)
        return {"filter": lambda doc: doc.metadata["chunk_id"] not in seen}

    return _vector_rows(s, vs, "InMemoryVectorStore", tenant, exclude, "callable filter")


def qdrant_rows(s: Setup) -> list[System]:
    from langchain_qdrant import QdrantVectorStore
    from qdrant_client import models

    vs = QdrantVectorStore(client=qdrant_client(s), collection_name=COLLECTION, embedding=_embeddings(s))

    def exclude(ids):
        return {"filter": models.Filter(must_not=[models.HasIdCondition(has_id=list(ids))])}

    return _vector_rows(s, vs, "Qdrant local (:memory:)", lambda t: qdrant_tenant(t, "metadata.tenant"), exclude,
                        "models.Filter", "the same collection as the core Qdrant rows")


def chroma_rows(s: Setup) -> list[System]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from langchain_community.vectorstores import Chroma
    client, col = chroma_collection(s)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        vs = Chroma(client=client, collection_name=col.name, embedding_function=_embeddings(s))

    def exclude(ids):
        return {"filter": {"chunk_id": {"$nin": list(ids)}}}

    return _vector_rows(s, vs, "Chroma (in-memory, HNSW)", lambda t: {"tenant": t}, exclude, "where dict",
                        "langchain_community.vectorstores.Chroma over the core rows' collection")


def faiss_rows(s: Setup) -> list[System]:
    try:
        import faiss  # noqa: F401
    except ImportError as e:
        raise Skip(f"faiss not importable: {e}") from None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from langchain_community.vectorstores import FAISS
    vs = FAISS.from_embeddings(list(zip(s.corpus.texts, s.vectors.tolist())), _embeddings(s),
                               metadatas=[{"chunk_id": c.id, "tenant": c.tenant} for c in s.corpus.chunks],
                               ids=[str(c.id) for c in s.corpus.chunks])

    def exclude(ids):
        return {"filter": {"chunk_id": {"$nin": list(ids)}}}

    return _vector_rows(s, vs, "FAISS (langchain_community, flat L2)", lambda t: {"tenant": t}, exclude, "dict filter")


def bm25_rows(s: Setup) -> list[System]:
    from langchain_community.retrievers import BM25Retriever
    from langchain_diversify import DiversifyRetriever

    bm25 = BM25Retriever.from_documents(_docs(s), k=K)
    s.probe.patch(bm25.vectorizer, "get_scores")  # shared by the resized copies the refill makes

    def plain(q, _t: Optional[str]):
        return Outcome(ids_of(bm25.invoke(q.text), _chunk_id))

    def make_diversify():
        wrapped = DiversifyRetriever(retriever=bm25, cluster_map=s.cluster_map, id_field="chunk_id", k=K)

        def call(q, _t: Optional[str]):
            docs, res = wrapped.retrieve_with_result(q.text)
            return Outcome(ids_of(docs, _chunk_id), res.backend_calls, res.exhausted)
        return call

    name = "BM25Retriever (rank_bm25)"
    return [System("LangChain", name, "invoke k=10", "baseline", plain),
            guarded("LangChain", name, "DiversifyRetriever(retriever=bm25)", "diversify", make_diversify,
                    note="refilled by asking a copy for a larger k; BM25Retriever takes no filter")]


ROWS = (("langchain-inmemory", inmemory_rows), ("langchain-qdrant", qdrant_rows), ("langchain-chroma", chroma_rows),
        ("langchain-faiss", faiss_rows), ("langchain-bm25", bm25_rows))
