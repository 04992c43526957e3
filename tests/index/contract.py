"""The contract every live-index backend passes, against a real server (no mocks).

A backend's test module subclasses :class:`IndexContract` and provides one fixture::

    from index.contract import IndexContract

    class TestPostgres(IndexContract):
        @pytest.fixture
        def storage_url(self, postgres_server) -> str:
            return postgres_server.url(...)   # a URL of a NEW, EMPTY index for each test

The URL must be a plain string that other processes can open too (the concurrency and crash
tests pass it to subprocesses). Every test opens its own Storage objects through
``open_storage(storage_url)`` and closes them.

Part 1 (``test_storage_*``) checks the Storage interface itself (diversify/index/storage.py): the
rows round-trip, band lookups, rollback, and that the writer lock serializes read-modify-write.
Part 2 (``test_index_*``) runs diversify.Index on the backend: add/query/delete/export, the fold
guarantee, concurrent writers in real processes, SIGKILLed writers.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest

from diversify.errors import InputError, StorageError
from diversify.index.registry import open_storage
from diversify.index.storage import (
    SCHEMA_VERSION,
    Assignment,
    DocRow,
    Meta,
    State,
    StorageOptions,
)

META = Meta(schema_version=SCHEMA_VERSION, config_json='{"seed":1}', fingerprint="f" * 64, created_by="test")


def _row(seq: int, *, doc_id: str | None = None, cluster: int | None = None, rep: bool = True,
         payload: bytes | None = None) -> DocRow:
    return DocRow(seq=seq, id=doc_id if doc_id is not None else f"d{seq}", cluster=seq if cluster is None else cluster,
                  is_rep=rep, similarity=1.0 if rep else 0.9, stages=0 if rep else 2,
                  payload=payload if payload is not None else bytes([seq % 256]) * 40)


class IndexContract:
    """Subclass with a ``storage_url`` fixture (see the module docstring)."""

    @pytest.fixture
    def storage_url(self) -> str:  # pragma: no cover - every backend overrides it
        raise NotImplementedError("a backend's test class provides `storage_url`")

    @pytest.fixture
    def storage(self, storage_url):
        s = open_storage(storage_url)
        s.initialize(META)
        yield s
        s.close()

    # ------------------------------------------------------------------ part 1: the Storage interface

    def test_storage_meta_absent_then_created_once(self, storage_url):
        with open_storage(storage_url) as a, open_storage(storage_url) as b:
            assert a.read_meta() is None
            assert a.initialize(META) == META
            other = Meta(schema_version=SCHEMA_VERSION, config_json='{"seed":2}', fingerprint="0" * 64, created_by="x")
            # the second creator finds the first one's meta and keeps it
            assert b.initialize(other) == META
            assert b.read_meta() == META
            with b.read() as view:
                assert view.state() == State()
                assert view.counts().documents == 0

    def test_storage_rows_round_trip(self, storage):
        payloads = [bytes(range(256)), b"\x00" * 600, b"", "é✓".encode() * 50]
        ids = ["plain", "ünïcødé id ✓", "x" * 300, "0"]
        rows = [_row(i + 10, doc_id=ids[i], payload=payloads[i], cluster=7, rep=i == 0) for i in range(4)]
        with storage.write() as tx:
            tx.insert_docs(rows)
            tx.set_state(State(next_seq=14, next_cluster=8, id_kind="str", layout='{"dim": 3, "é": "✓"}'))
        with storage.read() as view:
            assert view.state() == State(next_seq=14, next_cluster=8, id_kind="str", layout='{"dim": 3, "é": "✓"}')
            got = {r.seq: r for r in view.docs_by_seq([13, 10, 11, 12, 99])}
            assert got == {r.seq: r for r in rows}
            by_id = {r.id: r for r in view.docs_by_id(["ünïcødé id ✓", "0", "missing"])}
            assert set(by_id) == {"ünïcødé id ✓", "0"} and by_id["0"].payload == "é✓".encode() * 50
            light = view.docs_in_clusters([7, 8], payload=False)
            assert sorted(r.seq for r in light) == [10, 11, 12, 13] and all(r.payload == b"" for r in light)
            assert [r.is_rep for r in sorted(light, key=lambda r: r.seq)] == [True, False, False, False]
            c = view.counts()
            assert (c.documents, c.representatives, c.band_rows) == (4, 1, 0)

    def test_storage_many_rows_and_long_key_lists(self, storage):
        # more ids / keys than one SQL parameter list or one Redis call usually takes
        n = 2500
        with storage.write() as tx:
            tx.insert_docs([_row(i) for i in range(n)])
            keys = np.arange(n, dtype=np.int64) * 7919 - 10_000
            tx.insert_bands(keys, np.arange(n, dtype=np.int64))
        with storage.read() as view:
            assert len(view.docs_by_id([f"d{i}" for i in range(n)], payload=False)) == n
            assert len(view.docs_by_seq(list(range(0, n, 2)), payload=False)) == (n + 1) // 2
            k, s = view.candidates(keys[::-1])
            assert sorted(zip(k.tolist(), s.tolist())) == sorted(zip(keys.tolist(), range(n)))

    def test_storage_candidates_by_band_key(self, storage):
        extreme = np.array([np.iinfo(np.int64).min, -2, 0, 1, np.iinfo(np.int64).max], dtype=np.int64)
        with storage.write() as tx:
            tx.insert_docs([_row(s) for s in (1, 2, 3)])
            # seq 1 and 2 share key -1; seq 3 has the extremes
            tx.insert_bands(np.array([-1, 5, -1, 6], dtype=np.int64), np.array([1, 1, 2, 2], dtype=np.int64))
            tx.insert_bands(extreme, np.full(extreme.size, 3, dtype=np.int64))
        with storage.read() as view:
            k, s = view.candidates(np.array([-1, -1, 6, 12345], dtype=np.int64))
            assert k.dtype == np.int64 and s.dtype == np.int64
            assert sorted(zip(k.tolist(), s.tolist())) == [(-1, 1), (-1, 2), (6, 2)]
            k, s = view.candidates(extreme)
            assert sorted(zip(k.tolist(), s.tolist())) == sorted((int(x), 3) for x in extreme)
            k, s = view.candidates(np.zeros(0, dtype=np.int64))
            assert k.size == 0 and s.size == 0
            assert view.counts().band_rows == 4 + extreme.size

    def test_storage_delete_and_update(self, storage):
        with storage.write() as tx:
            tx.insert_docs([_row(1), _row(2, cluster=1, rep=False), _row(3)])
            tx.insert_bands(np.array([10, 11, 30], dtype=np.int64), np.array([1, 1, 3], dtype=np.int64))
        with storage.write() as tx:
            tx.delete_docs([1])
            tx.delete_bands(np.array([10, 11, 999], dtype=np.int64), np.array([1, 1, 1], dtype=np.int64))
            tx.update_docs([Assignment(seq=2, cluster=1, is_rep=True, similarity=1.0, stages=0)])
            tx.insert_bands(np.array([10], dtype=np.int64), np.array([2], dtype=np.int64))
        with storage.read() as view:
            assert view.docs_by_seq([1]) == [] and view.docs_by_id(["d1"]) == []
            (two,) = view.docs_by_seq([2])
            assert two.is_rep and two.cluster == 1 and two.similarity == 1.0 and two.stages == 0
            assert two.payload == _row(2).payload  # an update keeps the payload
            k, s = view.candidates(np.array([10, 11, 30], dtype=np.int64))
            assert sorted(zip(k.tolist(), s.tolist())) == [(10, 2), (30, 3)]
            assert [r.seq for r in view.scan(0, 10)] == [2, 3]

    def test_storage_scan_pages_in_seq_order(self, storage):
        seqs = [5, 1, 9, 3, 7, 2]
        with storage.write() as tx:
            tx.insert_docs([_row(s) for s in seqs])
        with storage.read() as view:
            pages, after = [], -1
            while True:
                page = view.scan(after, 4, payload=False)
                if not page:
                    break
                pages.append([r.seq for r in page])
                after = page[-1].seq
        assert pages == [[1, 2, 3, 5], [7, 9]]

    def test_storage_exception_rolls_the_batch_back(self, storage):
        with storage.write() as tx:
            tx.insert_docs([_row(1)])
            tx.set_state(State(next_seq=2, next_cluster=2, id_kind="str"))
        with pytest.raises(RuntimeError, match="boom"):
            with storage.write() as tx:
                tx.insert_docs([_row(2)])
                tx.insert_bands(np.array([1], dtype=np.int64), np.array([2], dtype=np.int64))
                tx.update_docs([Assignment(seq=1, cluster=9, is_rep=False, similarity=0.5, stages=2)])
                tx.set_state(State(next_seq=3, next_cluster=3, id_kind="str"))
                raise RuntimeError("boom")
        with storage.read() as view:
            assert view.state() == State(next_seq=2, next_cluster=2, id_kind="str")
            assert [r.seq for r in view.scan(-1, 10)] == [1]
            assert view.docs_by_seq([1])[0].cluster == 1
            assert view.candidates(np.array([1], dtype=np.int64))[0].size == 0
        with storage.write() as tx:  # the storage is usable after a rollback
            tx.insert_docs([_row(2)])
        with storage.read() as view:
            assert view.counts().documents == 2

    def test_storage_writer_lock_serializes_read_modify_write(self, storage_url, storage):
        """Each writer reads the counter, waits, writes counter+1: without the lock updates are lost."""
        writers, rounds = 3, 4
        errors: list[BaseException] = []

        def work(w: int) -> None:
            try:
                with open_storage(storage_url) as s:
                    for i in range(rounds):
                        with s.write() as tx:
                            st = tx.state()
                            time.sleep(0.02)
                            tx.insert_docs([_row(st.next_seq, doc_id=f"w{w}-{i}")])
                            tx.set_state(State(next_seq=st.next_seq + 1, next_cluster=0, id_kind="str"))
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(w,)) for w in range(writers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not errors, errors
        with storage.read() as view:
            assert view.state().next_seq == writers * rounds
            assert [r.seq for r in view.scan(-1, 100)] == list(range(writers * rounds))

    def test_storage_reader_is_not_blocked_by_a_writer(self, storage_url, storage):
        with storage.write() as tx:
            tx.insert_docs([_row(1)])
        holding, release = threading.Event(), threading.Event()

        def hold() -> None:
            with open_storage(storage_url) as s, s.write() as tx:
                tx.insert_docs([_row(2)])
                holding.set()
                release.wait(30)

        t = threading.Thread(target=hold)
        t.start()
        try:
            assert holding.wait(30)
            t0 = time.monotonic()
            with storage.read() as view:
                # the uncommitted row is invisible; the committed one is there
                assert [r.seq for r in view.scan(-1, 10)] == [1]
            assert time.monotonic() - t0 < 5
        finally:
            release.set()
            t.join(30)
        with storage.read() as view:
            assert [r.seq for r in view.scan(-1, 10)] == [1, 2]

    def test_storage_lock_timeout_is_a_storage_error(self, storage_url, storage):
        holding, release = threading.Event(), threading.Event()

        def hold() -> None:
            with open_storage(storage_url) as s, s.write():
                holding.set()
                release.wait(30)

        t = threading.Thread(target=hold)
        t.start()
        try:
            assert holding.wait(30)
            with open_storage(storage_url, StorageOptions(lock_timeout=0.5)) as s:
                t0 = time.monotonic()
                with pytest.raises(StorageError, match="lock"):
                    with s.write() as tx:
                        tx.insert_docs([_row(5)])
                assert time.monotonic() - t0 < 10
        finally:
            release.set()
            t.join(30)
        with storage.read() as view:
            assert view.docs_by_seq([5]) == []

    # ------------------------------------------------------------------ part 2: diversify.Index on the backend

    def test_index_add_query_delete_export(self, storage_url, tmp_path):
        import diversify

        base = [_doc(i) for i in range(30)]
        near = [_near(i) for i in range(10)]
        with diversify.Index(storage_url) as idx:
            first = idx.add(base, ids=[f"b{i}" for i in range(30)])
            assert [m.joined for m in first] == [False] * 30
            assert len({m.cluster for m in first}) == 30
            got = idx.add(near, ids=[f"n{i}" for i in range(10)])
            for i, m in enumerate(got):
                assert m.joined and m.representative == f"b{i}" and m.cluster == first[i].cluster
                assert 0.8 <= m.similarity < 1.0 and m.matched == ((f"b{i}", m.similarity),)
            docs_before = idx.stats()["documents"]
            q = idx.query([_near(12), _doc(999)], ids=["q1", "q2"])
            assert q[0].joined and q[0].representative == "b12" and q[0].cluster == first[12].cluster
            assert q[1].cluster is None and not q[1].joined and q[1].matched == ()
            assert idx.stats()["documents"] == docs_before == 40  # query wrote nothing
            assert idx.cluster_of(["n3", "b3", "zz"]) == [first[3].cluster, first[3].cluster, None]
            assert idx.members(first[3].cluster) == ["b3", "n3"]
            assert idx.check() == []
            # delete a representative: its member takes over the cluster id; other clusters untouched
            before = {f"b{i}": c for i, c in enumerate(idx.cluster_of([f"b{i}" for i in range(30)]))}
            res = idx.delete(["b3", "n5", "nope"])
            assert res == {"deleted": 2, "missing": ["nope"], "reassigned": 1}
            assert idx.members(first[3].cluster) == ["n3"]
            assert idx.members(first[5].cluster) == ["b5"]
            after = idx.cluster_of([f"b{i}" for i in range(30)])
            assert all(after[i] == before[f"b{i}"] for i in range(30) if i != 3) and after[3] is None
            assert idx.check() == []
            cm = idx.export(tmp_path / "live.dvf")
            _assert_export_matches(idx, diversify.load(tmp_path / "live.dvf"))
            assert cm.n_docs == 38
            # the export is a normal artifact: `add` extends it
            ext = diversify.add(tmp_path / "live.dvf", [_near(20)], ids=["m20"]).cluster_map
            assert ext.lookup(["m20"])[0] == ext.lookup(["b20"])[0] != ext.lookup(["b21"])[0]

    def test_index_every_fold_is_exactly_verified_against_stored_documents(self, storage_url):
        """Documents added one at a time (so every pair is a new document against a stored one), many
        of them 0.74-0.86 similar to a stored one: every fold's exact Jaccard reaches the threshold.
        The same stream with the estimate alone (verify="estimate", no stored sets) folds some pairs
        below it, so this corpus does test the stored sets."""
        import diversify
        from diversify.config import BuildConfig, MinHashConfig

        texts = [_doc(i) for i in range(40)] + [_edited(i, c) for i in range(40) for c in (2, 3)]
        ids = list(range(len(texts)))
        below: dict = {}
        for verify in ("auto", "estimate"):
            url = storage_url if verify == "auto" else _other_index(storage_url)
            cfg = BuildConfig(minhash=MinHashConfig(verify=verify))
            with diversify.Index(url, cfg) as idx:
                for i, t in zip(ids, texts):
                    idx.add([t], ids=[i])
                rows = list(idx.scan())
                assert idx.check() == [] if verify == "auto" else True
            rep_of = {r.cluster: int(r.id) for r in rows if r.is_rep}
            folds = [(int(r.id), rep_of[r.cluster]) for r in rows if not r.is_rep]
            jac = [_jaccard(texts[a], texts[b]) for a, b in folds]
            below[verify] = [j for j in jac if j < 0.8]
            if verify == "auto":
                assert len(folds) >= 30, f"too few folds ({len(folds)}) to test anything"
                assert min(jac) >= 0.8, f"folds below the threshold: {sorted(below[verify])[:5]}"
        assert below["estimate"], "the estimate alone folded nothing below 0.8: the corpus is too easy"

    def test_index_source_thresholds_fold_each_pair_at_the_stricter_of_its_two(self, storage_url, tmp_path):
        """``source_thresholds`` as in the build: edges at the lowest threshold, every fold checked
        against the stricter of its two documents' thresholds, each stored with its document."""
        import diversify
        from diversify.config import BuildConfig, MinHashConfig
        from diversify.errors import ConfigError

        cfg = BuildConfig(minhash=MinHashConfig(threshold=0.8), source_thresholds={"strict": 0.97, "lax": 0.7})
        src = {i: "lax" if i % 2 == 0 else "strict" for i in range(12)}
        with diversify.Index(storage_url, cfg) as idx:
            idx.add([_doc(i) for i in range(12)], ids=[f"b{i}" for i in range(12)], sources=[src[i] for i in range(12)])
            # one at a time, so each is judged against stored documents and their stored thresholds
            got = {}
            for i in range(12):
                for tag, text in (("n", _near(i)), ("e", _edited(i, 3))):  # J ~0.92 and 0.74-0.86
                    got[f"{tag}{i}"] = idx.add([text], ids=[f"{tag}{i}"], sources=["lax"])[0]
            for i in range(12):
                for tag in ("n", "e"):
                    m = got[f"{tag}{i}"]
                    if src[i] == "lax":  # both lax: 0.7 decides, below the config's own 0.8 for most "e"
                        assert m.joined and m.representative == f"b{i}", (tag, i, m)
                    else:  # a strict base: 0.97 decides, so neither folds under it
                        assert m.representative != f"b{i}", (tag, i, m)
            rows = list(idx.scan())
            text_of = {f"b{i}": _doc(i) for i in range(12)}
            text_of.update({f"n{i}": _near(i) for i in range(12)})
            text_of.update({f"e{i}": _edited(i, 3) for i in range(12)})
            thr = {**{f"b{i}": cfg.source_thresholds[src[i]] for i in range(12)},
                   **{f"{t}{i}": 0.7 for t in "ne" for i in range(12)}}
            rep_of = {r.cluster: r.id for r in rows if r.is_rep}
            for r in rows:
                if not r.is_rep:
                    rep = rep_of[r.cluster]
                    assert _jaccard(text_of[r.id], text_of[rep]) >= max(thr[r.id], thr[rep]), (r.id, rep)
            assert any(_jaccard(text_of[r.id], text_of[rep_of[r.cluster]]) < 0.8 for r in rows if not r.is_rep)
            assert idx.check() == []
            # query: each document at its own source's threshold against the stored ones'
            q = idx.query([_near(0), _near(0), _near(1)], sources=["lax", "strict", "lax"])
            assert q[0].representative == "b0" and q[1].cluster is None and q[2].representative != "b1"
            with pytest.raises(ConfigError, match="needs `sources`"):
                idx.query([_near(0)])
            with pytest.raises(ConfigError, match="needs `sources`"):
                idx.add([_near(30)], ids=["x"])
            # delete a lax representative: its members are re-assigned under the same thresholds
            idx.delete(["b0"])
            assert idx.check() == []
            cm = idx.export(tmp_path / "src.dvf")
            _assert_export_matches(idx, diversify.load(tmp_path / "src.dvf"))
            assert cm.n_docs == len(rows) - 1
            # the export is the build's artifact: `add` with sources extends it under the same rule (m2,
            # a copy of b2, is 0.92 and 0.77 similar to the other members, n2 and e2; m3 is 0.92 to b3)
            ext = diversify.add(tmp_path / "src.dvf", [_doc(2), _near(3)], ids=["m2", "m3"],
                                sources=["lax", "lax"]).cluster_map
            assert ext.lookup(["m2"])[0] == ext.lookup(["b2"])[0] and ext.lookup(["m3"])[0] != ext.lookup(["b3"])[0]

    def test_index_near_duplicates_in_one_batch_share_a_cluster(self, storage_url):
        import diversify

        with diversify.Index(storage_url) as idx:
            got = idx.add([_doc(1), _near(1), _doc(2), _near(2, 7)], ids=[1, 2, 3, 4])
            assert got[0].cluster == got[1].cluster and got[2].cluster == got[3].cluster != got[0].cluster
            for a, b in ((0, 1), (2, 3)):  # one of each pair (the longer: representative="longest") is the rep
                assert got[a].joined != got[b].joined
                rep, member = (a, b) if got[b].joined else (b, a)
                assert got[member].representative == rep + 1 and isinstance(got[member].representative, int)
                assert got[rep].representative == rep + 1 and got[rep].similarity == 1.0
            assert idx.check() == []

    def test_index_two_processes_add_near_duplicates_at_once(self, storage_url):
        """Each of two processes adds one of each near-duplicate pair, at the same moment: the
        assignment step is serialized, so the second sees the first and every pair is one cluster."""
        import diversify

        pairs = 12
        with diversify.Index(storage_url) as idx:
            idx.add([_doc(10_000 + i) for i in range(5)], ids=[f"seed{i}" for i in range(5)])  # creates the index
        rounds = []
        for r in range(2):
            procs = [_spawn(_ADD_ON_GO, storage_url, side, r, pairs) for side in ("a", "b")]
            for p in procs:
                assert p.stdout.readline().strip() == "ready", p.stderr.read()
            for p in procs:
                p.stdin.write("go\n")
                p.stdin.flush()
            for p in procs:
                out, err = p.communicate(timeout=300)
                assert p.returncode == 0, err
            rounds.append(r)
        with diversify.Index(storage_url) as idx:
            for r in rounds:
                a = idx.cluster_of([f"a{r}-{i}" for i in range(pairs)])
                b = idx.cluster_of([f"b{r}-{i}" for i in range(pairs)])
                assert None not in a and None not in b
                assert a == b, f"round {r}: near-duplicates added at once by two writers split: {a} vs {b}"
            assert idx.stats()["documents"] == 5 + 2 * 2 * pairs
            assert idx.check() == []

    def test_index_sigkill_of_writers_leaves_it_consistent(self, storage_url, tmp_path):
        """Writers add batches (and delete older batches whole); SIGKILL at random points; afterwards
        every batch is all there or not at all, and every invariant holds."""
        import random

        import diversify

        rng = random.Random(20261201)
        zygote = _spawn(_ZYGOTE, storage_url, str(tmp_path / "warm.db"))
        assert zygote.stdout.readline().strip() == "ready", zygote.stderr.read()
        kills = 0
        try:
            for trial in range(6):
                zygote.stdin.write(f"fork {trial}\n")
                zygote.stdin.flush()
                pid = int(zygote.stdout.readline())
                time.sleep(rng.uniform(0.3, 2.5))
                os.kill(pid, signal.SIGKILL)
                zygote.stdin.write("reap\n")
                zygote.stdin.flush()
                assert zygote.stdout.readline().strip() == "reaped"
                kills += 1
        finally:
            zygote.stdin.write("quit\n")
            zygote.stdin.flush()
            zygote.communicate(timeout=60)
        assert kills == 6
        with diversify.Index(storage_url) as idx:
            problems = idx.check()
            assert problems == [], problems
            rows = list(idx.scan())
            batches: dict = {}
            for r in rows:
                batches.setdefault(r.id.rsplit("-", 1)[0], []).append(r.id)
            assert batches, "no batch was committed before the kills"
            for name, got in batches.items():
                assert len(got) == _KILL_BATCH, f"batch {name} is partly there ({len(got)} of {_KILL_BATCH})"
            # the index takes writes again
            idx.add([_near(5, 11)], ids=["after-0"])
            assert idx.check() == []

    def test_index_check_finds_broken_invariants(self, storage_url):
        """Index.check can fail: each invariant broken by hand through the storage is reported."""
        import diversify

        with diversify.Index(storage_url) as idx:
            got = idx.add([_doc(1), _near(1), _doc(2)], ids=["a", "a2", "b"])
            assert idx.check() == []
            rows = {r.id: r for r in idx.scan()}
            member = "a2" if got[1].joined else "a"
            with idx.storage.write() as tx:  # move the member under an unrelated representative
                m = rows[member]
                tx.update_docs([Assignment(m.seq, rows["b"].cluster, False, 0.9, 2)])
            assert any("not verified similar" in p for p in idx.check())
            b = rows["b"]
            b_bands = idx.band_rows_of([b])
            with idx.storage.write() as tx:
                tx.update_docs([Assignment(m.seq, m.cluster, False, m.similarity, m.stages)])
                tx.delete_bands(*b_bands)
            assert any("band rows differ" in p for p in idx.check())
            with idx.storage.write() as tx:
                tx.insert_bands(*b_bands)
                tx.update_docs([Assignment(b.seq, b.cluster, False, 1.0, 0)])  # a cluster without a representative
            assert any("0 representatives" in p for p in idx.check())

    def test_index_newer_schema_is_refused(self, storage_url):
        import diversify
        from diversify.config import BuildConfig, canonical_json, fingerprint
        from diversify.errors import IncompatibleIndexError

        cfg = BuildConfig()
        with open_storage(storage_url) as s:
            s.initialize(Meta(schema_version=SCHEMA_VERSION + 1, config_json=canonical_json(cfg),
                              fingerprint=fingerprint(cfg), created_by="9.9.9"))
        with pytest.raises(IncompatibleIndexError, match=rf"schema version {SCHEMA_VERSION + 1}.*9\.9\.9.*Upgrade"):
            diversify.Index(storage_url)

    def test_index_other_config_is_refused_with_the_fields_named(self, storage_url):
        import diversify
        from diversify.config import BuildConfig, MinHashConfig, TextConfig
        from diversify.errors import IncompatibleIndexError

        diversify.Index(storage_url).close()
        other = BuildConfig(minhash=MinHashConfig(threshold=0.7), text=TextConfig(k=4))
        with pytest.raises(IncompatibleIndexError) as e:
            diversify.Index(storage_url, config=other)
        assert "minhash.threshold: 0.8 -> 0.7" in str(e.value) and "text.k: 5 -> 4" in str(e.value)
        diversify.Index(storage_url, config=BuildConfig()).close()  # the same config opens it
        diversify.Index(storage_url, config={"seed": 1}).close()

    def test_index_bad_input_is_refused_like_build_and_writes_nothing(self, storage_url):
        import diversify
        from diversify.errors import DuplicateIdError, InputError, InputTypeError

        with diversify.Index(storage_url) as idx:
            idx.add([_doc(1), _doc(2)], ids=["x1", "x2"], vectors=np.eye(2, 8))
            cases = [  # (texts, ids, vectors): each refused by build's validators with build's message
                ([_doc(3), _doc(4)], ["a", "a"], np.eye(2, 8)),
                ([_doc(3)], [True], np.eye(1, 8)),
                ([_doc(3)], [1.5], np.eye(1, 8)),
                ([_doc(3), _doc(4)], ["a"], np.eye(2, 8)),
                ([_doc(3)], ["a", "b"], np.eye(1, 8)),
                ([_doc(3), 7], ["a", "b"], np.eye(2, 8)),
                ([_doc(3)], ["\ud800"], np.eye(1, 8)),
                ([_doc(3)], ["a"], np.full((1, 8), np.nan)),
                ([_doc(3)], ["a"], np.zeros((1, 8))),
                ([_doc(3), _doc(4)], ["a", 2], np.eye(2, 8)),
            ]
            for texts, ids, vecs in cases:
                with pytest.raises((InputError, InputTypeError)) as built:
                    diversify.build(texts, ids=ids, vectors=vecs)
                with pytest.raises(type(built.value)) as added:
                    idx.add(texts, ids=ids, vectors=vecs)
                assert str(added.value) == str(built.value)
            with pytest.raises(InputError, match="not one str"):
                idx.add(_doc(3), ids=["a"])
            with pytest.raises(DuplicateIdError, match=r"in the index already.*'x2'"):
                idx.add([_doc(5), _doc(6)], ids=["new", "x2"], vectors=np.eye(2, 8))
            with pytest.raises(InputError, match="id kind"):
                idx.add([_doc(5)], ids=[5], vectors=np.eye(1, 8))
            with pytest.raises(InputError, match="dimension"):
                idx.add([_doc(5)], ids=["y"], vectors=np.eye(1, 9))
            with pytest.raises(InputError, match="dimension"):
                idx.add([_doc(5)], ids=["y"])
            with pytest.raises(InputError, match="empty"):
                idx.add([], ids=[])
            assert idx.stats()["documents"] == 2 and idx.check() == []
            assert idx.cluster_of(["new", "a"]) == [None, None]

    def test_index_live_lookup_from_threads_while_adding(self, storage_url):
        """Diversifier threads read cluster ids live while the application adds through the same Index."""
        import diversify

        with diversify.Index(storage_url) as idx:
            idx.add([_doc(i) for i in range(8)], ids=[f"a{i}" for i in range(8)])
            search = diversify.Diversifier(idx, k=16, max_rounds=0).wrap(
                lambda q, k: [(f"a{i}", 1.0 - i / 100) for i in range(8)] + [(f"n{i}", 0.5) for i in range(8)])
            errors: list = []
            stop = threading.Event()

            def serve() -> None:
                try:
                    while not stop.is_set():
                        assert len(search("q").ids) >= 8
                except BaseException as exc:  # pragma: no cover - reported below
                    errors.append(exc)

            threads = [threading.Thread(target=serve) for _ in range(4)]
            for t in threads:
                t.start()
            try:
                for i in range(8):
                    idx.add([_near(i)], ids=[f"n{i}"])
            finally:
                stop.set()
                for t in threads:
                    t.join(60)
            assert not errors, errors
            assert search("q").ids == [f"a{i}" for i in range(8)]  # every n{i} folded under its a{i}

    def test_index_vectors_only(self, storage_url, tmp_path):
        import diversify

        rng = np.random.default_rng(7)
        v = rng.normal(size=(30, 32))
        near = v[:6] + 0.01 * rng.normal(size=(6, 32))
        with diversify.Index(storage_url) as idx:
            idx.add(vectors=v, ids=list(range(30)))
            got = idx.add(vectors=near, ids=list(range(100, 106)))
            assert [m.representative for m in got] == list(range(6)) and all(m.similarity > 0.99 for m in got)
            assert idx.query(vectors=near[:1])[0].representative == 0
            with pytest.raises(InputError, match="texts"):
                idx.add([_doc(1)], ids=[500], vectors=v[:1])
            idx.delete([0, 1])
            assert idx.cluster_of([100, 101]) == [got[0].cluster, got[1].cluster]
            assert idx.check() == []
            _assert_export_matches(idx, idx.export(tmp_path / "v.dvf"))

    def test_index_diversifier_folds_a_document_added_a_moment_ago(self, storage_url):
        import diversify

        with diversify.Index(storage_url) as idx:
            idx.add([_doc(1), _doc(2)], ids=["a", "b"])
            hits = [("a", 0.9), ("a2", 0.8), ("b", 0.7)]
            search = diversify.Diversifier(idx, k=3, max_rounds=0).wrap(lambda q, k: hits[:k])
            assert search("q").ids == ["a", "a2", "b"]  # a2 is not in the index: its own cluster
            idx.add([_near(1)], ids=["a2"])
            assert search("q").ids == ["a", "b"]  # added a moment ago: folded under a on the next query


def _doc(i: int, words: int = 120) -> str:
    """A deterministic text of ``words`` words from a 3,000-word vocabulary (independent per i)."""
    rng = np.random.default_rng(1_000_003 * (i + 1))
    return " ".join(f"w{x}" for x in rng.integers(0, 3000, words))


def _edited(i: int, changes: int) -> str:
    """``_doc(i)`` with ``changes`` words replaced at spread-out positions: Jaccard 0.74-0.86."""
    words = _doc(i).split()
    rng = np.random.default_rng(7 * i + changes)
    for j, where in enumerate(rng.choice(len(words) // changes, changes, replace=False) + np.arange(changes) * (len(words) // changes)):
        words[int(where)] = f"edit{j}"
    return " ".join(words)


def _jaccard(a: str, b: str) -> float:
    """Exact Jaccard of two texts' 64-bit shingle sets, as the batch build computes it."""
    from diversify.config import BuildConfig
    from diversify.text import exact_jaccard, sorted_unique_shingles

    cfg = BuildConfig()
    starts, counts, hashes = sorted_unique_shingles([a, b], cfg.text, cfg.seed)
    return exact_jaccard(hashes[starts[0]: starts[0] + counts[0]], hashes[starts[1]: starts[1] + counts[1]])


def _other_index(url: str) -> str:
    """A second, empty index next to the one ``url`` names (another file, or another ?index= name)."""
    if url.startswith("sqlite"):
        return url[:-3] + "-other.db" if url.endswith(".db") else url + "-other"
    sep = "&" if "?" in url else "?"
    if "index=" in url:
        return url.replace("index=", "index=other")
    return url + f"{sep}index=other"


def _near(i: int, where: int = 60) -> str:
    """``_doc(i)`` with one word replaced: Jaccard ~0.92 on word 5-shingles."""
    words = _doc(i).split()
    words[where] = "changed"
    return " ".join(words)


def _assert_export_matches(idx, cm) -> None:
    """The exported artifact holds every live document, with the index's partition and representatives."""
    rows = list(idx.scan())
    ids = [int(r.id) if str(cm.id_kind) == "int" else r.id for r in rows]
    assert sorted(map(str, cm.ids)) == sorted(str(i) for i in ids)
    looked = cm.lookup(ids).tolist()
    by_index: dict = {}
    by_export: dict = {}
    for r, c in zip(rows, looked):
        by_index.setdefault(r.cluster, set()).add(r.id)
        by_export.setdefault(c, set()).add(r.id)
    assert sorted(map(sorted, by_index.values())) == sorted(map(sorted, by_export.values()))
    reps = {r.id for r in rows if r.is_rep}
    rep_mask = np.asarray(cm.is_representative, dtype=bool)
    assert {str(i) for i, m in zip(cm.ids, rep_mask) if m} == reps


_KILL_BATCH = 20


def _spawn(code: str, *args):
    import subprocess
    import sys

    import diversify

    root = os.path.dirname(os.path.dirname(os.path.abspath(diversify.__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.path.join(root, "tests"),
                                                       os.environ.get("PYTHONPATH", "")]))
    return subprocess.Popen([sys.executable, "-c", code, *map(str, args)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


_ADD_ON_GO = r"""
import sys
import diversify
from index.contract import _doc, _near
url, side, r, pairs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
texts = [(_doc if side == "a" else _near)(500 * (r + 1) + i) for i in range(pairs)]
idx = diversify.Index(url)
idx.query(texts[:1])  # warm the kernels before the race
print("ready", flush=True)
sys.stdin.readline()
idx.add(texts, ids=[f"{side}{r}-{i}" for i in range(pairs)])
idx.close()
"""

_ZYGOTE = r"""
import os, sys
import diversify
from index.contract import _doc, _near, _KILL_BATCH
url, warm = sys.argv[1], sys.argv[2]
w = diversify.Index("sqlite:///" + warm)  # compile / load the kernels once, on a scratch index
w.add([_doc(1), _near(1)], ids=["a", "b"]); w.delete(["a"]); w.query([_doc(1)]); w.close()
print("ready", flush=True)
child = None
for line in sys.stdin:
    cmd = line.split()
    if cmd[0] == "fork":
        trial = int(cmd[1])
        pid = os.fork()
        if pid == 0:  # the writer: its own connection, batches until killed
            try:
                idx = diversify.Index(url, lock_timeout=60)
                b = 0
                while True:
                    base = 100_000 * (trial + 1) + 100 * b
                    texts = [(_near(i % 40, 30 + trial) if i % 3 == 0 else _doc(base + i)) for i in range(_KILL_BATCH)]
                    idx.add(texts, ids=[f"t{trial}b{b}-{i}" for i in range(_KILL_BATCH)])
                    if b >= 2 and b % 3 == 2:
                        idx.delete([f"t{trial}b{b - 2}-{i}" for i in range(_KILL_BATCH)])
                    b += 1
            finally:
                os._exit(0)
        child = pid
        print(pid, flush=True)
    elif cmd[0] == "reap":
        os.waitpid(child, 0)
        print("reaped", flush=True)
    elif cmd[0] == "quit":
        break
"""
