"""The live-index contract on Redis (a real redis-server, tests/index/servers_redis.py), plus what
only the Redis backend has: the writer lease and its fencing, the key layout's version, writers
SIGKILLed mid-batch, the server killed mid-batch, unreachable URLs, masked passwords, memory."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from diversify.errors import ConfigError, IncompatibleIndexError, StorageError
from diversify.index.registry import open_storage
from diversify.index.storage import DocRow, State, StorageOptions
from index.contract import META, IndexContract
from index.servers_redis import free_port, own_redis_server, redis_server, require_binary  # noqa: F401  (fixtures)

ROOT = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("redis_worker.py")


class TestRedis(IndexContract):
    @pytest.fixture
    def storage_url(self, redis_server) -> str:  # noqa: F811
        return redis_server.fresh_url()


def _row(seq: int, name: str = "d") -> DocRow:
    return DocRow(seq=seq, id=f"{name}{seq}", cluster=seq, is_rep=True, similarity=1.0, stages=0,
                  payload=bytes([seq % 256]) * 64)


def _seqs(storage) -> list[int]:
    with storage.read() as view:
        return [r.seq for r in view.scan(-1, 1_000_000, payload=False)]


def _worker(url: str, *args: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    return subprocess.Popen([sys.executable, str(WORKER), url, *args], stdout=subprocess.PIPE, text=True, env=env)


def _consistent(server, url: str) -> dict:
    """Recount the index from its raw keys and compare with its counters; returns the counts."""
    with open_storage(url) as s:
        prefix = s.p.encode()
        with s.read() as view:
            counts = view.counts()
            rows = view.scan(-1, 10**7, payload=False)
    c = server.client()
    try:
        ids = c.hgetall(prefix + b"ids")
        band_rows = sum(c.strlen(key) // 8 for key in c.scan_iter(match=prefix + b"b:*", count=1000))
        members = sum(len(v) // 8 for key in c.scan_iter(match=prefix + b"c:*") for v in c.hvals(key))
    finally:
        c.close()
    assert counts.documents == len(rows) == len(ids) == members
    assert counts.representatives == sum(r.is_rep for r in rows)
    assert counts.band_rows == band_rows
    return {"documents": len(rows), "band_rows": band_rows, "ids": {r.id for r in rows}}


def test_an_absent_server_binary_skips_outside_ci_and_fails_in_ci(monkeypatch):
    monkeypatch.delenv("DIVERSIFY_CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no-such-redis-server not found on PATH; install"):
        require_binary("no-such-redis-server")
    monkeypatch.setenv("DIVERSIFY_CI", "1")
    with pytest.raises(pytest.fail.Exception, match="DIVERSIFY_CI=1 but no-such-redis-server not found"):
        require_binary("no-such-redis-server")


# ---------------------------------------------------------------------------- diversify.Index on Redis


@pytest.mark.slow
def test_writer_processes_at_once_lose_nothing_and_fold_simultaneous_copies(redis_server, tmp_path):  # noqa: F811
    """4 writer processes start at the same instant; each adds the same 30 texts (under its own
    ids, so every text arrives 4 times at once, once per writer) and 25 texts of its own. Every
    document must be there once, the 4 copies of a text in one cluster, the others alone."""
    import json

    import diversify
    from diversify.corpus.datagen import generate_corpus

    writers, shared, own = 4, 30, 25
    texts = generate_corpus(shared + writers * own, words_per_doc=120, dup_fraction=0.0, seed=7).texts
    url = redis_server.fresh_url(lease=5)
    with diversify.Index(url):
        pass  # create it, so that no writer races on the creation
    start = time.time() + 8  # time for every process to import and connect
    procs = []
    for w in range(writers):
        mine = list(range(shared + w * own, shared + (w + 1) * own))
        order = []  # every writer adds shared text j at about the same moment
        for j in range(max(shared, own)):
            order += ([j] if j < shared else []) + ([mine[j]] if j < own else [])
        job = {"start": start, "batch": 10, "texts": [texts[i] for i in order],
               "ids": [f"w{w}-{i}" for i in order]}
        path = tmp_path / f"job{w}.json"
        path.write_text(json.dumps(job), encoding="utf-8")
        procs.append(subprocess.Popen([sys.executable, str(Path(__file__).with_name("redis_index_worker.py")), url,
                                       str(path)], stdout=subprocess.PIPE, text=True,
                                      env=dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get(
                                          "PYTHONPATH", "")]))))
    for proc in procs:
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0 and "done" in out
    with diversify.Index(url) as idx:
        stats = idx.stats()
        assert stats["documents"] == writers * (shared + own)
        assert stats["clusters"] == shared + writers * own
        for i in range(shared):
            copies = idx.cluster_of([f"w{w}-{i}" for w in range(writers)])
            assert None not in copies and len(set(copies)) == 1, (i, copies)
        singles = idx.cluster_of([f"w{w}-{i}" for w in range(writers) for i in range(shared + w * own,
                                                                                  shared + (w + 1) * own)])
        assert len(set(singles)) == writers * own
        members = [m for c in set(singles) | set(idx.cluster_of([f"w0-{i}" for i in range(shared)]))
                   for m in idx.members(c)]
        assert len(members) == len(set(members)) == writers * (shared + own)  # each in exactly one cluster
    _consistent(redis_server, url)


def test_an_index_of_a_newer_schema_is_refused(redis_server):  # noqa: F811
    import diversify
    from diversify.index.storage import SCHEMA_VERSION

    url = redis_server.fresh_url()
    with diversify.Index(url) as idx:
        idx.add(["a document about rivers and the old town bridge"], ids=["a"])
    c = redis_server.client()
    try:  # what a newer diversify would have written
        assert c.hset("dvf:{" + url.rsplit("index=", 1)[1] + "}:meta", "schema_version", SCHEMA_VERSION + 1) == 0
    finally:
        c.close()
    with pytest.raises(IncompatibleIndexError, match=f"schema version {SCHEMA_VERSION + 1}"):
        diversify.Index(url)


# ---------------------------------------------------------------------------- the lease and its fencing


def _stalled_writer(url: str, name: str):
    """A writer process inside its batch, then frozen (SIGSTOP: its lease-renewing thread stops too)."""
    proc = subprocess.Popen([sys.executable, str(WORKER), url, "stall", name], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])))
    assert proc.stdout is not None and proc.stdout.readline().strip() == "inside"
    proc.send_signal(signal.SIGSTOP)
    return proc


def _resume(proc, line: str = "commit") -> str:
    proc.send_signal(signal.SIGCONT)
    out, _ = proc.communicate(line + "\n", timeout=60)
    return out.strip()


@pytest.mark.parametrize("then", ["commit", "read"])
def test_a_frozen_writer_whose_lease_was_taken_over_cannot_commit_or_read_on(redis_server, then):  # noqa: F811
    url = redis_server.fresh_url(lease=0.5)
    with open_storage(url) as fresh:
        fresh.initialize(META)
        stale = _stalled_writer(url, "stale")
        try:
            with open_storage(url, StorageOptions(lock_timeout=20)) as other, other.write() as tx:
                tx.insert_docs([_row(2, "fresh")])  # took the lease once the frozen writer's expired
        finally:
            out = _resume(stale, then)
        assert out.startswith("refused:") and "lease" in out and "rolled back; nothing of it was written" in out, out
        assert _seqs(fresh) == [2]
        with fresh.read() as view:
            assert view.counts().documents == 1
    assert _consistent(redis_server, url)["ids"] == {"fresh2"}


def test_a_frozen_writer_cannot_commit_while_another_holds_the_lease(redis_server):  # noqa: F811
    url = redis_server.fresh_url(lease=0.5)
    with open_storage(url) as s:
        s.initialize(META)
        stale = _stalled_writer(url, "stale")
        try:
            with open_storage(url, StorageOptions(lock_timeout=20)) as other, other.write() as tx:
                out = _resume(stale)  # tries to commit while this batch holds the lease
                tx.insert_docs([_row(2, "fresh")])
        finally:
            if stale.poll() is None:
                _resume(stale)
        assert out.startswith("refused:") and "lease" in out, out
        assert _seqs(s) == [2]


def test_a_frozen_writer_nobody_waited_for_still_commits(redis_server):  # noqa: F811
    """Its lease expired, but no other writer took a fencing token since, so nobody can have
    committed in between: committing is safe."""
    url = redis_server.fresh_url(lease=0.3)
    with open_storage(url) as s:
        s.initialize(META)
        stale = _stalled_writer(url, "late")
        time.sleep(1.0)
        assert _resume(stale) == "committed"
        assert len(_seqs(s)) == 50


def test_a_live_writer_keeps_its_lease_through_a_long_batch(redis_server):  # noqa: F811
    url = redis_server.fresh_url(lease=0.3)
    with open_storage(url) as s, open_storage(url, StorageOptions(lock_timeout=0.6)) as other:
        s.initialize(META)
        with s.write() as tx:
            tx.insert_docs([_row(1)])
            t0 = time.monotonic()
            with pytest.raises(StorageError, match="lock"):  # 2x the lease later, still ours
                with other.write() as tx2:
                    tx2.insert_docs([_row(2)])
            assert time.monotonic() - t0 >= 0.5
        assert _seqs(s) == [1]


@pytest.mark.parametrize("lease", ["0", "-1", "abc", "1e9", ""])
def test_a_bad_lease_parameter_is_refused(redis_server, lease):  # noqa: F811
    with pytest.raises(ConfigError, match=r"`lease`.*\[0.05, 3600\]"):
        open_storage(redis_server.fresh_url(lease=lease))


def test_a_newer_key_layout_is_refused(redis_server):  # noqa: F811
    url = redis_server.fresh_url()
    with open_storage(url) as s:
        s.initialize(META)
        c = redis_server.client()
        c.hset(s.p + "meta", "layout", 99)
        c.close()
        for call in (s.read_meta, lambda: s.initialize(META)):
            with pytest.raises(IncompatibleIndexError, match="layout 99, newer than this diversify reads"):
                call()


# ---------------------------------------------------------------------------- killed writers


def test_a_writer_killed_inside_a_batch_leaves_nothing_and_its_lease_expires(redis_server):  # noqa: F811
    url = redis_server.fresh_url(lease=1)
    with open_storage(url) as s:
        s.initialize(META)
        with s.write() as tx:
            tx.insert_docs([_row(0, "before")])
            tx.set_state(State(next_seq=1, next_cluster=1, id_kind="str"))
        proc = _worker(url, "hold", "killed")
        try:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "inside"
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)
        t0 = time.monotonic()
        with open_storage(url, StorageOptions(lock_timeout=20)) as s2, s2.write() as tx:
            waited = time.monotonic() - t0
            assert tx.state() == State(next_seq=1, next_cluster=1, id_kind="str")
        assert waited < 5  # the lease (1 s) expired; nobody waited for lock_timeout
    assert _consistent(redis_server, url)["ids"] == {"before0"}


@pytest.mark.slow
def test_writers_killed_at_random_points_leave_whole_batches_only(redis_server):  # noqa: F811
    url = redis_server.fresh_url(lease=0.5)
    k = 40
    with open_storage(url) as s:
        s.initialize(META)
    rnd = random.Random(13)
    for round_ in range(8):
        proc = _worker(url, "loop", f"r{round_}", str(k))
        assert proc.stdout is not None
        proc.stdout.readline()  # it committed at least one batch; now kill it anywhere in the next ones
        time.sleep(rnd.uniform(0.0, 0.15))
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        got = _consistent(redis_server, url)
        batches: dict[str, int] = {}
        for doc_id in got["ids"]:
            b = doc_id.rsplit("-", 1)[0]
            batches[b] = batches.get(b, 0) + 1
        assert set(batches.values()) == {k}, f"a partial batch after kill {round_}: {batches}"
        assert got["band_rows"] == 9 * got["documents"]
        with open_storage(url) as s, s.read() as view:
            assert view.state().next_seq == got["documents"]


# ---------------------------------------------------------------------------- the server goes away


def test_the_server_killed_mid_batch_rolls_the_batch_back_and_says_so(own_redis_server):  # noqa: F811
    server = own_redis_server
    url = server.fresh_url(lease=1)
    with open_storage(url) as s:
        s.initialize(META)
        with s.write() as tx:
            tx.insert_docs([_row(1, "kept")])
        with pytest.raises(StorageError) as err:
            with s.write() as tx:
                tx.insert_docs([_row(2, "lost")])
                tx.insert_bands(np.array([5], dtype=np.int64), np.array([2], dtype=np.int64))
                server.kill()
                tx.docs_by_seq([1])
        msg = str(err.value)
        assert f"127.0.0.1:{server.port}" in msg and "rolled back; nothing of it was written" in msg
        assert "ConnectionError" in msg or "Connection" in msg
        server.start()  # the same append-only file
        # the same Storage object works again (a new connection) after the lease of the lost batch expired
        with s.write() as tx:
            tx.insert_docs([_row(3, "after")])
    assert _consistent(server, url)["ids"] == {"kept1", "after3"}


def test_the_server_killed_while_a_commit_is_in_flight_applies_all_or_nothing(own_redis_server):  # noqa: F811
    server = own_redis_server
    url = server.fresh_url(lease=1)
    with open_storage(url) as s:
        s.initialize(META)
        batch = s.write()
        tx = batch.__enter__()
        tx.insert_docs([_row(i, "inflight") for i in range(500)])
        tx.set_state(State(next_seq=500, next_cluster=500, id_kind="str"))  # nothing left to read
        assert server.proc is not None
        server.proc.send_signal(signal.SIGSTOP)  # the commit reaches a server that never runs it
        try:
            import threading

            killer = threading.Timer(0.5, server.kill)
            killer.start()
            with pytest.raises(StorageError, match="entirely or not at all"):
                batch.__exit__(None, None, None)
        finally:
            killer.cancel()
            killer.join()  # a late timer must not kill the server restarted below
            server.kill()
        server.start()
        assert _consistent(server, url)["documents"] in (0, 500)


def test_an_unreachable_url_fails_fast_naming_it_and_the_cause(redis_server):  # noqa: F811
    port = free_port()  # nothing listens there
    url = f"redis://alice:hunter2-secret@127.0.0.1:{port}/0?index=x"
    t0 = time.monotonic()
    with pytest.raises(StorageError) as err:
        open_storage(url, StorageOptions(connect_timeout=1))
    assert time.monotonic() - t0 < 5
    msg = str(err.value)
    assert f"redis://alice:***@127.0.0.1:{port}/0" in msg and "Connection" in msg
    assert "hunter2" not in msg and "hunter2" not in str(err.value.__cause__)


def test_a_wrong_password_is_refused_with_the_password_masked(redis_server):  # noqa: F811
    redis_server.add_user("alice", "right-pw-1")
    ok = redis_server.url(index="pw", user="alice", password="right-pw-1")
    with open_storage(ok) as s:
        assert s.initialize(META) == META
        assert "right-pw-1" not in s.url and "alice:***@" in s.url
    with pytest.raises(StorageError) as err:
        open_storage(redis_server.url(index="pw", user="alice", password="wrong-pw-2"))
    msg = str(err.value)
    assert "alice:***@" in msg and "wrong-pw-2" not in msg and "right-pw-1" not in msg
    assert "Authentication" in msg or "WRONGPASS" in msg or "invalid" in msg


# ---------------------------------------------------------------------------- memory


def _memory_without_clients(client) -> int:
    """The server's memory less its clients' buffers (a batch's request can sit in its connection's
    query buffer for a while after it ran)."""
    mem = client.info("memory")
    return int(mem["used_memory"]) - int(mem["mem_clients_normal"])


def test_a_band_row_costs_one_small_string(own_redis_server):  # noqa: F811
    """A band key is one Redis string of seq8s: ~110 bytes a row with its key (datasketch keeps a
    Redis set per band key plus a list per document, ~5.7 KB a document in all); a regression
    guard on the layout, and on the band-row counter.

    On a server of its own: ``used_memory`` is the whole server's, and on the shared one the
    keys of every earlier test sit in the same keyspace, whose hash table may double (both tables
    held while it rehashes) right when this test's 100,000 keys arrive (CI once measured 138
    bytes a row so; 110 alone, every time)."""
    server = own_redis_server
    url = server.fresh_url()
    rows = 100_000
    rng = np.random.default_rng(5)
    keys = rng.integers(np.iinfo(np.int64).min, np.iinfo(np.int64).max, size=rows, dtype=np.int64)
    c = server.client()
    try:
        with open_storage(url) as s:
            s.initialize(META)
            before = _memory_without_clients(c)
            with s.write() as tx:
                tx.candidates(keys)  # as the index does: the batch looks its keys up first
                tx.insert_bands(keys, np.arange(rows, dtype=np.int64) // 9)
            used = _memory_without_clients(c) - before
            with s.read() as view:
                assert view.counts().band_rows == rows
                k, got = view.candidates(keys[:1000])
                assert sorted(got.tolist()) == (np.arange(1000) // 9).tolist()
    finally:
        c.close()
    assert used / rows < 130, used / rows


def _on_first_exec(monkeypatch, action) -> list:
    """Run ``action()`` (another client's command) just before the first commit body (MULTI ...
    EXEC) reaches the server, i.e. between the lease check under WATCH and EXEC: the real
    connection, delayed by one hook. Returns the list of bodies sent."""
    import redis.connection

    sent: list = []
    original = redis.connection.AbstractConnection.send_packed_command

    def send(self, command, check_health=True):
        blob = command[0] if isinstance(command, list) and command else command
        if isinstance(blob, bytes) and blob.startswith(b"*1\r\n$5\r\nMULTI"):
            if not sent:
                action()
            sent.append(blob)
        return original(self, command, check_health)

    monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", send)
    return sent


def test_a_renewal_racing_the_commit_aborts_exec_and_the_commit_runs_again(redis_server, monkeypatch):  # noqa: F811
    """The heartbeat's PEXPIRE of our own lock between WATCH and EXEC makes EXEC apply nothing; the
    commit checks the lease again and commits once, whole."""
    url = redis_server.fresh_url()
    c = redis_server.client()
    try:
        with open_storage(url) as s:
            s.initialize(META)
            sent = _on_first_exec(monkeypatch, lambda: c.pexpire(s.p + "lock", 9000))
            with s.write() as tx:
                tx.insert_docs([_row(k) for k in range(5)])
                tx.insert_bands(np.arange(10, dtype=np.int64), np.arange(10, dtype=np.int64) // 2)
            assert len(sent) == 2  # the first EXEC aborted by the watched lock, the second committed
            assert _seqs(s) == list(range(5))
            with s.read() as view:
                assert view.counts().band_rows == 10
    finally:
        c.close()
    assert _consistent(redis_server, url)["documents"] == 5


def test_a_lease_taken_over_between_the_check_and_exec_writes_nothing(redis_server, monkeypatch):  # noqa: F811
    """Another writer takes the lease (INCR fence, SET lock) after our check under WATCH: our EXEC
    aborts, the check runs again and finds the other token: the batch is refused and none of it,
    bulk commands included, is written."""
    url = redis_server.fresh_url()
    c = redis_server.client()
    try:
        with open_storage(url) as s:
            s.initialize(META)
            with s.write() as tx:
                tx.insert_docs([_row(0)])

            def take_over():
                other = c.incr(s.p + "fence")
                c.set(s.p + "lock", str(other), px=60_000)

            sent = _on_first_exec(monkeypatch, take_over)
            with pytest.raises(StorageError, match="lease"):
                with s.write() as tx:
                    tx.insert_docs([_row(k, "late") for k in range(1, 6)])
                    tx.insert_bands(np.arange(10, dtype=np.int64), np.arange(10, dtype=np.int64))
            assert len(sent) == 1
            c.delete(s.p + "lock")
            assert _seqs(s) == [0]
            with s.read() as view:
                assert view.counts().band_rows == 0
            assert c.hlen(s.p + "ids") == 1
            assert not list(c.scan_iter(match=s.p.encode() + b"b:*"))
    finally:
        c.close()
