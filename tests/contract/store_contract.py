"""Contract every store adapter passes. Subclass it and implement ``make_store``.

```python
class TestNumpyStore(StoreContract):
    def make_store(self, corpus):
        return NumpyStore(corpus.vectors, corpus.ids, payloads=corpus.payloads)
```

Set ``exact = False`` for approximate stores (results are then checked for the invariants,
not against the exact oracle).
"""

from __future__ import annotations

import pytest

from diversify.online import Diversifier, Hit

from .corpus import make_corpus, oracle_select


class StoreContract:
    #: the store ranks exactly (flat index); approximate ones check invariants only
    exact = True

    def make_store(self, corpus):  # pragma: no cover - provided by the subclass
        raise NotImplementedError

    @pytest.fixture
    def corpus(self):
        return make_corpus(seed=7)

    @pytest.fixture
    def store(self, corpus):
        before = corpus.snapshot()
        store = self.make_store(corpus)
        yield store
        after = corpus.snapshot()
        assert before[0] == after[0], "the adapter mutated the caller's payloads"
        assert (before[1] == after[1]).all(), "the adapter mutated the caller's vectors"

    # ------------------------------------------------------------------ search

    def test_declares_score_direction(self, store):
        assert store.scores_are in ("similarity", "distance"), store.scores_are

    def test_declares_its_refill_strategy(self, store):
        # what `auto` resolved to; the Diversifier passes seen ids only to a store that pushes them down
        assert store.refill in ("exclude", "grow"), store.refill
        assert store.supports_exclude is (store.refill == "exclude")
        for mode in ("exclude", "grow"):
            store._setup_refill(mode, None)
            assert store.refill == mode and store.supports_exclude is (mode == "exclude")

    @pytest.mark.parametrize("refill", ["exclude", "grow"])
    def test_refill_strategies_give_the_same_answer(self, store, corpus, refill):
        store._setup_refill(refill, None)
        k = 6
        res = Diversifier(corpus.cluster_map, k=k, fetch_k=k, max_rounds=6).wrap(store)(corpus.query)
        assert len(res.ids) == k and not res.exhausted and res.backend_calls >= 2, res
        clusters = [corpus.cluster_of.get(i, ("own", i)) for i in res.ids]
        assert len(set(clusters)) == k, clusters
        if self.exact:
            assert res.ids == oracle_select(corpus.ranked_ids, corpus.cluster_of, k=k)

    @pytest.mark.parametrize("max_exclude", [0, 1, 4])
    def test_exclusion_beyond_max_exclude_is_answered_by_a_larger_k(self, store, corpus, max_exclude):
        store._setup_refill("exclude", max_exclude)
        excluded = corpus.ranked_ids[:12]
        hits = store.search(corpus.query, 8, exclude_ids=excluded)
        ids = [h.id for h in hits]
        assert len(ids) == 8 and not set(ids) & set(excluded), ids
        if self.exact:
            assert ids == [i for i in corpus.ranked_ids if i not in excluded][:8]
        # exhaustion is exact too: everything but the excluded, never fewer
        rest = store.search(corpus.query, len(corpus.ids), exclude_ids=excluded)
        assert sorted(h.id for h in rest) == sorted(set(corpus.ids) - set(excluded))

    def test_search_returns_ranked_hits(self, store, corpus):
        k = 12
        hits = store.search(corpus.query, k)
        assert len(hits) == k, f"asked for {k}, got {len(hits)}"
        assert all(isinstance(h, Hit) for h in hits)
        ids = [h.id for h in hits]
        assert len(set(ids)) == k, f"duplicate ids in {ids}"
        assert set(ids) <= set(corpus.ids), f"unknown ids {set(ids) - set(corpus.ids)}"
        assert all(type(i) is int for i in ids), [type(i) for i in ids]
        scores = [h.score for h in hits]
        sign = -1 if store.scores_are == "similarity" else 1
        assert all(sign * a <= sign * b + 1e-6 for a, b in zip(scores, scores[1:])), \
            f"scores not ordered for {store.scores_are}: {scores}"
        if self.exact:
            assert ids == corpus.ranked_ids[:k]

    def test_self_query_ranks_first(self, store, corpus):
        for row in (0, 17, len(corpus.ids) - 1):
            hits = store.search(corpus.vectors[row], 3)
            assert hits[0].id == corpus.ids[row], (row, [h.id for h in hits])

    def test_exclusion_is_pushed_down(self, store, corpus):
        excluded = corpus.ranked_ids[:5] + [corpus.ranked_ids[9]]
        hits = store.search(corpus.query, 8, exclude_ids=excluded)
        ids = [h.id for h in hits]
        assert not set(ids) & set(excluded), f"excluded ids came back: {set(ids) & set(excluded)}"
        assert len(ids) == 8
        if self.exact:
            assert ids == [i for i in corpus.ranked_ids if i not in excluded][:8]

    def test_k_beyond_size_returns_everything(self, store, corpus):
        n = len(corpus.ids)
        hits = store.search(corpus.query, n + 10)
        assert sorted(h.id for h in hits) == sorted(corpus.ids)
        hits = store.search(corpus.query, n + 10, exclude_ids=corpus.ids[:3])
        assert len(hits) == n - 3

    # ------------------------------------------------------------------ with the Diversifier

    def test_refill_when_first_fetch_short(self, store, corpus, record_property):
        k = 6
        d = Diversifier(corpus.cluster_map, k=k, fetch_k=k, max_rounds=6)
        res = d.wrap(store)(corpus.query)
        ids = res.ids
        assert len(ids) == k and not res.short and not res.exhausted, res
        # the first fetch of k hits held at most 4 distinct clusters, so refill had to happen
        # every store call counts, also a second one inside a round (an approximate index widened)
        assert res.rounds >= 1 and res.backend_calls >= res.rounds + 1, \
            f"backend_calls={res.backend_calls}, rounds={res.rounds}"
        clusters = [corpus.cluster_of.get(i, ("own", i)) for i in ids]
        assert len(set(clusters)) == k, clusters
        if self.exact:
            assert ids == oracle_select(corpus.ranked_ids, corpus.cluster_of, k=k)
        record_property("backend_calls", res.backend_calls)  # lands in --junitxml reports
        print(f"{type(store).__name__}: k={k} fetch_k={k} backend_calls={res.backend_calls}")

    def test_exhaustion_is_reported(self, store, corpus):
        k = 200
        d = Diversifier(corpus.cluster_map, k=k, max_rounds=8)
        res = d.wrap(store)(corpus.query)
        expected = corpus.distinct_available(1)
        assert len(res.hits) == expected, (len(res.hits), expected)
        assert res.short and res.exhausted, res

    def test_page_two_repeats_no_cluster(self, store, corpus):
        k = 5
        d = Diversifier(corpus.cluster_map, k=k, fetch_k=k)
        search = d.wrap(store)
        p1 = search(corpus.query)
        p2 = search(corpus.query, cursor=p1.cursor)
        c1 = {corpus.cluster_of.get(i, ("own", i)) for i in p1.ids}
        c2 = {corpus.cluster_of.get(i, ("own", i)) for i in p2.ids}
        assert len(p2.ids) == k and not (c1 & c2), (p1.ids, p2.ids)
        if self.exact:
            assert p1.ids + p2.ids == oracle_select(corpus.ranked_ids, corpus.cluster_of, k=2 * k)

    def test_refetch_without_exclusion_support(self, store, corpus):
        k = 6
        d = Diversifier(corpus.cluster_map, k=k, fetch_k=k, max_rounds=6)
        res = d.wrap(lambda query, kk: store.search(query, kk))(corpus.query)
        assert len(res.ids) == k and res.backend_calls >= 2, res
        if self.exact:
            assert res.ids == oracle_select(corpus.ranked_ids, corpus.cluster_of, k=k)

    def test_write_clusters_then_group_by_payload(self, store, corpus):
        written = store.write_clusters(corpus.cluster_map)
        assert written == len(corpus.known_ids), (written, len(corpus.known_ids))
        by_map = Diversifier(corpus.cluster_map, k=8).wrap(store)(corpus.query)
        by_field = Diversifier(cluster_field="cluster_id", k=8).wrap(store)(corpus.query)
        assert by_field.ids == by_map.ids
        assert [h.cluster_id for h in by_field.hits] == [h.cluster_id for h in by_map.hits]
        hits = store.search(corpus.query, len(corpus.ids))
        for h in hits:
            if h.id in corpus.cluster_of:
                assert h.payload["cluster_id"] == corpus.cluster_of[h.id], h
                assert bool(h.payload["is_representative"]) == corpus.is_representative[h.id], h
            else:
                assert h.payload is None or h.payload.get("cluster_id", -1) in (-1, None), h
