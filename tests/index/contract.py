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

import threading
import time

import numpy as np
import pytest

from diversify.errors import StorageError
from diversify.index.storage import (
    SCHEMA_VERSION,
    Assignment,
    DocRow,
    Meta,
    State,
    StorageOptions,
    open_storage,
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
