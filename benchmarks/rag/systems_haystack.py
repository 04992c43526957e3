"""Haystack rows over an ``InMemoryDocumentStore`` (cosine) and its ``InMemoryEmbeddingRetriever``:
the retriever's plain ``run``, and ``DiversifyRetriever`` around it with the tenant filter given
two ways: at ``run(filters=...)`` (AND-ed with the exclusion), and on the wrapped retriever's own
``filters`` (Haystack's default ``filter_policy`` REPLACE applies to run-time filters).

The query is embedded in the call (one embedding per user query, as an embedder component
upstream would). Haystack has no model-free redundancy filter (its diversity ranker needs a
sentence-transformers model), so no peer row.
"""

from __future__ import annotations

from .systems import K, Outcome, Setup, System, guarded, ids_of


def _chunk_id(d) -> int:
    return d.meta["chunk_id"]


def _tenant(t):
    return None if t is None else {"field": "meta.tenant", "operator": "==", "value": t}


def rows(s: Setup) -> list[System]:
    from haystack import Document
    from haystack.components.retrievers.in_memory import InMemoryEmbeddingRetriever
    from haystack.document_stores.in_memory import InMemoryDocumentStore
    from haystack_integrations.components.retrievers.diversify import DiversifyRetriever

    store = InMemoryDocumentStore(embedding_similarity_function="cosine")
    store.write_documents([Document(id=str(c.id), content=c.text, meta={"chunk_id": c.id, "tenant": c.tenant},
                                    embedding=s.vectors[c.id].tolist()) for c in s.corpus.chunks])

    def inner(filters=None):
        r = InMemoryEmbeddingRetriever(store, filters=filters, top_k=K)
        s.probe.patch(r, "run")
        return r

    plain = inner()

    def baseline(q, t):
        out = plain.run(query_embedding=s.embedder.query(q.text), top_k=K, filters=_tenant(t))
        return Outcome(ids_of(out["documents"], _chunk_id))

    def report(out) -> Outcome:
        info = out["diversify"]
        return Outcome(ids_of(out["documents"], _chunk_id), info["backend_calls"], info["exhausted"])

    def make_at_run():
        at_run = DiversifyRetriever(retriever=inner(), cluster_map=s.cluster_map, id_field="chunk_id", top_k=K)
        at_run.warm_up()
        return lambda q, t: report(at_run.run(query_embedding=s.embedder.query(q.text), filters=_tenant(t)))

    def make_on_inner():
        on_inner = s.per_tenant(lambda t: DiversifyRetriever(retriever=inner(_tenant(t)), cluster_map=s.cluster_map,
                                                             id_field="chunk_id", top_k=K))
        for r in on_inner.values():
            r.warm_up()
        return lambda q, t: report(on_inner[t].run(query_embedding=s.embedder.query(q.text)))

    name = "InMemoryDocumentStore"
    return [System("Haystack", name, "InMemoryEmbeddingRetriever top_k=10", "baseline", baseline, "run(filters=...)"),
            guarded("Haystack", name, "DiversifyRetriever, filters at run()", "diversify", make_at_run,
                    "DiversifyRetriever.run(filters=...)"),
            guarded("Haystack", name, "DiversifyRetriever, filters on the wrapped retriever", "diversify",
                    make_on_inner, "InMemoryEmbeddingRetriever(filters=...)")]


ROWS = (("haystack", rows),)
