"""langchain-diversify speaks LangChain: it wraps any retriever, uses LangChain's names, refuses typos.

Against the real langchain-core / langchain-community / langchain-classic classes (BM25Retriever
over rank_bm25, EnsembleRetriever, MultiQueryRetriever with a FakeListLLM writing the queries,
ContextualCompressionRetriever, InMemoryVectorStore, FAISS), no mocks:

* refill behind a retriever that can be asked for more (BM25 ``k``, ensemble and multi-query
  over resizable retrievers, ``as_retriever()``), and an honest single call behind one that
  cannot (``backend_calls == 1``, ``exhausted`` when short);
* ``top_n`` on the compressor (``top_k`` deprecated), unknown and mistyped arguments refused at
  construction, bad ``search_kwargs`` and bad settings refused at construction.
"""

from __future__ import annotations

import asyncio
import pathlib
import sys
import warnings

import pytest

pytest.importorskip("langchain_core", reason="langchain-core is not installed")
pytest.importorskip("langchain_classic", reason="langchain-classic is not installed (pip install langchain-classic)")
pytest.importorskip("langchain_community", reason="langchain-community is not installed")

_SRC = pathlib.Path(__file__).resolve().parents[1]
if str(_SRC) not in sys.path:
    sys.path.insert(0, str(_SRC))

with warnings.catch_warnings():  # langchain-community announces its sunset on import
    warnings.simplefilter("ignore", DeprecationWarning)
    from langchain_community.retrievers import BM25Retriever
    from langchain_community.vectorstores import FAISS

from contract import oracle_select  # noqa: E402
from contract.text_corpus import QUERY, cluster_map, cluster_of, embed, texts  # noqa: E402
from langchain_classic.retrievers import ContextualCompressionRetriever, EnsembleRetriever  # noqa: E402
from langchain_classic.retrievers.multi_query import MultiQueryRetriever  # noqa: E402
from langchain_core.callbacks import CallbackManagerForRetrieverRun  # noqa: E402
from langchain_core.documents import Document  # noqa: E402
from langchain_core.embeddings import Embeddings  # noqa: E402
from langchain_core.language_models import FakeListLLM  # noqa: E402
from langchain_core.retrievers import BaseRetriever  # noqa: E402
from langchain_core.vectorstores import InMemoryVectorStore  # noqa: E402
from langchain_diversify import DiversifyCompressor, DiversifyRetriever, callable_exclude_filter  # noqa: E402

from diversify.errors import ConfigError  # noqa: E402


class WordEmbeddings(Embeddings):
    def embed_documents(self, items):
        return [embed(t) for t in items]

    def embed_query(self, text):
        return embed(text)


def _docs():
    return [Document(page_content=t, id=i, metadata={"uid": i}) for i, t in texts().items()]


def _bm25(k=4):
    pytest.importorskip("rank_bm25", reason="rank_bm25 is not installed (pip install 'langchain-diversify[test]')")
    return BM25Retriever.from_documents(_docs(), k=k)


def _store():
    store = InMemoryVectorStore(WordEmbeddings())
    store.add_documents(_docs())
    return store


def _ids(docs):
    return [d.id for d in docs]


def _distinct(ids):
    of = cluster_of()
    return len({of[i] for i in ids})


# ---------------------------------------------------------------------- retrievers that can give more


def test_bm25_retriever_is_wrapped_and_refilled_through_its_k():
    bm25 = _bm25(k=6)
    full = _ids(_bm25(k=len(texts())).invoke(QUERY))
    assert _distinct(full[:6]) < 6, "the corpus must make BM25's own top 6 short of distinct clusters"
    retriever = DiversifyRetriever(retriever=bm25, cluster_map=cluster_map(), fetch_k=6, max_rounds=4)
    assert retriever.k == 6, "k defaults to the wrapped retriever's own k"
    docs, result = retriever.retrieve_with_result(QUERY)
    assert _ids(docs) == oracle_select(full, cluster_of(), k=6)
    assert result.backend_calls >= 2 and result.backend_calls == result.rounds + 1, result
    assert not result.short and not result.exhausted
    assert bm25.k == 6, "the caller's retriever was changed"
    assert _ids(retriever.invoke(QUERY)) == _ids(docs)
    assert _ids(asyncio.run(retriever.ainvoke(QUERY))) == _ids(docs)
    assert "k" in retriever.refill_how


def test_bm25_exhausted_means_the_corpus_ran_out():
    retriever = DiversifyRetriever(retriever=_bm25(), cluster_map=cluster_map(), k=50, max_rounds=8)
    docs, result = retriever.retrieve_with_result(QUERY)
    assert len(docs) == len(set(cluster_of().values())) < 50
    assert result.exhausted and result.short


def test_ensemble_of_bm25_and_a_vector_store_is_refilled_through_both():
    store = _store()
    bm25, dense = _bm25(k=6), store.as_retriever(search_kwargs={"k": 6})
    ensemble = EnsembleRetriever(retrievers=[bm25, dense], weights=[0.5, 0.5])
    first = _ids(ensemble.invoke(QUERY))[:6]
    assert _distinct(first) < 6, first
    retriever = DiversifyRetriever(retriever=ensemble, cluster_map=cluster_map(), k=6, fetch_k=6, max_rounds=4)
    docs, result = retriever.retrieve_with_result(QUERY)
    ids = _ids(docs)
    assert len(ids) == 6 and _distinct(ids) == 6, ids
    assert result.backend_calls >= 2 and not result.short, result
    assert bm25.k == 6 and dense.search_kwargs == {"k": 6}, "the caller's retrievers were changed"
    # what came back is the ensemble's own answer at the last size asked, diversified
    wide = _ids(EnsembleRetriever(retrievers=[_bm25(k=48), store.as_retriever(search_kwargs={"k": 48})],
                                  weights=[0.5, 0.5]).invoke(QUERY))
    assert set(ids) <= set(wide)


def test_multi_query_retriever_over_bm25_is_refilled():
    llm = FakeListLLM(responses=["t0w3 t1w3\nt2w3 t3w3"])  # the queries it "writes": copies first
    mq = MultiQueryRetriever.from_llm(retriever=_bm25(k=6), llm=llm, include_original=True)
    assert _distinct(_ids(mq.invoke(QUERY))[:6]) < 6
    retriever = DiversifyRetriever(retriever=mq, cluster_map=cluster_map(), k=6, fetch_k=6, max_rounds=4)
    docs, result = retriever.retrieve_with_result(QUERY)
    assert len(docs) == 6 and _distinct(_ids(docs)) == 6 and result.backend_calls >= 2, result
    assert mq.retriever.k == 6


def test_a_vector_store_or_its_as_retriever_is_searched_with_scores_and_exclusion():
    store = _store()
    ranked = [d.id for d, _ in store.similarity_search_with_score(QUERY, k=len(texts()))]
    expected = oracle_select(ranked, cluster_of(), k=5)
    for wrapped in (store, store.as_retriever(search_kwargs={"k": 5})):
        retriever = DiversifyRetriever(retriever=wrapped, cluster_map=cluster_map(), fetch_k=5,
                                       exclude_filter=callable_exclude_filter, max_rounds=6)
        assert retriever.k == 5 if wrapped is not store else retriever.k == 4
        docs, result = retriever.retrieve_with_result(QUERY, k=5)
        assert _ids(docs) == expected
        assert all(d.metadata["diversify"]["score"] is not None for d in docs), "the store's scores were lost"
        assert retriever.vectorstore is store and result.backend_calls >= 2


def test_as_retriever_filter_is_kept():
    store = _store()
    allowed = {i for i in texts() if i.endswith(("-bang", "-edit")) or i in ("doc-8", "doc-9")}
    wrapped = store.as_retriever(search_kwargs={"filter": lambda doc: doc.id in allowed})
    docs = DiversifyRetriever(retriever=wrapped, cluster_map=cluster_map(), k=6).invoke(QUERY)
    assert docs and set(_ids(docs)) <= allowed


# ---------------------------------------------------------------------- retrievers that cannot give more


class _Fixed(BaseRetriever):
    """A retriever with no size to change (as a team's own retriever often is)."""

    docs: list
    calls: int = 0

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun):
        self.calls += 1
        return list(self.docs)


def test_a_retriever_that_cannot_give_more_is_called_once_and_says_exhausted():
    wanted = ("doc-0", "doc-0-bang", "doc-1-edit", "doc-1", "doc-0-edit", "doc-5")
    by_id = {d.id: d for d in _docs()}
    docs = [by_id[i] for i in wanted]
    fixed = _Fixed(docs=docs)
    retriever = DiversifyRetriever(retriever=fixed, cluster_map=cluster_map(), k=5)
    assert retriever.refill_how is None
    out, result = retriever.retrieve_with_result(QUERY)
    assert fixed.calls == 1 and result.backend_calls == 1 and result.rounds == 0
    assert _ids(out) == ["doc-0", "doc-1-edit", "doc-5"]
    assert result.exhausted and result.short
    assert out[0].metadata["diversify"]["omitted"] == 2, "folded copies are counted"
    assert asyncio.run(retriever.ainvoke(QUERY)) == out and fixed.calls == 2


def test_contextual_compression_retriever_is_wrapped_as_fixed():
    base = _bm25(k=9)
    pipeline = ContextualCompressionRetriever(base_compressor=DiversifyCompressor(cluster_field="none"),
                                              base_retriever=base)
    retriever = DiversifyRetriever(retriever=pipeline, cluster_map=cluster_map(), k=6)
    docs, result = retriever.retrieve_with_result(QUERY)
    expected = oracle_select(_ids(base.invoke(QUERY)), cluster_of(), k=6)
    assert _ids(docs) == expected and len(expected) < 6
    assert result.backend_calls == 1 and result.exhausted


# ---------------------------------------------------------------------- names, typos, validation


def test_compressor_takes_top_n_refuses_k_and_keeps_top_k_as_a_deprecated_alias():
    ranked = _ids(_bm25(k=12).invoke(QUERY))
    docs = {d.id: d for d in _docs()}
    listed = [docs[i] for i in ranked]
    expected = oracle_select(ranked, cluster_of(), k=3)
    assert _ids(DiversifyCompressor(cluster_map=cluster_map(), top_n=3).compress_documents(listed, QUERY)) == expected
    with pytest.raises(ConfigError, match="top_n"):
        DiversifyCompressor(cluster_map=cluster_map(), k=3)
    with pytest.warns(DeprecationWarning, match="top_n"):
        old = DiversifyCompressor(cluster_map=cluster_map(), top_k=3)
    assert old.top_n == 3 and _ids(old.compress_documents(listed, QUERY)) == expected
    with pytest.raises(ConfigError, match="top_k.*top_n|both"):
        DiversifyCompressor(cluster_map=cluster_map(), top_k=3, top_n=3)


@pytest.mark.parametrize("kwargs,match", [
    ({"k": 3}, "top_n"),
    ({"n": 3}, "top_n"),
    ({"max_per_clusters": 2}, "max_per_cluster"),
    ({"clustermap": {}}, "cluster_map"),
    ({"top_n": 0}, "top_n"),
    ({"top_n": "3"}, "top_n"),
    ({"top_n": True}, "top_n"),
    ({"max_per_cluster": 0}, "max_per_cluster"),
])
def test_compressor_refuses_unknown_and_bad_arguments_at_construction(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        DiversifyCompressor(**{"cluster_map": cluster_map(), **kwargs})


def test_compressor_without_a_cluster_source_fails_at_construction():
    with pytest.raises(ConfigError, match="cluster_map"):
        DiversifyCompressor()


@pytest.mark.parametrize("kwargs,match", [
    ({"top_n": 5}, r"`k`"),
    ({"top_k": 5}, r"`k`"),
    ({"similarity_top_k": 5}, r"`k`"),
    ({"max_round": 2}, "max_rounds"),
    ({"fetchk": 10}, "fetch_k"),
    ({"filter": {"a": 1}}, "search_kwargs"),
    ({"k": 0}, "k"),
    ({"k": -2}, "k"),
    ({"k": "5"}, "k"),
    ({"k": 2.5}, "k"),
    ({"fetch_k": 2, "k": 5}, "fetch_k"),
    ({"max_rounds": -1}, "max_rounds"),
    ({"max_per_cluster": 0}, "max_per_cluster"),
    ({"cluster_map": None}, "cluster_map"),
])
def test_retriever_refuses_unknown_and_bad_arguments_at_construction(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        DiversifyRetriever(**{"retriever": _store(), "cluster_map": cluster_map(), **kwargs})


@pytest.mark.parametrize("search_kwargs,match", [
    ({"filters": lambda d: True}, "filter"),       # the typo that would silently drop a tenant filter
    ({"fliter": lambda d: True}, "filter"),
    ({"k": 0}, r"search_kwargs\['k'\]"),
    ({"k": -1}, r"search_kwargs\['k'\]"),
    ({"k": "5"}, r"search_kwargs\['k'\]"),
    ({"k": True}, r"search_kwargs\['k'\]"),
    ({"k": None}, r"search_kwargs\['k'\]"),
    ({1: "x"}, "strings"),
    ({"query": "x"}, "query"),
    ("filter", "dict"),
    (["filter"], "dict"),
])
def test_bad_search_kwargs_fail_at_construction(search_kwargs, match):
    with pytest.raises(ConfigError, match=match):
        DiversifyRetriever(retriever=_store(), cluster_map=cluster_map(), search_kwargs=search_kwargs)


def test_bad_as_retriever_search_kwargs_fail_at_construction():
    store = _store()
    with pytest.raises(ConfigError, match="filter"):
        DiversifyRetriever(retriever=store.as_retriever(search_kwargs={"filters": {}}), cluster_map=cluster_map())
    with pytest.raises(ConfigError, match=r"search_kwargs\['k'\]"):
        DiversifyRetriever(retriever=store.as_retriever(search_kwargs={"k": 0}), cluster_map=cluster_map())


def test_search_kwargs_k_is_the_default_k_and_conflicts_are_refused():
    store = _store()
    assert DiversifyRetriever(retriever=store, cluster_map=cluster_map(), search_kwargs={"k": 3}).k == 3
    assert len(DiversifyRetriever(retriever=store, cluster_map=cluster_map(), search_kwargs={"k": 3}).invoke(QUERY)) == 3
    with pytest.raises(ConfigError, match="twice"):
        DiversifyRetriever(retriever=store, cluster_map=cluster_map(), k=4, search_kwargs={"k": 3})


def test_search_kwargs_are_checked_against_the_real_store_signatures():
    faiss = FAISS.from_documents(_docs(), WordEmbeddings())
    ok = DiversifyRetriever(retriever=faiss, cluster_map=cluster_map(), search_kwargs={"filter": {"uid": "doc-1"},
                                                                                       "fetch_k": 40})
    assert [d.id for d in ok.invoke(QUERY)] == ["doc-1"]
    with pytest.raises(ConfigError, match="where_document"):  # a Chroma key, not a FAISS one
        DiversifyRetriever(retriever=faiss, cluster_map=cluster_map(), search_kwargs={"where_document": {}})
    # a key the store reads from **kwargs only: allowed when the caller says so
    loose = DiversifyRetriever(retriever=faiss, cluster_map=cluster_map(), search_kwargs={"score_threshold": 10.0},
                               check_search_kwargs=False)
    assert len(loose.invoke(QUERY)) == 4


def test_options_that_only_a_vector_store_takes_are_refused_for_other_retrievers():
    with pytest.raises(ConfigError, match="search_kwargs"):
        DiversifyRetriever(retriever=_bm25(), cluster_map=cluster_map(), search_kwargs={"filter": {}})
    with pytest.raises(ConfigError, match="exclude_filter"):
        DiversifyRetriever(retriever=_bm25(), cluster_map=cluster_map(), exclude_filter=callable_exclude_filter)
    with pytest.raises(ConfigError, match="both"):
        DiversifyRetriever(retriever=_bm25(), vectorstore=_store(), cluster_map=cluster_map())
    with pytest.raises(ConfigError, match="BaseRetriever"):
        DiversifyRetriever(retriever=object(), cluster_map=cluster_map())
    with pytest.raises(ConfigError, match="retriever"):
        DiversifyRetriever(cluster_map=cluster_map())


def test_vectorstore_keyword_still_works():
    store = _store()
    new = DiversifyRetriever(retriever=store, cluster_map=cluster_map(), k=5).invoke(QUERY)
    old = DiversifyRetriever(vectorstore=store, cluster_map=cluster_map(), k=5).invoke(QUERY)
    assert _ids(old) == _ids(new) and len(new) == 5
