"""Property: any sequence of add / delete batches keeps the live index's invariants (SQLite).

After every step: each live document is in exactly one cluster, every member is verified similar
to its representative (Index.check), the band rows are exactly the representatives', and the
exported artifact holds exactly the live documents with the index's partition.
"""

from __future__ import annotations

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from index.contract import _assert_export_matches, _doc, _near  # noqa: E402

# a document is (family, variant): variants of one family are near-duplicates of each other
_docs = st.tuples(st.integers(0, 5), st.integers(0, 3))
_step = st.one_of(
    st.tuples(st.just("add"), st.lists(_docs, min_size=1, max_size=6)),
    st.tuples(st.just("delete"), st.lists(st.integers(0, 40), min_size=1, max_size=4)),
)


def _text(family: int, variant: int) -> str:
    return _doc(family) if variant == 0 else _near(family, 10 + 25 * variant)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(_step, min_size=1, max_size=7))
def test_any_add_delete_sequence_keeps_the_invariants(tmp_path_factory, steps):
    import diversify

    path = tmp_path_factory.mktemp("prop")
    live: dict[str, tuple] = {}
    added = 0
    with diversify.Index(f"sqlite:///{path}/p.db") as idx:
        for kind, arg in steps:
            if kind == "add":
                ids = [f"x{added + j}" for j in range(len(arg))]
                added += len(arg)
                got = idx.add([_text(*d) for d in arg], ids=ids)
                assert [m.id for m in got] == ids
                live.update(zip(ids, arg))
            else:
                ids = [f"x{j}" for j in arg]
                res = idx.delete(ids)
                gone = [i for i in dict.fromkeys(ids) if i in live]
                assert res["deleted"] == len(gone)
                for i in gone:
                    del live[i]
            assert idx.check() == []
            clusters = idx.cluster_of(list(live))
            assert None not in clusters
            assert sorted(r.id for r in idx.scan()) == sorted(live)
        if live:
            _assert_export_matches(idx, idx.export(path / "p.dvf"))


_sourced = st.tuples(st.integers(0, 5), st.integers(0, 3), st.sampled_from(["loose", "strict", "other"]))
_sourced_step = st.one_of(
    st.tuples(st.just("add"), st.lists(_sourced, min_size=1, max_size=6)),
    st.tuples(st.just("delete"), st.lists(st.integers(0, 40), min_size=1, max_size=4)),
)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(_sourced_step, min_size=1, max_size=6))
def test_with_source_thresholds_every_fold_meets_the_stricter_of_its_pair(tmp_path_factory, steps):
    """The same with per-source thresholds ("other" is unlisted: the MinHash threshold): check()
    verifies each fold at the stricter of its two documents' thresholds, and the exact Jaccard of
    every fold is checked here against them as well."""
    import diversify
    from diversify.config import BuildConfig
    from index.contract import _jaccard

    table = {"loose": 0.7, "strict": 0.95}
    thr = {**table, "other": 0.8}
    path = tmp_path_factory.mktemp("prop")
    live: dict[str, tuple] = {}
    added = 0
    with diversify.Index(f"sqlite:///{path}/p.db", BuildConfig(source_thresholds=table)) as idx:
        for kind, arg in steps:
            if kind == "add":
                ids = [f"x{added + j}" for j in range(len(arg))]
                added += len(arg)
                idx.add([_text(f, v) for f, v, _ in arg], ids=ids, sources=[s for _, _, s in arg])
                live.update(zip(ids, arg))
            else:
                ids = [f"x{j}" for j in arg]
                idx.delete(ids)
                for i in ids:
                    live.pop(i, None)
            assert idx.check() == []
            rows = list(idx.scan())
            assert sorted(r.id for r in rows) == sorted(live)
            rep_of = {r.cluster: r.id for r in rows if r.is_rep}
            for r in rows:
                if not r.is_rep:
                    a, b = live[r.id], live[rep_of[r.cluster]]
                    assert _jaccard(_text(a[0], a[1]), _text(b[0], b[1])) >= max(thr[a[2]], thr[b[2]])
        if live:
            _assert_export_matches(idx, idx.export(path / "p.dvf"))
