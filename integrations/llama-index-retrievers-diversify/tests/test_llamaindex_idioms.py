"""The LlamaIndex plugins speak LlamaIndex: DiversifyRetriever wraps any BaseRetriever, uses
``similarity_top_k``, the postprocessor uses ``top_n``; typos and bad values fail at construction;
an int-keyed cluster map survives to_dict / from_dict.

Against the real llama-index-core (VectorStoreIndex, VectorIndexRetriever, QueryFusionRetriever,
SummaryIndex, MockLLM), no mocks of LlamaIndex itself.
"""

from __future__ import annotations

import asyncio
import copy

import pytest

pytest.importorskip("llama_index.core", reason="llama-index-core is not installed")

from contract import make_corpus, oracle_select  # noqa: E402
from contract.llama import vector_index  # noqa: E402  (puts the plugins on sys.path)
from llama_index.core import SummaryIndex  # noqa: E402
from llama_index.core.base.base_retriever import BaseRetriever  # noqa: E402
from llama_index.core.llms import MockLLM  # noqa: E402
from llama_index.core.retrievers import QueryFusionRetriever  # noqa: E402
from llama_index.core.schema import NodeWithScore, TextNode  # noqa: E402
from llama_index.core.vector_stores.types import (  # noqa: E402
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)
from llama_index.postprocessor.diversify import DiversifyPostprocessor  # noqa: E402
from llama_index.retrievers.diversify import DiversifyRetriever  # noqa: E402

from diversify.errors import ConfigError  # noqa: E402

QUERY = "__query__"


def _nodes(corpus):
    return [TextNode(id_=f"n{i}", text=t, metadata={"uid": i}, excluded_embed_metadata_keys=["uid"])
            for i, t in zip(corpus.ids, corpus.texts)]


@pytest.fixture(scope="module")
def corpus():
    return make_corpus(seed=11)


@pytest.fixture(scope="module")
def index(corpus):
    table = dict(zip(corpus.texts, corpus.vectors))
    table[QUERY] = corpus.query
    return vector_index(_nodes(corpus), table)


def _uids(nodes):
    return [n.node.metadata["uid"] for n in nodes]


# ---------------------------------------------------------------------- any retriever


def test_a_vector_index_retriever_is_wrapped_and_refilled_keeping_its_filters(corpus, index):
    odd = [i for i in corpus.ids if i % 2]
    filters = MetadataFilters(filters=[MetadataFilter(key="uid", value=odd, operator=FilterOperator.IN)])
    wrapped = index.as_retriever(similarity_top_k=6, filters=filters)
    ranked_odd = [i for i in corpus.ranked_ids if i % 2]
    assert len(oracle_select(ranked_odd[:6], corpus.cluster_of, k=6)) < 6, "the first fetch must be short"
    retriever = DiversifyRetriever(wrapped, cluster_map=corpus.cluster_map, id_field="uid", fetch_k=6, max_rounds=8)
    assert retriever.similarity_top_k == 6, "the wrapped retriever's own similarity_top_k is the default"
    nodes, result = retriever.retrieve_with_result(QUERY)
    assert _uids(nodes) == oracle_select(ranked_odd, corpus.cluster_of, k=6)
    assert result.backend_calls >= 2 and not result.short, result
    assert wrapped.similarity_top_k == 6, "the caller's retriever was changed"
    anodes, aresult = asyncio.run(retriever.aretrieve_with_result(QUERY))
    assert _uids(anodes) == _uids(nodes) and aresult.backend_calls == result.backend_calls
    assert _uids(retriever.retrieve(QUERY)) == _uids(nodes)


def test_a_wrapped_vector_index_retriever_gets_the_exclusion_anded_to_its_own_filters(corpus, index):
    """exclude_key on a wrapped VectorIndexRetriever: refetches push the NIN exclusion down AND-ed
    with the retriever's own filters (never instead of them), on a copy."""
    odd = [i for i in corpus.ids if i % 2]
    filters = MetadataFilters(filters=[MetadataFilter(key="uid", value=odd, operator=FilterOperator.IN)])
    wrapped = index.as_retriever(similarity_top_k=6, filters=filters)
    ranked_odd = [i for i in corpus.ranked_ids if i % 2]
    retriever = DiversifyRetriever(wrapped, cluster_map=corpus.cluster_map, id_field="uid", exclude_key="uid",
                                   fetch_k=6, max_rounds=8, refill="exclude")
    assert "exclusion" in retriever.refill_how
    nodes, result = retriever.retrieve_with_result(QUERY)
    assert _uids(nodes) == oracle_select(ranked_odd, corpus.cluster_of, k=6)
    assert result.backend_calls >= 2 and not result.short, result
    assert retriever._refill.pushes_down, retriever._refill  # the store took the AND-ed filters
    assert wrapped._filters is filters and len(filters.filters) == 1, "the caller's filters were changed"
    anodes, _ = asyncio.run(retriever.aretrieve_with_result(QUERY))
    assert _uids(anodes) == _uids(nodes)


def test_a_wrapped_retrievers_or_filter_is_kept_by_growing_k_where_nesting_is_refused(corpus, index, caplog):
    """An OR filter on SimpleVectorStore cannot take the exclusion (no nesting): refetches grow k
    under the retriever's own OR filter, which still holds on every call."""
    low = [i for i in corpus.ids if i % 3 == 0]
    either = MetadataFilters(filters=[MetadataFilter(key="uid", value=low, operator=FilterOperator.IN),
                                      MetadataFilter(key="uid", value=-1, operator=FilterOperator.EQ)],
                             condition=FilterCondition.OR)
    wrapped = index.as_retriever(similarity_top_k=6, filters=either)
    retriever = DiversifyRetriever(wrapped, cluster_map=corpus.cluster_map, id_field="uid", exclude_key="uid",
                                   fetch_k=6, max_rounds=8)
    with caplog.at_level("WARNING", logger="diversify"):
        nodes, result = retriever.retrieve_with_result(QUERY)
    allowed = [i for i in corpus.ranked_ids if i % 3 == 0]
    assert _uids(nodes) == oracle_select(allowed, corpus.cluster_of, k=6)
    assert result.backend_calls >= 2 and not retriever._refill.pushes_down
    assert "nested MetadataFilters" in caplog.text


def test_a_query_fusion_retriever_is_refilled_through_the_retrievers_it_fuses(corpus, index):
    first, second = index.as_retriever(similarity_top_k=6), index.as_retriever(similarity_top_k=3)
    fusion = QueryFusionRetriever([first, second], llm=MockLLM(), num_queries=1, use_async=False,
                                  similarity_top_k=6)
    assert len(oracle_select(_uids(fusion.retrieve(QUERY)), corpus.cluster_of, k=6)) < 6
    retriever = DiversifyRetriever(fusion, cluster_map=corpus.cluster_map, id_field="uid", fetch_k=6, max_rounds=8)
    nodes, result = retriever.retrieve_with_result(QUERY)
    assert _uids(nodes) == oracle_select(corpus.ranked_ids, corpus.cluster_of, k=6)
    assert result.backend_calls >= 2 and not result.short
    assert (fusion.similarity_top_k, first.similarity_top_k, second.similarity_top_k) == (6, 6, 3)


def test_a_retriever_that_cannot_give_more_is_called_once_and_says_exhausted(corpus):
    summary = SummaryIndex(_nodes(corpus)).as_retriever()  # returns every node, has no size
    listed = _uids(summary.retrieve(QUERY))
    retriever = DiversifyRetriever(summary, cluster_map=corpus.cluster_map, id_field="uid", similarity_top_k=6)
    assert retriever.refill_how is None
    nodes, result = retriever.retrieve_with_result(QUERY)
    assert _uids(nodes) == oracle_select(listed, corpus.cluster_of, k=6)
    assert result.backend_calls == 1 and result.rounds == 0 and not result.exhausted
    everything, result = retriever.retrieve_with_result(QUERY, k=500)
    assert len(everything) == corpus.distinct_available(1) and result.exhausted and result.backend_calls == 1


class _Fixed(BaseRetriever):
    """A retriever with no size to change, counting its calls."""

    def __init__(self, nodes):
        super().__init__()
        self.nodes, self.calls = nodes, 0

    def _retrieve(self, query_bundle):
        self.calls += 1
        return list(self.nodes)


def test_a_custom_fixed_retriever_reports_what_it_folded(corpus):
    ranked = corpus.ranked_ids[:12]
    fixed = _Fixed([NodeWithScore(node=TextNode(id_=f"n{i}", text="x", metadata={"uid": i}), score=1.0 - r / 100)
                    for r, i in enumerate(ranked)])
    nodes, result = DiversifyRetriever(fixed, cluster_map=corpus.cluster_map, id_field="uid",
                                       similarity_top_k=12).retrieve_with_result(QUERY)
    assert fixed.calls == 1 and result.backend_calls == 1 and result.exhausted
    assert _uids(nodes) == oracle_select(ranked, corpus.cluster_of, k=12)
    assert sum(n.node.metadata["diversify"]["omitted"] for n in nodes) == len(ranked) - len(nodes) > 0


# ---------------------------------------------------------------------- names and deprecations


def test_retriever_k_and_index_are_deprecated_aliases(corpus, index):
    new = DiversifyRetriever(index, cluster_map=corpus.cluster_map, id_field="uid", similarity_top_k=5)
    with pytest.warns(DeprecationWarning, match="similarity_top_k"):
        old = DiversifyRetriever(index, cluster_map=corpus.cluster_map, id_field="uid", k=5)
    with pytest.warns(DeprecationWarning, match="retriever"):
        by_keyword = DiversifyRetriever(index=index, cluster_map=corpus.cluster_map, id_field="uid",
                                        similarity_top_k=5)
    assert _uids(old.retrieve(QUERY)) == _uids(new.retrieve(QUERY)) == _uids(by_keyword.retrieve(QUERY))
    assert len(_uids(new.retrieve(QUERY))) == 5
    with pytest.raises(ConfigError, match="both"):
        DiversifyRetriever(index, cluster_map={}, k=5, similarity_top_k=5)


def test_postprocessor_takes_top_n_and_keeps_top_k_as_a_deprecated_alias(corpus, index):
    nodes = index.as_retriever(similarity_top_k=15).retrieve(QUERY)
    expected = oracle_select(_uids(nodes), corpus.cluster_of, k=3)
    pp = DiversifyPostprocessor(cluster_map=corpus.cluster_map, id_field="uid", top_n=3)
    assert _uids(pp.postprocess_nodes(nodes, query_str=QUERY)) == expected
    with pytest.warns(DeprecationWarning, match="top_n"):
        old = DiversifyPostprocessor(cluster_map=corpus.cluster_map, id_field="uid", top_k=3)
    assert old.top_n == 3 and _uids(old.postprocess_nodes(nodes, query_str=QUERY)) == expected
    with pytest.warns(DeprecationWarning, match="top_n"):  # a config saved with the old name still loads
        loaded = DiversifyPostprocessor.from_dict({"cluster_map": {"a": 0}, "top_k": 3, "class_name": "x"})
    assert loaded.top_n == 3 and "top_k" not in loaded.to_dict()


@pytest.mark.parametrize("kwargs,match", [
    ({"k": 3}, "top_n"),
    ({"similarity_top_k": 3}, "top_n"),
    ({"topn": 3}, "top_n"),
    ({"max_per_clusters": 2}, "max_per_cluster"),
    ({"top_n": 0}, "top_n"),
    ({"top_n": "3"}, "top_n"),
    ({"max_per_cluster": 0}, "max_per_cluster"),
    ({"fold_threshold": 1.5}, "fold_threshold"),
    ({"top_k": 3, "top_n": 3}, "both"),
])
def test_postprocessor_refuses_unknown_and_bad_arguments_at_construction(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        DiversifyPostprocessor(**{"cluster_map": {}, **kwargs})


@pytest.mark.parametrize("kwargs,match", [
    ({"top_n": 5}, "similarity_top_k"),
    ({"top_k": 5}, "similarity_top_k"),
    ({"similarity_topk": 5}, "similarity_top_k"),
    ({"max_round": 2}, "max_rounds"),
    ({"similarity_top_k": 0}, "k"),
    ({"similarity_top_k": "5"}, "k"),
    ({"similarity_top_k": 5, "fetch_k": 2}, "fetch_k"),
    ({"max_rounds": -1}, "max_rounds"),
    ({"max_per_cluster": 0}, "max_per_cluster"),
    ({"fold_threshold": 3.0}, "fold_threshold"),
    ({"id_source": "doc_id"}, "id_source"),
    ({"filters": {"uid": 1}}, "MetadataFilters"),
    ({"retriever_kwargs": {"similarity_top_k": 3}}, "similarity_top_k"),
    ({"retriever_kwargs": ["filters"]}, "retriever_kwargs"),
    ({"retriever_kwargs": {"filter": MetadataFilters(filters=[])}}, "filters"),  # ignored by the index otherwise
    ({"retriever_kwargs": {"vector_store_query_mod": "default"}}, "vector_store_query_mode"),
])
def test_retriever_refuses_unknown_and_bad_arguments_at_construction(index, kwargs, match):
    with pytest.raises(ConfigError, match=match):
        DiversifyRetriever(index, **{"cluster_map": {}, **kwargs})


def test_valid_retriever_kwargs_are_accepted(corpus, index):
    retriever = DiversifyRetriever(index, cluster_map=corpus.cluster_map, id_field="uid", similarity_top_k=4,
                                   retriever_kwargs={"vector_store_query_mode": "default", "vector_store_kwargs": {}})
    assert len(retriever.retrieve(QUERY)) == 4


def test_index_only_options_are_refused_for_a_wrapped_retriever(index):
    wrapped = index.as_retriever()
    for kwargs in ({"filters": MetadataFilters(filters=[])}, {"retriever_kwargs": {}}):
        with pytest.raises(ConfigError, match=next(iter(kwargs))):
            DiversifyRetriever(wrapped, cluster_map={}, **kwargs)
    # exclude_key needs a retriever whose own filters can carry the exclusion (a VectorIndexRetriever)
    fusion = QueryFusionRetriever([wrapped], llm=MockLLM(), num_queries=1, use_async=False)
    with pytest.raises(ConfigError, match="exclude_key"):
        DiversifyRetriever(fusion, cluster_map={}, exclude_key="uid")
    with pytest.raises(ConfigError, match="refill='exclude'"):
        DiversifyRetriever(fusion, cluster_map={}, refill="exclude")
    with pytest.raises(ConfigError, match="BaseRetriever"):
        DiversifyRetriever(object(), cluster_map={})


# ---------------------------------------------------------------------- serialization


@pytest.mark.parametrize("mapping", [{1: 0, 2: 0, 3: 7}, {"a": 0, 2: 0, 3: 7}], ids=["int", "mixed"])
def test_postprocessor_cluster_map_with_non_string_ids_round_trips(mapping):
    pp = DiversifyPostprocessor(cluster_map=mapping, id_field="uid")
    data = copy.deepcopy(pp.to_dict())
    back = DiversifyPostprocessor.from_dict(data)
    assert back.cluster_map == mapping and back.to_dict() == pp.to_dict()
    nodes = [NodeWithScore(node=TextNode(id_=f"x{j}", text="t", metadata={"uid": key}), score=1.0 - j / 10)
             for j, key in enumerate(mapping)]
    assert _uids(back.postprocess_nodes(nodes)) == _uids(pp.postprocess_nodes(nodes)) == [list(mapping)[0], 3]
    assert DiversifyPostprocessor.from_json(pp.to_json()).cluster_map == mapping


# ---------------------------------------------------------------------- exclude_key the stores overwrite

_OVERWRITTEN = ("doc_id", "document_id", "ref_doc_id")


@pytest.mark.parametrize("key", _OVERWRITTEN)
def test_an_exclude_key_the_vector_store_overwrites_cannot_exclude(corpus, key):
    """Why it is refused: LlamaIndex stores a node's ref_doc_id under these keys, over the node's own
    value, so a filter on them does not see the ids the hits report (here: it excludes nothing)."""
    nodes = [TextNode(id_=f"n{i}", text=t, metadata={key: i}, excluded_embed_metadata_keys=[key])
             for i, t in zip(corpus.ids, corpus.texts)]
    table = dict(zip(corpus.texts, corpus.vectors))
    table[QUERY] = corpus.query
    idx = vector_index(nodes, table)
    seen = [n.node.metadata[key] for n in idx.as_retriever(similarity_top_k=5).retrieve(QUERY)]
    again = idx.as_retriever(similarity_top_k=5, filters=MetadataFilters(filters=[
        MetadataFilter(key=key, value=seen, operator=FilterOperator.NIN)])).retrieve(QUERY)
    assert [n.node.metadata[key] for n in again] == seen  # the exclusion skipped none of them
    with pytest.raises(ConfigError, match=f"exclude_key={key!r}.*ref_doc_id.*chunk_id"):
        DiversifyRetriever(idx, cluster_map=corpus.cluster_map, id_field=key, exclude_key=key)


def test_an_exclude_key_of_the_nodes_own_or_for_whole_documents_is_accepted(corpus, index):
    own = DiversifyRetriever(index, cluster_map=corpus.cluster_map, id_field="uid", exclude_key="uid",
                             similarity_top_k=6)
    assert _uids(own.retrieve(QUERY)) == oracle_select(corpus.ranked_ids, corpus.cluster_of, k=6)
    assert own.refill_how == "store-side exclusion (NIN filter)", "the exclusion goes to the store"
    for key in _OVERWRITTEN:  # documents as the unit: the source-document id is what is excluded
        whole = DiversifyRetriever(index, cluster_map=corpus.cluster_map, id_source="ref_doc_id", exclude_key=key,
                                   similarity_top_k=6)
        assert whole.refill_how == own.refill_how and whole.similarity_top_k == 6, key
