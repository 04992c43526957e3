"""LangChain's redundancy filters on given hits: ``EmbeddingsRedundantFilter`` and MMR.

They get precomputed vectors (no model download, no re-embedding cost counted):
``EmbeddingsRedundantFilter`` through an ``Embeddings`` object that returns the stored vector of
each text, MMR through ``langchain_core.vectorstores.utils.maximal_marginal_relevance``.
"""

from __future__ import annotations

import warnings

import numpy as np


def filters(hits, queries, text_of: dict, vector_of_text: dict, *, k: int, erf_threshold: float,
            mmr_lambda: float):
    """(erf_call, mmr_call): each maps a query index to the ids it keeps, at most ``k``.

    ``hits[j]`` is query j's ranked hit list (``.id``, ``.vector``); ``text_of`` maps ids to texts,
    ``vector_of_text`` texts to their vector (a list of floats)."""
    from langchain_core.documents import Document
    from langchain_core.embeddings import Embeddings
    from langchain_core.vectorstores.utils import maximal_marginal_relevance

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from langchain_community.document_transformers import EmbeddingsRedundantFilter

    class LookupEmbeddings(Embeddings):
        """Deterministic precomputed vectors: what a model would return, without the model."""

        def embed_documents(self, texts):
            return [vector_of_text[t] for t in texts]

        def embed_query(self, text):
            raise NotImplementedError

    erf = EmbeddingsRedundantFilter(embeddings=LookupEmbeddings(), similarity_threshold=erf_threshold)
    docs = [[Document(page_content=text_of[h.id], metadata={"id": h.id}, id=h.id) for h in hs] for hs in hits]
    mats = [np.stack([np.asarray(h.vector, dtype=np.float32) for h in hs]) for hs in hits]
    n_hits = max(len(hs) for hs in hits)

    def erf_call(j, top=n_hits):
        out = erf.transform_documents(docs[j][:top])
        return [d.metadata["id"] for d in out][:k]

    def mmr_call(j):
        idx = maximal_marginal_relevance(queries[j], mats[j], lambda_mult=mmr_lambda, k=k)
        return [hits[j][i].id for i in idx]

    return erf_call, mmr_call
