"""The live index keeps clique clusters (``clustering="clique"``, the default): every two members of a
cluster are verified similar, after adds in batches and after deletes, on SQLite, PostgreSQL and
Redis (the session's servers, tests/index/servers*.py). ``"star"`` keeps its earlier behaviour.

The oracle is exact Jaccard on word 5-shingles (``index.contract._jaccard``), every pair of every
cluster. The corpus is a chain of windows over one long text: window ``k`` starts ``3k`` words in,
so windows ``d`` apart are ``(L - 3d - 4) / (L + 3d - 4)`` similar (120 words: 0.95, 0.90, 0.86,
0.81 for d = 1..4, then 0.77, 0.73, ...): a star around a window in the middle holds windows 8
apart (0.61), a clique never more than 4.
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

import diversify
from diversify.config import BuildConfig, MinHashConfig, canonical_json, fingerprint
from diversify.errors import ConfigError, IncompatibleIndexError
from diversify.index.registry import open_storage
from diversify.index.storage import SCHEMA_VERSION, Meta
from index.contract import _doc, _jaccard, _near
from index.servers import postgres_server  # noqa: F401  (session fixture)
from index.servers_redis import redis_server  # noqa: F401  (session fixture)

T = 0.8
EXACT = BuildConfig(minhash=MinHashConfig(threshold=T, verify="exact"))
_WORDS = [f"v{x}" for x in np.random.default_rng(4040).integers(0, 50_000, 400)]


def _win(k: int, length: int = 120) -> str:
    """Window ``k`` of the chain (see the module docstring)."""
    return " ".join(_WORDS[3 * k: 3 * k + length])


def _url(backend: str, request, tmp_path, name: str = "i") -> str:
    if backend == "sqlite":
        return f"sqlite:///{tmp_path}/{name}.db"
    if backend == "postgresql":
        return request.getfixturevalue("postgres_server").new_index()
    return request.getfixturevalue("redis_server").fresh_url()


def _clusters(idx) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for r in idx.scan():
        out.setdefault(r.cluster, []).append(r.id)
    return out


def _below(idx, text_of: dict) -> list[tuple[str, str, float]]:
    """Every pair sharing a cluster whose exact Jaccard is below T (the oracle: all pairs)."""
    bad = []
    for members in _clusters(idx).values():
        for a, b in itertools.combinations(sorted(members), 2):
            j = _jaccard(text_of[a], text_of[b])
            if j < T:
                bad.append((a, b, round(j, 3)))
    return bad


BACKENDS = ["sqlite", "postgresql", "redis"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_two_members_are_similar_after_adds_in_batches(backend, request, tmp_path):
    """Two corpora added in batches of 1 to 7, centers first (a star around them would hold far
    pairs): the chain, and families of a base page with copies really above the threshold
    (one word changed, J ~0.92) and edits at 0.74-0.86 of it. Every pair of every cluster is >= T
    by exact Jaccard; the clusters still fold (the chain into groups of up to five windows)."""
    rng = np.random.default_rng(40)
    text_of = {f"c{k}": _win(k) for k in range(40)}
    for i in range(8):
        text_of[f"b{i}"] = _doc(i)
        for v in range(3):
            text_of[f"n{i}-{v}"] = _near(i, 10 + 30 * v)
    from index.contract import _edited

    for i in range(8):
        for c in (2, 3):
            text_of[f"e{i}-{c}"] = _edited(i, c)
    centers = [f"c{k}" for k in range(4, 40, 9)] + [f"e{i}-2" for i in range(8)]
    rest = [x for x in text_of if x not in centers]
    rng.shuffle(rest)
    order = centers + rest
    with diversify.Index(_url(backend, request, tmp_path), EXACT) as idx:
        at = 0
        while at < len(order):
            size = int(rng.integers(1, 8))
            batch = order[at: at + size]
            idx.add([text_of[x] for x in batch], ids=batch)
            at += size
        assert _below(idx, text_of) == []
        clusters = _clusters(idx)
        assert idx.check() == []
        sizes = sorted(len(m) for m in clusters.values())
        assert sum(s - 1 for s in sizes) >= 40, f"too little folded to test anything: {sizes}"
        assert max(len([m for m in ms if m.startswith("c")]) for ms in clusters.values()) <= 5
        st = idx.stats()
        assert st["clustering"] == "clique" and st["promise"] == "every two members of a cluster are verified similar"


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_new_document_similar_to_the_representative_but_not_to_a_member_does_not_join(backend, request, tmp_path):
    with diversify.Index(_url(backend, request, tmp_path), EXACT) as idx:
        idx.add([_win(4)], ids=["c4"])
        first = idx.add([_win(0)], ids=["c0"])[0]  # 0.81 to c4: joins
        assert first.joined and first.representative == "c4"
        cid = first.cluster
        # query gives add's answer: c8 is similar to the representative c4 but not to c0, c2 to both
        q8, q2 = idx.query([_win(8), _win(2)])
        assert q8.cluster is None and not q8.joined and q8.matched == ()
        assert q2.cluster == cid and q2.representative == "c4"
        far = idx.add([_win(8)], ids=["c8"])[0]  # 0.81 to c4, 0.61 to c0
        assert _jaccard(_win(8), _win(4)) >= T > _jaccard(_win(8), _win(0))
        assert not far.joined and far.cluster != cid and far.representative == "c8"
        mid = idx.add([_win(2)], ids=["c2"])[0]  # 0.90 to both
        assert mid.joined and mid.cluster == cid and mid.representative == "c4"
        # in one batch: c7 (0.86 to c4, 0.66 to c0) starts its own cluster with c8, c3 joins
        got = idx.add([_win(7), _win(3)], ids=["c7", "c3"])
        assert got[0].cluster == far.cluster and got[1].cluster == cid
        assert idx.members(cid) == ["c4", "c0", "c2", "c3"]
        assert idx.check() == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_deleting_a_representative_keeps_its_clique_and_rechooses_the_representative(backend, request, tmp_path):
    """The members of a deleted representative stay one cluster, with its id, represented by the
    first of them by the rule (``longest``: c1 of 124 words over the earlier c2), each member's
    similarity re-verified against it; none leaves for another cluster it is also similar to
    (c5, a representative of its own, 0.86 to c2: under star c2 would join it)."""
    with diversify.Index(_url(backend, request, tmp_path), EXACT) as idx:
        idx.add([_win(0)], ids=["c0"])
        cid = idx.add([_win(2)], ids=["c2"])[0].cluster
        assert idx.add([_win(1, 124)], ids=["c1"])[0].cluster == cid  # the longest, added last
        other = idx.add([_win(5)], ids=["c5"])[0]  # 0.86 to c2, 0.77 to c0: not into the clique
        assert not other.joined and other.cluster != cid
        before = {r.id: r for r in idx.scan()}
        res = idx.delete(["c0"])
        assert res == {"deleted": 1, "missing": [], "reassigned": 2}
        assert idx.members(cid) == ["c1", "c2"]  # same id; the longest represents it
        assert idx.members(other.cluster) == ["c5"]
        rows = {r.id: r for r in idx.scan()}
        assert rows["c1"].is_rep and rows["c1"].similarity == 1.0 and rows["c1"].stages == 0
        assert not rows["c2"].is_rep and rows["c2"].stages != 0
        # re-verified: the stored similarity is now c2's exact Jaccard to c1 (32-bit shingle sets)
        assert rows["c2"].similarity != before["c2"].similarity
        assert rows["c2"].similarity == pytest.approx(_jaccard(_win(2), _win(1, 124)), abs=0.01)
        assert idx.check() == []
        # the new representative has band rows: a copy of c1 finds and joins the cluster
        assert idx.add([_win(1, 124)], ids=["c1b"])[0].cluster == cid
        assert idx.check() == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_star_keeps_its_behaviour(backend, request, tmp_path):
    """``clustering="star"``: a new document joins the representative it is similar to whatever
    the other members are, and a deleted representative's members are re-assigned (c2 joins c5)."""
    cfg = EXACT.model_copy(update={"clustering": "star"})
    with diversify.Index(_url(backend, request, tmp_path), cfg) as idx:
        idx.add([_win(4)], ids=["c4"])
        got = idx.add([_win(k) for k in (0, 1, 2, 3, 5, 6, 7, 8)], ids=[f"c{k}" for k in (0, 1, 2, 3, 5, 6, 7, 8)])
        assert {m.representative for m in got} == {"c4"} and all(m.joined for m in got)
        assert idx.stats()["promise"] == "every member of a cluster is verified similar to its representative"
        assert idx.check() == []
    with diversify.Index(_url(backend, request, tmp_path, "j"), cfg) as idx:
        idx.add([_win(0)], ids=["c0"])
        cid = idx.add([_win(2)], ids=["c2"])[0].cluster
        other = idx.add([_win(5)], ids=["c5"])[0].cluster
        idx.delete(["c0"])
        assert idx.cluster_of(["c2"]) == [other] and idx.members(cid) == []
        assert idx.check() == []


def test_a_member_that_does_not_verify_against_the_new_representative_is_reassigned(tmp_path):
    """A member that does not verify against the re-chosen representative (here one put into the
    cluster by hand; in use, the MinHash estimate's noise where no sets are stored) goes through the
    ordinary re-assignment and gets a fresh cluster id, not the id its former clique keeps."""
    from diversify.index.storage import Assignment

    with diversify.Index(f"sqlite:///{tmp_path}/e.db") as idx:
        cid = idx.add([_win(0)], ids=["a"])[0].cluster
        assert idx.add([_win(1)], ids=["b"])[0].cluster == cid
        idx.add([_doc(3)], ids=["z"])
        z = next(r for r in idx.scan() if r.id == "z")
        z_bands = idx.band_rows_of([z])
        with idx.storage.write() as tx:
            tx.update_docs([Assignment(z.seq, cid, False, 0.9, 2)])
            tx.delete_bands(*z_bands)
        assert idx.members(cid) == ["a", "b", "z"]
        with idx.storage.read() as view:
            next_cluster = view.state().next_cluster
        assert idx.delete(["a"]) == {"deleted": 1, "missing": [], "reassigned": 2}
        assert idx.members(cid) == ["b"]
        assert idx.cluster_of(["z"]) == [next_cluster] and idx.members(next_cluster) == ["z"]
        assert idx.check() == []


@pytest.mark.parametrize("clustering", ["clique", "star"])
def test_check_finds_two_members_that_are_not_similar_to_each_other(tmp_path, clustering):
    """c8, moved by hand into the cluster of c4 and c0, is similar to c4 (0.81) but not to c0
    (0.61): check() names that pair under clique, and finds nothing wrong under star."""
    from diversify.index.storage import Assignment
    from diversify.stages import STAGE_MINHASH

    with diversify.Index(f"sqlite:///{tmp_path}/k.db", EXACT.model_copy(update={"clustering": clustering})) as idx:
        cid = idx.add([_win(4)], ids=["c4"])[0].cluster
        assert idx.add([_win(0)], ids=["c0"])[0].cluster == cid
        idx.add([_win(8)], ids=["c8"])  # its own cluster under clique (star may take it itself)
        c8 = next(r for r in idx.scan() if r.id == "c8")
        assert c8.is_rep or clustering == "star"
        if c8.is_rep:
            bands = idx.band_rows_of([c8])
            with idx.storage.write() as tx:
                tx.update_docs([Assignment(c8.seq, cid, False, _jaccard(_win(8), _win(4)), STAGE_MINHASH)])
                tx.delete_bands(*bands)
        problems = idx.check()
        if clustering == "clique":
            assert problems == [f"documents 'c0' and 'c8' are in cluster {cid} but not verified similar to each other"]
        else:
            assert problems == []


def _page(seed: int = 7) -> list[str]:
    return [f"p{x}" for x in np.random.default_rng(seed).integers(0, 50_000, 550)]


def _changed(words: list[str], where, tag: str) -> str:
    out = list(words)
    for j in where:
        out[j] = f"{tag}{j}"
    return " ".join(out)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_large_cluster_loads_only_the_members_the_metric_bound_cannot_vouch_for(backend, request, tmp_path,
                                                                               monkeypatch):
    """A cluster of a 550-word page, 70 copies with one word changed (0.98 to it, 0.96 to each
    other) and F, the page with a block of 47 words changed (0.83 to it, 0.81 to every copy).
    X, the page with another block changed, is 0.83 to the page and 0.81 to the copies but 0.69
    to F: the bound vouches for every copy (0.17 + 0.02 <= 0.2), not for F, which is loaded and
    keeps X out. A plain copy loads nothing (0.02 + 0.17 <= 0.2 for F too); a page like none of
    them loads nothing either. Every pair of the cluster stays >= T."""
    import diversify.index.cliques as cliques

    loaded: list[int] = []
    real = cliques.decode

    def counting(payloads, *args):
        loaded.append(len(payloads))
        return real(payloads, *args)

    base = _page()
    text_of = {"b": " ".join(base), "f": _changed(base, range(100, 147), "F"),
               "x": _changed(base, range(300, 347), "X"), "y": _changed(base, [520], "Y")}
    text_of.update({f"c{j}": _changed(base, [2 * j], "C") for j in range(70)})
    assert _jaccard(text_of["x"], text_of["f"]) < T <= min(_jaccard(text_of["x"], text_of["c3"]),
                                                             _jaccard(text_of["f"], text_of["c3"]))
    with diversify.Index(_url(backend, request, tmp_path), EXACT) as idx:
        cid = idx.add([text_of["b"]], ids=["b"])[0].cluster
        got = idx.add([text_of[f"c{j}"] for j in range(70)] + [text_of["f"]], ids=[f"c{j}" for j in range(70)] + ["f"])
        assert {m.cluster for m in got} == {cid}
        qx, qy = idx.query([text_of["x"], text_of["y"]])  # add's answers, from a read
        assert qx.cluster is None and qy.cluster == cid
        monkeypatch.setattr(cliques, "decode", counting)
        x = idx.add([text_of["x"]], ids=["x"])[0]
        assert loaded == [1] and x.cluster != cid  # F alone was loaded, and it kept X out
        loaded.clear()
        assert idx.add([text_of["y"]], ids=["y"])[0].cluster == cid and loaded == []
        assert idx.add([_doc(5)], ids=["z"])[0].cluster not in (cid, x.cluster) and loaded == []
        assert _below(idx, {**text_of, "z": _doc(5)}) == [] and idx.check() == []


def _old_index(url: str) -> None:
    """An index as an earlier release created it under its default: clustering "guaranteed"."""
    cfg = BuildConfig(clustering="star")
    stored = canonical_json(cfg).replace('"clustering":"star"', '"clustering":"guaranteed"')
    assert '"guaranteed"' in stored
    with open_storage(url) as s:
        s.initialize(Meta(schema_version=SCHEMA_VERSION, config_json=stored, fingerprint=fingerprint(cfg),
                          created_by="0.9.0"))


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_index_stored_as_guaranteed_opens_as_star(backend, request, tmp_path):
    url = _url(backend, request, tmp_path)
    _old_index(url)
    with diversify.Index(url) as idx:  # its own config: nothing to refuse
        assert idx.config.clustering == "star" and idx.stats()["clustering"] == "star"
        idx.add([_win(4)], ids=["c4"])
        got = idx.add([_win(1), _win(7)], ids=["c1", "c7"])  # the star's assignment (J(c1, c7) = 0.73)
        assert [m.representative for m in got] == ["c4", "c4"]
    for same in (BuildConfig(clustering="star"), {"clustering": "guaranteed"}):
        diversify.Index(url, same).close()
    with pytest.raises(IncompatibleIndexError) as e:
        diversify.Index(url, BuildConfig())  # today's default is clique
    msg = str(e.value)
    assert "clustering: 'star' -> 'clique'" in msg and "stored as 'guaranteed'" in msg
    assert "pass clustering='star' (`--clustering star`)" in msg and "create a new index" in msg


def test_index_add_on_the_command_line_takes_clustering(tmp_path, capsys):
    from diversify.cli.main import main

    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"c{k}", "text": _win(k)}) + "\n" for k in (4, 1, 7)))

    def run(*argv):
        status = main(list(argv))
        out, err = capsys.readouterr()
        return status, [json.loads(x) for x in out.splitlines() if x.strip()], err

    old = f"sqlite:///{tmp_path}/old.db"
    _old_index(old)
    status, lines, _ = run("index", "add", old, str(corpus), "--batch-size", "1")  # no option: its own config
    assert status == 0 and [x["representative"] for x in lines] == ["c4", "c4", "c4"]
    status, _, err = run("index", "add", old, str(corpus), "--threshold", "0.8")
    assert status != 0 and "clustering: 'star' -> 'clique'" in err and "--clustering star" in err
    status, _, err = run("index", "add", old, str(corpus), "--threshold", "0.8", "--clustering", "star")
    assert status != 0 and "must not be in the index already" in err  # the config was accepted
    status, lines, _ = run("index", "add", f"sqlite:///{tmp_path}/new.db", str(corpus), "--batch-size", "1",
                           "--clustering", "clique")
    assert status == 0 and [x["representative"] for x in lines] == ["c4", "c4", "c7"]
    status, lines, _ = run("index", "stats", f"sqlite:///{tmp_path}/new.db")
    assert lines[0]["clustering"] == "clique" and lines[0]["promise"].startswith("every two members")
    with pytest.raises(ConfigError, match="clustering='components'"):
        diversify.Index(f"sqlite:///{tmp_path}/c.db", BuildConfig(clustering="components"))
    status, _, err = run("index", "add", f"sqlite:///{tmp_path}/c2.db", str(corpus), "--clustering", "components")
    assert status != 0 and "clustering='components'" in err and "Use clustering='clique'" in err


hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_step = st.one_of(
    st.tuples(st.just("add"), st.lists(st.integers(0, 14), min_size=1, max_size=6)),
    st.tuples(st.just("delete"), st.lists(st.integers(0, 30), min_size=1, max_size=3)),
)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(_step, min_size=1, max_size=7), star=st.booleans())
def test_any_add_delete_sequence_keeps_cliques(tmp_path_factory, steps, star):
    """Property (SQLite): any sequence of batches of chain windows (a window may come again, as a
    copy) and deletes keeps every two members of every cluster >= T by exact Jaccard, and the
    index's invariants (Index.check); the same sequences under star keep only the star's promise
    (each member to its representative)."""
    path = tmp_path_factory.mktemp("clq")
    cfg = EXACT.model_copy(update={"clustering": "star"}) if star else EXACT
    text_of: dict[str, str] = {}
    added = 0
    with diversify.Index(f"sqlite:///{path}/p.db", cfg) as idx:
        for kind, arg in steps:
            if kind == "add":
                ids = [f"x{added + j}" for j in range(len(arg))]
                added += len(arg)
                idx.add([_win(k) for k in arg], ids=ids)
                text_of.update(zip(ids, (_win(k) for k in arg)))
            else:
                idx.delete([f"x{j}" for j in arg])
            assert idx.check() == []
            if not star:
                assert _below(idx, text_of) == []
            else:
                rows = list(idx.scan())
                rep_of = {r.cluster: r.id for r in rows if r.is_rep}
                assert all(_jaccard(text_of[r.id], text_of[rep_of[r.cluster]]) >= T for r in rows)
