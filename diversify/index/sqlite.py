"""The embedded backend: one SQLite file (standard library ``sqlite3``), WAL mode.

Layout (logical schema :data:`~diversify.index.storage.SCHEMA_VERSION`):

* ``meta(k TEXT PRIMARY KEY, v TEXT)``: the :class:`Meta` fields and the :class:`State` counters;
* ``docs(seq INTEGER PRIMARY KEY, id TEXT UNIQUE, cluster, is_rep, similarity, stages, payload BLOB)``
  with an index on ``cluster``;
* ``bands(key INTEGER, seq INTEGER, PRIMARY KEY (key, seq)) WITHOUT ROWID``: the band table is its
  own B-tree on (key, seq), so a lookup by key is one index range scan and a band row costs about
  as many bytes as its two integers; ``bands_recent`` (the same) takes new rows.

Two tiers, because band keys are random: inserting a batch's rows into one big B-tree dirties about
one page per row (docs/index.md), while a small
tree stays in the page cache and its pages are shared by many rows of a batch. When
``bands_recent`` outgrows ``max(2**20, rows of bands / 8)`` rows, it is merged into ``bands`` in key
order (each page of the big tree written once) inside the writer transaction that crossed the
limit. Lookups read both tiers; the big one only for the keys its Bloom filter (``band_filter``,
kept up to date by the merges; see :class:`_SQLiteView`) cannot rule out, since most band keys of a
new document match nothing and each miss still cost a B-tree descent.

Writers take the file's write lock with ``BEGIN IMMEDIATE`` (waiting up to ``lock_timeout``), so the
read-verify-write of an assignment runs against the latest committed state and two writers are
serialized. Readers run in a deferred transaction: a WAL snapshot, never blocked by the writer.
``synchronous=NORMAL`` under WAL: a killed process never corrupts or half-applies a batch (the
uncommitted WAL frames are ignored at the next open); a power loss may lose the last batches
committed before it, never leave a partial one.

Checkpoints (copying committed WAL pages back into the file) run off the writer's path: after each
commit, one background thread per process (:mod:`diversify.index.sqlite_checkpoint`) runs a PASSIVE
checkpoint on a connection of its own, which overlaps the next batch's sketching instead of
lengthening the commit (SQLite's own checkpoint at 1,000 pages had run inside nearly every commit of a
large batch; docs/index.md). SQLite's automatic checkpoint stays on as a backstop at
:data:`AUTOCHECKPOINT_PAGES`, for a checkpointer that falls behind. A checkpoint is crash-safe; a
killed process leaves the rest to the next one.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import zlib
from collections.abc import Iterator, Sequence
from typing import Optional

import numpy as np

from .._arrays import unique_sorted
from ..errors import ConfigError, StorageError
from .failures import NOTHING_WRITTEN, ROLLED_BACK, failed, lock_timeout, storage_errors
from .keyfilter import KeyFilter, bits_for
from .records import META_FIELDS, STATE_FIELDS, checked_int, checked_meta, checked_state, meta_fields, state_fields
from .sqlite_checkpoint import CHECKPOINTER
from .storage import Assignment, Counts, DocRow, Meta, State, Storage, StorageOptions, Transaction, View
from .urls import index_name, mask_url, query_param, sqlite_file

__all__ = ["SQLiteStorage", "sqlite_path", "sqlite_mmap_mb"]

_CHUNK = 900  # parameters per IN (...) list (SQLite's limit is 999 on old builds)

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS docs (seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, cluster INTEGER NOT NULL, "
    "is_rep INTEGER NOT NULL, similarity REAL NOT NULL, stages INTEGER NOT NULL, payload BLOB NOT NULL)",
    "CREATE INDEX IF NOT EXISTS docs_cluster ON docs (cluster)",
    "CREATE TABLE IF NOT EXISTS bands (key INTEGER NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY (key, seq)) "
    "WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS bands_recent (key INTEGER NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY (key, seq)) "
    "WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS band_filter (id INTEGER PRIMARY KEY, bits BLOB NOT NULL)",
)
#: rows of bands_recent before it is merged into bands (at least; see the module docstring)
MERGE_MIN_ROWS = 1 << 20
_LOOKUP = ("WITH q(k) AS (SELECT value FROM json_each(?)) "
           "SELECT b.key, b.seq FROM q JOIN bands b ON b.key = q.k "
           "UNION ALL SELECT r.key, r.seq FROM q JOIN bands_recent r ON r.key = q.k")
_LOOKUP_TIER = "SELECT t.key, t.seq FROM json_each(?) q JOIN {} t ON t.key = q.value"
#: lookups of fewer unique keys skip the filter
_FILTER_FROM_KEYS = 1024
#: meta keys of the main tier's key filter: its token (a fresh random value per version), its key
#: count, the CRC-32 of its bits, and the (next_seq, main_rows) it was last known to cover
#: (see _SQLiteView), with the two it is compared with
_FILTER_KEYS = ("filter_token", "filter_keys", "filter_crc", "filter_seq", "filter_main", "next_seq", "main_rows")

_COLS = "seq, id, cluster, is_rep, similarity, stages"


#: page size of a new index file (an existing file keeps its own)
PAGE_SIZE = 32768
#: default of the ``mmap_mb`` URL parameter (MiB of the file SQLite reads through a memory map)
MMAP_MB = 1024
#: WAL pages at which a writer's commit checkpoints by itself (SQLite's default is 1,000): the
#: backstop when the background checkpointer falls behind
AUTOCHECKPOINT_PAGES = 8192


_CHECKPOINTER = CHECKPOINTER  # one per process (tests reach it here)


def sqlite_mmap_mb(url: str) -> int:
    """The ``mmap_mb=`` parameter of a sqlite URL (default :data:`MMAP_MB`; 0 turns memory-mapped reads off)."""
    text = query_param(url, "mmap_mb")
    if text is None:
        return MMAP_MB
    if not text.isdigit() or int(text) > 1 << 20:
        raise ConfigError(f"the `mmap_mb` parameter of a sqlite URL is the MiB of the file read through a memory map, "
                          f"an integer from 0 (off) to {1 << 20}; got {text!r} in {mask_url(url)}. Use e.g. "
                          "sqlite:///index.db?mmap_mb=0.")
    return int(text)


def sqlite_path(url: str) -> str:
    """The file path of ``sqlite:///relative.db`` / ``sqlite:////absolute.db`` (ConfigError otherwise;
    the rules are :func:`diversify.index.urls.sqlite_file`'s)."""
    path = sqlite_file(url)
    if index_name(url) != "default":
        raise ConfigError(f"a sqlite index is one file; the `index` parameter is for server backends; got "
                          f"{mask_url(url)}. Use another file for another index.")
    return path


class _FilterCache:
    """The last main-tier key filter a storage object loaded, by token (one per SQLiteStorage)."""

    def __init__(self) -> None:
        self.token = ""
        self.filter: Optional[KeyFilter] = None


class _SQLiteView(Transaction):
    """Reads (and, under the writer lock, writes) on one connection.

    The main band table has a Bloom filter of its keys (``band_filter``; :mod:`.keyfilter`), so a
    lookup descends the big B-tree only for keys the filter cannot rule out. The filter is trusted
    only while the meta stamp ``(filter_seq, filter_main)`` equals ``(next_seq, main_rows)``: every
    write transaction of this code moves the stamp along (keys enter the main table only in a
    merge, which adds them to the filter in the same transaction; a delete leaves the filter a
    superset, which stays correct), while a writer that does not know the filter (an older
    diversify) changes ``next_seq`` or ``main_rows`` without it, and the filter is then ignored
    until the next merge rebuilds it from the table.
    """

    def __init__(self, con: sqlite3.Connection, cache: Optional[_FilterCache] = None, writing: bool = False,
                 url: str = "sqlite"):
        self.con = con
        self.url = url
        self._cache = cache if cache is not None else _FilterCache()
        self._writing = writing
        self._meta: Optional[dict] = None
        self._valid = False
        self._pending: Optional[tuple[str, KeyFilter]] = None  # a filter written in this transaction
        if writing:
            self._load_filter_meta()

    # ---- the main tier's key filter
    def _load_filter_meta(self) -> dict:
        rows = dict(self.con.execute(f"SELECT k, v FROM meta WHERE k IN ({','.join('?' * len(_FILTER_KEYS))})",
                                     _FILTER_KEYS).fetchall())
        self._meta = rows
        self._valid = bool(rows.get("filter_token")) and rows.get("filter_seq") == rows.get("next_seq", "0") and \
            rows.get("filter_main") == rows.get("main_rows", "0")
        return rows

    def _filter(self) -> Optional[KeyFilter]:
        """The main tier's filter when it is valid for this transaction's state, else None."""
        if self._pending is not None:
            return self._pending[1]
        meta = self._meta if self._meta is not None else self._load_filter_meta()
        if not self._valid:
            return None
        token = meta["filter_token"]
        if self._cache.token != token or self._cache.filter is None:
            row = self.con.execute("SELECT bits FROM band_filter WHERE id = 0").fetchone()
            blob = bytes(row[0]) if row is not None and isinstance(row[0], bytes) else b""
            try:  # a damaged filter is only a lost shortcut: the plain lookup answers instead
                if str(zlib.crc32(blob)) != meta.get("filter_crc"):
                    raise ValueError("checksum")
                flt = KeyFilter.from_bytes(blob, int(meta.get("filter_keys", "0")))
            except ValueError:
                self._valid = False
                return None
            self._cache.filter, self._cache.token = flt, token
        return self._cache.filter

    def finish(self) -> None:
        """Before COMMIT: move the filter's stamp to this transaction's final state, if it is valid."""
        if not self._writing or not (self._valid or self._pending is not None):
            return
        now = dict(self.con.execute("SELECT k, v FROM meta WHERE k IN ('next_seq', 'main_rows')").fetchall())
        self.con.executemany("INSERT OR REPLACE INTO meta (k, v) VALUES (?, ?)",
                             [("filter_seq", now.get("next_seq", "0")), ("filter_main", now.get("main_rows", "0"))])

    def committed(self) -> None:
        """After COMMIT: a filter written by this transaction becomes the cached one."""
        if self._pending is not None:
            self._cache.token, self._cache.filter = self._pending
            self._pending = None

    def _tier_keys(self, table: str) -> np.ndarray:
        """Every key of a band table, in chunks of the key space (one JSON array each)."""
        parts = []
        for i in range(16):  # [lo, lo + 2**60) of the int64 range each; the last one up to its top
            lo = -(1 << 63) + i * (1 << 60)
            (text,) = self.con.execute(f"SELECT json_group_array(key) FROM {table} WHERE key >= ? AND key <= ?",
                                       (lo, lo + (1 << 60) - 1)).fetchone()
            parts.append(np.array(json.loads(text), dtype=np.int64))
        return np.concatenate(parts)

    # ---- reads
    def state(self) -> State:
        rows = dict(self.con.execute("SELECT k, v FROM meta WHERE k IN (?, ?, ?, ?)", STATE_FIELDS).fetchall())
        if not rows:
            return State()
        return checked_state(self.url, rows.get("next_seq"), rows.get("next_cluster"), rows.get("id_kind"),
                             rows.get("layout", ""))

    def _docs(self, where: str, values: Sequence, payload: bool) -> list[DocRow]:
        cols = _COLS + (", payload" if payload else "")
        out: list[DocRow] = []
        for lo in range(0, len(values), _CHUNK):
            part = list(values[lo: lo + _CHUNK])
            marks = ",".join("?" * len(part))
            for r in self.con.execute(f"SELECT {cols} FROM docs WHERE {where} IN ({marks})", part):
                out.append(DocRow(int(r[0]), r[1], int(r[2]), bool(r[3]), float(r[4]), int(r[5]),
                                  bytes(r[6]) if payload else b""))
        return out

    def docs_by_id(self, ids: Sequence[str], *, payload: bool = True) -> list[DocRow]:
        return self._docs("id", list(dict.fromkeys(ids)), payload)

    def docs_by_seq(self, seqs: Sequence[int], *, payload: bool = True) -> list[DocRow]:
        return self._docs("seq", list(dict.fromkeys(int(s) for s in seqs)), payload)

    def docs_in_clusters(self, clusters: Sequence[int], *, payload: bool = True) -> list[DocRow]:
        return self._docs("cluster", list(dict.fromkeys(int(c) for c in clusters)), payload)

    def candidates(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        uniq = unique_sorted(np.asarray(keys, dtype=np.int64))
        if not uniq.size:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        # a few keys (one queried document: 16) cost less as one plain statement than the filter's
        # numpy work; a batch's tens of thousands save a B-tree descent for each key ruled out
        flt = self._filter() if uniq.size >= _FILTER_FROM_KEYS else None
        if flt is None:
            # one statement: the keys travel as one JSON array (no per-key parameter binding)
            rows = self.con.execute(_LOOKUP, (json.dumps(uniq.tolist()),)).fetchall()
        else:  # the main table only for the keys its filter cannot rule out
            rows = self.con.execute(_LOOKUP_TIER.format("bands_recent"), (json.dumps(uniq.tolist()),)).fetchall()
            maybe = uniq[flt.may_contain(uniq)]
            if maybe.size:
                rows += self.con.execute(_LOOKUP_TIER.format("bands"), (json.dumps(maybe.tolist()),)).fetchall()
        if not rows:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        arr = np.array(rows, dtype=np.int64).reshape(-1, 2)
        return arr[:, 0].copy(), arr[:, 1].copy()

    def scan(self, after_seq: int, limit: int, *, payload: bool = True) -> list[DocRow]:
        cols = _COLS + (", payload" if payload else "")
        rows = self.con.execute(f"SELECT {cols} FROM docs WHERE seq > ? ORDER BY seq LIMIT ?",
                                (int(after_seq), int(limit)))
        return [DocRow(int(r[0]), r[1], int(r[2]), bool(r[3]), float(r[4]), int(r[5]), bytes(r[6]) if payload else b"")
                for r in rows]

    def counts(self) -> Counts:
        docs, reps = self.con.execute("SELECT count(*), coalesce(sum(is_rep), 0) FROM docs").fetchone()
        (bands,) = self.con.execute("SELECT (SELECT count(*) FROM bands) + (SELECT count(*) FROM bands_recent)").fetchone()
        (pages,) = self.con.execute("PRAGMA page_count").fetchone()
        (size,) = self.con.execute("PRAGMA page_size").fetchone()
        (free,) = self.con.execute("PRAGMA freelist_count").fetchone()
        return Counts(documents=int(docs), representatives=int(reps), band_rows=int(bands),
                      size_bytes=int((pages - free) * size))

    # ---- writes
    def set_state(self, state: State) -> None:
        self.con.executemany("INSERT OR REPLACE INTO meta (k, v) VALUES (?, ?)", list(state_fields(state).items()))

    def insert_docs(self, rows: Sequence[DocRow]) -> None:
        self.con.executemany("INSERT INTO docs (seq, id, cluster, is_rep, similarity, stages, payload) "
                             "VALUES (?, ?, ?, ?, ?, ?, ?)",
                             [(r.seq, r.id, r.cluster, int(r.is_rep), float(r.similarity), int(r.stages), r.payload)
                              for r in rows])

    def update_docs(self, changes: Sequence[Assignment]) -> None:
        self.con.executemany("UPDATE docs SET cluster = ?, is_rep = ?, similarity = ?, stages = ? WHERE seq = ?",
                             [(c.cluster, int(c.is_rep), float(c.similarity), int(c.stages), c.seq) for c in changes])

    def delete_docs(self, seqs: Sequence[int]) -> None:
        self.con.executemany("DELETE FROM docs WHERE seq = ?", [(int(s),) for s in seqs])

    def insert_bands(self, keys: np.ndarray, seqs: np.ndarray) -> None:
        k = np.asarray(keys, dtype=np.int64)
        s = np.asarray(seqs, dtype=np.int64)
        # sorted by key: inserts walk the B-tree in order (fewer page splits, warmer cache)
        order = np.lexsort((s, k))
        before = self.con.total_changes
        self.con.executemany("INSERT OR IGNORE INTO bands_recent (key, seq) VALUES (?, ?)",
                             zip(k[order].tolist(), s[order].tolist()))
        recent = self._tier_rows("recent_rows") + self.con.total_changes - before
        main = self._tier_rows("main_rows")
        if recent > max(MERGE_MIN_ROWS, main // 8):
            self.merge_tiers()
        else:
            self._set_tier_rows(recent=recent)

    def delete_bands(self, keys: np.ndarray, seqs: np.ndarray) -> None:
        pairs = list(zip(np.asarray(keys, dtype=np.int64).tolist(), np.asarray(seqs, dtype=np.int64).tolist()))
        before = self.con.total_changes
        self.con.executemany("DELETE FROM bands_recent WHERE key = ? AND seq = ?", pairs)
        mid = self.con.total_changes
        self.con.executemany("DELETE FROM bands WHERE key = ? AND seq = ?", pairs)
        self._set_tier_rows(recent=max(0, self._tier_rows("recent_rows") - (mid - before)),
                            main=max(0, self._tier_rows("main_rows") - (self.con.total_changes - mid)))

    def merge_tiers(self) -> None:
        """Move every row of bands_recent into bands, in key order (inside the writer transaction),
        and add their keys to the main tier's filter (rebuilt from the table when it is not valid or
        would fall below its bits per key)."""
        recent_rows = self._tier_rows("recent_rows")
        old = self._filter()
        flt: Optional[KeyFilter] = None
        if old is not None and not old.full(recent_rows):  # a copy: the cached one stays until COMMIT
            flt = KeyFilter(old.bits.copy(), old.keys)
            flt.add(self._tier_keys("bands_recent"))
        before = self.con.total_changes
        self.con.execute("INSERT OR IGNORE INTO bands (key, seq) SELECT key, seq FROM bands_recent ORDER BY key, seq")
        moved = self.con.total_changes - before
        self.con.execute("DELETE FROM bands_recent")
        self._set_tier_rows(recent=0, main=self._tier_rows("main_rows") + moved)
        if flt is None:
            keys = self._tier_keys("bands")
            flt = KeyFilter.empty(bits_for(keys.size))
            flt.add(keys)
        token = os.urandom(8).hex()
        self.con.execute(_SCHEMA[-1])  # a file created before the filter has no table for it yet
        blob = flt.to_bytes()
        self.con.execute("INSERT OR REPLACE INTO band_filter (id, bits) VALUES (0, ?)", (blob,))
        self.con.executemany("INSERT OR REPLACE INTO meta (k, v) VALUES (?, ?)",
                             [("filter_token", token), ("filter_keys", str(flt.keys)),
                              ("filter_crc", str(zlib.crc32(blob)))])
        self._pending = (token, flt)

    def _tier_rows(self, name: str) -> int:
        row = self.con.execute("SELECT v FROM meta WHERE k = ?", (name,)).fetchone()
        return checked_int(self.url, "meta", name, row[0], 0) if row else 0

    def _set_tier_rows(self, *, recent: Optional[int] = None, main: Optional[int] = None) -> None:
        items = [(k, str(v)) for k, v in (("recent_rows", recent), ("main_rows", main)) if v is not None]
        self.con.executemany("INSERT OR REPLACE INTO meta (k, v) VALUES (?, ?)", items)


class SQLiteStorage(Storage):
    """A live index in one SQLite file (see the module docstring)."""

    def __init__(self, url: str, options: StorageOptions):
        self.url = mask_url(url)
        self.path = sqlite_path(url)
        self.mmap_bytes = sqlite_mmap_mb(url) << 20
        self.options = options
        self._con: Optional[sqlite3.Connection] = None
        self._filters = _FilterCache()

    # ---- connection
    def _connect(self) -> sqlite3.Connection:
        if self._con is not None:
            return self._con
        if os.path.isdir(self.path):
            raise ConfigError(f"`url` must name a file for a sqlite index; {self.path!r} of {self.url} is a "
                              "directory. Add a file name, e.g. sqlite:///dir/index.db.")
        directory = os.path.dirname(os.path.abspath(self.path))
        if not os.path.isdir(directory):
            raise StorageError(f"cannot open {self.url}: the directory {directory!r} does not exist. Create it first.")
        try:
            con = sqlite3.connect(self.path, timeout=self.options.lock_timeout, isolation_level=None,
                                  check_same_thread=False)
            con.execute(f"PRAGMA busy_timeout = {int(self.options.lock_timeout * 1000)}")
            # 32 KiB pages for a new file (no effect on an existing one): a page holds whole document
            # rows only, and smaller pages left much of each unused (docs/index.md)
            con.execute(f"PRAGMA page_size = {PAGE_SIZE}")
            mode = con.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                con.close()
                raise StorageError(f"cannot open {self.url} in WAL mode (the file system gave journal_mode={mode!r}); "
                                   "put the index on a local file system.")
            con.execute("PRAGMA synchronous = NORMAL")
            con.execute(f"PRAGMA wal_autocheckpoint = {AUTOCHECKPOINT_PAGES}")
            con.execute("PRAGMA cache_size = -65536")  # 64 MiB page cache per connection
            # reads through a memory map of up to mmap_mb (URL parameter, default 1024): no copy into
            # the page cache per page read (faster adds and queries: docs/index.md)
            con.execute(f"PRAGMA mmap_size = {int(self.mmap_bytes)}")
        except sqlite3.DatabaseError as exc:
            raise StorageError(f"cannot open {self.url}: {type(exc).__name__}: {exc}. Is it a diversify index "
                               "(an SQLite file)?") from exc
        self._con = con
        return con

    def close(self) -> None:
        if self._con is not None:
            con, self._con = self._con, None
            with contextlib.suppress(sqlite3.Error):
                con.close()

    # ---- meta
    def read_meta(self) -> Optional[Meta]:
        if not os.path.exists(self.path):
            return None  # do not create a file just to look
        con = self._connect()
        try:
            has = con.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").fetchone()
            if not has:
                return None
            rows = dict(con.execute("SELECT k, v FROM meta WHERE k IN (?, ?, ?, ?)", META_FIELDS).fetchall())
        except sqlite3.DatabaseError as exc:
            raise StorageError(f"cannot read {self.url}: {type(exc).__name__}: {exc}. Is it a diversify index?") from exc
        if not rows:
            return None
        return checked_meta(rows, self.url)

    def initialize(self, meta: Meta) -> Meta:
        con = self._connect()
        try:
            self._begin_immediate(con)
            try:
                for stmt in _SCHEMA:
                    con.execute(stmt)
                rows = dict(con.execute("SELECT k, v FROM meta WHERE k IN (?, ?, ?, ?)", META_FIELDS).fetchall())
                if not rows:
                    con.executemany("INSERT INTO meta (k, v) VALUES (?, ?)", list(meta_fields(meta).items()))
                    stored = meta
                else:
                    stored = checked_meta(rows, self.url)
                con.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    con.execute("ROLLBACK")
                raise
        except sqlite3.DatabaseError as exc:
            raise failed("creating the index in", self.url, exc, "Nothing was created.") from exc
        return stored

    # ---- transactions
    def _begin_immediate(self, con: sqlite3.Connection) -> None:
        try:
            con.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise lock_timeout(self.url, self.options.lock_timeout) from exc
            raise

    @contextlib.contextmanager
    def read(self) -> Iterator[View]:
        con = self._connect()
        try:
            con.execute("BEGIN")
        except sqlite3.DatabaseError as exc:
            raise StorageError(f"cannot read {self.url}: {type(exc).__name__}: {exc}.") from exc
        try:
            with storage_errors(self.url, "reading", kinds=(sqlite3.DatabaseError,)):
                yield _SQLiteView(con, self._filters, url=self.url)
        finally:
            with contextlib.suppress(sqlite3.Error):
                con.execute("COMMIT")

    @contextlib.contextmanager
    def write(self) -> Iterator[Transaction]:
        con = self._connect()
        try:
            self._begin_immediate(con)
        except sqlite3.DatabaseError as exc:
            raise failed("starting a write on", self.url, exc, NOTHING_WRITTEN) from exc
        try:
            with storage_errors(self.url, "writing a batch to", rolled_back=True, kinds=(sqlite3.DatabaseError,)):
                view = _SQLiteView(con, self._filters, writing=True, url=self.url)
                yield view
                view.finish()
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                con.execute("ROLLBACK")
            raise
        try:
            con.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            with contextlib.suppress(sqlite3.Error):
                con.execute("ROLLBACK")
            raise failed("committing a batch to", self.url, exc, ROLLED_BACK) from exc
        view.committed()
        _CHECKPOINTER.request(os.path.abspath(self.path))

