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

_SRC = pathlib.Path(__file__).resolve().parents[1] / "integrations" / "langchain-diversify"
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


def test_async_matches_sync_and_uses_asimilarity_search_with_score(corpus, monkeypatch):
    store = _corpus_store(corpus)
    calls = {"sync": 0, "async": 0}
    sync_search, async_search = store.similarity_search_with_score, store.asimilarity_search_with_score

    def counting_sync(*a, **kw):
        calls["sync"] += 1
        return sync_search(*a, **kw)

    async def counting_async(*a, **kw):
        calls["async"] += 1
        return await async_search(*a, **kw)

    monkeypatch.setattr(store, "similarity_search_with_score", counting_sync)
    monkeypatch.setattr(store, "asimilarity_search_with_score", counting_async)
    retriever = DiversifyRetriever(vectorstore=store, cluster_map=corpus.cluster_map, id_field="doc_id",
                                   k=7, fetch_k=7, max_rounds=8, exclude_filter=_exclude_doc_ids)
    adocs, aresult = asyncio.run(retriever.aretrieve_with_result(QUERY))
    assert calls == {"sync": 0, "async": aresult.backend_calls} and aresult.backend_calls >= 2, calls
    sdocs = retriever.invoke(QUERY)
    assert [d.id for d in adocs] == [d.id for d in sdocs]
    assert [d.id for d in asyncio.run(retriever.ainvoke(QUERY))] == [d.id for d in sdocs]


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
