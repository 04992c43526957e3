"""diversify-haystack speaks Haystack: rankers' top_k=10, the wrapped retriever's own inputs, configs
that round-trip (Pipeline.dumps / loads) whatever the ids' type, and settings checked at construction.

Against the real haystack-ai (InMemoryDocumentStore, InMemoryBM25Retriever,
InMemoryEmbeddingRetriever, Pipeline, YAML), no mocks.
"""

from __future__ import annotations

import copy
import itertools
import pathlib
import sys

import numpy as np
import pytest

pytest.importorskip("haystack", reason="haystack-ai is not installed")

_SRC = pathlib.Path(__file__).resolve().parents[1] / "src"
if str(_SRC) not in sys.path:
    sys.path.insert(0, str(_SRC))

from contract import make_corpus, oracle_select  # noqa: E402
from haystack import Document, Pipeline, component  # noqa: E402
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever, InMemoryEmbeddingRetriever  # noqa: E402
from haystack.document_stores.in_memory import InMemoryDocumentStore  # noqa: E402
from haystack_integrations.components.rankers.diversify import DiversifyRanker  # noqa: E402
from haystack_integrations.components.retrievers.diversify import DiversifyRetriever  # noqa: E402

from diversify.errors import ConfigError, InputError  # noqa: E402

_names = itertools.count()


@pytest.fixture(scope="module")
def corpus():
    return make_corpus(seed=11)


@pytest.fixture(scope="module")
def store(corpus):
    store = InMemoryDocumentStore(index=f"diversify-idioms-{next(_names)}")
    store.write_documents([Document(id=f"d{i}", content=t, meta={"uid": i}, embedding=v.tolist())
                           for i, t, v in zip(corpus.ids, corpus.texts, corpus.vectors)])
    return store


def _int_map(corpus):
    """The contract corpus's clusters as a plain mapping keyed by the int ``meta["uid"]``."""
    return {int(i): int(c) for i, c in corpus.cluster_of.items()}


# ---------------------------------------------------------------------- ranker default top_k


def test_ranker_returns_ten_by_default_like_haystack_rankers():
    docs = [Document(id=str(j), content=f"text {j}", meta={"grp": j}) for j in range(30)]
    ranker = DiversifyRanker(cluster_field="grp")
    assert ranker.top_k == 10 and ranker.to_dict()["init_parameters"]["top_k"] == 10
    assert [d.id for d in ranker.run(documents=docs)["documents"]] == [str(j) for j in range(10)]
    assert len(DiversifyRanker(cluster_field="grp", top_k=None).run(documents=docs)["documents"]) == 30
    assert len(ranker.run(documents=docs, top_k=3)["documents"]) == 3


# ---------------------------------------------------------------------- serialization of the cluster map


@pytest.mark.parametrize("mapping", [
    {1: 0, 2: 0, 3: 1},                                  # int ids (a meta field)
    {"a": 0, 1: 0, 2: 5},                                # mixed
    {np.int64(1): np.int64(0), np.int64(2): np.int64(0)},  # numpy scalars from an array
], ids=["int", "mixed", "numpy"])
def test_cluster_map_round_trips_through_pipeline_yaml(mapping):
    pipe = Pipeline()
    pipe.add_component("ranker", DiversifyRanker(cluster_map=mapping, id_field="uid", top_k=None))
    loaded = Pipeline.loads(pipe.dumps())
    back = loaded.get_component("ranker").cluster_map
    plain = {k.item() if isinstance(k, np.generic) else k: int(v) for k, v in mapping.items()}
    assert back == plain and [type(k) for k in back] == [type(k) for k in plain]
    docs = [Document(id=f"x{j}", content=f"t{j}", meta={"uid": key}) for j, key in enumerate(plain)]
    expected = oracle_select(list(plain), plain, k=len(plain))
    got = loaded.run({"ranker": {"documents": docs}})["ranker"]["documents"]
    assert [d.meta["uid"] for d in got] == expected and len(expected) < len(plain)


def test_retriever_with_an_int_keyed_map_round_trips_and_answers_the_same(corpus, store):
    pipe = Pipeline()
    pipe.add_component("retriever", DiversifyRetriever(InMemoryEmbeddingRetriever(store), cluster_map=_int_map(corpus),
                                                       id_field="uid", top_k=6, fetch_k=6, max_rounds=8))
    text = pipe.dumps()
    loaded = Pipeline.loads(text)
    query = {"retriever": {"query_embedding": corpus.query.tolist()}}
    out, again = pipe.run(query)["retriever"], loaded.run(query)["retriever"]
    assert [d.id for d in again["documents"]] == [d.id for d in out["documents"]]
    assert [d.meta["uid"] for d in out["documents"]] == oracle_select(corpus.ranked_ids, corpus.cluster_of, k=6)
    data = pipe.get_component("retriever").to_dict()
    assert DiversifyRetriever.from_dict(copy.deepcopy(data)).to_dict() == data


@pytest.mark.parametrize("bad,match", [
    ([[1, 0], [2]], "pairs"),
    ([1, 2], "pairs"),
    ([[1, 0], [1, 2]], "twice"),
])
def test_a_malformed_pair_list_is_refused(bad, match):
    with pytest.raises(ConfigError, match=match):
        DiversifyRanker(cluster_map=bad)


# ---------------------------------------------------------------------- the wrapped retriever's own inputs


def test_wrapped_retrievers_run_inputs_are_exposed_and_passed_on(corpus, store):
    retriever = DiversifyRetriever(InMemoryEmbeddingRetriever(store), cluster_map=corpus.cluster_map, id_field="uid",
                                   top_k=5)
    sockets = retriever.__haystack_input__._sockets_dict
    assert {"scale_score", "return_embedding"} <= set(sockets)
    pipe = Pipeline()
    pipe.add_component("retriever", retriever)
    q = corpus.query.tolist()
    plain = pipe.run({"retriever": {"query_embedding": q}})["retriever"]["documents"]
    with_emb = pipe.run({"retriever": {"query_embedding": q, "return_embedding": True}})["retriever"]["documents"]
    assert all(d.embedding is None for d in plain) and all(d.embedding is not None for d in with_emb)
    raw = pipe.run({"retriever": {"query_embedding": q, "scale_score": False}})["retriever"]["documents"]
    scaled = pipe.run({"retriever": {"query_embedding": q, "scale_score": True}})["retriever"]["documents"]
    assert [d.id for d in raw] == [d.id for d in scaled] and [d.score for d in raw] != [d.score for d in scaled]
    with pytest.raises(InputError, match="return_embeddings"):
        retriever.run(query_embedding=q, return_embeddings=True)


def test_run_time_return_embedding_lets_fold_threshold_act():
    emb = {"a": [1.0, 0.0, 0.0], "a-new": [0.99, 0.05, 0.0], "b": [0.0, 1.0, 0.0], "c": [0.0, 0.0, 1.0]}
    store = InMemoryDocumentStore(index=f"diversify-idioms-{next(_names)}")
    store.write_documents([Document(id=i, content=i, embedding=v) for i, v in emb.items()])
    retriever = DiversifyRetriever(InMemoryEmbeddingRetriever(store), cluster_map={}, top_k=3, fetch_k=3,
                                   fold_threshold=0.95)
    out = retriever.run(query_embedding=[1.0, 0.1, 0.05], return_embedding=True)
    assert [d.id for d in out["documents"]] == ["a", "b", "c"]
    assert out["documents"][0].meta["diversify"]["omitted_ids"] == ["a-new"]


def test_bm25_scale_score_is_passed_on():
    store = InMemoryDocumentStore(index=f"diversify-idioms-{next(_names)}")
    store.write_documents([Document(id=str(j), content=f"alpha beta {'gamma ' * j}") for j in range(6)])
    inner = InMemoryBM25Retriever(store)
    retriever = DiversifyRetriever(inner, cluster_field="none", top_k=3, fetch_k=3)
    for scale in (True, False):
        ours = retriever.run(query="gamma", scale_score=scale)["documents"]
        theirs = inner.run(query="gamma", top_k=3, scale_score=scale)["documents"]
        assert [(d.id, d.score) for d in ours] == [(d.id, d.score) for d in theirs]
    assert retriever.run(query="gamma", scale_score=True)["documents"][0].score != theirs[0].score


# ---------------------------------------------------------------------- construction-time checks


@pytest.mark.parametrize("kwargs,match", [
    ({"top_k": 0}, "k"),
    ({"top_k": "5"}, "k"),
    ({"top_k": True}, "k"),
    ({"fetch_k": 2, "top_k": 5}, "fetch_k"),
    ({"max_rounds": -1}, "max_rounds"),
    ({"max_rounds": 2.5}, "max_rounds"),
    ({"max_per_cluster": 0}, "max_per_cluster"),
    ({"fold_threshold": 2.0}, "fold_threshold"),
])
def test_retriever_settings_fail_at_construction(store, kwargs, match):
    with pytest.raises(ConfigError, match=match):
        DiversifyRetriever(InMemoryEmbeddingRetriever(store), **{"cluster_map": {}, **kwargs})


@pytest.mark.parametrize("kwargs,match", [
    ({"fold_threshold": 2.0}, "fold_threshold"),
    ({"fold_threshold": "0.9"}, "fold_threshold"),
])
def test_ranker_settings_fail_at_construction(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        DiversifyRanker(**{"cluster_map": {}, **kwargs})


@component
class _NoTopK:
    @component.output_types(documents=list[Document])
    def run(self, query: str, filters: dict | None = None):
        return {"documents": []}


@component
class _NoFilters:
    @component.output_types(documents=list[Document])
    def run(self, query: str, top_k: int = 10):
        return {"documents": []}


def test_a_retriever_without_top_k_or_filters_is_refused_at_construction():
    with pytest.raises(ConfigError, match="top_k"):
        DiversifyRetriever(_NoTopK(), cluster_map={})
    with pytest.raises(ConfigError, match="exclude_seen=False"):
        DiversifyRetriever(_NoFilters(), cluster_map={})
    assert DiversifyRetriever(_NoFilters(), cluster_map={}, exclude_seen=False).run(query="x")["documents"] == []
