"""Contract every framework plugin passes (LangChain, LlamaIndex, Haystack...).

A subclass implements one or both hooks, each returning document ids in output order:

* ``run(corpus, *, k, max_per_cluster)`` -- a *retriever* over the whole corpus (set
  ``refills = True``): it must fill k even though the first fetch is short;
* ``run_fixed(corpus, ranked_ids, *, k, max_per_cluster)`` -- a *filter* over a fixed, ranked
  list (compressor / postprocessor / ranker): it must equal the reference selection.

The corpus (see :func:`make_corpus`) has ``ids``, ``vectors``, ``texts``, ``payloads``, ``query``,
``ranked_ids`` (exact ranking for ``query``), ``cluster_of`` and ``cluster_map``. Hooks must build
their framework objects from it without mutating it (checked after every test).
"""

from __future__ import annotations

import pytest

from .corpus import make_corpus, oracle_select


class PluginContract:
    #: the plugin searches (and refills); False for filters over a fixed list
    refills = True

    def run(self, corpus, *, k, max_per_cluster):  # pragma: no cover - subclass hook
        raise NotImplementedError

    def run_fixed(self, corpus, ranked_ids, *, k, max_per_cluster):  # pragma: no cover
        pytest.skip("this plugin does not filter fixed lists")

    @pytest.fixture
    def corpus(self):
        corpus = make_corpus(seed=11)
        before = corpus.snapshot()
        yield corpus
        after = corpus.snapshot()
        assert before[0] == after[0], "the plugin mutated the caller's payloads"
        assert (before[1] == after[1]).all(), "the plugin mutated the caller's vectors"

    def _retrieve(self, corpus, k, n):
        if not self.refills:
            pytest.skip("this plugin filters a fixed list; see the run_fixed tests")
        return list(self.run(corpus, k=k, max_per_cluster=n))

    @pytest.mark.parametrize("n", [1, 2])
    def test_retriever_matches_reference(self, corpus, n):
        k = 6
        ids = self._retrieve(corpus, k, n)
        expected = oracle_select(corpus.ranked_ids, corpus.cluster_of, k=k, n=n)
        assert ids == expected, f"n={n}: got {ids}, expected {expected}"

    def test_retriever_never_exceeds_n_per_cluster_and_keeps_rank_order(self, corpus):
        ids = self._retrieve(corpus, 10, 1)
        clusters = [corpus.cluster_of.get(i, ("own", i)) for i in ids]
        assert len(set(clusters)) == len(clusters), clusters
        positions = [corpus.ranked_ids.index(i) for i in ids]
        assert positions == sorted(positions), positions

    def test_retriever_returns_fewer_only_when_exhausted(self, corpus):
        ids = self._retrieve(corpus, 500, 1)
        assert len(ids) == corpus.distinct_available(1), (len(ids), corpus.distinct_available(1))

    @pytest.mark.parametrize("n", [1, 2])
    def test_filter_matches_reference(self, corpus, n):
        ranked = corpus.ranked_ids[:30]
        k = 5
        ids = list(self.run_fixed(corpus, ranked, k=k, max_per_cluster=n))
        assert ids == oracle_select(ranked, corpus.cluster_of, k=k, n=n), ids

    def test_filter_keeps_unknown_ids_as_their_own_cluster(self, corpus):
        unknown = [i for i in corpus.ranked_ids if i not in corpus.cluster_of]
        known = [i for i in corpus.ranked_ids if i in corpus.cluster_of][:10]
        ranked = known[:3] + unknown + known[3:]
        ids = list(self.run_fixed(corpus, ranked, k=len(ranked), max_per_cluster=1))
        assert set(unknown) <= set(ids), (unknown, ids)
        assert ids == oracle_select(ranked, corpus.cluster_of, k=len(ranked), n=1)

    def test_filter_returns_fewer_than_k_when_the_list_is_short(self, corpus):
        ranked = corpus.ranked_ids[:12]
        ids = list(self.run_fixed(corpus, ranked, k=12, max_per_cluster=1))
        assert ids == oracle_select(ranked, corpus.cluster_of, k=12, n=1)
        assert len(ids) < 12
