"""``Result.backend_calls`` (and ``stats()["backend_calls"]``) is the number of calls the store or
the wrapped retriever really received, also where one search call of the wrapper asks the store
again (counted once there before).

Every case counts the calls on the real library object (the vendor method, replaced on the
instance by a counting wrapper that calls the original) and compares per query:

* LangChain's FAISS under a filter (post-filtering: a short answer is asked again over a larger
  ``fetch_k``), through ``DiversifyRetriever``, sync and async;
* ``FaissStore`` over an HNSW index with a ``where`` filter (a short answer widens ``efSearch``);
* a pushed-down exclusion whose short answer is confirmed with a larger k (LangChain Chroma,
  ``refill="exclude"``: approximate HNSW, so a short answer proves nothing);
* a LangChain and a LlamaIndex retriever that cannot be asked for more (called once).

Each of the first three also checks that some query did call its store more often than the
wrapper's rounds (so the case exercises what undercounted).
"""

from __future__ import annotations

import asyncio
import functools
import pathlib
import sys

import numpy as np
import pytest
from contract.filters import SHAPES, holds, make_tenant_corpus

from diversify import Diversifier

_ROOT = pathlib.Path(__file__).resolve().parents[2] / "integrations"
if str(_ROOT / "langchain-diversify") not in sys.path:
    sys.path.insert(0, str(_ROOT / "langchain-diversify"))

K = 10
CORPUS = make_tenant_corpus()
#: one document in 12 passes: LangChain's FAISS filters only its first fetch_k candidates, so it is asked again
SELECTIVE = ("and", [("eq", "tenant", "a"), ("eq", "level", 3)])


class Counted:
    """Counts the calls of ``obj.name`` (replaced on the instance; the original does the work)."""

    def __init__(self, obj, name: str):
        self.n = 0
        real = getattr(obj, name)
        if asyncio.iscoroutinefunction(real):
            async def counted(*args, **kwargs):
                self.n += 1
                return await real(*args, **kwargs)
        else:
            def counted(*args, **kwargs):
                self.n += 1
                return real(*args, **kwargs)
        # the original's signature stays visible (the plugin reads it, e.g. for a fetch_k parameter)
        object.__setattr__(obj, name, functools.wraps(real)(counted))

    def take(self) -> int:
        n, self.n = self.n, 0
        return n


def _lc_embeddings():
    from langchain_core.embeddings import Embeddings

    table = dict(zip(CORPUS.texts, CORPUS.vectors.tolist()))
    table.update({f"__query {q}__": v for q, v in enumerate(CORPUS.queries.tolist())})

    class TableEmbeddings(Embeddings):
        def embed_documents(self, texts):
            return [table[t] for t in texts]

        def embed_query(self, text):
            return table[text]

    return TableEmbeddings()


def _mongo(tree):
    op = tree[0]
    if op == "eq":
        return {tree[1]: {"$eq": tree[2]}}
    if op == "in":
        return {tree[1]: {"$in": list(tree[2])}}
    return {"$and" if op == "and" else "$or": [_mongo(t) for t in tree[1]]}


def _check(runs, label):
    """runs: (Result, counted calls) per query."""
    for j, (res, calls) in enumerate(runs):
        assert res.backend_calls == calls, f"{label} query {j}: Result.backend_calls={res.backend_calls}, store " \
                                           f"called {calls} times"
    assert any(calls > res.rounds + 1 for res, calls in runs), \
        f"{label}: no query called its store more often than the wrapper's rounds; the case checks nothing"


@pytest.mark.parametrize("shape", ["selective", "in"])
def test_langchain_faiss_under_a_filter(shape):
    pytest.importorskip("faiss")
    pytest.importorskip("langchain_community")
    from langchain_community.vectorstores import FAISS
    from langchain_diversify import DiversifyRetriever

    store = FAISS.from_embeddings(list(zip(CORPUS.texts, CORPUS.vectors.tolist())), _lc_embeddings(),
                                  metadatas=[dict(m) for m in CORPUS.metas], ids=[str(i) for i in CORPUS.ids])
    counted = Counted(store, "similarity_search_with_score_by_vector")
    retriever = DiversifyRetriever(vectorstore=store, cluster_map=CORPUS.cluster_map, id_field="doc_id", k=K,
                                   max_rounds=8, search_kwargs={"filter": _mongo(SELECTIVE if shape == "selective" else SHAPES[shape])},
                                   exclude_filter=lambda ids: {"filter": {"doc_id": {"$nin": list(ids)}}})
    runs = []
    for q in range(4):
        _, res = retriever.retrieve_with_result(f"__query {q}__")
        runs.append((res, counted.take()))
    if shape == "selective":
        _check(runs, f"LangChain FAISS {shape}")
    assert all(res.backend_calls == calls for res, calls in runs), runs
    assert retriever.diversifier.stats()["backend_calls"] == sum(c for _, c in runs)


def test_langchain_faiss_under_a_filter_async():
    pytest.importorskip("faiss")
    pytest.importorskip("langchain_community")
    from langchain_community.vectorstores import FAISS
    from langchain_diversify import DiversifyRetriever

    store = FAISS.from_embeddings(list(zip(CORPUS.texts, CORPUS.vectors.tolist())), _lc_embeddings(),
                                  metadatas=[dict(m) for m in CORPUS.metas], ids=[str(i) for i in CORPUS.ids])
    counted = Counted(store, "asimilarity_search_with_score_by_vector")
    retriever = DiversifyRetriever(vectorstore=store, cluster_map=CORPUS.cluster_map, id_field="doc_id", k=K,
                                   max_rounds=8, search_kwargs={"filter": _mongo(SELECTIVE)},
                                   exclude_filter=lambda ids: {"filter": {"doc_id": {"$nin": list(ids)}}})

    async def run():
        out = []
        for q in range(4):
            _, res = await retriever.aretrieve_with_result(f"__query {q}__")
            out.append((res, counted.take()))
        return out

    _check(asyncio.run(run()), "LangChain FAISS async")


def test_faiss_store_widening_an_hnsw_search():
    faiss = pytest.importorskip("faiss")
    from diversify.stores import FaissStore

    x = np.ascontiguousarray(CORPUS.vectors)
    index = faiss.IndexHNSWFlat(x.shape[1], 16, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efSearch = 16  # visits few: a selective filter leaves it short, so it widens
    index.add(x)
    tree = SHAPES["nested"]
    counted = Counted(index, "search")
    search = Diversifier(CORPUS.cluster_map, k=K, max_rounds=8).wrap(
        FaissStore(index, ids=CORPUS.ids, payloads=CORPUS.metas, where=lambda m: holds(tree, m)))
    runs = []
    for q in range(4):
        res = search(CORPUS.queries[q])
        runs.append((res, counted.take()))
    _check(runs, "FaissStore HNSW")


def test_a_short_pushed_down_answer_confirmed_with_a_larger_k():
    pytest.importorskip("chromadb")
    pytest.importorskip("langchain_community")
    import chromadb
    from langchain_community.vectorstores import Chroma
    from langchain_diversify import DiversifyRetriever

    store = Chroma(collection_name="backend-calls", embedding_function=_lc_embeddings(),
                   client=chromadb.EphemeralClient(), collection_metadata={"hnsw:space": "cosine"})
    store.add_texts(CORPUS.texts, metadatas=[dict(m) for m in CORPUS.metas], ids=[str(i) for i in CORPUS.ids])
    counted = Counted(store, "similarity_search_by_vector_with_relevance_scores")
    # 30 documents of 3 clusters: the first call is full (25) but holds 3 clusters; the refetch, with
    # those 25 excluded, finds 5 and is short, which an approximate store must confirm with a larger k
    by_cluster: dict = {}
    for i in CORPUS.ranking(0):
        if i in CORPUS.cluster_of:
            by_cluster.setdefault(CORPUS.cluster_of[i], []).append(i)
    few = [i for members in list(by_cluster.values())[:3] for i in members[:10]]
    retriever = DiversifyRetriever(vectorstore=store, cluster_map=CORPUS.cluster_map, id_field="doc_id", k=K,
                                   max_rounds=8, refill="exclude", search_kwargs={"filter": {"doc_id": {"$in": few}}},
                                   exclude_filter=lambda ids: {"filter": {"doc_id": {"$nin": list(ids)}}})
    runs = []
    for q in range(4):
        _, res = retriever.retrieve_with_result(f"__query {q}__")
        runs.append((res, counted.take()))
    _check(runs, "LangChain Chroma, exclusion pushed down")


def test_a_langchain_retriever_called_once():
    pytest.importorskip("langchain_core")
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from langchain_diversify import DiversifyRetriever

    docs = [Document(page_content=t, metadata=dict(m)) for t, m in zip(CORPUS.texts[:40], CORPUS.metas[:40])]

    class Fixed(BaseRetriever):  # no k to resize: called once
        def _get_relevant_documents(self, query, *, run_manager):
            return list(docs)

    inner = Fixed()
    counted = Counted(inner, "_get_relevant_documents")
    retriever = DiversifyRetriever(retriever=inner, cluster_map=CORPUS.cluster_map, id_field="doc_id", k=K)
    for _ in range(3):
        _, res = retriever.retrieve_with_result("q")
        assert res.backend_calls == counted.take() == 1
    assert retriever.diversifier.stats()["backend_calls"] == 3


def test_a_llamaindex_retriever_called_once():
    pytest.importorskip("llama_index.core")
    from contract.llama import vector_index  # noqa: F401  (puts the plugins on sys.path)
    from llama_index.core.base.base_retriever import BaseRetriever
    from llama_index.core.schema import NodeWithScore, TextNode
    from llama_index.retrievers.diversify import DiversifyRetriever

    nodes = [NodeWithScore(node=TextNode(id_=str(m["doc_id"]), text=t, metadata=dict(m)), score=1.0 - j / 100)
             for j, (t, m) in enumerate(zip(CORPUS.texts[:40], CORPUS.metas[:40]))]

    class Fixed(BaseRetriever):
        def _retrieve(self, query_bundle):
            return list(nodes)

    inner = Fixed()
    counted = Counted(inner, "_retrieve")
    retriever = DiversifyRetriever(inner, cluster_map=CORPUS.cluster_map, id_field="doc_id", similarity_top_k=K)
    for _ in range(3):
        res = retriever.retrieve_with_result("q").result
        assert res.backend_calls == counted.take() == 1
    assert retriever.diversifier.stats()["backend_calls"] == 3


def test_select_items_refuses_a_bad_backend_calls():
    from diversify.errors import ConfigError

    d = Diversifier({"a": 0}, k=1)
    for bad in (-1, True, 1.0, "1", None):
        with pytest.raises(ConfigError, match="backend_calls"):
            d.select_items([{"id": "a"}], backend_calls=bad)
    assert d.select_items([{"id": "a"}], backend_calls=2).backend_calls == 2
