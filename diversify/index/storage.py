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
  every process opens its own with :func:`~diversify.index.registry.open_storage`.

Errors a backend raises: :class:`~diversify.errors.StorageError` for a server that cannot be
reached, goes away, or times out on the writer lock (the message names the masked URL, the cause,
and for a write that the batch was rolled back: :mod:`diversify.index.failures` words these once for
all backends), and :class:`~diversify.errors.MissingDependencyError` (from
:func:`~diversify.index.registry.open_storage`) for an absent client library. Every other check
(schema version, config, ids, texts) is the index's, not the backend's.

URLs: ``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db``; ``postgresql://`` (or
``postgres://``) as libpq takes them; ``redis://``, ``rediss://``, ``unix://`` as redis-py takes
them. Every backend accepts the query parameter ``index=<name>`` (letters, digits, ``_``; default
``default``) to keep several independent indexes in one database / Redis database: table names
or key prefixes derive from it (:func:`~diversify.index.urls.index_name`). SQLite: one file is one
index (``index`` names nothing and is refused when not ``default``). Which backend serves a scheme
is :mod:`diversify.index.registry`'s to say (this module imports no backend; the backends import
it); its :func:`~diversify.index.registry.open_storage` applies the rules of
:mod:`diversify.index.urls` (no control characters, no fragment, valid ports...) before a backend
or driver sees the URL.

Backends read stored records through :mod:`diversify.index.records`: a damaged field is a StorageError naming the record,
the field and what it holds, never a bare ValueError or KeyError.
"""

from __future__ import annotations

import abc
import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..errors import ConfigError

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
]

#: Version of the logical schema (the rows above and what the index stores in ``payload``). An index
#: whose meta carries a larger number was written by a newer diversify and is refused; a backend
#: keeps its own physical layout in step with this number.
SCHEMA_VERSION = 1


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
    """Options every backend takes (given to :func:`~diversify.index.registry.open_storage`)."""

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
