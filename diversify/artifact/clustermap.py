"""ClusterMap: the Python object that reads and writes an artifact, where the offline builder meets the online side.

The builder constructs it with :meth:`ClusterMap.from_arrays` and :meth:`ClusterMap.save`\\ s it;
the online side :func:`load`\\ s it and calls :meth:`ClusterMap.lookup` per query.

A ClusterMap is immutable once built or loaded, so it is safe to share between threads and to
swap for a newer one (hot reload) by replacing a reference. The file layout is documented in
``docs/artifact-format.md``; the schema is :mod:`~diversify.artifact.schema`, the checks run at
load :mod:`~diversify.artifact.validation`, the id lookup :mod:`~diversify.artifact.lookup`.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from diversify import __version__ as _LIB_VERSION
from diversify.artifact.assemble import assemble
from diversify.artifact.format import read_container, write_container
from diversify.artifact.layout import artifact_error
from diversify.artifact.lookup import FULL_BINDING_DOCS, LookupTable, check_binding
from diversify.artifact.members import ClusterQueries
from diversify.artifact.schema import (
    EXTRA_PREFIX,
    FORMAT_NAME,
    STAGE_EXACT,
    STAGE_MINHASH,
    STAGE_SIMHASH_TEXT,
    STAGE_SIMHASH_VECTORS,
    required_arrays,
)
from diversify.artifact.validation import validate_arrays, validate_header
from diversify.errors import ArtifactError
from diversify.files import DEFAULT_LOCK_TIMEOUT, FileIdentity, file_identity, write_guard
from diversify.ids import check_id_type, id_kind_of, query_keys, utf8_id_keys

__all__ = ["ClusterMap", "load", "FORMAT_NAME", "STAGE_EXACT", "STAGE_MINHASH", "STAGE_SIMHASH_VECTORS", "STAGE_SIMHASH_TEXT"]


class ClusterMap(ClusterQueries):
    """Which cluster each document belongs to, plus how the clusters were built.

    Build with :meth:`from_arrays` (offline) or read an artifact with :func:`load` (online).
    Immutable and thread-safe. Cluster ids are document indices (of a member of the cluster),
    with merged ids (``extras["aliases"]``) already resolved transitively.

    Memory: a loaded ClusterMap holds its own copy of every array but the builder's
    ``extra/*`` state (about 80 bytes per document plus the ids), read at :meth:`load`; the
    extras are read from the file the first time they are used. :meth:`lookup` itself touches
    two arrays of 8 bytes per document (sorted id keys and the parallel cluster ids).
    """

    __slots__ = ("_header", "_arrays", "_path", "_origin", "_kind", "_n", "_k", "_lookup_table", "_lazy", "__weakref__")

    def __init__(self, header: dict, arrays: Mapping[str, np.ndarray], *, path: str | None = None):
        # Private: use from_arrays() or load().
        self._header = header
        self._arrays = arrays
        self._path = path
        self._origin: FileIdentity | None = None  # set by load()
        self._kind: str = header["id_kind"]
        self._n: int = header["counts"]["n_docs"]
        self._k: int = header["counts"]["n_clusters"]
        self._lookup_table = LookupTable(
            arrays["lookup/key"],
            arrays["lookup/cluster"],
            arrays["lookup/bucket_start"],
            bucket_bits=header["lookup"]["bucket_bits"],
            window=header["lookup"]["window"],
        )
        self._lazy: dict[str, Any] = {}

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_arrays(
        cls,
        ids,
        cluster_ids,
        is_representative,
        doc_stages,
        doc_lengths,
        *,
        config: dict,
        fingerprint: str,
        seed: int,
        hash_scheme: str,
        build_info: dict,
        metadata: dict | None = None,
        created_at: str | None = None,
        extras: dict[str, np.ndarray] | None = None,
        library_version: str = _LIB_VERSION,
    ) -> ClusterMap:
        """Validate the builder's arrays and assemble a ClusterMap (call :meth:`save` to write the artifact).

        Parameters
        ----------
        ids : list[str] | list[int] | numpy.ndarray[int64], shape (n,)
            Document ids in document order; unique; all str or all int (:func:`diversify.ids.check_ids`).
        cluster_ids : numpy.ndarray[int64], shape (n,)
            Cluster id per document: the document index of a member of the cluster (the first
            member), possibly a merged id listed in ``extras["aliases"]``.
        is_representative : numpy.ndarray[bool], shape (n,)
            Exactly one True per cluster.
        doc_stages : numpy.ndarray[uint8], shape (n,)
            Bitmask of the stages that joined the document to its cluster: 1 exact,
            2 minhash, 4 simhash (vectors), 8 simhash (text); 0 for a singleton.
        doc_lengths : numpy.ndarray[uint32], shape (n,)
            Normalized text length in bytes (0 for vector-only documents).
        config, build_info, metadata : dict
            Plain msgpack-able data (str keys; None/bool/int/float/str/bytes/list/dict values).
        fingerprint, hash_scheme : str
        seed : int
        created_at : str, optional
            ISO-8601 UTC. None: from ``SOURCE_DATE_EPOCH`` if set, else now (to the second).
        extras : dict[str, numpy.ndarray], optional
            Incremental state stored as is (names ``[A-Za-z0-9_.-]{1,64}``, whitelisted dtypes).
            ``"aliases"`` (m, 2) int [merged_id, surviving_id] is also used to resolve ``cluster_ids``.
        library_version : str

        Raises
        ------
        InputTypeError, InputError, DuplicateIdError
            With the parameter, the rule, the value received and the fix.
        """
        header, arrays, str_ids = assemble(
            ids, cluster_ids, is_representative, doc_stages, doc_lengths,
            config=config, fingerprint=fingerprint, seed=seed, hash_scheme=hash_scheme, build_info=build_info,
            metadata=metadata, created_at=created_at, extras=extras, library_version=library_version,
        )
        obj = cls(header, arrays)
        if str_ids is not None:
            obj._lazy["ids"] = str_ids
        return obj

    # ------------------------------------------------------------------ persistence

    def save(self, path: str | os.PathLike, *, expect: FileIdentity | None = None,
             lock_timeout: float | None = DEFAULT_LOCK_TIMEOUT) -> None:
        """Write the artifact to ``path`` atomically (temp file + fsync + rename), holding the path's writer lock.

        ``expect`` is the version of a file this map was derived from (see :func:`diversify.add`):
        if ``path`` is that file and it has changed since, :class:`~diversify.errors.WriteConflictError`
        is raised and nothing is written. ``lock_timeout``: seconds to wait for another writer of
        ``path`` (:class:`~diversify.errors.LockTimeoutError` after). The rules for ``path`` are
        those of :mod:`diversify.files`.
        """
        header = {k: v for k, v in self._header.items() if k != "format_version"}
        with write_guard(path, what="the artifact", error=ArtifactError, origin=expect, lock_timeout=lock_timeout):
            write_container(path, header, dict(self._arrays.items()))

    @classmethod
    def load(cls, path: str | os.PathLike, *, mmap: bool = False, verify: bool = True) -> ClusterMap:
        """Open an artifact written by :meth:`save`.

        Parameters
        ----------
        path : str or os.PathLike
        mmap : bool, default False
            False: every array a query, ``members`` or ``ids`` can need is read into this
            process's memory now (about 80 bytes per document plus the ids; the ``extra/*``
            state is read on first use, from the same open file). Whatever happens to the file
            afterwards (truncated, overwritten in place, ``cp`` over itself, replaced, deleted),
            the loaded map keeps its answers and cannot crash the process; an extra first read
            after such a change is refused with :class:`ArtifactError`. True: memory-map the
            file instead (pages shared between processes and loaded on use, no copy). Then the
            file must never change in place: truncating it kills the process with SIGBUS at the
            next access, overwriting it changes answers silently; replacing it by rename and
            deleting it are safe (see ``docs/security.md``, "Live files").
        verify : bool, default True
            Check checksums and structural invariants (sorted keys, indices in range, one
            representative per cluster) and, for str ids of up to 65,536 documents, re-hash
            every id against the lookup table. Checksums of ``extras`` are checked when first
            accessed. With False only the header, the layout and a sample of the id binding are
            checked: use it for trusted files when load time matters.

        Notes
        -----
        Always, whatever ``verify``: 2,048 evenly spaced documents are re-hashed and looked up
        (they must map to their own document and cluster), and the documents at 2,048 evenly
        spaced lookup positions are looked up (they must be found exactly there), so a table
        written with the wrong key scheme or permuted against the ids is refused (a cost that does not
        grow with the artifact; see ``docs/artifact-format.md`` section 5).

        Raises
        ------
        ArtifactNotFoundError
            The path does not exist or cannot be read.
        ArtifactError
            The file is corrupt, truncated, hostile, of a future major version, or not a diversify artifact.
        """
        before = file_identity(path)
        header, arrays = read_container(path, mmap=mmap, verify=verify)
        spath = os.fspath(path)
        validate_header(spath, header)
        for name in required_arrays(header["id_kind"]):
            if name in arrays:
                arrays[name]  # read (and checksum) now: a later change to the file cannot reach it
        validate_arrays(spath, header, arrays, deep=verify)
        cm = cls(header, arrays, path=spath)
        cm._check_binding(full=verify and cm._n <= FULL_BINDING_DOCS)
        # the file version this map was read from (None if a writer replaced the file meanwhile):
        # an `add` of this map saved back onto the file fails if the file changes after the load
        after = file_identity(path)
        cm._origin = before if before is not None and after is not None and before.same_version(after) else None
        return cm

    def _check_binding(self, *, full: bool) -> None:
        """Refuse a lookup table that does not belong to the stored ids (see :func:`lookup.check_binding`)."""
        keys_of: Callable[[np.ndarray], np.ndarray]
        if self._kind == "int":
            int_keys = self._arrays["ids/int"].view(np.uint64)
            keys_of = int_keys.take
            full = False  # validation compared every int key already (verify=True)
        else:
            raw, off = self._str_blob()

            def keys_of(docs: np.ndarray) -> np.ndarray:
                lo, hi = off.take(docs).tolist(), off.take(docs + 1).tolist()
                blob = bytes(raw) if docs.size > 4096 else raw  # slicing bytes is faster; a copy only for many
                return utf8_id_keys([bytes(blob[a:b]) for a, b in zip(lo, hi)])

        problem = check_binding(self._lookup_table, self._arrays["lookup/doc"], self._arrays["doc/cluster_id"],
                                keys_of, self._id_for_message, full=full)
        if problem is not None:
            raise artifact_error(
                self._path or "<in memory>",
                f"the lookup table does not belong to the stored ids: {problem}. "
                "The file is corrupt or its writer does not follow docs/artifact-format.md section 3; rebuild it.",
            )

    def _id_for_message(self, doc: int) -> str | int:
        try:
            return self._id_at(doc)
        except ArtifactError:
            return "<not valid UTF-8>"

    # ------------------------------------------------------------------ properties

    @property
    def n_docs(self) -> int:
        return self._n

    @property
    def n_clusters(self) -> int:
        return self._k

    @property
    def n_duplicates(self) -> int:
        return self._n - self._k

    @property
    def id_kind(self) -> str:
        return self._kind

    @property
    def path(self) -> str | None:
        return self._path

    @property
    def ids(self) -> list[str] | np.ndarray:
        """Document ids in document order: list[str], or a read-only int64 array."""
        if self._kind == "int":
            return self._arrays["ids/int"]
        ids = self._lazy.get("ids")
        if ids is None:
            raw, off = self._str_blob()
            o = off.tolist()
            try:
                ids = [str(raw[o[i] : o[i + 1]], "utf-8") for i in range(self._n)]
            except UnicodeDecodeError as exc:
                raise self._corrupt(f"stored ids are not valid UTF-8 ({exc}).") from None
            self._lazy["ids"] = ids
        return ids

    def _corrupt(self, what: str) -> ArtifactError:
        return artifact_error(self._path or "<in memory>", f"{what} The file is corrupt.")

    def _str_blob(self) -> tuple[memoryview, np.ndarray]:
        blob = self._lazy.get("blob")
        if blob is None:
            off = self._arrays["ids/str_offsets"]
            raw = self._arrays["ids/str_bytes"]
            if (
                off.shape != (self._n + 1,)
                or int(off[0]) != 0
                or int(off[-1]) != raw.shape[0]
                or (self._n and bool((off[1:] < off[:-1]).any()))
            ):
                raise self._corrupt("`ids/str_offsets` must rise from 0 to the length of `ids/str_bytes`.")
            blob = (raw.data, off)  # a view of the array already read: no second copy
            self._lazy["blob"] = blob
        return blob

    def _id_at(self, doc: int) -> str | int:
        if self._kind == "int":
            return int(self._arrays["ids/int"][doc])
        ids = self._lazy.get("ids")
        if ids is not None:
            return ids[doc]
        raw, off = self._str_blob()
        try:
            return str(raw[int(off[doc]) : int(off[doc + 1])], "utf-8")
        except UnicodeDecodeError as exc:
            raise self._corrupt(f"stored id {doc} is not valid UTF-8 ({exc}).") from None

    @property
    def cluster_ids(self) -> np.ndarray:
        """int64 (n_docs,): cluster id per document, in document order (aliases resolved)."""
        return self._arrays["doc/cluster_id"]

    @property
    def is_representative(self) -> np.ndarray:
        return self._arrays["doc/is_representative"]

    @property
    def doc_stages(self) -> np.ndarray:
        return self._arrays["doc/stages"]

    @property
    def doc_lengths(self) -> np.ndarray:
        return self._arrays["doc/length"]

    @property
    def config(self) -> dict:
        return self._header["config"]

    @property
    def fingerprint(self) -> str:
        return self._header["fingerprint"]

    @property
    def seed(self) -> int:
        return self._header["seed"]

    @property
    def hash_scheme(self) -> str:
        return self._header["hash_scheme"]

    @property
    def build_info(self) -> dict:
        return self._header["build_info"]

    @property
    def metadata(self) -> dict:
        return self._header["metadata"]

    @property
    def created_at(self) -> str:
        return self._header["created_at"]

    @property
    def library_version(self) -> str:
        return self._header["library_version"]

    @property
    def format_version(self) -> tuple[int, int]:
        major, minor = self._header["format_version"]
        return (major, minor)

    @property
    def header(self) -> dict:
        """A copy of the full header (without the array table)."""
        return copy.deepcopy(self._header)

    @property
    def extras(self) -> dict[str, np.ndarray]:
        """Incremental state stored by the builder: name -> read-only array (may be empty)."""
        return {name[len(EXTRA_PREFIX) :]: self._arrays[name] for name in self._arrays if name.startswith(EXTRA_PREFIX)}

    # ------------------------------------------------------------------ online lookups

    def lookup(self, ids) -> np.ndarray:
        """Cluster id of each id, ``-1`` for ids not in the artifact.

        Parameters
        ----------
        ids : sequence of str/int, or 1-D array
            Ids of the wrong kind (int against a str artifact and vice versa) are unknown (-1).

        Returns
        -------
        numpy.ndarray[int64], shape (len(ids),)

        Raises
        ------
        InputTypeError
            An id is a float, None, bool or other non-id value, or ``ids`` is a bare id.

        Notes
        -----
        Str ids are matched by their 64-bit key; an id *not* in the artifact is reported as
        present with probability ~n_docs * 2**-64 (never for int ids).
        """
        return self._lookup_table.clusters_of(*query_keys(ids, self._kind))

    def doc_index(self, ids) -> np.ndarray:
        """Document index of each id (int64), ``-1`` when unknown. Same rules as :meth:`lookup`."""
        return self._lookup_table.take(self._arrays["lookup/doc"], *query_keys(ids, self._kind))

    def cluster_of(self, id) -> int | None:
        """Cluster id of one document id, or None when the id is not in the artifact."""
        check_id_type(id, param="id")
        c = int(self.lookup([id])[0])
        return None if c < 0 else c

    def __contains__(self, id) -> bool:
        if id_kind_of(id) is None:
            return False
        return bool(self.lookup([id])[0] >= 0)

    def __len__(self) -> int:
        return self._n

    # ------------------------------------------------------------------ views

    def to_pandas(self):
        """One row per document: ``id``, ``cluster_id``, ``is_representative``, ``representative_id``,
        ``similarity`` (verified, to the representative; NaN where the artifact stores none) and
        ``stages`` (names of the stages that joined it). Needs pandas (:class:`MissingDependencyError`
        with the install command otherwise). See :mod:`diversify.artifact.views`."""
        from .views import to_pandas

        return to_pandas(self)

    def _repr_html_(self) -> str:
        from .views import html_summary

        return html_summary(self)

    def __repr__(self) -> str:
        fp = self.fingerprint
        fp = fp[:12] + "…" if len(fp) > 12 else fp
        where = f", path={self._path!r}" if self._path else ""
        return (
            f"ClusterMap(n_docs={self._n}, n_clusters={self._k}, n_duplicates={self._n - self._k}, "
            f"id_kind={self._kind!r}, fingerprint={fp!r}, created_at={self.created_at!r}, "
            f"format_version={'.'.join(map(str, self.format_version))}{where})"
        )


def load(path: str | os.PathLike, *, mmap: bool = False, verify: bool = True) -> ClusterMap:
    """Open an artifact as a ClusterMap, read into memory (``mmap=True``: memory-mapped). See :meth:`ClusterMap.load`.

    A directory holding a sharded result (``build(..., engine="dask", output_dir=...)``) is
    assembled shard by shard into one ClusterMap (:func:`diversify.artifact.shards.assemble`)."""
    from .shards import assemble, is_sharded

    if is_sharded(path):
        args, kwargs = assemble(path)
        return ClusterMap.from_arrays(*args, **kwargs)
    return ClusterMap.load(path, mmap=mmap, verify=verify)
