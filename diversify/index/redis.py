"""The Redis backend (redis-py): one index = the keys under one prefix of one Redis database.

URL: ``redis://[user:password@]host:port/db?index=name`` (also ``rediss://``, ``unix://``); the
prefix is ``dvf:{name}:`` (the braces are a hash tag: every key of an index lands in one slot).
``lease=SECONDS`` (default 10) sets the writer lease described below; every other query parameter
goes to redis-py. Redis Cluster is not supported (the scripts touch keys they do not declare).

Key layout (``P`` = the prefix; a seq is stored as 8 little-endian bytes, ``seq8``):

* ``P meta`` hash: the :class:`Meta` fields + ``layout`` (this module's :data:`LAYOUT`);
* ``P state`` hash: ``next_seq``, ``next_cluster``, ``id_kind``, ``layout``, the counters ``docs``, ``reps``,
  ``band_rows`` and ``last_commit`` (the fencing token of the last committed batch);
* ``P d:<seq8>`` string, one per document: a 29-byte header (is_rep, cluster, similarity, stages,
  id length), the id (UTF-8), the payload;
* ``P ids`` hash: id -> seq8;
* ``P b:<key8>`` strings, the band table: one per band key (8 big-endian bytes), its value the
  seq8s of the representatives with that key. A batch looks its keys up with one MGET per 4,000
  and writes the new ones with MSETNX, so neither side handles band rows one by one (hash buckets
  in listpack encoding take fewer bytes a row once full, but need one command per row inside the
  script: much slower commits; docs/index.md);
* ``P c:<bucket8>`` hashes, cluster -> member seq8s, 128 clusters per bucket (small hashes stay
  listpacks, compact per member);
* ``P lock`` string: the fencing token of the writer holding the lease; ``P fence`` its counter.

Writer assignment (why two writers never interleave, and a stale one cannot commit):

1. :meth:`RedisStorage.write` takes a fencing token (``INCR P fence``) and the lease
   (``SET P lock <token> NX PX lease``), waiting up to ``lock_timeout``.
2. Inside the block every read goes to the server (the latest committed state: nobody else can
   commit while we hold the lease). A thread renews the lease every lease/3 (a script:
   compare-and-PEXPIRE), so a live writer keeps it however long its batch takes. Writes are buffered in this process only; reads inside the block see
   them (read-your-writes), the server sees nothing yet.
3. On a normal exit ONE MULTI/EXEC commits: under WATCH of ``P lock`` and ``P fence`` the writer
   checks that the lock still holds its token, then queues the commit script (it applies the
   writes that read before they write, records the token as ``last_commit`` and deletes the lock)
   and the bulk of the batch as plain commands (MSETNX of the new band keys, MSET of the
   documents, HSET of the ids). A MULTI/EXEC runs with no other command in between and is written
   to the append-only file as one unit (a server killed while writing it loads without it), so the
   batch is applied entirely or not at all, also when the server is killed; a change of the lock
   or fence between the check and EXEC (a takeover, or our own renewal) makes EXEC apply nothing.
4. A writer whose lease expired (the whole process stalled longer than the lease: SIGSTOP, a frozen VM)
   finds another token (or none) in ``P lock``: its check refuses to write, and the batch is
   reported as rolled back. The writer that took over read the state after the stale one's last
   commit, so assignments stay serializable: two near-duplicates added at once by two writers are
   assigned one after the other and the second finds the first as a representative.
5. A SIGKILLed writer leaves only its lease, which expires after ``lease`` seconds; it never wrote
   anything else. An exception inside the block releases the lease (compare-and-delete).
6. The server going away: before the commit the batch is simply not applied (StorageError says
   so). If the connection breaks during the commit the outcome is unknown to the client,
   so it reconnects once and compares ``last_commit`` with its token: committed -> success, else
   the error says the batch was not applied (or, with the server still gone, that it was applied
   entirely or not at all).

The code is in four modules: this one (the storage: connection, lease, commit), the committed
reads (:mod:`diversify.index.redis_view`), the write transaction's read-your-writes buffer
(:mod:`diversify.index.redis_buffer`) and the wire (:mod:`diversify.index.redis_wire`: command
packing, record encodings, and the Lua scripts, package data files under ``diversify/index/lua/``).

Readers take no lock; every read call is one command or one script, so atomic by itself, but two
calls of one :meth:`read` block may see different commits (the contract allows it).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any, Optional

import numpy as np
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from ..errors import ConfigError, IncompatibleIndexError, StorageError
from .failures import ROLLED_BACK, lock_timeout, storage_errors
from .records import checked_int, checked_meta, meta_fields
from .redis_buffer import RedisTransaction
from .redis_view import RedisView
from .redis_wire import Raw, lua, pack, text, text_key
from .storage import Meta, Storage, StorageOptions, Transaction, View
from .urls import index_name, mask_url, query_values, without_params

__all__ = ["RedisStorage", "LAYOUT", "DEFAULT_LEASE"]

#: version of this module's key layout (stored in ``P meta``; a larger one is refused)
LAYOUT = 1
#: seconds a writer's lease lasts without renewal (a killed writer blocks others this long at most)
DEFAULT_LEASE = 10.0

_OUR_PARAMS = ("index", "lease")
_COMMIT_TRIES = 5  # EXECs a batch tries when a renewal of its own lease raced it (see RedisStorage._commit)
#: the scripts run by EVALSHA (the commit script goes as EVAL inside MULTI: see RedisStorage._commit)
_CACHED = ("init", "renew", "release", "band_get", "docs_by_id", "docs_in_clusters")


def _split_url(url: str) -> tuple[str, str, float]:
    """(the URL for redis-py without our parameters, the index name, the lease in seconds)."""
    lease = DEFAULT_LEASE
    for v in query_values(url, "lease"):
        try:
            lease = float(v)
        except ValueError:
            lease = -1.0
        if not (0.05 <= lease <= 3600):
            raise ConfigError(f"the `lease` parameter of a redis URL is the writer lease in seconds, in "
                              f"[0.05, 3600]; got {v!r} in {mask_url(url)}. Use e.g. ?lease=10.")
    return without_params(url, _OUR_PARAMS), index_name(url), lease


# --------------------------------------------------------------------------- the storage


class RedisStorage(Storage):
    """The live index in one Redis database (see the module docstring)."""

    def __init__(self, url: str, options: Optional[StorageOptions] = None):
        self.url = mask_url(url)
        self.options = options if options is not None else StorageOptions()
        plain, name, self.lease = _split_url(url)
        self.name = name
        self.p = f"dvf:{{{name}}}:"
        try:
            self.client = redis.Redis.from_url(
                plain, socket_connect_timeout=self.options.connect_timeout,
                socket_timeout=max(60.0, self.options.lock_timeout), retry=Retry(NoBackoff(), 0))
        except ValueError as exc:
            raise ConfigError(f"`url` is not a redis URL redis-py accepts: {exc}; got {self.url}.") from exc
        self.scripts = {name: self.client.register_script(lua(name)) for name in _CACHED}
        with storage_errors(self.url, "connecting to"):
            self.client.ping()

    # ---- plumbing
    def evalsha(self, name: str, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        """Run a script with its arguments packed by :func:`_pack` (loading it when the server lost it)."""
        script = self.scripts[name]
        nkeys = sum(a.n if isinstance(a, Raw) else 1 for a in keys)
        packed = pack([b"EVALSHA", script.sha, nkeys, *keys, *args])
        pool = self.client.connection_pool
        for attempt in (0, 1):
            conn = pool.get_connection()
            try:
                conn.send_packed_command([packed])
                return conn.read_response()
            except redis.exceptions.NoScriptError:
                if attempt:
                    raise
                self.client.script_load(script.script)
            except BaseException:
                conn.disconnect()  # never reuse a connection with a reply pending
                raise
            finally:
                pool.release(conn)

    def call(self, fn, *args, action: str = "reading from", rolled_back: bool = False):
        with storage_errors(self.url, action, rolled_back=rolled_back):
            return fn(*args)

    def lease_lost(self) -> str:
        return (f"the writer lease of index {self.name!r} on {self.url} expired before this batch was committed "
                f"(the writer stalled longer than lease={self.lease:g}s) and another writer may have taken over: "
                "the batch was rolled back; nothing of it was written. Run it again, or raise ?lease= in the URL.")

    # ---- meta
    def initialize(self, meta: Meta) -> Meta:
        fields = meta_fields(meta)
        flat = self.call(self.scripts["init"], [], [self.p, fields["schema_version"], fields["config_json"],
                                                    fields["fingerprint"], fields["created_by"], LAYOUT],
                         action="creating the index on")
        return self._meta(flat)

    def read_meta(self) -> Optional[Meta]:
        flat = self.call(self.client.hgetall, self.p + "meta")
        if not flat:
            return None
        return self._meta([x for kv in flat.items() for x in kv])

    def _meta(self, flat: list) -> Meta:
        d = {text_key(flat[i]): flat[i + 1] for i in range(0, len(flat), 2)}
        layout = checked_int(self.url, "meta", "layout", d.get("layout", 0), 0)
        if layout > LAYOUT:
            raise IncompatibleIndexError(
                f"the index {self.name!r} on {self.url} has Redis key layout {layout}, newer than this diversify "
                f"reads (layout {LAYOUT}); upgrade diversify-retrieval to open it.")
        return checked_meta(d, self.url)

    # ---- read / write
    @contextlib.contextmanager
    def read(self) -> Iterator[View]:
        yield RedisView(self)

    def _acquire(self) -> str:
        token = str(self.call(self.client.incr, self.p + "fence", action="taking the writer lock of"))
        lock = self.p + "lock"
        deadline = time.monotonic() + self.options.lock_timeout
        pause = 0.001
        px = int(self.lease * 1000)
        while True:
            if self.call(lambda: self.client.set(lock, token, nx=True, px=px), action="taking the writer lock of"):
                return token
            if time.monotonic() >= deadline:
                holder = self.call(self.client.get, lock)
                ttl = self.call(self.client.pttl, lock)
                raise lock_timeout(f"index {self.name!r} on {self.url}", self.options.lock_timeout,
                                   f"writer token {holder.decode() if holder else '?'} holds it (its lease ends in "
                                   f"{max(ttl, 0) / 1000:.1f} s)")
            time.sleep(pause * (0.5 + np.random.random()))
            pause = min(pause * 2, 0.05)

    @contextlib.contextmanager
    def write(self) -> Iterator[Transaction]:
        token = self._acquire()
        tx = RedisTransaction(self, token)
        stop = threading.Event()
        beat = threading.Thread(target=self._heartbeat, args=(tx, stop), daemon=True, name="diversify-redis-lease")
        beat.start()
        try:
            yield tx
            stop.set()  # no join: a renewal racing the commit finds the fence moved on and does nothing
            self._commit(tx)
        except BaseException:
            stop.set()
            with contextlib.suppress(Exception):  # compare-and-delete: a no-op when the lease is gone
                self.scripts["release"]([self.p + "lock", self.p + "fence"], [token])
            raise
        finally:
            stop.set()

    def _heartbeat(self, tx: RedisTransaction, stop: threading.Event) -> None:
        """Renew the lease every lease/3 while the batch is open, so a long batch of a live writer
        keeps it; a killed or stopped (SIGSTOP, a frozen VM) writer stops renewing and loses it."""
        while not stop.wait(self.lease / 3):
            try:
                ok = self.scripts["renew"]([self.p + "lock", self.p + "fence"], [tx.token, int(self.lease * 1000)])
            except Exception:
                continue  # the batch's own next call reports a broken connection
            if not ok:
                tx.lost = True
                return
            tx.renewed = time.monotonic()

    def _commit(self, tx: RedisTransaction) -> None:
        """Commit the batch in one MULTI/EXEC: the commit script, then the bulk commands.

        A MULTI/EXEC runs with no other command in between and goes to the append-only file as one
        unit (a server killed while writing it loads without it), as a script does; but unlike a
        script's own error it cannot stop the commands queued after it, so the lease is checked
        before EXEC under WATCH of ``P lock`` and ``P fence``: a writer that takes the lease over must
        INCR the fence first, which makes our EXEC return nil and apply nothing. A renewal racing the
        commit (the heartbeat's PEXPIRE touches the lock) aborts the EXEC the same way; then the check
        runs again. The script goes as EVAL, not EVALSHA: inside MULTI a script the server lost (SCRIPT
        FLUSH, a restart) fails only at EXEC, after the bulk commands were queued.
        """
        script, bulk = tx.commit_args()
        lock, fence = self.p + "lock", self.p + "fence"
        check = pack([b"WATCH", lock, fence]) + pack([b"GET", lock]) + pack([b"GET", fence])
        body = b"".join([pack([b"MULTI"]), pack([b"EVAL", lua("commit"), 0, *script]), *(pack(c) for c in bulk),
                         pack([b"EXEC"])])
        pool = self.client.connection_pool
        for _ in range(_COMMIT_TRIES):
            conn = pool.get_connection()
            try:
                conn.send_packed_command([check])
                conn.read_response()
                held, counter = conn.read_response(), conn.read_response()
                if not (held is not None and text(held) == tx.token
                        or held is None and counter is not None and text(counter) == tx.token):
                    conn.send_packed_command([pack([b"UNWATCH"])])
                    conn.read_response()
                    raise StorageError(self.lease_lost())
                conn.send_packed_command([body])
                queued = [conn.read_response() for _ in range(2 + len(bulk))]  # OK, QUEUED...
                done = conn.read_response()
            except redis.ResponseError as exc:  # refused while queueing (EXECABORT): nothing ran
                conn.disconnect()
                raise StorageError(f"committing a batch to {self.url} failed: {exc}. {ROLLED_BACK}") from exc
            except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
                conn.disconnect()  # never reuse a connection with replies pending
                msg = self._after_broken_commit(tx.token, exc)
                if msg is not None:
                    raise StorageError(msg) from exc
                return
            except BaseException:
                conn.disconnect()
                raise
            finally:
                pool.release(conn)
            del queued
            if done is None:  # a watched key changed between the check and EXEC: nothing ran; check again
                continue
            failed = [r for r in done if isinstance(r, Exception)]
            if failed:  # not expected (the lease was checked under WATCH); the queued commands ran regardless
                raise StorageError(f"committing a batch to {self.url} failed inside MULTI/EXEC: {failed[0]}. Part of "
                                   "the batch may have been written; check `diversify index stats`.")
            return
        raise StorageError(f"the commit of a batch to {self.url} was interrupted {_COMMIT_TRIES} times by changes to "
                           f"the writer lock of index {self.name!r}. {ROLLED_BACK}")

    def _after_broken_commit(self, token: str, exc: BaseException) -> Optional[str]:
        """The connection broke during the commit script: find out whether it ran (None: it did)."""
        cause = f"{type(exc).__name__}: {exc}"
        try:
            last = self.client.hget(self.p + "state", "last_commit")
        except Exception:
            return (f"the connection to {self.url} broke while a batch was being committed ({cause}); the server is "
                    "not reachable, so whether it ran is unknown: it ran entirely or not at all (one atomic script), "
                    "never half. Check `diversify index stats` and run the batch again if its documents are missing.")
        if last is not None and text(last) == token:
            return None
        with contextlib.suppress(Exception):
            self.scripts["release"]([self.p + "lock", self.p + "fence"], [token])
        return f"the connection to {self.url} broke while a batch was being committed ({cause}). {ROLLED_BACK}"

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.client.close()
