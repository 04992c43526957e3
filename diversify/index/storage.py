"""The storage interface of the live index: what a backend (SQLite, PostgreSQL, Redis) must do.

The :class:`~diversify.index.Index` does every piece of near-duplicate logic itself (text rule,
sketches, band keys, verification, the representative rule, the fold guarantee). A backend only
keeps rows and answers a few lookups, so the three backends stay small and behave the same:

* **meta** (:class:`Meta`): written once when the index is created (schema version, the build
  config as canonical JSON, its fingerprint, the diversify version that created it);
* **state** (:class:`State`): the counters the index hands out (next document sequence number,
  next cluster id) and the id kind, rewritten inside each write transaction;
* **documents** (:class:`DocRow`): one row per live document, keyed by ``seq`` (an int64 the index
  assigns) with a unique ``id`` (always a ``str`` here; see :attr:`DocRow.id`), its cluster, whether
  it is its cluster's representative, its verified similarity to the representative, the stage
  bits that verified it, and ``payload``: the document's sketches as opaque bytes (the backend
  never looks inside);
* **bands**: ``(key, seq)`` pairs, ``key`` an int64 LSH band key. Only representatives have band
  rows (a new document can only join a representative), so a lookup of the keys of a new
  document returns the representatives it may join.

Concurrency contract (the part the fold guarantee depends on):

* :meth:`Storage.write` opens ONE transaction that holds the index-wide writer lock from its first
  statement to commit: writes of two processes never interleave, and everything read inside it is
  the latest committed state (SQLite ``BEGIN IMMEDIATE``; PostgreSQL ``pg_advisory_xact_lock``;
  Redis a lease lock with a fencing token checked at ``EXEC``). On a normal exit of the ``with``
  block the transaction commits; on an exception it rolls back and the exception propagates. A
  process killed inside the block leaves the index as it was before the block (the lock is
  released by the server, or the lease expires).
* :meth:`Storage.read` gives a read-only view. It takes no writer lock. SQLite and PostgreSQL give
  a consistent snapshot; a backend that cannot (Redis) makes each call atomic, and a row named by
  one call may be gone in the next: :meth:`View.docs_by_seq` then simply omits it.
* A :class:`Storage` object is used by one thread at a time and is not shared across ``fork``;
  every process opens its own with :func:`open_storage`.

Errors a backend raises: :class:`~diversify.errors.StorageError` for a server that cannot be
reached, goes away, or times out on the writer lock (the message names the masked URL, the cause,
and for a write that the batch was rolled back), and
:class:`~diversify.errors.MissingDependencyError` (from :func:`open_storage`) for an absent client
library. Every other check (schema version, config, ids, texts) is the index's, not the backend's.

URLs: ``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db``; ``postgresql://`` (or
``postgres://``) as libpq takes them; ``redis://``, ``rediss://``, ``unix://`` as redis-py takes
them. Every backend accepts the query parameter ``index=<name>`` (letters, digits, ``_``; default
``default``) to keep several independent indexes in one database / Redis database: table names
or key prefixes derive from it (:func:`index_name`). SQLite: one file is one index (``index``
names nothing and is refused when not ``default``). :func:`open_storage` applies the rules of
:mod:`diversify.index.urls` (no control characters, no fragment, valid ports...) before a
backend or driver sees the URL.

Backends read stored records through :mod:`diversify.index.records`: a damaged field is a StorageError naming the record,
the field and what it holds, never a bare ValueError or KeyError.
"""

from __future__ import annotations

import abc
import contextlib
import re
import urllib.parse
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..errors import ConfigError, MissingDependencyError, StorageError, require

__all__ = [
    "SCHEMA_VERSION",
    "Meta",
    "State",
    "DocRow",
    "Assignment",
    "Counts",
    "StorageOptions",
    "View",
    "Transaction",
    "Storage",
    "open_storage",
    "mask_url",
    "index_name",
    "scheme_of",
    "storage_errors",
]

#: Version of the logical schema (the rows above and what the index stores in ``payload``). An index
#: whose meta carries a larger number was written by a newer diversify and is refused; a backend
#: keeps its own physical layout in step with this number.
SCHEMA_VERSION = 1

_INDEX_NAME = re.compile(r"[A-Za-z0-9_]{1,48}")


# --------------------------------------------------------------------------- rows


@dataclass(frozen=True)
class Meta:
    """Written once, when the index is created; never changed afterwards."""

    schema_version: int
    #: canonical JSON of the BuildConfig (diversify.config.canonical_json)
    config_json: str
    #: diversify.config.fingerprint of that config
    fingerprint: str
    #: diversify.__version__ of the process that created the index
    created_by: str


@dataclass(frozen=True)
class State:
    """The counters of the index; read and rewritten inside a write transaction."""

    #: seq of the next document added (seqs are never reused: a deleted seq stays unused)
    next_seq: int = 0
    #: id of the next new cluster (never reused either)
    next_cluster: int = 0
    #: "str" or "int" once the first document is added (every id of an index has one kind), else None
    id_kind: Optional[str] = None
    #: what the index fixed at its first add that all later documents must match (vector dimension,
    #: key columns...), as a short JSON text the index writes and reads; opaque to the backend
    #: (store and return it verbatim; ``""`` until set)
    layout: str = ""


@dataclass(frozen=True)
class DocRow:
    """One live document."""

    #: int64 assigned by the index, increasing in order of addition; the primary key
    seq: int
    #: the document id as text: a str id as is, an int id in decimal (``str(int)``); unique. The
    #: index converts back using :attr:`State.id_kind`.
    id: str
    #: int64 cluster id (the representative's cluster; stable while the cluster exists)
    cluster: int
    #: True for the one representative of each cluster
    is_rep: bool
    #: verified similarity to the representative (1.0 for a representative)
    similarity: float
    #: stage bits (diversify.stages.STAGE_*) that verified the fold; 0 for a lone representative
    stages: int
    #: the document's sketches, encoded by the index (opaque to the backend); ``b""`` when a lookup
    #: was made with ``payload=False``
    payload: bytes = b""


@dataclass(frozen=True)
class Assignment:
    """A change of an existing document's cluster (after a delete re-assigns a cluster)."""

    seq: int
    cluster: int
    is_rep: bool
    similarity: float
    stages: int


@dataclass(frozen=True)
class Counts:
    """What :meth:`View.counts` reports."""

    documents: int
    #: number of representatives = number of clusters
    representatives: int
    band_rows: int
    #: bytes the index occupies in the backend (file size, relation sizes, memory usage), or None
    size_bytes: Optional[int] = None


@dataclass(frozen=True)
class StorageOptions:
    """Options every backend takes (given to :func:`open_storage`)."""

    #: seconds a writer waits for the index-wide writer lock before StorageError
    lock_timeout: float = 30.0
    #: seconds to wait for a server connection before StorageError (fail fast on a bad URL)
    connect_timeout: float = 5.0

    def __post_init__(self) -> None:
        for name in ("lock_timeout", "connect_timeout"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (0 < float(v) <= 3600):
                raise ConfigError(f"`{name}` must be a number of seconds in (0, 3600]; got {v!r}.")


# --------------------------------------------------------------------------- the interface


class View(abc.ABC):
    """Read operations; available in :meth:`Storage.read` and inside :meth:`Storage.write`."""

    @abc.abstractmethod
    def state(self) -> State:
        """The counters (State() for an index without documents yet)."""

    @abc.abstractmethod
    def docs_by_id(self, ids: Sequence[str], *, payload: bool = True) -> list[DocRow]:
        """The live documents among ``ids`` (in any order; unknown ids are omitted)."""

    @abc.abstractmethod
    def docs_by_seq(self, seqs: Sequence[int], *, payload: bool = True) -> list[DocRow]:
        """The live documents among ``seqs`` (in any order; unknown seqs are omitted)."""

    @abc.abstractmethod
    def docs_in_clusters(self, clusters: Sequence[int], *, payload: bool = True) -> list[DocRow]:
        """Every live document of the given clusters (in any order)."""

    @abc.abstractmethod
    def candidates(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Band rows whose key is in ``keys`` (int64 (m,), may repeat): ``(keys, seqs)``, two int64
        arrays of equal length, one entry per matching band row, in any order."""

    @abc.abstractmethod
    def scan(self, after_seq: int, limit: int, *, payload: bool = True) -> list[DocRow]:
        """Up to ``limit`` live documents with ``seq > after_seq`` in increasing seq order (export,
        checks). Inside one :meth:`Storage.read` of a snapshot backend, pages are consistent."""

    @abc.abstractmethod
    def counts(self) -> Counts:
        """Documents, representatives and band rows now."""

    def rows(self, *, page: int = 20_000, payload: bool = True) -> Iterator[DocRow]:
        """Every live document in increasing seq order, read :meth:`scan` page by page."""
        after = -1
        while True:
            got = self.scan(after, page, payload=payload)
            if not got:
                return
            yield from got
            after = got[-1].seq


class Transaction(View):
    """Write operations; only inside :meth:`Storage.write` (under the writer lock)."""

    @abc.abstractmethod
    def set_state(self, state: State) -> None:
        """Replace the counters."""

    @abc.abstractmethod
    def insert_docs(self, rows: Sequence[DocRow]) -> None:
        """Insert new documents (their seqs and ids are not in the index; the index checked)."""

    @abc.abstractmethod
    def update_docs(self, changes: Sequence[Assignment]) -> None:
        """Change the cluster fields of existing documents (payload and id unchanged)."""

    @abc.abstractmethod
    def delete_docs(self, seqs: Sequence[int]) -> None:
        """Remove documents (their band rows are removed by :meth:`delete_bands`, which the index
        calls in the same transaction: it knows every document's band keys from its payload, so a
        backend needs no lookup from seq to band rows)."""

    @abc.abstractmethod
    def insert_bands(self, keys: np.ndarray, seqs: np.ndarray) -> None:
        """Add band rows ``(keys[i], seqs[i])`` (two int64 arrays of equal length; the index never
        inserts a pair that is already there)."""

    @abc.abstractmethod
    def delete_bands(self, keys: np.ndarray, seqs: np.ndarray) -> None:
        """Remove band rows ``(keys[i], seqs[i])`` (two int64 arrays of equal length; a pair that
        is not there is ignored)."""


class Storage(abc.ABC):
    """One open connection to an index's storage (see the module docstring for the contract)."""

    #: the URL with any password masked (for messages)
    url: str

    @abc.abstractmethod
    def initialize(self, meta: Meta) -> Meta:
        """Create the index with ``meta`` if it does not exist yet, else leave it as is; return the
        meta stored (``meta`` itself, or the existing one). Atomic: of two processes creating the
        same index at once, one creates it and both return the same meta."""

    @abc.abstractmethod
    def read_meta(self) -> Optional[Meta]:
        """The stored meta, or None when the index does not exist (nothing created yet)."""

    @abc.abstractmethod
    def read(self) -> contextlib.AbstractContextManager[View]:
        """A read-only view (see the module docstring)."""

    @abc.abstractmethod
    def write(self) -> contextlib.AbstractContextManager[Transaction]:
        """ONE transaction under the index-wide writer lock; commit on a normal exit, roll back on
        an exception. Raises StorageError when the lock is not acquired within
        ``options.lock_timeout`` or the server goes away (saying the batch was rolled back)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the connection (idempotent)."""

    def __enter__(self) -> Storage:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# --------------------------------------------------------------------------- URLs


#: scheme -> (client module, extra) of the server backends; their modules are imported on use
_BACKENDS = {
    "sqlite": (None, None),
    "postgresql": ("psycopg", "postgres"),
    "postgres": ("psycopg", "postgres"),
    "redis": ("redis", "redis"),
    "rediss": ("redis", "redis"),
    "unix": ("redis", "redis"),
}


def mask_url(url: str) -> str:
    """``url`` with the password (if any) replaced by ``***``, for messages and logs.

    Also masks ``password=`` query parameters (libpq's and redis-py's keyword form).
    """
    if not isinstance(url, str):
        return repr(url)
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:  # e.g. an unclosed IPv6 bracket: hide whatever stands before an '@'
        return re.sub(r"://[^/?#]*@", "://***@", url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        if ":" in userinfo:
            user = userinfo.split(":", 1)[0]
            netloc = f"{user}:***@{host}"
    query = parts.query
    if query:
        pairs = urllib.parse.parse_qsl(query, keep_blank_values=True)
        if any(k.lower() == "password" for k, _ in pairs):
            query = "&".join(f"{k}=***" if k.lower() == "password" else f"{k}={v}" for k, v in pairs)
    if netloc == parts.netloc and query == parts.query:
        return url  # nothing to hide (urlunsplit would also drop the empty host of sqlite:////abs)
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def scheme_of(url: str) -> str:
    """The URL's scheme, lower case, checked against the known backends (ConfigError if unknown)."""
    if not isinstance(url, str) or "://" not in url:
        raise ConfigError(f"`url` must be a storage URL such as 'sqlite:///index.db', 'postgresql://host/db' or "
                          f"'redis://host:6379/0'; got {mask_url(url) if isinstance(url, str) else url!r}.")
    scheme = url.split("://", 1)[0].lower()
    if scheme not in _BACKENDS:
        raise ConfigError(f"`url` scheme must be one of {sorted(set(_BACKENDS))}; got {scheme!r} in {mask_url(url)}. "
                          "Use sqlite:///path.db for an embedded index.")
    return scheme


def index_name(url: str) -> str:
    """The ``index=`` query parameter of ``url`` (default ``"default"``), checked."""
    query = urllib.parse.urlsplit(url).query
    values = [v for k, v in urllib.parse.parse_qsl(query, keep_blank_values=True) if k == "index"]
    if not values:
        return "default"
    name = values[-1]
    if not _INDEX_NAME.fullmatch(name):
        raise ConfigError(f"the `index` parameter of the URL must be 1-48 letters, digits or '_'; got {name!r} in "
                          f"{mask_url(url)}.")
    return name


def open_storage(url: str, options: Optional[StorageOptions] = None) -> Storage:
    """Open the backend named by the URL's scheme (the client library is imported only now).

    Raises ConfigError for an unknown scheme or a URL that breaks a rule of
    :mod:`diversify.index.urls`, MissingDependencyError naming the extra to install
    (``pip install 'diversify-retrieval[postgres]'`` / ``[redis]``), StorageError when the server
    cannot be reached (within ``options.connect_timeout``).
    """
    from .urls import check_url

    scheme = scheme_of(url)
    check_url(url, scheme)  # before any driver sees it (NUL, fragments, bad ports...: see .urls)
    client, extra = _BACKENDS[scheme]
    if client is not None:
        assert extra is not None
        require(client, extra=extra, purpose=f"a {scheme}:// index")
    opts = options if options is not None else StorageOptions()
    backend = _backend_class(scheme)
    storage = backend(url, opts)
    if not isinstance(storage, Storage):  # pragma: no cover - a backend bug
        raise StorageError(f"{type(storage).__name__} is not a Storage")
    return storage


def _backend_class(scheme: str) -> type:
    """The backend class of a scheme, imported now (static imports of our own modules only)."""
    try:
        if scheme == "sqlite":
            from .sqlite import SQLiteStorage

            return SQLiteStorage
        if scheme in ("postgresql", "postgres"):
            from .postgres import PostgresStorage  # type: ignore[import-not-found,unused-ignore]

            return PostgresStorage
        from .redis import RedisStorage  # type: ignore[import-not-found,unused-ignore]

        return RedisStorage
    except ModuleNotFoundError as exc:
        if not (exc.name or "").startswith("diversify.index."):
            raise
        raise MissingDependencyError(f"the {scheme}:// backend ({exc.name}) is not part of this installation of "
                                     "diversify; upgrade diversify-retrieval, or use sqlite:///path.db.") from exc


@contextlib.contextmanager
def storage_errors(url: str, action: str, *, rolled_back: bool = False) -> Iterator[None]:
    """Re-raise a backend driver's exception as StorageError naming the masked URL and the cause.

    ``rolled_back`` adds that the batch was rolled back (for failures inside a write transaction).
    """
    try:
        yield
    except StorageError:
        raise
    except Exception as exc:
        if not _driver_error(exc):
            raise
        tail = " The batch was rolled back; nothing of it was written. Run it again." if rolled_back else ""
        raise StorageError(f"{action} {mask_url(url)} failed: {type(exc).__name__}: {exc}.{tail}") from exc


def _driver_error(exc: BaseException) -> bool:
    """Errors of the database client libraries (and the OS below them), not bugs in our code."""
    mod = type(exc).__module__ or ""
    return isinstance(exc, OSError) or mod.split(".")[0] in {"sqlite3", "psycopg", "redis", "psycopg_pool"}
