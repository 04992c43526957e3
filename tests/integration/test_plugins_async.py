"""The frameworks' async entry points never block the event loop, on a real Chroma server.

Each framework's retriever over a Chroma server (LangChain ``Chroma`` on an ``HttpClient``,
LlamaIndex ``ChromaVectorStore`` on an ``HttpClient`` collection, Haystack ``ChromaDocumentStore``
with ``host`` / ``port``, whose ``run_async`` uses chromadb's async client) answers a filtered,
diversified query while the server is frozen for 0.6 s: a heartbeat task ticking every 10 ms
must keep ticking (no gap of half the stall), and the answer must satisfy the filter contract
and equal the sync call's. LlamaIndex's own ``aquery`` for Chroma is the base class's, which
calls the sync ``query`` in the loop's thread: before the retriever moved it to a worker thread,
the heartbeat stopped for the whole stall. (Creating chromadb's ``AsyncHttpClient`` itself blocks
the loop while it contacts the server; chroma-haystack creates it on the first ``run_async``, so
the Haystack case warms up first.)
"""

from __future__ import annotations

import asyncio
import itertools

import pytest
import test_filters_contract as sync_cases
from contract.filters import SHAPES, Run, check_run
from contract.heartbeat import Heartbeat

pytestmark = pytest.mark.integration

STALL = 0.6
TREE = SHAPES["in"]
_names = itertools.count()


async def _stalled(server, ask):
    """``await ask()`` with the server frozen for STALL seconds at the start; (answer, longest gap)."""
    hb = Heartbeat()
    task = asyncio.create_task(hb.beat(0.01))
    await asyncio.sleep(0.05)
    with server.paused(STALL):
        out = await ask()
    await asyncio.sleep(0.03)
    task.cancel()
    return out, max(hb.gaps)


def _check(corpus, runs, gap, label):
    check_run(corpus, TREE, runs, k=sync_cases.K, exact=False, label=label)
    assert gap < STALL / 2, f"{label}: the event loop stalled {gap:.3f} s while the server was frozen {STALL} s"


def test_langchain_ainvoke_does_not_block_on_a_stalled_server(chroma_server):
    sync_cases._need("langchain_community.vectorstores", "chromadb")
    import chromadb
    from langchain_community.vectorstores import Chroma
    from langchain_diversify import DiversifyRetriever

    corpus = sync_cases._CORPUS
    vs = Chroma(collection_name=f"lc-async-{next(_names)}", embedding_function=sync_cases._lc_embeddings(corpus),
                client=chromadb.HttpClient(host=chroma_server.host, port=chroma_server.port),
                collection_metadata={"hnsw:space": "cosine"})
    vs.add_texts(corpus.texts, metadatas=[dict(m) for m in corpus.metas], ids=[str(i) for i in corpus.ids])
    retriever = DiversifyRetriever(vectorstore=vs, cluster_map=corpus.cluster_map, id_field="doc_id", k=sync_cases.K,
                                   max_rounds=sync_cases.ROUNDS, search_kwargs={"filter": sync_cases.mongo(TREE)})

    async def go():
        return await _stalled(chroma_server, lambda: retriever.aretrieve_with_result(sync_cases._query_text(0)))

    (docs, res), gap = asyncio.run(go())
    ids = [d.metadata["doc_id"] for d in docs]
    _check(corpus, [Run(ids, res.backend_calls)], gap, "langchain chroma-server")
    assert ids == [d.metadata["doc_id"] for d in retriever.invoke(sync_cases._query_text(0))]


def test_llamaindex_aretrieve_does_not_block_on_a_stalled_server(chroma_server):
    sync_cases._need("llama_index.vector_stores.chroma", "chromadb")
    import chromadb
    from llama_index.retrievers.diversify import DiversifyRetriever
    from llama_index.vector_stores.chroma import ChromaVectorStore

    corpus = sync_cases._CORPUS
    col = chromadb.HttpClient(host=chroma_server.host, port=chroma_server.port).create_collection(
        f"llama-async-{next(_names)}", metadata={"hnsw:space": "cosine"})
    index = sync_cases._llama_index(corpus, ChromaVectorStore(chroma_collection=col))
    retriever = DiversifyRetriever(index, cluster_map=corpus.cluster_map, id_field="doc_id", exclude_key="chunk_id",
                                   similarity_top_k=sync_cases.K, max_rounds=sync_cases.ROUNDS,
                                   filters=sync_cases.llama(TREE))

    async def go():
        return await _stalled(chroma_server, lambda: retriever.aretrieve_with_result(sync_cases._query_text(0)))

    (nodes, res), gap = asyncio.run(go())
    ids = [n.node.metadata["doc_id"] for n in nodes]
    _check(corpus, [Run(ids, res.backend_calls)], gap, "llamaindex chroma-server")
    assert ids == [n.node.metadata["doc_id"] for n in retriever.retrieve(sync_cases._query_text(0))]


def test_haystack_run_async_awaits_chroma_and_does_not_block(chroma_server):
    sync_cases._need("haystack_integrations.document_stores.chroma")
    from haystack_integrations.components.retrievers.chroma import ChromaEmbeddingRetriever
    from haystack_integrations.components.retrievers.diversify import DiversifyRetriever
    from haystack_integrations.components.retrievers.diversify.retriever import awaits_the_store
    from haystack_integrations.document_stores.chroma import ChromaDocumentStore

    corpus = sync_cases._CORPUS
    store = ChromaDocumentStore(collection_name=f"hs-async-{next(_names)}", host=chroma_server.host,
                                port=chroma_server.port, distance_function="cosine")
    store.write_documents(sync_cases._hs_docs(corpus))
    inner = ChromaEmbeddingRetriever(store)
    assert awaits_the_store(inner)  # a server: chroma-haystack's own async client is used
    retriever = DiversifyRetriever(inner, cluster_map=corpus.cluster_map, id_field="doc_id", top_k=sync_cases.K,
                                   max_rounds=sync_cases.ROUNDS)
    query = corpus.queries[0].tolist()
    filters = sync_cases.haystack(TREE)

    async def go():
        # the first run_async makes chroma-haystack's async client, and chromadb's client creation
        # blocks the loop while it contacts the server (docs/integrations/haystack.md): warm up first
        await retriever.run_async(query_embedding=query, filters=filters)
        return await _stalled(chroma_server, lambda: retriever.run_async(query_embedding=query, filters=filters))

    out, gap = asyncio.run(go())
    ids = [d.meta["doc_id"] for d in out["documents"]]
    _check(corpus, [Run(ids, out["diversify"]["backend_calls"])], gap, "haystack chroma-server")
    assert ids == [d.meta["doc_id"] for d in retriever.run(query_embedding=query, filters=filters)["documents"]]
