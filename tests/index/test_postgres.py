"""The live-index contract on PostgreSQL 15 (a real server started by the session, see servers.py),
plus what only this backend has: the URL and connection handling, a server that goes away in the
middle of a batch, the advisory writer lock across processes."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path

import numpy as np
import pytest

from diversify.errors import ConfigError, StorageError
from diversify.index.registry import open_storage
from diversify.index.storage import SCHEMA_VERSION, DocRow, Meta, State, StorageOptions
from index.contract import META, IndexContract
from index.servers import (  # noqa: F401  (postgres_server: the session fixture)
    PG_PASSWORD,
    ServerUnavailable,
    free_port,
    postgres_server,
    skip_or_fail,
    start_postgres,
    stop_postgres,
)


class TestPostgres(IndexContract):
    @pytest.fixture
    def storage_url(self, postgres_server) -> str:  # noqa: F811
        return postgres_server.new_index()


# --------------------------------------------------------------------------- URLs and connections

def _db(url: str) -> str:
    return urllib.parse.urlsplit(url).path.lstrip("/")


def _no_secret(message: str, *secrets: str) -> None:
    for secret in secrets:
        for form in {secret, urllib.parse.quote(secret, safe="")}:
            assert form not in message, f"the password {form!r} is in the message: {message}"


def test_unreachable_port_fails_fast_naming_the_masked_url():
    port = free_port()  # nothing listens there
    url = f"postgresql://diversify:{PG_PASSWORD}@127.0.0.1:{port}/db"
    t0 = time.monotonic()
    with pytest.raises(StorageError) as err:
        open_storage(url)
    assert time.monotonic() - t0 < 5
    msg = str(err.value)
    assert f"postgresql://diversify:***@127.0.0.1:{port}/db" in msg
    assert "refused" in msg.lower()  # the cause
    _no_secret(msg, PG_PASSWORD)


def test_silent_server_fails_within_connect_timeout():
    """A port that accepts TCP but never speaks (a hung server, a black-holing proxy)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # the kernel completes the handshake; nobody ever answers
        port = silent.getsockname()[1]
        url = f"postgresql://diversify:{PG_PASSWORD}@127.0.0.1:{port}/db"
        t0 = time.monotonic()
        with pytest.raises(StorageError) as err:
            open_storage(url, StorageOptions(connect_timeout=2))
        elapsed = time.monotonic() - t0
    assert 1.5 <= elapsed < 6, elapsed
    msg = str(err.value)
    assert "***@127.0.0.1" in msg and "timeout" in msg.lower()
    _no_secret(msg, PG_PASSWORD)


#: passwords with every character class a URL treats specially, and non-ASCII
PASSWORDS = ["p@ss:w/rd?#[x]", "ünï ✓ 100%", "semi;colon'quote\"back\\slash", "a%25b=c&d"]


@pytest.mark.parametrize("password", PASSWORDS)
def test_passwords_are_never_shown(postgres_server, password):  # noqa: F811
    role = f"pw{PASSWORDS.index(password)}"
    postgres_server.admin(f'DROP ROLE IF EXISTS "{role}"')
    postgres_server.admin(f'CREATE ROLE "{role}" LOGIN PASSWORD {_literal(password)}')
    good = postgres_server.url("postgres", user=role, password=password)
    with open_storage(good) as s:  # the percent-encoded URL reaches libpq intact
        assert s.read_meta() is None
        assert password not in s.url and "***" in s.url
    bad = postgres_server.url("postgres", user=role, password=password + "-wrong")
    with pytest.raises(StorageError) as err:
        open_storage(bad)
    msg = str(err.value)
    assert "password authentication failed" in msg and f"{role}:***@127.0.0.1" in msg
    _no_secret(msg, password + "-wrong")
    # the keyword form of libpq (?password=...) is masked too
    kw = f"postgresql://{role}@127.0.0.1:{postgres_server.port}/postgres?password=" + \
        urllib.parse.quote(password + "-wrong", safe="")
    with pytest.raises(StorageError) as err:
        open_storage(kw)
    _no_secret(str(err.value), password + "-wrong")


def test_malformed_url_is_a_config_error_without_the_password(postgres_server):  # noqa: F811
    # an invalid percent escape in the password: libpq's parser quotes the bad token in its message
    url = f"postgresql://diversify:se%zzcret@127.0.0.1:{postgres_server.port}/postgres"
    with pytest.raises((ConfigError, StorageError)) as err:
        open_storage(url)
    msg = str(err.value)
    _no_secret(msg, "se%zzcret", "zzcret")
    assert "diversify:***@" in msg


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


# --------------------------------------------------------------------------- a server that goes away mid-batch

def _rows(n0: int, n: int) -> list[DocRow]:
    return [DocRow(seq=i, id=f"d{i}", cluster=i, is_rep=True, similarity=1.0, stages=0, payload=bytes([i % 256]) * 64)
            for i in range(n0, n0 + n)]


def _write_batch(tx, n0: int, n: int) -> None:
    tx.insert_docs(_rows(n0, n))
    seqs = np.arange(n0, n0 + n, dtype=np.int64)
    tx.insert_bands(seqs * 3 + 1, seqs)
    tx.set_state(State(next_seq=n0 + n, next_cluster=n0 + n, id_kind="str"))


def _assert_only_first_batch(url: str, n: int) -> None:
    with open_storage(url) as s, s.read() as view:
        assert view.state() == State(next_seq=n, next_cluster=n, id_kind="str")
        assert [r.seq for r in view.scan(-1, 10 * n, payload=False)] == list(range(n))
        c = view.counts()
        assert (c.documents, c.representatives, c.band_rows) == (n, n, n)
        assert view.docs_by_id([f"d{n}", f"d{n + 1}"]) == []


def test_terminated_writer_connection_rolls_the_batch_back(postgres_server):  # noqa: F811
    url = postgres_server.new_database() + "?application_name=victim"
    with open_storage(url) as s:
        s.initialize(META)
        with s.write() as tx:
            _write_batch(tx, 0, 50)
        with pytest.raises(StorageError) as err:
            with s.write() as tx:
                _write_batch(tx, 50, 50)
                assert postgres_server.terminate_backends("victim") == 1
                tx.docs_by_seq([1])  # the next statement finds the connection gone
        msg = str(err.value)
        assert "rolled back" in msg and "nothing of it was written" in msg and "***@" in msg
        _no_secret(msg, PG_PASSWORD)
        _assert_only_first_batch(url, 50)
        with s.write() as tx:  # the same Storage reconnects
            _write_batch(tx, 50, 1)
    with open_storage(url) as s, s.read() as view:
        assert view.counts().documents == 51


@pytest.fixture(scope="module")
def crash_server():
    """A server of this module's own, for the tests that crash it (each leaves it running again)."""
    try:
        server = start_postgres()
    except ServerUnavailable as exc:
        skip_or_fail(str(exc))
    try:
        yield server
    finally:
        stop_postgres(server)


@pytest.fixture
def own_server(crash_server):
    if not crash_server.is_running():
        crash_server.start()
    return crash_server


def test_server_crash_mid_batch_rolls_the_batch_back(own_server):
    url = own_server.new_database()
    with open_storage(url) as s:
        s.initialize(META)
        with s.write() as tx:
            _write_batch(tx, 0, 40)
        with pytest.raises(StorageError) as err:
            with s.write() as tx:
                _write_batch(tx, 40, 40)
                own_server.stop("immediate")  # no checkpoint, every client cut off
                tx.counts()
        assert "rolled back" in str(err.value)
        own_server.start()  # crash recovery replays the WAL: batch 1 committed, batch 2 never did
        _assert_only_first_batch(url, 40)


def _slow_commit(server, url: str, *, fail: bool) -> None:
    """A deferred constraint trigger on docs: COMMIT sleeps 1.5 s per inserted row (then fails if ``fail``)."""
    db = _db(url)
    server.admin("CREATE FUNCTION public.slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                 "PERFORM pg_sleep(1.5); IF TG_ARGV[0] = 'fail' THEN RAISE EXCEPTION 'refused at commit'; END IF; "
                 "RETURN NULL; END $$", dbname=db)
    server.admin("CREATE CONSTRAINT TRIGGER slow AFTER INSERT ON diversify_default.docs DEFERRABLE INITIALLY "
                 f"DEFERRED FOR EACH ROW EXECUTE FUNCTION public.slow_commit('{'fail' if fail else 'ok'}')", dbname=db)


def _cut_client_socket_after(storage, delay: float) -> threading.Thread:
    """Close the client's side of the connection while its COMMIT runs on the server."""
    fd = os.dup(storage._conn.fileno())

    def cut() -> None:
        time.sleep(delay)
        with socket.socket(fileno=fd) as sock:
            sock.shutdown(socket.SHUT_RDWR)

    t = threading.Thread(target=cut)
    t.start()
    return t


def test_connection_lost_during_commit_that_went_through_is_a_success(postgres_server):  # noqa: F811
    url = postgres_server.new_database()
    with open_storage(url) as s:
        s.initialize(META)
        _slow_commit(postgres_server, url, fail=False)
        with s.write() as tx:
            _write_batch(tx, 0, 1)
            cutter = _cut_client_socket_after(s, 0.5)
        # COMMIT raised (the socket was cut) but the server committed: write() asked it and returned
        cutter.join(10)
        assert s._conn is None or s._conn.broken or s._conn.closed
    _assert_only_first_batch(url, 1)


def test_connection_lost_during_commit_that_failed_says_rolled_back(postgres_server):  # noqa: F811
    url = postgres_server.new_database()
    with open_storage(url) as s:
        s.initialize(META)
        with s.write() as tx:
            _write_batch(tx, 0, 5)
        _slow_commit(postgres_server, url, fail=True)
        with pytest.raises(StorageError, match="rolled back") as err:
            with s.write() as tx:
                _write_batch(tx, 5, 1)
                cutter = _cut_client_socket_after(s, 0.5)
        cutter.join(10)
        assert "refused at commit" not in str(err.value)  # the client never saw the server's error: it asked
    _assert_only_first_batch(url, 5)


def test_commit_refused_by_the_server_says_rolled_back(postgres_server):  # noqa: F811
    url = postgres_server.new_database()
    with open_storage(url) as s:
        s.initialize(META)
        with s.write() as tx:
            _write_batch(tx, 0, 5)
        _slow_commit(postgres_server, url, fail=True)
        with pytest.raises(StorageError, match="rolled back.*nothing of it was written") as err:
            with s.write() as tx:
                _write_batch(tx, 5, 1)
        assert "refused at commit" in str(err.value)
        with s.read() as view:  # the connection stays usable
            assert view.counts().documents == 5


def test_server_gone_during_commit_says_the_outcome_is_unknown(own_server):
    url = own_server.new_database()
    with open_storage(url, StorageOptions(connect_timeout=2)) as s:
        s.initialize(META)
        _slow_commit(own_server, url, fail=False)
        stopper = threading.Thread(target=lambda: (time.sleep(0.5), own_server.stop("immediate")))
        with pytest.raises(StorageError) as err:
            with s.write() as tx:
                _write_batch(tx, 0, 1)
                stopper.start()
        stopper.join(30)
    msg = str(err.value)
    assert "either applied whole or not at all" in msg and "cluster_of" in msg and "unreachable" in msg
    own_server.start()
    with open_storage(url) as s, s.read() as view:  # and indeed: all or nothing
        assert view.counts().documents == 0  # the server died inside the trigger, before the commit record


# --------------------------------------------------------------------------- the writer lock across processes

REPO = Path(__file__).resolve().parents[2]

#: a writer process: the assignment step of the index in miniature (candidates -> join the first
#: representative found, else become one with a band row), one document per transaction
WORKER = r'''
import random, sys, time
import numpy as np
from diversify.index.registry import open_storage
from diversify.index.storage import SCHEMA_VERSION, DocRow, Meta, State, StorageOptions
url, mode, w, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
s = open_storage(url, StorageOptions(lock_timeout=120))
if mode == "assign":
    start_at = float(sys.argv[5])
    groups = list(range(n))
    random.Random(w).shuffle(groups)
    while time.time() < start_at:
        time.sleep(0.001)
    for g in groups:
        key = np.array([1000 + g], dtype=np.int64)
        with s.write() as tx:
            st = tx.state()
            _, seqs = tx.candidates(key)
            time.sleep(0.003)  # widen the read-decide-write window
            seq = st.next_seq
            if seqs.size:
                (rep,) = tx.docs_by_seq([int(seqs.min())], payload=False)
                tx.insert_docs([DocRow(seq, f"w{w}-g{g}", rep.cluster, False, 0.9, 2, b"m")])
                tx.set_state(State(seq + 1, st.next_cluster, "str"))
            else:
                tx.insert_docs([DocRow(seq, f"w{w}-g{g}", st.next_cluster, True, 1.0, 0, b"r")])
                tx.insert_bands(key, np.array([seq], dtype=np.int64))
                tx.set_state(State(seq + 1, st.next_cluster + 1, "str"))
else:  # "batches": batches of n documents with 3 band rows each, until killed
    print("ready", flush=True)
    while True:
        with s.write() as tx:
            st = tx.state()
            seqs = np.arange(st.next_seq, st.next_seq + n, dtype=np.int64)
            tx.insert_docs([DocRow(int(q), f"d{q}", int(q), True, 1.0, 0, bytes(600)) for q in seqs])
            tx.insert_bands(np.concatenate([seqs * 3, seqs * 3 + 1, seqs * 3 + 2]), np.concatenate([seqs] * 3))
            tx.set_state(State(int(seqs[-1]) + 1, int(seqs[-1]) + 1, "str"))
'''


def _spawn(*args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, "-c", WORKER, *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_processes_adding_near_duplicates_at_once_end_in_one_cluster(postgres_server):  # noqa: F811
    url = postgres_server.new_index()
    with open_storage(url) as s:
        s.initialize(META)
    writers, groups = 4, 30
    start_at = time.time() + 3  # every writer imports first, then all start on the same instant
    procs = [_spawn(url, "assign", str(w), str(groups), str(start_at)) for w in range(writers)]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    with open_storage(url) as s, s.read() as view:
        docs = view.scan(-1, 10 * writers * groups, payload=False)
        st = view.state()
    # no document lost, none twice, counters consistent
    assert sorted(r.id for r in docs) == sorted(f"w{w}-g{g}" for w in range(writers) for g in range(groups))
    assert [r.seq for r in docs] == list(range(writers * groups)) and st.next_seq == writers * groups
    by_group: dict[str, list[DocRow]] = {}
    for r in docs:
        by_group.setdefault(r.id.split("-")[1], []).append(r)
    # each group of simultaneous near-duplicates: ONE representative, every member in its cluster
    for g, rows in by_group.items():
        assert sum(r.is_rep for r in rows) == 1, (g, rows)
        assert len({r.cluster for r in rows}) == 1, (g, rows)
    assert len({rows[0].cluster for rows in by_group.values()}) == groups == st.next_cluster


def test_sigkill_of_a_writer_mid_batch_leaves_whole_batches_and_frees_the_lock(postgres_server):  # noqa: F811
    url = postgres_server.new_index()
    batch = 300
    with open_storage(url) as s:
        s.initialize(META)
    rng = random.Random(13)
    kills_after_commits = 0
    for _ in range(6):
        p = _spawn(url, "batches", "0", str(batch))
        assert p.stdout is not None and p.stdout.readline().strip() == "ready", p.stderr.read() if p.stderr else ""
        time.sleep(rng.uniform(0.05, 0.8))
        p.send_signal(signal.SIGKILL)
        p.wait(30)
        t0 = time.monotonic()
        with open_storage(url, StorageOptions(lock_timeout=10)) as s:
            with s.write() as tx:  # the killed writer's lock is gone (its session ended with it)
                tx.state()
            assert time.monotonic() - t0 < 5
            with s.read() as view:
                st = view.state()
                c = view.counts()
                seqs = [r.seq for r in view.scan(-1, 10**6, payload=False)]
        assert c.documents % batch == 0 and c.documents == st.next_seq == len(seqs)
        assert seqs == list(range(c.documents)) and c.band_rows == 3 * c.documents
        kills_after_commits += c.documents > 0
    assert kills_after_commits >= 3  # the kills landed while batches were being committed, not only at start


# --------------------------------------------------------------------------- diversify.Index on PostgreSQL

def test_index_written_by_a_newer_schema_is_refused_and_left_alone(postgres_server):  # noqa: F811
    from diversify.errors import IncompatibleIndexError
    from diversify.index import Index
    from diversify.index.storage import SCHEMA_VERSION

    url = postgres_server.new_index()
    with Index(url) as idx:
        idx.add(["the river flooded the old town last night and the bridge is closed"], ids=["a"])
    name = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)["index"][0]
    db = _db(url.split("?")[0])
    postgres_server.admin(f"UPDATE diversify_{name}.meta SET schema_version = {SCHEMA_VERSION + 1}", dbname=db)
    with pytest.raises(IncompatibleIndexError, match=f"schema version {SCHEMA_VERSION + 1}") as err:
        Index(url)
    assert "***@" in str(err.value) and PG_PASSWORD not in str(err.value)
    with open_storage(url) as s, s.read() as view:  # refused, not migrated or touched
        meta = s.read_meta()
        assert meta is not None and meta.schema_version == SCHEMA_VERSION + 1
        assert view.counts().documents == 1


INDEX_WORKER = r'''
import sys, time
import numpy as np
from diversify.index import Index
url, mode, w = sys.argv[1], sys.argv[2], int(sys.argv[3])
vocab = [f"w{i}" for i in range(20000)]
def words(seed, n=90):
    r = np.random.default_rng(seed)
    return [vocab[j] for j in r.integers(0, len(vocab), n)]
def variant(g, w):  # near-duplicates of original g: one word appended (pairwise Jaccard 85/87 = 0.98,
    return " ".join(words(g) + [f"tail{w}"])  # so LSH misses a pair with probability < 1e-4)
idx = Index(url, lock_timeout=120)
idx.query([variant(0, 0)])  # compile the kernels and connect before the common start
if mode in ("writer", "reader"):
    print("ready", flush=True)
    sys.stdin.readline()  # "go": every process starts at once
if mode == "writer":
    groups = int(sys.argv[4])
    docs = [(f"w{w}-g{g}", variant(g, w)) for g in range(groups)]
    docs += [(f"w{w}-u{u}", " ".join(words(10**6 + 1000 * w + u))) for u in range(groups // 2)]
    order = np.random.default_rng(w).permutation(len(docs))
    docs = [docs[i] for i in order]
    for lo in range(0, len(docs), 8):  # small batches: the writers' transactions interleave
        part = docs[lo:lo + 8]
        idx.add([t for _, t in part], ids=[i for i, _ in part])
    print("done", flush=True)
elif mode == "reader":
    n = 0
    while not sys.stdin.readline().startswith("stop"):  # one query per line the parent sends
        res = idx.query([variant(n % 40, 99)])
        assert len(res) == 1
        n += 1
    print(n, flush=True)
else:  # "batches": batch b = 100 new documents, 20 of them near-duplicates of batch b-1; until killed
    print("ready", flush=True)
    b = int(idx.stats()["documents"]) // 100
    while True:
        texts = [" ".join(words(100 * b + i)) for i in range(80)]
        texts += [variant(100 * (b - 1) + i, b) if b else " ".join(words(10**7 + i)) for i in range(20)]
        idx.add(texts, ids=[f"b{b}-{i}" for i in range(100)])
        b += 1
'''


def _spawn_index(*args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, "-c", INDEX_WORKER, *args], env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _check_clusters(url: str) -> list[DocRow]:
    """Every document in exactly one cluster with exactly one representative; counters consistent."""
    with open_storage(url) as s, s.read() as view:
        docs = view.scan(-1, 10**7, payload=False)
        st = view.state()
    assert len({r.id for r in docs}) == len(docs)
    reps = {r.cluster: r for r in docs if r.is_rep}
    assert len(reps) == sum(r.is_rep for r in docs)  # one representative per cluster
    assert all(r.cluster in reps for r in docs)  # every member's cluster has its representative
    assert st.next_seq >= (max((r.seq for r in docs), default=-1) + 1)
    assert all(r.similarity >= 0.8 - 1e-9 for r in docs if not r.is_rep)  # verified folds only
    return docs


@pytest.mark.slow
def test_index_writer_and_query_processes_fold_simultaneous_near_duplicates(postgres_server):  # noqa: F811
    from diversify.index import Index

    url = postgres_server.new_index()
    with Index(url) as idx:
        idx.add(["a seed document so that the index exists before the writers start"], ids=["seed"])
    writers, groups = 4, 40
    procs = [_spawn_index(url, "writer", str(w), str(groups)) for w in range(writers)]
    readers = [_spawn_index(url, "reader", str(9 + r)) for r in range(2)]
    for p in procs + readers:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready", p.stderr.read() if p.stderr else ""
    for p in procs + readers:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    while any(p.poll() is None for p in procs):  # the readers query while the writers write
        for r in readers:
            assert r.stdin is not None
            r.stdin.write("q\n" * 5)
            r.stdin.flush()
        time.sleep(0.05)
    queries = []
    for p in procs + readers:
        out, err = p.communicate("stop\n", timeout=600)
        assert p.returncode == 0, err[-3000:]
        queries.append(out)
    assert all(int(q) > 0 for q in queries[writers:])  # the queries ran during the writes, without error
    docs = _check_clusters(url)
    ids = {r.id: r for r in docs}
    expected = {f"w{w}-g{g}" for w in range(writers) for g in range(groups)}
    expected |= {f"w{w}-u{u}" for w in range(writers) for u in range(groups // 2)}
    assert set(ids) == expected | {"seed"}  # none lost, none added twice
    for g in range(groups):  # the 4 near-duplicates written at once by 4 processes: ONE cluster
        clusters = {ids[f"w{w}-g{g}"].cluster for w in range(writers)}
        assert len(clusters) == 1, (g, clusters)
        assert sum(ids[f"w{w}-g{g}"].is_rep for w in range(writers)) == 1
    uniques = [ids[f"w{w}-u{u}"] for w in range(writers) for u in range(groups // 2)]
    assert all(r.is_rep for r in uniques) and len({r.cluster for r in uniques}) == len(uniques)


@pytest.mark.slow
def test_index_writer_killed_mid_batch_leaves_whole_batches(postgres_server):  # noqa: F811
    from diversify.index import Index

    url = postgres_server.new_index()
    with Index(url) as idx:
        idx.stats()
    rng = random.Random(29)
    landed = 0
    for _ in range(5):
        p = _spawn_index(url, "batches", "0")
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.3, 2.5))
        p.send_signal(signal.SIGKILL)
        p.wait(30)
        docs = _check_clusters(url)
        batches: dict[str, int] = {}
        for r in docs:
            batches[r.id.split("-")[0]] = batches.get(r.id.split("-")[0], 0) + 1
        assert all(n == 100 for n in batches.values()), batches  # whole batches only
        assert sorted(batches) == sorted(f"b{b}" for b in range(len(batches)))
        landed += bool(batches)
        with Index(url, lock_timeout=10) as idx:  # the lock is free at once, the index usable
            assert idx.stats()["documents"] == len(docs)
    assert landed >= 3
    folded = [r for r in docs if not r.is_rep]
    assert folded, "the near-duplicate tail of each batch folds under the previous batch's documents"


def test_many_processes_creating_one_index_at_once_agree_on_its_meta(postgres_server):  # noqa: F811
    """Each creator first looks (read_meta: the index is absent), then all create at the same moment,
    as eight benchmark workers opening a new index do."""
    url = postgres_server.new_index()
    n = 8
    barrier = threading.Barrier(n)
    got: list = []
    errors: list = []

    def create(i: int) -> None:
        try:
            with open_storage(url) as s:
                assert s.read_meta() is None
                barrier.wait(30)
                got.append(s.initialize(Meta(SCHEMA_VERSION, f'{{"seed":{i}}}', str(i) * 64, "test")))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=create, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert len(got) == n and len(set(got)) == 1  # one creator won; everyone returned its meta
    with open_storage(url) as s:
        assert s.read_meta() == got[0]


def test_an_open_storage_survives_a_server_restart_between_operations(own_server):
    """A long-lived Storage (a Diversifier's live lookups, a worker's Index) after a restart or a failover:
    the first statement of the next operation finds its connection dead and retries once."""
    url = own_server.new_index()
    with open_storage(url) as s:
        s.initialize(META)
        with s.write() as tx:
            _write_batch(tx, 0, 10)
        for step in ("read", "write", "read_meta"):
            own_server.stop("fast")  # terminates every session
            own_server.start()
            if step == "read":
                with s.read() as view:
                    assert view.counts().documents == 10
            elif step == "write":
                with s.write() as tx:
                    tx.insert_docs(_rows(10, 1))
            else:
                assert s.read_meta() == META
    with open_storage(url) as s, s.read() as view:
        assert view.counts().documents == 11


def test_payloads_are_stored_external_without_a_compression_attempt(postgres_server):  # noqa: F811
    """The payload column of a new index is STORAGE EXTERNAL (random bytes: no pglz attempt per row),
    and a payload larger than a TOAST chunk comes back intact."""
    import psycopg

    import diversify
    from index.contract import _doc

    url = postgres_server.new_index()
    long_doc = " ".join(_doc(i) for i in range(40))  # a shingle set of several KB: moved to the TOAST table
    with diversify.Index(url) as idx:
        idx.add([long_doc, _doc(1)], ids=["long", "short"])
        assert idx.query([long_doc])[0].representative == "long"
        assert idx.check() == []
    db_url = url.split("?")[0]
    with psycopg.connect(db_url) as con:
        rows = con.execute("SELECT c.relnamespace::regnamespace::text, a.attstorage FROM pg_attribute a "
                           "JOIN pg_class c ON c.oid = a.attrelid WHERE c.relname = 'docs' "
                           "AND a.attname = 'payload'").fetchall()
    assert rows and all(storage == "e" for _, storage in rows), rows
