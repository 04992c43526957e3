"""diversify-haystack against the real haystack-ai (InMemoryDocumentStore pipelines, no mocks).

The components are imported from their source folder (integrations/diversify-haystack/src); in
CI they can also be installed with ``pip install -e integrations/diversify-haystack``. Skips only
when haystack-ai is not importable.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import pathlib
import sys

import pytest

pytest.importorskip("haystack", reason="haystack-ai is not installed (pip install 'diversify-retrieval[haystack]')")

_SRC = pathlib.Path(__file__).resolve().parents[1] / "src"
if str(_SRC) not in sys.path:
    sys.path.insert(0, str(_SRC))

from contract import PluginContract, make_corpus, oracle_select  # noqa: E402
from haystack import Document, Pipeline, component  # noqa: E402
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever, InMemoryEmbeddingRetriever  # noqa: E402
from haystack.core.errors import DeserializationError, PipelineError  # noqa: E402
from haystack.document_stores.in_memory import InMemoryDocumentStore  # noqa: E402
from haystack_integrations.components.rankers.diversify import DiversifyRanker  # noqa: E402
from haystack_integrations.components.retrievers.diversify import DiversifyRetriever  # noqa: E402

from diversify.errors import ConfigError, InputError  # noqa: E402

_index_names = itertools.count()


def _store(corpus):
    # a unique index name: InMemoryDocumentStore shares storage per index name within a process
    store = InMemoryDocumentStore(index=f"diversify-test-{next(_index_names)}")
    store.write_documents([
        Document(id=f"d{i}", content=t, meta={**copy.deepcopy(p), "uid": i}, embedding=v.tolist())
        for i, t, p, v in zip(corpus.ids, corpus.texts, corpus.payloads, corpus.vectors)])
    return store


class TestComponentsContract(PluginContract):
    refills = True

    def run(self, corpus, *, k, max_per_cluster):
        retriever = DiversifyRetriever(InMemoryEmbeddingRetriever(_store(corpus)), cluster_map=corpus.cluster_map,
                                       id_field="uid", top_k=k, max_per_cluster=max_per_cluster, max_rounds=8)
        out = retriever.run(query_embedding=corpus.query.tolist())
        return [d.meta["uid"] for d in out["documents"]]

    def run_fixed(self, corpus, ranked_ids, *, k, max_per_cluster):
        text = dict(zip(corpus.ids, corpus.texts))
        docs = [Document(id=f"d{i}", content=text[i], meta={"uid": i}, score=1.0 - 0.01 * r)
                for r, i in enumerate(ranked_ids)]
        ranker = DiversifyRanker(cluster_map=corpus.cluster_map, id_field="uid", top_k=k,
                                 max_per_cluster=max_per_cluster)
        return [d.meta["uid"] for d in ranker.run(documents=docs)["documents"]]


@pytest.fixture(scope="module")
def corpus():
    return make_corpus(seed=11)


@pytest.fixture(scope="module")
def store(corpus):
    return _store(corpus)


@pytest.mark.parametrize("exclude", [True, False], ids=["not-in-filter", "larger-top-k"])
def test_pipeline_refills_when_the_first_fetch_is_short_and_reports_backend_calls(corpus, store, exclude):
    k = 8
    first = InMemoryEmbeddingRetriever(store).run(query_embedding=corpus.query.tolist(), top_k=k)["documents"]
    assert len(oracle_select([d.meta["uid"] for d in first], corpus.cluster_of, k=k)) < k
    pipe = Pipeline()
    pipe.add_component("retriever", DiversifyRetriever(
        InMemoryEmbeddingRetriever(store), cluster_map=corpus.cluster_map, id_field="uid", top_k=k, fetch_k=k,
        max_rounds=8, exclude_seen=exclude))
    out = pipe.run({"retriever": {"query_embedding": corpus.query.tolist()}})["retriever"]
    assert [d.meta["uid"] for d in out["documents"]] == oracle_select(corpus.ranked_ids, corpus.cluster_of, k=k)
    info = out["diversify"]
    assert info["backend_calls"] >= 2 and info["backend_calls"] == info["rounds"] + 1, info
    assert not info["exhausted"] and not info["short"]
    if exclude:  # the store really left out what was seen: nothing came back twice
        stats = pipe.get_component("retriever").diversifier.stats()
        assert stats["fetched"] == info["considered"], (stats, info)
    print(f"haystack refill ({'not-in filter' if exclude else 'larger top_k'}): backend_calls={info['backend_calls']}")


def test_exclusion_is_anded_with_the_callers_filters(corpus, store):
    odd = [i for i in corpus.ids if i % 2]
    retriever = DiversifyRetriever(InMemoryEmbeddingRetriever(store), cluster_map=corpus.cluster_map, id_field="uid",
                                   top_k=6, fetch_k=6, max_rounds=8)
    out = retriever.run(query_embedding=corpus.query.tolist(),
                        filters={"field": "meta.uid", "operator": "in", "value": odd})
    ranked_odd = [i for i in corpus.ranked_ids if i % 2]
    assert [d.meta["uid"] for d in out["documents"]] == oracle_select(ranked_odd, corpus.cluster_of, k=6)
    assert out["diversify"]["backend_calls"] >= 2


def test_run_async_matches_run(corpus, store):
    retriever = DiversifyRetriever(InMemoryEmbeddingRetriever(store), cluster_map=corpus.cluster_map, id_field="uid",
                                   top_k=7, fetch_k=7, max_rounds=8)
    sync = retriever.run(query_embedding=corpus.query.tolist())
    out = asyncio.run(retriever.run_async(query_embedding=corpus.query.tolist()))
    assert [d.id for d in out["documents"]] == [d.id for d in sync["documents"]]
    assert out["diversify"]["backend_calls"] == sync["diversify"]["backend_calls"] >= 2


def test_cursor_gives_the_next_page(corpus, store):
    retriever = DiversifyRetriever(InMemoryEmbeddingRetriever(store), cluster_map=corpus.cluster_map, id_field="uid",
                                   top_k=4, max_rounds=8)
    page1 = retriever.run(query_embedding=corpus.query.tolist())
    page2 = retriever.run(query_embedding=corpus.query.tolist(), cursor=page1["diversify"]["cursor"])
    ids = [d.meta["uid"] for d in page1["documents"] + page2["documents"]]
    assert ids == oracle_select(corpus.ranked_ids, corpus.cluster_of, k=8), ids


# ---------------------------------------------------------------------- real artifact, ids, copies, YAML

TEXTS = {
    "a": "the quick brown fox jumps over the lazy dog near the river bank today",
    "a-copy": "The quick brown fox jumps over the lazy dog near the river bank today!",
    "b": "a completely different sentence about vector databases and retrieval quality",
    "c": "near duplicate detection with minhash signatures and locality sensitive hashing",
    "c-copy": "near duplicate detection with minhash signatures and locality sensitive hashing.",
}


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    from diversify import build

    path = tmp_path_factory.mktemp("artifact") / "clusters.dvf"
    build(texts=list(TEXTS.values()), ids=list(TEXTS)).cluster_map.save(path)
    return str(path)


def _text_store():
    store = InMemoryDocumentStore(index=f"diversify-test-{next(_index_names)}")
    store.write_documents([Document(id=k, content=t, meta={"source": k}) for k, t in TEXTS.items()])
    return store


def test_ranker_keeps_better_ranked_copy_and_id_without_mutating_documents(artifact):
    docs = [Document(id=k, content=TEXTS[k], meta={"source": k}, score=s)
            for k, s in (("a-copy", 0.9), ("b", 0.8), ("a", 0.7), ("c", 0.6), ("c-copy", 0.5))]
    before = copy.deepcopy(docs)
    out = DiversifyRanker(cluster_map=artifact).run(documents=docs)["documents"]
    assert [d.id for d in out] == ["a-copy", "b", "c"]
    assert [d.score for d in out] == [0.9, 0.8, 0.6]
    assert out[0].meta["diversify"]["omitted_ids"] == ["a"] and out[0].meta["source"] == "a-copy"
    assert docs == before, "the caller's documents were modified"
    assert all(o is not d for o in out for d in docs)


def test_ranker_top_k_at_run_time_and_cluster_field():
    docs = [Document(id=str(j), content=f"text {j}", meta={"grp": j // 2}) for j in range(8)]
    ranker = DiversifyRanker(cluster_field="grp")
    assert [d.id for d in ranker.run(documents=docs)["documents"]] == ["0", "2", "4", "6"]
    assert [d.id for d in ranker.run(documents=docs, top_k=2)["documents"]] == ["0", "2"]
    assert ranker.run(documents=[])["documents"] == []


def test_saved_pipeline_loads_without_an_allowlist_entry(artifact):
    """Components under haystack_integrations.* are on Haystack's default deserialization allowlist."""
    store = _text_store()
    pipe = Pipeline()
    pipe.add_component("retriever", DiversifyRetriever(InMemoryBM25Retriever(store), cluster_map=artifact, top_k=3))
    pipe.add_component("ranker", DiversifyRanker(cluster_map=artifact, top_k=2))
    pipe.connect("retriever.documents", "ranker.documents")
    yaml_text = pipe.dumps()
    assert "haystack_integrations.components.rankers.diversify.ranker.DiversifyRanker" in yaml_text
    assert artifact in yaml_text
    loaded = Pipeline.loads(yaml_text)
    query = "quick brown fox and near duplicate detection with minhash"
    out = loaded.run({"retriever": {"query": query}})
    assert out == pipe.run({"retriever": {"query": query}})
    assert len(out["ranker"]["documents"]) == 2
    assert len({d.meta["diversify"]["cluster_id"] for d in out["ranker"]["documents"]}) == 2


@component
class _MyRanker(DiversifyRanker):
    """A subclass living outside haystack_integrations: it needs the allowlist."""


def test_a_component_outside_the_default_allowlist_needs_allowed_modules():
    pipe = Pipeline()
    pipe.add_component("ranker", _MyRanker(cluster_map={"a": 0, "b": 0}))
    yaml_text = pipe.dumps()
    with pytest.raises((DeserializationError, PipelineError), match="allowlist"):
        Pipeline.loads(yaml_text)
    loaded = Pipeline.loads(yaml_text, allowed_modules=[__name__])
    docs = [Document(id="a", content="x"), Document(id="b", content="y")]
    assert [d.id for d in loaded.run({"ranker": {"documents": docs}})["ranker"]["documents"]] == ["a"]


def test_to_dict_from_dict_roundtrip(artifact):
    store = _text_store()
    r = DiversifyRetriever(InMemoryBM25Retriever(store, top_k=50), cluster_map=artifact, id_field=None, top_k=3,
                           max_per_cluster=2, fetch_k=4, max_rounds=2, exclude_seen=False)
    data = r.to_dict()
    assert data["init_parameters"]["retriever"]["type"].endswith("InMemoryBM25Retriever")
    back = DiversifyRetriever.from_dict(copy.deepcopy(data))
    assert back.to_dict() == data
    ranker = DiversifyRanker(cluster_map=pathlib.Path(artifact), max_per_cluster=2, top_k=4, meta_key="dv")
    assert DiversifyRanker.from_dict(ranker.to_dict()).to_dict() == ranker.to_dict()


def test_clear_errors():
    with pytest.raises(ConfigError, match="cluster_map"):
        DiversifyRanker()
    with pytest.raises(ConfigError, match="top_k"):
        DiversifyRanker(cluster_field="c", top_k=0)
    with pytest.raises(InputError, match="uid"):
        DiversifyRanker(cluster_field="c", id_field="uid").run(documents=[Document(content="x")])
    from diversify import build

    in_memory = build(texts=["one two three four five six"], ids=["x"]).cluster_map
    with pytest.raises(ConfigError, match="save"):
        DiversifyRanker(cluster_map=in_memory).to_dict()


def test_fold_threshold_folds_documents_the_artifact_does_not_know():
    # "a-new" was added after the build (the artifact knows neither a nor a-new), but its embedding
    # is nearly the same as a's: the on-the-fly mode folds it into a.
    emb = {"a": [1.0, 0.0, 0.0], "a-new": [0.99, 0.05, 0.0], "b": [0.0, 1.0, 0.0], "c": [0.0, 0.0, 1.0]}
    docs = [Document(id=i, content=i, embedding=v, score=1.0 - j / 10) for j, (i, v) in enumerate(emb.items())]
    before = copy.deepcopy(docs)
    out = DiversifyRanker(cluster_map={}, fold_threshold=0.95).run(documents=docs)["documents"]
    assert [d.id for d in out] == ["a", "b", "c"]
    assert out[0].meta["diversify"]["omitted_ids"] == ["a-new"]
    assert [d.id for d in DiversifyRanker(cluster_map={}).run(documents=docs)["documents"]] == list(emb)
    assert docs == before

    store = _store_of(docs)
    inner = InMemoryEmbeddingRetriever(store, return_embedding=True)
    calls = []
    run = inner.run
    inner.run = lambda *a, **kw: calls.append(1) or run(*a, **kw)
    retriever = DiversifyRetriever(inner, cluster_map={}, top_k=3, fetch_k=3, fold_threshold=0.95)
    out = retriever.run(query_embedding=[1.0, 0.1, 0.05])
    # the refetch's pushed-down answer (1 of 3) is short and confirmed by a larger k: 3 store calls
    assert [d.id for d in out["documents"]] == ["a", "b", "c"] and out["diversify"]["backend_calls"] == len(calls) == 3
    data = retriever.to_dict()
    assert data["init_parameters"]["fold_threshold"] == 0.95
    assert DiversifyRetriever.from_dict(copy.deepcopy(data)).to_dict() == data


def _store_of(docs):
    store = InMemoryDocumentStore(index=f"diversify-test-{next(_index_names)}")
    store.write_documents([Document(id=d.id, content=d.content, embedding=d.embedding) for d in docs])
    return store


@pytest.mark.integration
def test_chroma_haystack_refills_although_it_cannot_filter_on_id(corpus, caplog):
    """chroma-haystack rejects a filter on `id`: the first refill falls back to a larger top_k
    (one WARNING) instead of raising, and the answer is the reference selection."""
    pytest.importorskip("haystack_integrations.document_stores.chroma", reason="chroma-haystack is not installed")
    from haystack_integrations.components.retrievers.chroma import ChromaEmbeddingRetriever
    from haystack_integrations.document_stores.chroma import ChromaDocumentStore

    store = ChromaDocumentStore(collection_name=f"ids{next(_index_names)}", distance_function="cosine")
    store.write_documents([Document(id=str(i), content=t, meta={"uid": i}, embedding=v.tolist())
                           for i, t, v in zip(corpus.ids, corpus.texts, corpus.vectors)])
    cm = {str(i): c for i, c in corpus.cluster_of.items()}
    retriever = DiversifyRetriever(ChromaEmbeddingRetriever(store), cluster_map=cm, top_k=6, fetch_k=6, max_rounds=8,
                                   refill="exclude")  # auto grows on Chroma: force the filter that is rejected
    with caplog.at_level("WARNING", logger="diversify"):
        outs = [retriever.run(query_embedding=corpus.query.tolist()) for _ in range(2)]
    for out in outs:
        assert out["diversify"]["backend_calls"] >= 2 and not out["diversify"]["exhausted"], out["diversify"]
        ids = [int(d.id) for d in out["documents"]]
        assert ids == oracle_select(corpus.ranked_ids, corpus.cluster_of, k=6), ids
    assert sum("rejected an exclusion filter" in r.getMessage() for r in caplog.records) == 1


def test_refill_switch_is_validated_and_serialized(corpus, store):
    with pytest.raises(ConfigError, match="`refill` must be one of"):
        DiversifyRetriever(InMemoryEmbeddingRetriever(store), cluster_map={}, refill="sometimes")
    with pytest.raises(ConfigError, match="refill='exclude'.*exclude_seen=True"):
        DiversifyRetriever(InMemoryEmbeddingRetriever(store), cluster_map={}, refill="exclude", exclude_seen=False)
    r = DiversifyRetriever(InMemoryEmbeddingRetriever(store), cluster_map={}, refill="grow")
    assert r.to_dict()["init_parameters"]["refill"] == "grow"
    assert DiversifyRetriever.from_dict(r.to_dict()).refill == "grow"
