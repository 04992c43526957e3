"""llama-index-postprocessor-diversify against the real llama-index-core (VectorStoreIndex, no mocks
of LlamaIndex itself; the embedding is llama-index-core's MockEmbedding made content-dependent).

The plugins are imported from their source folders; in CI they can also be installed with
``pip install -e integrations/llama-index-postprocessor-diversify`` and
``pip install -e integrations/llama-index-retrievers-diversify``. Skips only when
llama-index-core is not importable.
"""

from __future__ import annotations

import asyncio
import copy

import pytest

pytest.importorskip("llama_index.core", reason="llama-index-core is not installed (pip install 'diversify-retrieval[llamaindex]')")

from contract import PluginContract, make_corpus, oracle_select  # noqa: E402
from contract.llama import vector_index  # noqa: E402  (puts the plugins on sys.path)
from llama_index.core.schema import MetadataMode, NodeWithScore, TextNode  # noqa: E402
from llama_index.core.vector_stores.types import FilterCondition, FilterOperator, MetadataFilter, MetadataFilters  # noqa: E402
from llama_index.postprocessor.diversify import DiversifyPostprocessor  # noqa: E402
from llama_index.retrievers.diversify import DiversifyRetriever  # noqa: E402

from diversify.errors import ConfigError, InputError  # noqa: E402

QUERY = "__query__"


def _index(corpus):
    table = {t: v for t, v in zip(corpus.texts, corpus.vectors)}
    table[QUERY] = corpus.query
    nodes = [TextNode(id_=f"n{i}", text=t, metadata={**copy.deepcopy(p), "uid": i},
                      excluded_embed_metadata_keys=["title", "tags", "uid"])
             for i, t, p in zip(corpus.ids, corpus.texts, corpus.payloads)]
    return vector_index(nodes, table)


class TestRetrieverContract(PluginContract):
    refills = True

    def run(self, corpus, *, k, max_per_cluster):
        retriever = DiversifyRetriever(_index(corpus), cluster_map=corpus.cluster_map, id_field="uid",
                                       exclude_key="uid", similarity_top_k=k, max_per_cluster=max_per_cluster, max_rounds=8)
        return [n.node.metadata["uid"] for n in retriever.retrieve(QUERY)]

    def run_fixed(self, corpus, ranked_ids, *, k, max_per_cluster):
        text = dict(zip(corpus.ids, corpus.texts))
        nodes = [NodeWithScore(node=TextNode(id_=f"n{i}", text=text[i], metadata={"uid": i}), score=1.0 - 0.01 * r)
                 for r, i in enumerate(ranked_ids)]
        pp = DiversifyPostprocessor(cluster_map=corpus.cluster_map, id_field="uid", top_n=k,
                                    max_per_cluster=max_per_cluster)
        return [n.node.metadata["uid"] for n in pp.postprocess_nodes(nodes, query_str=QUERY)]


@pytest.fixture(scope="module")
def corpus():
    return make_corpus(seed=11)


@pytest.fixture(scope="module")
def index(corpus):
    return _index(corpus)


@pytest.mark.parametrize("exclude", [True, False], ids=["nin-filter", "larger-k"])
def test_refills_when_the_first_fetch_is_short_and_reports_backend_calls(corpus, index, exclude):
    k = 8
    first = [n.node.metadata["uid"] for n in index.as_retriever(similarity_top_k=k).retrieve(QUERY)]
    assert len(oracle_select(first, corpus.cluster_of, k=k)) < k, "the first fetch must be short for this test"
    retriever = DiversifyRetriever(index, cluster_map=corpus.cluster_map, id_field="uid", similarity_top_k=k, fetch_k=k,
                                   max_rounds=8, exclude_key="uid" if exclude else None)
    nodes, result = retriever.retrieve_with_result(QUERY)
    assert [n.node.metadata["uid"] for n in nodes] == oracle_select(corpus.ranked_ids, corpus.cluster_of, k=k)
    assert result.backend_calls >= 2 and result.backend_calls == result.rounds + 1, result
    assert not result.short
    if exclude:  # the store really left out what was seen: nothing came back twice
        assert retriever.diversifier.stats()["fetched"] == result.considered, retriever.diversifier.stats()
    print(f"llamaindex refill ({'NIN filter' if exclude else 'larger k'}): backend_calls={result.backend_calls}")


def test_async_retrieve_matches_sync(corpus, index):
    retriever = DiversifyRetriever(index, cluster_map=corpus.cluster_map, id_field="uid", exclude_key="uid",
                                   similarity_top_k=7, fetch_k=7, max_rounds=8)
    nodes, result = asyncio.run(retriever.aretrieve_with_result(QUERY))
    assert result.backend_calls >= 2
    assert [n.node_id for n in nodes] == [n.node_id for n in retriever.retrieve(QUERY)]
    assert [n.node_id for n in asyncio.run(retriever.aretrieve(QUERY))] == [n.node_id for n in nodes]


def test_exclusion_combines_with_the_callers_filters(corpus, index):
    # keep only documents whose id is odd, through the caller's own filter
    odd = [i for i in corpus.ids if i % 2]
    filters = MetadataFilters(filters=[MetadataFilter(key="uid", value=odd, operator=FilterOperator.IN)])
    retriever = DiversifyRetriever(index, cluster_map=corpus.cluster_map, id_field="uid", exclude_key="uid",
                                   filters=filters, similarity_top_k=6, fetch_k=6, max_rounds=8)
    nodes, result = retriever.retrieve_with_result(QUERY)
    ranked_odd = [i for i in corpus.ranked_ids if i % 2]
    assert [n.node.metadata["uid"] for n in nodes] == oracle_select(ranked_odd, corpus.cluster_of, k=6)


def test_postprocessor_keeps_better_ranked_copy_ids_and_leaves_nodes_unchanged(corpus, index):
    nodes = index.as_retriever(similarity_top_k=15).retrieve(QUERY)
    before = [n.model_copy(deep=True) for n in nodes]
    pp = DiversifyPostprocessor(cluster_map=corpus.cluster_map, id_field="uid")
    out = pp.postprocess_nodes(nodes, query_str=QUERY)
    ranked = [n.node.metadata["uid"] for n in nodes]
    assert [n.node.metadata["uid"] for n in out] == oracle_select(ranked, corpus.cluster_of, k=len(ranked))
    first = out[0]
    assert first.node_id == nodes[0].node_id and first.score == nodes[0].score
    folded = [i for i in ranked if corpus.cluster_of.get(i) == corpus.cluster_of[ranked[0]]][1:]
    assert first.node.metadata["diversify"] == {"cluster_id": corpus.cluster_of[ranked[0]],
                                                "omitted": len(folded), "omitted_ids": folded}
    # the annotation never reaches the prompt or the embedding
    assert "diversify" not in first.node.get_content(metadata_mode=MetadataMode.LLM)
    assert "diversify" not in first.node.get_content(metadata_mode=MetadataMode.EMBED)
    assert all(o.node is not n.node for o in out for n in nodes)
    assert [n.model_dump() for n in nodes] == [n.model_dump() for n in before], "input nodes were modified"


def test_postprocessor_with_a_query_engine_style_pipeline(corpus, index):
    pp = DiversifyPostprocessor(cluster_map=corpus.cluster_map, id_field="uid", top_n=5)
    retriever = index.as_retriever(similarity_top_k=15)
    out = pp.postprocess_nodes(retriever.retrieve(QUERY), query_str=QUERY)
    ranked = [n.node.metadata["uid"] for n in retriever.retrieve(QUERY)]
    assert [n.node.metadata["uid"] for n in out] == oracle_select(ranked, corpus.cluster_of, k=5)
    assert asyncio.run(pp.apostprocess_nodes(retriever.retrieve(QUERY), query_str=QUERY)) == out


def test_ref_doc_id_and_serialization(tmp_path):
    nodes = [NodeWithScore(node=TextNode(id_=f"chunk-{j}", text=f"t{j}"), score=1.0 - j / 10) for j in range(4)]
    for j, n in enumerate(nodes):
        n.node.relationships = {}
        n.node.metadata["src"] = "A" if j < 2 else f"B{j}"
    pp = DiversifyPostprocessor(cluster_field="src")
    assert [n.node_id for n in pp.postprocess_nodes(nodes)] == ["chunk-0", "chunk-2", "chunk-3"]
    data = DiversifyPostprocessor(cluster_map={"a": 0}, top_n=3).to_dict()
    assert data["cluster_map"] == {"a": 0} and data["top_n"] == 3 and data["class_name"] == "DiversifyPostprocessor"
    from diversify import build
    from diversify.artifact import load

    in_memory = build(texts=["one two three four five six"], ids=["x"]).cluster_map
    with pytest.raises(ValueError, match="save"):  # pydantic wraps the ConfigError
        DiversifyPostprocessor(cluster_map=in_memory).to_dict()
    in_memory.save(tmp_path / "c.dvf")
    saved = DiversifyPostprocessor(cluster_map=load(tmp_path / "c.dvf")).to_dict()
    assert saved["cluster_map"] == str(tmp_path / "c.dvf")
    assert DiversifyPostprocessor.from_dict(saved).postprocess_nodes(nodes[:1])[0].node_id == "chunk-0"
    with pytest.raises(InputError, match="ref_doc_id"):
        DiversifyPostprocessor(cluster_map={"a": 0}, id_source="ref_doc_id").postprocess_nodes(nodes)


def test_clear_errors(index):
    with pytest.raises(ConfigError, match="cluster_map"):
        DiversifyPostprocessor().postprocess_nodes([NodeWithScore(node=TextNode(text="x"), score=1.0)])
    with pytest.raises(ConfigError, match="cluster_map"):
        DiversifyRetriever(index)
    assert DiversifyPostprocessor(cluster_field="c").postprocess_nodes([]) == []


def test_fold_threshold_folds_nodes_the_artifact_does_not_know():
    emb = {"a": [1.0, 0.0, 0.0], "a-new": [0.99, 0.05, 0.0], "b": [0.0, 1.0, 0.0]}
    nodes = [NodeWithScore(node=TextNode(id_=i, text=i, embedding=v), score=1.0 - j / 10)
             for j, (i, v) in enumerate(emb.items())]
    out = DiversifyPostprocessor(cluster_map={}, fold_threshold=0.95).postprocess_nodes(nodes)
    assert [n.node_id for n in out] == ["a", "b"]
    assert out[0].node.metadata["diversify"]["omitted_ids"] == ["a-new"]
    assert [n.node_id for n in DiversifyPostprocessor(cluster_map={}).postprocess_nodes(nodes)] == list(emb)


def test_filters_and_retriever_kwargs_filters_are_both_kept(corpus, index):
    """Both user filters apply (AND) on the first call and on every refill; before, `filters`
    replaced `retriever_kwargs['filters']`."""
    even = MetadataFilters(filters=[MetadataFilter(key="parity", value=0, operator=FilterOperator.EQ)])
    low = MetadataFilters(filters=[MetadataFilter(key="uid", value=1040, operator=FilterOperator.LT)])
    idx = _index_with_parity(corpus)
    retriever = DiversifyRetriever(idx, cluster_map=corpus.cluster_map, id_field="uid", exclude_key="uid", similarity_top_k=5,
                                   fetch_k=5, max_rounds=8, filters=even, retriever_kwargs={"filters": low})
    nodes, res = retriever.retrieve_with_result(QUERY)
    allowed = [i for i in corpus.ranked_ids if i % 2 == 0 and i < 1040]
    assert [n.node.metadata["uid"] for n in nodes] == oracle_select(allowed, corpus.cluster_of, k=5)
    assert res.backend_calls >= 2
    either = MetadataFilters(filters=even.filters + low.filters, condition=FilterCondition.OR)
    with pytest.raises(ConfigError, match="nested MetadataFilters"):
        DiversifyRetriever(idx, cluster_map=corpus.cluster_map, filters=either, retriever_kwargs={"filters": either})


def _index_with_parity(corpus):
    table = {t: v for t, v in zip(corpus.texts, corpus.vectors)}
    table[QUERY] = corpus.query
    nodes = [TextNode(id_=f"n{i}", text=t, metadata={"uid": i, "parity": i % 2}, excluded_embed_metadata_keys=["uid", "parity"])
             for i, t in zip(corpus.ids, corpus.texts)]
    return vector_index(nodes, table)
