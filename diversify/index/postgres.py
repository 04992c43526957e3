"""The PostgreSQL backend (psycopg 3): the live index as three tables in one schema of a database.

Layout (logical schema :data:`~diversify.index.storage.SCHEMA_VERSION`), in the schema
``diversify_<index>`` (``<index>`` from the URL's ``index=`` parameter, default ``default``):

* ``meta``: one row: schema version, config canonical JSON, fingerprint, created_by, and the
  fields of :class:`State` (next_seq, next_cluster, id_kind, layout);
* ``docs(seq int8 PRIMARY KEY, id bytea UNIQUE, cluster int8, is_rep bool, similarity float8,
  stages int4, payload bytea)`` with a btree on ``cluster``. The id is kept as its UTF-8 bytes: a
  ``text`` column cannot hold NUL, which a valid ``str`` id may contain. The payload column is
  ``STORAGE EXTERNAL``: a payload with its shingle set (~2.7 KB at 550 words) is moved to the
  TOAST table as it is, without first trying to compress it (sketches and hash sets are random
  bytes; the default ``EXTENDED`` spent a pglz attempt on every row and stored them uncompressed
  anyway: the same bytes per document);
* ``bands(key int8, seq int8, PRIMARY KEY (key, seq))``: ONE band table for all bands (the band index
  is folded into the int64 key by the index). Its primary key is the lookup index: a lookup of a
  batch's keys is one ``key = ANY($1)`` index scan. One table per band (``band0 ... bandN`` with an
  index each) was measured as well: the same bytes per document (same rows, same index entries),
  N statements or a UNION per lookup instead of one, and N schema objects to migrate; no gain.

Bulk writes use ``COPY ... FROM STDIN (FORMAT BINARY)``: band rows are encoded in one numpy pass (26
bytes a row on the wire), documents row by row through psycopg's binary copy.

Concurrency (what the fold guarantee needs, see :mod:`diversify.index.storage`):

* A write is ONE transaction at READ COMMITTED whose first statement after ``BEGIN`` is
  ``pg_advisory_xact_lock(<index key>)`` (``<index key>`` a fixed 64-bit hash of the schema name;
  advisory locks are per database, so the database is part of the key for free). Only one
  transaction of the whole cluster holds it at a time; it is released by the server at COMMIT or
  ROLLBACK, and when the session ends for any reason (client killed, connection cut), so a killed
  writer can never keep the index locked.
* Why READ COMMITTED and not REPEATABLE READ: a REPEATABLE READ snapshot is taken at the first
  statement, i.e. the lock call, *before* the wait for the lock ends; a writer would then decide on
  a state older than the previous holder's commit and lose its update. At READ COMMITTED every
  statement takes a new snapshot, and every statement after the lock call runs after the previous
  holder's COMMIT became visible (PostgreSQL marks a transaction committed in the proc array before
  it releases its locks). So inside the lock a writer reads the latest committed state, decides
  (candidates -> verification -> representative rule) and writes, and no other writer can commit
  in between: writes are serial in lock order. Two near-duplicates sent at the same moment by two
  processes are assigned one after the other; the second finds the first as a representative.
* Everything a writer changes is in that one transaction, so a batch is applied whole or not at
  all: an exception, a SIGKILL of the writer (the server sees the socket close and aborts), a
  ``pg_terminate_backend`` or a server crash (recovery discards the uncommitted transaction) leave
  the index as it was before the batch. Durability of a *committed* batch is the server's setting:
  with ``synchronous_commit = off`` a server crash may lose the last batches committed before it
  (whole batches, never part of one).
* The writer lock is only taken by writers. Readers run in a ``REPEATABLE READ READ ONLY``
  transaction (one MVCC snapshot for all the calls of a :meth:`read`, so scan pages are consistent)
  and never wait for a writer, nor a writer for them.
* Creating an index (schema, tables, meta row) takes the same advisory lock, in one transaction:
  two processes creating the same index at once do not race on ``CREATE ... IF NOT EXISTS``.

Connections: the URL goes to libpq as given (minus ``index=``), with ``connect_timeout`` from
:class:`StorageOptions` (a server that does not answer fails fast) and TCP keepalives (a server that
vanishes mid-batch is noticed). Every error names the URL with the password masked, never the
password itself, and the cause. A connection that broke is replaced on the next call; when the
first statement of a read or write finds the connection dead (the server restarted since the last
call), it is retried once on a new connection, since nothing of the operation was sent yet.

If the connection breaks during COMMIT, the client cannot know whether the server committed; the
transaction id taken at the start of the batch is then looked up (``pg_xact_status``) on a fresh
connection: committed -> the batch stands, aborted -> "rolled back", server unreachable -> the
error says the outcome is unknown and how to check it.
"""

from __future__ import annotations

import contextlib
import hashlib
import struct
import time
from collections.abc import Iterator, Sequence
from typing import Any, Optional

import numpy as np
import psycopg
from psycopg import sql

from .._arrays import unique_sorted
from ..errors import ConfigError, StorageError
from .failures import NOTHING_CREATED, NOTHING_WRITTEN, ROLLED_BACK, failed, lock_timeout, scrub
from .records import META_FIELDS, STATE_FIELDS, checked_meta, checked_state, stored_id_text
from .storage import Assignment, Counts, DocRow, Meta, State, Storage, StorageOptions, Transaction, View
from .urls import index_name, mask_url, url_secrets, without_params

__all__ = ["PostgresStorage", "libpq_url", "lock_key"]

_COLS = "seq, id, cluster, is_rep, similarity, stages"
_DOC_TYPES = ["int8", "bytea", "int8", "bool", "float8", "int4", "bytea"]
#: set in every transaction (SET LOCAL: also right behind a transaction-pooling proxy). Every statement
#: of ours is a key lookup: a sequential scan is never the right plan, whatever the statistics say
#: (a fresh table has none, and a batch's thousands of band keys look like "most of the table" to the
#: planner); JIT compilation costs more than any of these statements
_SESSION = "SET LOCAL enable_seqscan = off; SET LOCAL jit = off;"
_EXISTS = "SELECT to_regclass(%s)"

#: one band row of a binary COPY: field count, then (length, value) for key and seq, big-endian
_BAND_ROW = np.dtype([("n", ">i2"), ("kl", ">i4"), ("k", ">i8"), ("sl", ">i4"), ("s", ">i8")])
_COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x00"
_COPY_TRAILER = b"\xff\xff"


class _Int8Array(psycopg.adapt.Dumper):
    """A numpy int64 array as a binary ``int8[]`` parameter, encoded by numpy (not element by element)."""

    format = psycopg.pq.Format.BINARY
    oid = 1016  # int8[]

    def dump(self, obj: Any) -> bytes:
        a = np.ascontiguousarray(obj, dtype=np.int64).ravel()
        if a.size == 0:
            return struct.pack(">iii", 0, 0, 20)
        body = np.empty(a.size, dtype=[("len", ">i4"), ("value", ">i8")])
        body["len"] = 8
        body["value"] = a
        return struct.pack(">iiiii", 1, 0, 20, a.size, 1) + body.tobytes()


def libpq_url(url: str) -> str:
    """``url`` without the ``index=`` parameter (ours, not libpq's), the rest as written."""
    return without_params(url, ("index",))


def lock_key(schema: str) -> int:
    """The advisory-lock key of an index: a signed int64 that every process derives alike."""
    digest = hashlib.blake2b(f"diversify.index:{schema}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)


def _one(cur: psycopg.Cursor) -> tuple:
    """The one row of an aggregate / function query (always there)."""
    row = cur.fetchone()
    assert row is not None, "an aggregate or a function call returns one row"
    return tuple(row)


class _PgView(Transaction):
    """Reads (and, inside :meth:`PostgresStorage.write`, writes) on one connection in a transaction."""

    def __init__(self, conn: psycopg.Connection, schema: str, names: dict[str, sql.Composable], url: str = "postgresql"):
        self.conn = conn
        self.url = url
        self.schema = schema
        self.t = names

    def _q(self, template: str) -> sql.Composed:
        return sql.SQL(template).format(**self.t)

    # ---- reads
    def state(self) -> State:
        row = self.conn.execute(self._q(f"SELECT {', '.join(STATE_FIELDS)} FROM {{meta}}")).fetchone()
        if row is None:
            return State()
        return checked_state(self.url, row[0], row[1], row[2], row[3])

    def _docs(self, where: str, values: Any, array_type: str, payload: bool) -> list[DocRow]:
        cols = _COLS + (", payload" if payload else "")
        query = self._q(f"SELECT {cols} FROM {{docs}} WHERE {where} = ANY(%b::{array_type})")
        rows = self.conn.execute(query, (values,), binary=True).fetchall()
        return [DocRow(int(r[0]), stored_id_text(bytes(r[1]), self.url, r[0]), int(r[2]), bool(r[3]), float(r[4]), int(r[5]),
                       bytes(r[6]) if payload else b"") for r in rows]

    def docs_by_id(self, ids: Sequence[str], *, payload: bool = True) -> list[DocRow]:
        if not len(ids):
            return []
        return self._docs("id", [str(i).encode("utf-8") for i in dict.fromkeys(ids)], "bytea[]", payload)

    def docs_by_seq(self, seqs: Sequence[int], *, payload: bool = True) -> list[DocRow]:
        if not len(seqs):
            return []
        return self._docs("seq", unique_sorted(np.asarray(seqs, dtype=np.int64)), "int8[]", payload)

    def docs_in_clusters(self, clusters: Sequence[int], *, payload: bool = True) -> list[DocRow]:
        if not len(clusters):
            return []
        return self._docs("cluster", unique_sorted(np.asarray(clusters, dtype=np.int64)), "int8[]", payload)

    def candidates(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        uniq = unique_sorted(np.asarray(keys, dtype=np.int64))
        if uniq.size == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        rows = self.conn.execute(self._q("SELECT key, seq FROM {bands} WHERE key = ANY(%b)"), (uniq,),
                                 binary=True).fetchall()
        if not rows:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        pairs = np.array(rows, dtype=np.int64).reshape(-1, 2)
        return pairs[:, 0].copy(), pairs[:, 1].copy()

    def scan(self, after_seq: int, limit: int, *, payload: bool = True) -> list[DocRow]:
        cols = _COLS + (", payload" if payload else "")
        rows = self.conn.execute(self._q(f"SELECT {cols} FROM {{docs}} WHERE seq > %s ORDER BY seq LIMIT %s"),
                                 (int(after_seq), int(limit)), binary=True).fetchall()
        return [DocRow(int(r[0]), stored_id_text(bytes(r[1]), self.url, r[0]), int(r[2]), bool(r[3]), float(r[4]), int(r[5]),
                       bytes(r[6]) if payload else b"") for r in rows]

    def counts(self) -> Counts:
        docs, reps = _one(self.conn.execute(self._q("SELECT count(*), count(*) FILTER (WHERE is_rep) FROM {docs}")))
        (bands,) = _one(self.conn.execute(self._q("SELECT count(*) FROM {bands}")))
        (size,) = _one(self.conn.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "WHERE c.relnamespace = to_regnamespace(%s) AND c.relkind = 'r'", (self.schema,)))
        return Counts(documents=int(docs), representatives=int(reps), band_rows=int(bands), size_bytes=int(size))

    # ---- writes
    def set_state(self, state: State) -> None:
        self.conn.execute(self._q("UPDATE {meta} SET next_seq = %s, next_cluster = %s, id_kind = %s, layout = %s"),
                          (int(state.next_seq), int(state.next_cluster), state.id_kind, state.layout))

    def insert_docs(self, rows: Sequence[DocRow]) -> None:
        if not len(rows):
            return
        copy_sql = self._q(f"COPY {{docs}} ({_COLS}, payload) FROM STDIN (FORMAT BINARY)")
        with self.conn.cursor() as cur, cur.copy(copy_sql) as cp:
            cp.set_types(_DOC_TYPES)
            for r in rows:
                cp.write_row((int(r.seq), r.id.encode("utf-8"), int(r.cluster), bool(r.is_rep), float(r.similarity),
                              int(r.stages), bytes(r.payload)))

    def update_docs(self, changes: Sequence[Assignment]) -> None:
        if not len(changes):
            return
        with self.conn.cursor() as cur:
            cur.execute(self._q(
                "UPDATE {docs} d SET cluster = u.cluster, is_rep = u.is_rep, similarity = u.similarity, "
                "stages = u.stages FROM unnest(%b, %b, %s::bool[], %s::float8[], %s::int4[]) "
                "AS u(seq, cluster, is_rep, similarity, stages) WHERE d.seq = u.seq"),
                (np.array([c.seq for c in changes], dtype=np.int64), np.array([c.cluster for c in changes], dtype=np.int64),
                 [bool(c.is_rep) for c in changes],
                 [float(c.similarity) for c in changes], [int(c.stages) for c in changes]))

    def delete_docs(self, seqs: Sequence[int]) -> None:
        if not len(seqs):
            return
        self.conn.execute(self._q("DELETE FROM {docs} WHERE seq = ANY(%b)"), (np.asarray(seqs, dtype=np.int64),))

    def insert_bands(self, keys: np.ndarray, seqs: np.ndarray) -> None:
        k = np.asarray(keys, dtype=np.int64).ravel()
        s = np.asarray(seqs, dtype=np.int64).ravel()
        if k.size != s.size:
            raise ValueError(f"insert_bands needs as many keys as seqs; got {k.size} and {s.size}")
        if k.size == 0:
            return
        order = np.lexsort((s, k))  # in key order: the btree is walked once, left to right
        buf = np.empty(k.size, dtype=_BAND_ROW)
        buf["n"], buf["kl"], buf["sl"] = 2, 8, 8
        buf["k"], buf["s"] = k[order], s[order]
        with self.conn.cursor() as cur, cur.copy(self._q("COPY {bands} (key, seq) FROM STDIN (FORMAT BINARY)")) as cp:
            cp.write(_COPY_HEADER + buf.tobytes() + _COPY_TRAILER)

    def delete_bands(self, keys: np.ndarray, seqs: np.ndarray) -> None:
        k = np.asarray(keys, dtype=np.int64).ravel()
        s = np.asarray(seqs, dtype=np.int64).ravel()
        if k.size == 0:
            return
        self.conn.execute(self._q("DELETE FROM {bands} b USING unnest(%b, %b) AS d(key, seq) "
                                  "WHERE b.key = d.key AND b.seq = d.seq"), (k, s))


class PostgresStorage(Storage):
    """A live index in a PostgreSQL database (see the module docstring)."""

    def __init__(self, url: str, options: StorageOptions):
        self.url = mask_url(url)
        self._secrets = url_secrets(url)
        self.options = options
        self.index = index_name(url)
        self.schema = f"diversify_{self.index}"
        self.lock_key = lock_key(self.schema)
        self._conninfo = libpq_url(url)
        schema = sql.Identifier(self.schema)
        self._names: dict[str, sql.Composable] = {
            "schema": schema,
            "meta": sql.SQL("{}.meta").format(schema), "docs": sql.SQL("{}.docs").format(schema),
            "bands": sql.SQL("{}.bands").format(schema),
        }
        self._conn: Optional[psycopg.Connection] = None
        self._connect()  # fail fast: a bad URL or an unreachable server is reported by open_storage

    # ---- messages
    def _scrub(self, text: str) -> str:
        return scrub(text, self._secrets)

    def _error(self, action: str, exc: BaseException, tail: str = "") -> StorageError:
        return failed(action, self.url, exc, tail, self._secrets)

    # ---- connection
    def _connect(self) -> psycopg.Connection:
        conn = self._conn
        if conn is not None and not conn.closed and not conn.broken:
            return conn
        self._conn = None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()
        try:
            conn = psycopg.connect(
                self._conninfo, autocommit=True, connect_timeout=max(1, round(self.options.connect_timeout)),
                fallback_application_name="diversify", keepalives=1, keepalives_idle=10, keepalives_interval=5,
                keepalives_count=3)
        except psycopg.ProgrammingError as exc:  # the URL itself is malformed (libpq's parser)
            raise ConfigError(self._scrub(f"`url` is not a PostgreSQL URL libpq accepts: {exc}; got {self.url}. "
                                          "Use postgresql://user:password@host:5432/dbname")) from exc
        except psycopg.Error as exc:
            raise self._error("connecting to", exc, "Is the server running and reachable, and are the user, "
                              "password and database right?") from exc
        conn.adapters.register_dumper(np.ndarray, _Int8Array)  # on this connection only
        self._conn = conn
        return conn

    def _first(self, statement: Any, params: Any = None) -> tuple[psycopg.Connection, psycopg.Cursor]:
        """Run the first statement of an operation; if it finds the connection dead (the server restarted
        or cut idle sessions since the last call), retry once on a new connection: nothing was sent yet."""
        conn = self._connect()
        try:
            return conn, conn.execute(statement, params)
        except psycopg.OperationalError:
            if not conn.broken:
                raise
        conn = self._connect()
        return conn, conn.execute(statement, params)

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    # ---- meta
    def _exists(self, conn: psycopg.Connection) -> bool:
        (reg,) = _one(conn.execute(_EXISTS, (f'"{self.schema}".meta',)))
        return reg is not None

    def _meta_row(self, conn: psycopg.Connection) -> Optional[Meta]:
        row = conn.execute(sql.SQL(f"SELECT {', '.join(META_FIELDS)} FROM {{}}").format(self._names["meta"])).fetchone()
        if row is None:
            return None
        return checked_meta(dict(zip(META_FIELDS, row)), self.url)

    def read_meta(self) -> Optional[Meta]:
        try:
            conn, cur = self._first(_EXISTS, (f'"{self.schema}".meta',))
            if _one(cur)[0] is None:
                return None
            return self._meta_row(conn)
        except psycopg.Error as exc:
            raise self._error("reading the meta of", exc) from exc

    def initialize(self, meta: Meta) -> Meta:
        q = self._names
        try:
            conn, _ = self._first("SELECT 1")
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (self.lock_key,))
                if self._exists(conn):
                    stored = self._meta_row(conn)
                    if stored is not None:
                        return stored
                for stmt in (
                    "CREATE SCHEMA IF NOT EXISTS {schema}",
                    "CREATE TABLE IF NOT EXISTS {meta} (one bool PRIMARY KEY DEFAULT true CHECK (one), "
                    "schema_version int4 NOT NULL, config_json text NOT NULL, fingerprint text NOT NULL, "
                    "created_by text NOT NULL, next_seq int8 NOT NULL DEFAULT 0, "
                    "next_cluster int8 NOT NULL DEFAULT 0, id_kind text, layout text NOT NULL DEFAULT '')",
                    "CREATE TABLE IF NOT EXISTS {docs} (seq int8 PRIMARY KEY, id bytea NOT NULL UNIQUE, "
                    "cluster int8 NOT NULL, is_rep bool NOT NULL, similarity float8 NOT NULL, "
                    "stages int4 NOT NULL, payload bytea NOT NULL)",
                    "CREATE INDEX IF NOT EXISTS docs_cluster ON {docs} (cluster)",
                    # no compression attempt on random bytes (module docstring); idempotent
                    "ALTER TABLE {docs} ALTER COLUMN payload SET STORAGE EXTERNAL",
                    "CREATE TABLE IF NOT EXISTS {bands} (key int8 NOT NULL, seq int8 NOT NULL, PRIMARY KEY (key, seq))",
                ):
                    conn.execute(sql.SQL(stmt).format(**q))
                # ON CONFLICT: after the lock, this session's catalog cache may still miss tables another
                # creator committed while we waited (advisory locks do not refresh it), so the existence
                # check above can say "absent" for an index that exists; the meta row decides
                conn.execute(sql.SQL("INSERT INTO {meta} (schema_version, config_json, fingerprint, created_by) "
                                     "VALUES (%s, %s, %s, %s) ON CONFLICT (one) DO NOTHING").format(**q),
                             (int(meta.schema_version), meta.config_json, meta.fingerprint, meta.created_by))
                stored = self._meta_row(conn)
                assert stored is not None, "the meta row was just written or found"
                return stored
        except psycopg.Error as exc:
            raise self._error("creating the index in", exc, NOTHING_CREATED) from exc

    # ---- transactions
    @contextlib.contextmanager
    def read(self) -> Iterator[View]:
        conn = self._connect()
        try:
            conn, _ = self._first(f"BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; {_SESSION}")
            yield _PgView(conn, self.schema, self._names, self.url)
            conn.execute("COMMIT")
        except psycopg.Error as exc:
            self._rollback(conn)
            raise self._error("reading", exc) from exc
        except BaseException:
            self._rollback(conn)
            raise

    def _rollback(self, conn: psycopg.Connection) -> None:
        if conn.closed or conn.broken:
            return
        with contextlib.suppress(psycopg.Error):
            conn.execute("ROLLBACK")

    @contextlib.contextmanager
    def write(self) -> Iterator[Transaction]:
        conn = self._connect()
        timeout_ms = max(1, int(self.options.lock_timeout * 1000))
        try:
            # one round trip; every value is an int of ours (no parameters in a multi-statement string)
            conn, cur = self._first(
                f"BEGIN ISOLATION LEVEL READ COMMITTED; {_SESSION} SET LOCAL lock_timeout = {timeout_ms}; "
                f"SELECT pg_advisory_xact_lock({int(self.lock_key)}), pg_current_xact_id()::text")
            while cur.nextset():
                pass  # the last result is the lock's
            (_, xid) = _one(cur)
        except psycopg.errors.LockNotAvailable as exc:
            self._rollback(conn)
            raise lock_timeout(f"index {self.index!r} on {self.url}", self.options.lock_timeout) from exc
        except psycopg.Error as exc:
            self._rollback(conn)
            raise self._error("starting a write on", exc, NOTHING_WRITTEN) from exc
        try:
            yield _PgView(conn, self.schema, self._names, self.url)
        except psycopg.Error as exc:
            self._rollback(conn)
            raise self._error("writing a batch to", exc, ROLLED_BACK) from exc
        except BaseException:
            self._rollback(conn)
            raise
        try:
            conn.execute("COMMIT")
        except psycopg.Error as exc:
            self._after_failed_commit(conn, xid, exc)

    def _after_failed_commit(self, conn: psycopg.Connection, xid: str, exc: psycopg.Error) -> None:
        """COMMIT raised: find out from the server whether transaction ``xid`` committed."""
        if not (conn.closed or conn.broken):
            # the server answered with an error: it rolled back (e.g. a deferred constraint)
            self._rollback(conn)
            raise self._error("committing a batch to", exc, ROLLED_BACK) from exc
        status = None
        try:
            with psycopg.connect(self._conninfo, autocommit=True, connect_timeout=max(1, round(
                    self.options.connect_timeout)), fallback_application_name="diversify") as probe:
                deadline = time.monotonic() + max(5.0, self.options.connect_timeout)
                while True:  # "in progress": the old session may still be finishing its COMMIT
                    (status,) = _one(probe.execute("SELECT pg_xact_status(%s::xid8)", (xid,)))
                    if status != "in progress" or time.monotonic() > deadline:
                        break
                    time.sleep(0.05)
        except psycopg.Error:
            status = None
        if status == "committed":
            return  # the commit reached the server before the connection broke: the batch stands
        if status == "aborted":
            raise self._error("committing a batch to", exc, ROLLED_BACK) from exc
        raise self._error("committing a batch to", exc,
                          f"The connection broke during COMMIT and the server could not tell whether transaction "
                          f"{xid} committed (status {status or 'unreachable'}): the batch is either applied whole or "
                          "not at all. Check with "
                          "cluster_of(ids) of the batch once the server is back, and add what is missing.") from exc
