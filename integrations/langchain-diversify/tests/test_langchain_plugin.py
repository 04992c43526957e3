"""langchain-diversify against the real langchain-core (InMemoryVectorStore, no mocks).

The plugin is imported from its source folder (integrations/langchain-diversify); in CI it can
also be installed with ``pip install -e integrations/langchain-diversify``. Skips only when
langchain-core is not importable.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import math
import pathlib
import sys

import pytest

pytest.importorskip("langchain_core", reason="langchain-core is not installed (pip install 'diversify-retrieval[langchain]')")

_SRC = pathlib.Path(__file__).resolve().parents[1]
if str(_SRC) not in sys.path:
    sys.path.insert(0, str(_SRC))

from contract import PluginContract, oracle_select  # noqa: E402
from langchain_core.documents import Document  # noqa: E402
from langchain_core.embeddings import Embeddings  # noqa: E402
from langchain_core.vectorstores import InMemoryVectorStore  # noqa: E402
from langchain_diversify import DiversifyCompressor, DiversifyRetriever, callable_exclude_filter  # noqa: E402

from diversify.errors import ConfigError, StoreError  # noqa: E402

QUERY = "__query__"


class TableEmbeddings(Embeddings):
    """Deterministic fake embedding: a fixed text -> vector table (the contract corpus's vectors)."""

    def __init__(self, table):
        self.table = table
        self.calls = 0

    def embed_documents(self, texts):
        return [self.embed_query(t) for t in texts]

    def embed_query(self, text):
        self.calls += 1
        return [float(x) for x in self.table[text]]


class WordHashEmbeddings(Embeddings):
    """Deterministic fake embedding: bag of words hashed (blake2b) into 32 dims, unit norm."""

    dim = 32

    def embed_documents(self, texts):
        return [self.embed_query(t) for t in texts]

    def embed_query(self, text):
        v = [0.0] * self.dim
        for word in text.lower().split():
            v[int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little") % self.dim] += 1.0
        norm = math.sqrt(sum(x * x for x in v)) or 1.0
        return [x / norm for x in v]


def _corpus_store(corpus):
    table = dict(zip(corpus.texts, corpus.vectors))
    table[QUERY] = corpus.query
    store = InMemoryVectorStore(TableEmbeddings(table))
    docs = [Document(page_content=t, metadata={**copy.deepcopy(p), "doc_id": i}, id=f"d{i}")
            for i, t, p in zip(corpus.ids, corpus.texts, corpus.payloads)]
    store.add_documents(docs)
    return store


def _exclude_doc_ids(ids):
    seen = frozenset(ids)
    return {"filter": lambda doc: doc.metadata["doc_id"] not in seen}


class TestRetrieverContract(PluginContract):
    refills = True

    def run(self, corpus, *, k, max_per_cluster):
        retriever = DiversifyRetriever(vectorstore=_corpus_store(corpus), cluster_map=corpus.cluster_map,
                                       id_field="doc_id", k=k, max_per_cluster=max_per_cluster,
                                       exclude_filter=_exclude_doc_ids, max_rounds=8)
        docs = retriever.invoke(QUERY)
        return [d.metadata["doc_id"] for d in docs]

    def run_fixed(self, corpus, ranked_ids, *, k, max_per_cluster):
        text = dict(zip(corpus.ids, corpus.texts))
        docs = [Document(page_content=text[i], metadata={"doc_id": i}, id=f"d{i}") for i in ranked_ids]
        comp = DiversifyCompressor(cluster_map=corpus.cluster_map, id_field="doc_id", top_n=k,
                                   max_per_cluster=max_per_cluster)
        return [d.metadata["doc_id"] for d in comp.compress_documents(docs, QUERY)]


# ---------------------------------------------------------------------- refill, calls, copies


@pytest.fixture
def corpus():
    from contract import make_corpus

    return make_corpus(seed=11)


@pytest.mark.parametrize("exclude", [True, False], ids=["exclude-filter", "larger-k"])
def test_refills_when_the_first_fetch_is_short_and_reports_backend_calls(corpus, exclude):
    store = _corpus_store(corpus)
    k = 8
    retriever = DiversifyRetriever(vectorstore=store, cluster_map=corpus.cluster_map, id_field="doc_id",
                                   k=k, fetch_k=k, max_rounds=8,
                                   exclude_filter=_exclude_doc_ids if exclude else None)
    first = [d.metadata["doc_id"] for d, _ in store.similarity_search_with_score(QUERY, k=k)]
    distinct_first = oracle_select(first, corpus.cluster_of, k=k)
    assert len(distinct_first) < k, f"the first fetch must be short for this test: {distinct_first}"

    docs, result = retriever.retrieve_with_result(QUERY)
    got = [d.metadata["doc_id"] for d in docs]
    assert got == oracle_select(corpus.ranked_ids, corpus.cluster_of, k=k), got
    assert result.backend_calls >= 2, f"refill expected; backend_calls={result.backend_calls}"
    assert result.backend_calls == result.rounds + 1
    assert not result.exhausted and not result.short
    if exclude:  # the store really left out what was seen: nothing came back twice
        assert retriever.diversifier.stats()["fetched"] == result.considered, retriever.diversifier.stats()
    print(f"langchain refill ({'exclude' if exclude else 'larger k'}): backend_calls={result.backend_calls}")


def test_exhausted_store_returns_fewer_and_says_so(corpus):
    retriever = DiversifyRetriever(vectorstore=_corpus_store(corpus), cluster_map=corpus.cluster_map,
                                   id_field="doc_id", k=200, max_rounds=8, exclude_filter=_exclude_doc_ids)
    docs, result = retriever.retrieve_with_result(QUERY)
    assert len(docs) == corpus.distinct_available(1) < 200
    assert result.exhausted and result.short


class AsyncTableEmbeddings(TableEmbeddings):
    """Counts the async embedding calls apart from the sync ones."""

    def __init__(self, table):
        super().__init__(table)
        self.acalls = 0

    async def aembed_query(self, text):
        self.acalls += 1
        return [float(x) for x in self.table[text]]


def test_async_matches_sync_and_embeds_the_query_once(corpus):
    store = _corpus_store(corpus)
    emb = AsyncTableEmbeddings(store.embedding.table)
    store.embedding = emb
    retriever = DiversifyRetriever(vectorstore=store, cluster_map=corpus.cluster_map, id_field="doc_id",
                                   k=7, fetch_k=7, max_rounds=8, exclude_filter=_exclude_doc_ids)
    adocs, aresult = asyncio.run(retriever.aretrieve_with_result(QUERY))
    assert aresult.backend_calls >= 2 and (emb.acalls, emb.calls) == (1, 0), (aresult, emb.acalls, emb.calls)
    sdocs, sresult = retriever.retrieve_with_result(QUERY)
    assert sresult.backend_calls >= 2 and emb.calls == 1, (sresult, emb.calls)
    assert [d.id for d in adocs] == [d.id for d in sdocs]
    assert [d.id for d in asyncio.run(retriever.ainvoke(QUERY))] == [d.id for d in sdocs]


@pytest.mark.parametrize("exclude", [True, False], ids=["exclude-filter", "larger-k"])
def test_the_query_is_embedded_once_per_user_query_whatever_the_refills(corpus, exclude):
    """Refetches reuse the query vector: one embedding call per query (a hosted model bills each)."""
    store = _corpus_store(corpus)
    retriever = DiversifyRetriever(vectorstore=store, cluster_map=corpus.cluster_map, id_field="doc_id", k=8,
                                   fetch_k=8, max_rounds=8, exclude_filter=_exclude_doc_ids if exclude else None)
    before = store.embedding.calls
    calls = []
    for _ in range(3):
        calls.append(retriever.retrieve_with_result(QUERY).result.backend_calls)
    assert min(calls) >= 2, calls  # every query refilled
    assert store.embedding.calls - before == 3, (store.embedding.calls - before, calls)


def test_invoke_accepts_k_and_cursor_gives_the_next_page(corpus):
    retriever = DiversifyRetriever(vectorstore=_corpus_store(corpus), cluster_map=corpus.cluster_map,
                                   id_field="doc_id", k=4, max_rounds=8, exclude_filter=_exclude_doc_ids)
    page1, res1 = retriever.retrieve_with_result(QUERY)
    page2, _ = retriever.retrieve_with_result(QUERY, cursor=res1.cursor)
    both = [d.metadata["doc_id"] for d in page1 + page2]
    assert both == oracle_select(corpus.ranked_ids, corpus.cluster_of, k=8), both
    assert len(retriever.invoke(QUERY, k=2)) == 2


# ---------------------------------------------------------------------- real artifact, ids, copies

TEXTS = {
    "a": "the quick brown fox jumps over the lazy dog near the river bank today",
    "a-copy": "The quick brown fox jumps over the lazy dog near the river bank today!",
    "b": "a completely different sentence about vector databases and retrieval quality",
    "c": "near duplicate detection with minhash signatures and locality sensitive hashing",
    "c-copy": "near duplicate detection with minhash signatures and locality sensitive hashing.",
}


@pytest.fixture(scope="module")
def built_map():
    from diversify import build

    return build(texts=list(TEXTS.values()), ids=list(TEXTS)).cluster_map


def _word_store():
    store = InMemoryVectorStore(WordHashEmbeddings())
    docs = [Document(page_content=t, metadata={"source": k, "tags": ["x"]}, id=k) for k, t in TEXTS.items()]
    store.add_documents(docs)
    return store


def test_keeps_better_ranked_copy_and_its_id_without_mutating_the_store(built_map):
    assert built_map.cluster_of("a") == built_map.cluster_of("a-copy") != built_map.cluster_of("b")
    store = _word_store()
    before = copy.deepcopy(store.store)
    query = "quick brown fox jumps over the lazy dog near the river bank today"
    ranked = [d.id for d, _ in store.similarity_search_with_score(query, k=5)]
    retriever = DiversifyRetriever(vectorstore=store, cluster_map=built_map, k=5)
    docs, result = retriever.retrieve_with_result(query)
    ids = [d.id for d in docs]
    better = min(("a", "a-copy"), key=ranked.index)
    worse = ({"a", "a-copy"} - {better}).pop()
    assert better in ids and worse not in ids, (ranked, ids)
    assert len(ids) == 3 and result.exhausted  # a|a-copy, b, c|c-copy: the store has no more
    info = next(d for d in docs if d.id == better).metadata["diversify"]
    assert info["omitted"] == 1 and info["omitted_ids"] == [worse], info
    assert info["cluster_id"] == built_map.cluster_of("a")
    assert store.store == before, "the vector store's documents were modified"


def test_compressor_returns_copies_and_leaves_callers_documents_unchanged(built_map):
    docs = [Document(page_content=TEXTS[k], metadata={"source": k}, id=k) for k in ("a-copy", "b", "a", "c")]
    before = copy.deepcopy(docs)
    out = DiversifyCompressor(cluster_map=built_map).compress_documents(docs, "q")
    assert [d.id for d in out] == ["a-copy", "b", "c"]
    assert docs == before
    assert all(o is not d for o in out for d in docs)
    assert out[0].metadata == {"source": "a-copy", "diversify": {"cluster_id": built_map.cluster_of("a"),
                                                                  "omitted": 1, "omitted_ids": ["a"],
                                                                  "score": None}}


def test_compressor_in_a_contextual_compression_retriever(built_map):
    retrievers = pytest.importorskip("langchain_classic.retrievers",
                                     reason="langchain-classic is not installed (pip install langchain-classic)")
    store = _word_store()
    pipeline = retrievers.ContextualCompressionRetriever(
        base_compressor=DiversifyCompressor(cluster_map=built_map),
        base_retriever=store.as_retriever(search_kwargs={"k": 5}))
    query = "near duplicate detection with minhash signatures"
    base_ids = [d.id for d in store.as_retriever(search_kwargs={"k": 5}).invoke(query)]
    ids = [d.id for d in pipeline.invoke(query)]
    assert ids == [i for i in base_ids if i not in (max(("a", "a-copy"), key=base_ids.index),
                                                     max(("c", "c-copy"), key=base_ids.index))]


def test_cluster_ids_from_a_metadata_field():
    store = InMemoryVectorStore(WordHashEmbeddings())
    store.add_documents([Document(page_content=t, metadata={"grp": k.split("-")[0]}, id=k) for k, t in TEXTS.items()])
    retriever = DiversifyRetriever(vectorstore=store, cluster_field="grp", k=10,
                                   exclude_filter=callable_exclude_filter)
    docs = retriever.invoke("fox dog minhash")
    assert sorted(d.metadata["grp"] for d in docs) == ["a", "b", "c"]


def test_clear_errors():
    store = _word_store()
    with pytest.raises(ConfigError, match="cluster_map"):
        DiversifyRetriever(vectorstore=store, k=3).invoke("x")
    retriever = DiversifyRetriever(vectorstore=store, cluster_map={}, id_field="missing", k=3)
    with pytest.raises(StoreError, match="missing"):
        retriever.invoke("fox")


@pytest.mark.integration
def test_langchain_qdrant_documents_without_id_get_a_clear_error_and_id_field_fixes_it(corpus):
    """langchain-qdrant returns Documents with id=None and the point id in metadata['_id']."""
    pytest.importorskip("langchain_qdrant", reason="langchain-qdrant is not installed")
    from langchain_qdrant import QdrantVectorStore

    table = dict(zip(corpus.texts, corpus.vectors))
    table[QUERY] = corpus.query
    table["dummy_text"] = corpus.query  # langchain-qdrant embeds it to learn the dimension
    vs = QdrantVectorStore.from_texts(corpus.texts, TableEmbeddings(table), ids=list(corpus.ids),
                                      metadatas=[{"doc_id": i} for i in corpus.ids], location=":memory:",
                                      collection_name="noid")
    retriever = DiversifyRetriever(vectorstore=vs, cluster_map=corpus.cluster_map, k=6)
    with pytest.raises(StoreError, match=r"Document.id is None.*id_field='_id'"):
        retriever.invoke(QUERY)
    fixed = DiversifyRetriever(vectorstore=vs, cluster_map=corpus.cluster_map, k=6, fetch_k=6, max_rounds=8,
                               id_field="_id")
    docs, res = fixed.retrieve_with_result(QUERY)
    assert [d.metadata["_id"] for d in docs] == oracle_select(corpus.ranked_ids, corpus.cluster_of, k=6)
    assert res.backend_calls >= 2 and fixed.refill == "auto"


def test_filters_that_cannot_be_anded_are_never_replaced(corpus):
    """A dict filter on a store whose dict dialect is unknown: the exclusion is not pushed down
    (it would replace or garble the user's filter); refetches grow k under the user's filter."""
    from langchain_diversify._search import NotComposable, and_filters

    store = _corpus_store(corpus)
    with pytest.raises(NotComposable, match="cannot be AND-ed"):
        and_filters({"tenant": "a"}, {"doc_id": {"$nin": [1]}}, store=store)
    assert and_filters(None, "x", store=store) == "x" and and_filters("x", None, store=store) == "x"
    both = and_filters(lambda d: d.metadata["doc_id"] % 2 == 0, lambda d: d.metadata["doc_id"] > 1010, store=store)
    assert [both(Document(page_content="", metadata={"doc_id": i})) for i in (1012, 1013, 1008)] == [True, False, False]
    even = {"filter": lambda doc: doc.metadata["doc_id"] % 2 == 0}
    retriever = DiversifyRetriever(vectorstore=store, cluster_map=corpus.cluster_map, id_field="doc_id", k=6, fetch_k=6,
                                   max_rounds=8, search_kwargs=even,
                                   exclude_filter=lambda ids: {"filter": {"doc_id": {"$nin": list(ids)}}})
    docs, res = retriever.retrieve_with_result(QUERY)
    ids = [d.metadata["doc_id"] for d in docs]
    allowed = [i for i in corpus.ranked_ids if i % 2 == 0]
    assert ids == oracle_select(allowed, corpus.cluster_of, k=6) and res.backend_calls >= 2, ids
    assert retriever.refill == "auto" and not retriever._refill().pushes_down  # gave up pushing down


def test_refill_exclude_needs_an_exclude_filter(corpus):
    retriever = DiversifyRetriever(vectorstore=_corpus_store(corpus), cluster_map=corpus.cluster_map, refill="exclude")
    with pytest.raises(ConfigError, match="refill='exclude'.*exclude_filter"):
        retriever.invoke(QUERY)
