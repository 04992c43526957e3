"""ClusterMap: the artifact where the offline builder meets the online side.

The builder constructs it with :meth:`ClusterMap.from_arrays` and :meth:`ClusterMap.save`\\ s it;
the online side :func:`load`\\ s it and calls :meth:`ClusterMap.lookup` per query.

A ClusterMap is immutable once built or loaded, so it is safe to share between threads and to
swap for a newer one (hot reload) by replacing a reference. The file layout is documented in
``docs/artifact-format.md``.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from diversify import __version__ as _LIB_VERSION
from diversify.artifact.format import (
    _CODE_OF,
    DTYPES,
    FORMAT_MAJOR,
    FORMAT_MINOR,
    MAX_NDIM,
    _prepare_arrays,
    canonical,
    read_container,
    write_container,
)
from diversify.errors import ArtifactError, DuplicateIdError, InputError, InputTypeError
from diversify.ids import (
    ID_KEY_SCHEME,
    INT64_MAX,
    INT64_MIN,
    id_kind_of,
    query_keys,
)

__all__ = ["ClusterMap", "load", "FORMAT_NAME", "STAGE_EXACT", "STAGE_MINHASH", "STAGE_SIMHASH_VECTORS", "STAGE_SIMHASH_TEXT"]

FORMAT_NAME = "diversify.clustermap"
STAGE_EXACT = 1
STAGE_MINHASH = 2
STAGE_SIMHASH_VECTORS = 4
STAGE_SIMHASH_TEXT = 8

# Lookup table: documents sorted by slot key = id_key * SLOT_MULTIPLIER (mod 2**64), a bijection
# that spreads sequential int ids over the top bits, plus a directory of bucket starts indexed by
# the top `bucket_bits` bits. A lookup reads one directory entry and a window of `window` keys
# (a few cache lines, fetched in parallel) instead of ~log2(n) dependent probes.
SLOT_MULTIPLIER = 0x9E3779B97F4A7C15
_MULT = np.uint64(SLOT_MULTIPLIER)
# Below this many documents plain binary search is as fast (fewer numpy calls, arrays in cache);
# measured crossover ~0.5-2M documents, earlier when other processes contend for the caches.
_BUCKET_MIN_DOCS = 1 << 19
_MAX_BUCKET_BITS = 40

_EXTRA_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")
_EXTRA_PREFIX = "extra/"

# name -> (dtype code, shape kind) of the arrays every ClusterMap file has.
# shape kinds: "n" (n_docs,), "k" (n_clusters,), "k+1" (n_clusters + 1,), "b" (2**bucket_bits + 1,)
_CORE = {
    "doc/cluster_id": ("i8", "n"),
    "doc/is_representative": ("bool", "n"),
    "doc/stages": ("u1", "n"),
    "doc/length": ("u4", "n"),
    "lookup/key": ("u8", "n"),
    "lookup/cluster": ("i8", "n"),
    "lookup/doc": ("i8", "n"),
    "lookup/bucket_start": ("i8", "b"),
    "cluster/id": ("i8", "k"),
    "cluster/indptr": ("i8", "k+1"),
    "cluster/members": ("i8", "n"),
    "cluster/representative": ("i8", "k"),
}


# --------------------------------------------------------------------------- helpers


def _created_at_now() -> str:
    sde = os.environ.get("SOURCE_DATE_EPOCH")
    if sde is not None and sde.strip() != "":
        try:
            ts = int(sde.strip())
        except ValueError:
            raise InputError(
                f"`SOURCE_DATE_EPOCH` must be an integer number of seconds since 1970-01-01 UTC; "
                f"got {sde!r}. Fix or unset the environment variable."
            ) from None
        when = _dt.datetime.fromtimestamp(ts, tz=_dt.timezone.utc)
    else:
        when = _dt.datetime.now(tz=_dt.timezone.utc).replace(microsecond=0)
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _check_created_at(value: Any) -> str:
    if not isinstance(value, str):
        raise InputTypeError(
            f"`created_at` must be an ISO-8601 UTC str such as '2024-01-31T12:00:00Z'; got {type(value).__name__}. "
            "Pass a str or None (None uses SOURCE_DATE_EPOCH or the current time)."
        )
    try:
        _dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InputError(
            f"`created_at` must be ISO-8601 such as '2024-01-31T12:00:00Z'; got {value!r}. "
            "Pass a valid timestamp or None."
        ) from None
    return value


def _int_array(x: Any, name: str, n: int, lo: int, hi: int, dtype: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype.kind == "b" and dtype != "bool":
        raise InputTypeError(f"`{name}` must be an integer array; got dtype bool. Pass integers.")
    if arr.dtype.kind not in "iub" or arr.ndim != 1:
        raise InputTypeError(
            f"`{name}` must be a 1-D integer array of length n_docs={n}; got dtype {arr.dtype}, shape {arr.shape}. "
            f"Convert it with np.asarray(..., dtype=np.{np.dtype(dtype).name})."
        )
    if arr.shape[0] != n:
        raise InputError(
            f"`{name}` must have one entry per document (length {n}, the length of `ids`); got length {arr.shape[0]}. "
            "Pass arrays in document order, aligned with `ids`."
        )
    if n:
        mn, mx = int(arr.min()), int(arr.max())
        if mn < lo or mx > hi:
            bad = int(np.flatnonzero((arr < lo) | (arr > hi))[0])
            raise InputError(
                f"`{name}` values must lie in [{lo}, {hi}]; got {int(arr[bad])} at position {bad}. "
                "Fix the value or check that the arrays are aligned with `ids`."
            )
    return arr.astype(dtype)


def _prepare_ids(ids: Any):
    """Return (kind, keys u8, int_values i8 | None, str_offsets u8 | None, encoded | None, str ids copy | None)."""
    if isinstance(ids, (str, bytes)) or not hasattr(ids, "__len__"):
        raise InputTypeError(
            f"`ids` must be a list of str or int document ids (or an int64 array); got {type(ids).__name__}. "
            "Pass a list in document order."
        )
    if isinstance(ids, np.ndarray):
        if ids.ndim != 1:
            raise InputError(f"`ids` must be one-dimensional; got shape {ids.shape}. Pass a flat list or array.")
        if ids.dtype.kind in "iu":
            if ids.dtype.kind == "u" and ids.size and int(ids.max()) > INT64_MAX:
                pos = int(np.flatnonzero(ids > INT64_MAX)[0])
                raise InputError(
                    f"`ids`: int ids must fit in int64; got {int(ids[pos])} at position {pos}. Use smaller ints or str ids."
                )
            vals = ids.astype(np.int64)
            return "int", vals.view(np.uint64), vals, None, None, None
        if ids.dtype.kind in "UO":
            ids = ids.tolist()
        else:
            raise InputTypeError(
                f"`ids` must hold str or int ids; got an array of dtype {ids.dtype}. Convert ids to str or int64."
            )
    ids = list(ids)
    n = len(ids)
    if n == 0:
        return "str", np.zeros(0, np.uint64), None, np.zeros(1, np.uint64), [], []
    kind = id_kind_of(ids[0])
    if kind is None:
        raise InputTypeError(
            f"`ids` must hold str or int ids; got {type(ids[0]).__name__} {ids[0]!r} at position 0. "
            "Convert ids to str (str(id)) or int."
        )
    want = str if kind == "str" else None
    for i, x in enumerate(ids):
        k = id_kind_of(x) if type(x) is not want else kind
        if k != kind:
            if k is None:
                raise InputTypeError(
                    f"`ids` must hold str or int ids; got {type(x).__name__} {x!r} at position {i}. "
                    "Convert ids to str (str(id)) or int."
                )
            raise InputTypeError(
                f"`ids` must be all str or all int; position 0 is {kind} but position {i} is {k} ({x!r}). "
                "Convert every id to the same type, e.g. [str(i) for i in ids]."
            )
    if kind == "int":
        vals = [int(x) for x in ids]
        for i, v in enumerate(vals):
            if not INT64_MIN <= v <= INT64_MAX:
                raise InputError(
                    f"`ids`: int ids must fit in int64; got {v} at position {i}. Use smaller ints or str ids."
                )
        arr = np.array(vals, dtype=np.int64)
        return "int", arr.view(np.uint64), arr, None, None, None
    encoded = []
    for i, s in enumerate(ids):
        try:
            encoded.append(s.encode("utf-8"))
        except UnicodeEncodeError as exc:
            raise InputError(
                f"`ids`: str ids must be encodable as UTF-8; got {s!r} at position {i} ({exc.reason}). "
                "Remove lone surrogates from the id."
            ) from None
    from diversify.ids import _BLAKE_BASE

    copy = _BLAKE_BASE.copy
    digests = []
    append = digests.append
    for b in encoded:
        h = copy()
        h.update(b)
        append(h.digest())
    keys = np.frombuffer(b"".join(digests), dtype="<u8").astype(np.uint64)
    lengths = np.fromiter(map(len, encoded), dtype=np.uint64, count=n)
    offsets = np.zeros(n + 1, dtype=np.uint64)
    np.cumsum(lengths, out=offsets[1:])
    return "str", keys, None, offsets, encoded, ids


def _check_unique(kind: str, keys: np.ndarray, order: np.ndarray, ids_view) -> None:
    """Raise DuplicateIdError for the first repeated id (smallest second position)."""
    sk = keys[order]
    same = sk[1:] == sk[:-1]
    if not same.any():
        return
    # Equal keys: group them; within a group check real equality (str keys may collide).
    idx = np.flatnonzero(same)
    best = None  # (second_pos, first_pos)
    collision = None
    starts = idx[np.concatenate(([True], idx[1:] != idx[:-1] + 1))]
    for s in starts.tolist():
        e = s + 1
        while e < len(sk) and sk[e] == sk[s]:
            e += 1
        group = order[s:e].tolist()  # ascending positions (stable sort)
        first_seen: dict = {}
        for p in group:
            v = ids_view(p)
            if v in first_seen:
                if best is None or p < best[0]:
                    best = (p, first_seen[v])
            else:
                first_seen[v] = p
        if len(first_seen) > 1 and collision is None:
            collision = list(first_seen.values())[:2]
    if best is not None:
        p2, p1 = best
        raise DuplicateIdError(
            f"`ids` must be unique; {ids_view(p1)!r} occurs at positions {p1} and {p2}. "
            "Deduplicate ids before building (or give each document a distinct id)."
        )
    if collision is not None:  # pragma: no cover - needs a 64-bit blake2b collision
        a, b = collision
        raise InputError(
            f"`ids` {ids_view(a)!r} (position {a}) and {ids_view(b)!r} (position {b}) share the same 64-bit id key "
            f"({ID_KEY_SCHEME}), which happens with probability ~2**-64 per pair. Rename one of them."
        )


def _resolve_aliases(aliases: Any, n: int) -> np.ndarray | None:
    """Return ``res`` (n,) int64 mapping every cluster id to its surviving id, or None."""
    if aliases is None:
        return None
    a = np.asarray(aliases)
    if a.dtype.kind not in "iu" or a.ndim != 2 or a.shape[1] != 2:
        raise InputTypeError(
            f"`extras['aliases']` must be an integer array of shape (m, 2) [merged_id, surviving_id]; "
            f"got dtype {a.dtype}, shape {a.shape}. Pass np.asarray(pairs, dtype=np.int64).reshape(-1, 2)."
        )
    if a.size == 0:
        return None
    if int(a.min()) < 0 or int(a.max()) >= n:
        bad = int(np.flatnonzero(((a < 0) | (a >= n)).any(axis=1))[0])
        raise InputError(
            f"`extras['aliases']` ids must be cluster ids in [0, {n}); got row {bad} = {a[bad].tolist()}. "
            "Aliases map a merged cluster id to the surviving cluster id, both document indices."
        )
    mapping: dict[int, int] = {}
    for i, (src, dst) in enumerate(a.tolist()):
        if src == dst:  # "merged into itself": a no-op
            continue
        if src in mapping and mapping[src] != dst:
            raise InputError(
                f"`extras['aliases']` maps cluster {src} twice (to {mapping[src]} and, at row {i}, to {dst}). "
                "Each merged id must have one surviving id."
            )
        mapping[src] = dst
    res = np.arange(n, dtype=np.int64)
    final: dict[int, int] = {}
    for src in mapping:
        chain = [src]
        on_chain = {src}
        cur = src
        while cur in mapping and cur not in final:
            cur = mapping[cur]
            if cur in on_chain:
                raise InputError(
                    f"`extras['aliases']` contains a cycle: {' -> '.join(map(str, chain + [cur]))}. "
                    "Aliases must point towards a surviving cluster id."
                )
            chain.append(cur)
            on_chain.add(cur)
        end = final.get(cur, cur)
        for c in chain:
            final[c] = end
    for src, end in final.items():
        res[src] = end
    return res


# --------------------------------------------------------------------------- ClusterMap


class ClusterMap:
    """Which cluster each document belongs to, plus how the clusters were built.

    Build with :meth:`from_arrays` (offline) or read with :func:`load` (online). Immutable and
    thread-safe. Cluster ids are document indices (of a member of the cluster), with merged
    ids (``extras["aliases"]``) already resolved transitively.

    Online cost: :meth:`lookup` needs two arrays of 8 bytes per document (sorted id keys and
    the parallel cluster ids); everything else loads lazily from the memory map.
    """

    __slots__ = (
        "_header", "_arrays", "_path", "_kind", "_n", "_k", "_keys", "_lcluster", "_starts", "_shift",
        "_window", "_arange", "_use_buckets", "_lazy", "__weakref__",
    )

    def __init__(self, header: dict, arrays: Mapping[str, np.ndarray], *, path: str | None = None):
        # Private: use from_arrays() or load().
        self._header = header
        self._arrays = arrays
        self._path = path
        self._kind = header["id_kind"]
        self._n = header["counts"]["n_docs"]
        self._k = header["counts"]["n_clusters"]
        self._keys = arrays["lookup/key"]
        self._lcluster = arrays["lookup/cluster"]
        self._starts = arrays["lookup/bucket_start"]
        bits = header["lookup"]["bucket_bits"]
        self._shift = np.uint64(64 - bits) if bits else None
        self._window = header["lookup"]["window"]
        self._arange = np.arange(self._window, dtype=np.int64)
        self._use_buckets = self._n >= _BUCKET_MIN_DOCS and bits > 0
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
        """Validate the builder's arrays and assemble a ClusterMap (call :meth:`save` to write it).

        Parameters
        ----------
        ids : list[str] | list[int] | numpy.ndarray[int64], shape (n,)
            Document ids in document order; unique; all str or all int.
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
        kind, keys, int_vals, str_offsets, encoded, str_list = _prepare_ids(ids)
        n = int(keys.shape[0])
        skeys = keys * _MULT
        order = np.argsort(skeys, kind="stable")
        if kind == "int":
            _check_unique(kind, skeys, order, lambda p: int(int_vals[p]))
        else:
            _check_unique(kind, skeys, order, lambda p: encoded[p].decode("utf-8"))

        cl = _int_array(cluster_ids, "cluster_ids", n, 0, max(n - 1, 0), "i8")
        extras = {} if extras is None else extras
        if not isinstance(extras, Mapping):
            raise InputTypeError(f"`extras` must be a dict of name -> numpy array or None; got {type(extras).__name__}.")
        res = _resolve_aliases(extras.get("aliases"), n)
        if res is not None:
            cl = res[cl]

        rep = np.array(is_representative)  # a copy: never alias the caller's array
        if rep.dtype.kind != "b":
            if rep.dtype.kind in "iu" and rep.ndim == 1 and (rep.size == 0 or (int(rep.min()) >= 0 and int(rep.max()) <= 1)):
                rep = rep.astype(bool)
            else:
                raise InputTypeError(
                    f"`is_representative` must be a 1-D bool array; got dtype {rep.dtype}, shape {rep.shape}. "
                    "Pass np.asarray(flags, dtype=bool)."
                )
        if rep.ndim != 1 or rep.shape[0] != n:
            raise InputError(
                f"`is_representative` must have one entry per document (length {n}); got shape {rep.shape}. "
                "Pass arrays in document order, aligned with `ids`."
            )
        stages = _int_array(doc_stages, "doc_stages", n, 0, 255, "u1")
        lengths = _int_array(doc_lengths, "doc_lengths", n, 0, 2**32 - 1, "u4")

        # Exactly one representative per cluster.
        used = np.bincount(cl, minlength=n) if n else np.zeros(0, np.int64)
        reps = np.bincount(cl[rep], minlength=n) if n else np.zeros(0, np.int64)
        bad = np.flatnonzero((used > 0) & (reps != 1))
        if bad.size:
            c = int(bad[0])
            members = np.flatnonzero(cl == c)
            rep_pos = members[rep[members]]
            shown = members[:10].tolist()
            raise InputError(
                f"`is_representative` must mark exactly one document per cluster; cluster {c} "
                f"(members at positions {shown}{'...' if members.size > 10 else ''}) has {int(reps[c])} "
                f"representatives{' at ' + str(rep_pos[:10].tolist()) if rep_pos.size else ''}. "
                "Mark one member per cluster as representative."
            )

        if not isinstance(fingerprint, str):
            raise InputTypeError(f"`fingerprint` must be a str; got {type(fingerprint).__name__}. Pass config fingerprint().")
        if not isinstance(hash_scheme, str):
            raise InputTypeError(f"`hash_scheme` must be a str; got {type(hash_scheme).__name__}.")
        if id_kind_of(seed) != "int":
            raise InputTypeError(f"`seed` must be an int; got {type(seed).__name__} {seed!r}.")
        if not isinstance(library_version, str):
            raise InputTypeError(f"`library_version` must be a str; got {type(library_version).__name__}.")
        for pname, pval in (("config", config), ("build_info", build_info)):
            if not isinstance(pval, Mapping):
                raise InputTypeError(f"`{pname}` must be a dict; got {type(pval).__name__}. Pass a plain dict.")
        if metadata is not None and not isinstance(metadata, Mapping):
            raise InputTypeError(f"`metadata` must be a dict or None; got {type(metadata).__name__}.")
        created_at = _created_at_now() if created_at is None else _check_created_at(created_at)

        # Derived, online-friendly arrays.
        cids, counts = np.unique(cl, return_counts=True)
        k = int(cids.shape[0])
        indptr = np.zeros(k + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        members = np.argsort(cl, kind="stable").astype(np.int64)
        rep_docs = np.flatnonzero(rep).astype(np.int64)
        representative = np.empty(k, dtype=np.int64)
        representative[np.searchsorted(cids, cl[rep_docs])] = rep_docs

        sorted_slots = skeys[order]
        bits = max(0, (n // 2).bit_length() - 1)  # 2**bits in (n/4, n/2]: 2-4 docs per bucket
        if bits:
            bucket_of = (sorted_slots >> np.uint64(64 - bits)).view(np.int64)
            per_bucket = np.bincount(bucket_of, minlength=1 << bits)
        else:
            per_bucket = np.array([n], dtype=np.int64)
        bucket_start = np.zeros((1 << bits) + 1, dtype=np.int64)
        np.cumsum(per_bucket, out=bucket_start[1:])
        window = int(per_bucket.max()) if n else 0

        arrays: dict[str, np.ndarray] = {
            "doc/cluster_id": cl,
            "doc/is_representative": rep,
            "doc/stages": stages,
            "doc/length": lengths,
            "lookup/key": sorted_slots,
            "lookup/bucket_start": bucket_start,
            "lookup/cluster": cl[order],
            "lookup/doc": order.astype(np.int64),
            "cluster/id": cids.astype(np.int64),
            "cluster/indptr": indptr,
            "cluster/members": members,
            "cluster/representative": representative,
        }
        if kind == "int":
            arrays["ids/int"] = int_vals
        else:
            arrays["ids/str_offsets"] = str_offsets
            arrays["ids/str_bytes"] = np.frombuffer(b"".join(encoded), dtype=np.uint8)
        for name in sorted(extras, key=str):
            arr = extras[name]
            if not isinstance(name, str) or not _EXTRA_RE.match(name):
                raise InputError(f"`extras` names must match {_EXTRA_RE.pattern}; got {name!r}. Rename it.")
            if not isinstance(arr, np.ndarray):
                raise InputTypeError(f"`extras[{name!r}]` must be a numpy array; got {type(arr).__name__}.")
            if arr.dtype.kind not in "uifb" or (arr.dtype.kind, arr.dtype.itemsize) not in _CODE_OF or arr.ndim > MAX_NDIM:
                raise InputTypeError(
                    f"`extras[{name!r}]` dtype must be one of {sorted(DTYPES)} with at most {MAX_NDIM} dimensions; "
                    f"got dtype {arr.dtype}, shape {arr.shape}. Cast it with .astype() (e.g. np.uint64)."
                )
            arrays[_EXTRA_PREFIX + name] = arr

        header = {
            "format": FORMAT_NAME,
            "library_version": library_version,
            "config": canonical(dict(config), path="config"),
            "fingerprint": fingerprint,
            "seed": int(seed),
            "hash_scheme": hash_scheme,
            "created_at": created_at,
            "counts": {"n_docs": n, "n_clusters": k, "n_duplicates": n - k},
            "build_info": canonical(dict(build_info), path="build_info"),
            "metadata": canonical(dict(metadata or {}), path="metadata"),
            "id_kind": kind,
            "id_key_scheme": ID_KEY_SCHEME,
            "lookup": {"slot_multiplier": SLOT_MULTIPLIER, "bucket_bits": bits, "window": window},
            "format_version": [FORMAT_MAJOR, FORMAT_MINOR],
        }
        # Normalize extras (little-endian, C order) now rather than at save() time.
        prepared = _prepare_arrays({k_: v for k_, v in arrays.items() if k_.startswith(_EXTRA_PREFIX)})
        for name, _, arr in prepared:
            arrays[name] = arr
        for name in list(arrays):
            # Read-only views: the ClusterMap is immutable (extras are not copied).
            view = arrays[name].view()
            view.flags.writeable = False
            arrays[name] = view
        obj = cls(header, arrays)
        if str_list is not None:
            obj._lazy["ids"] = str_list
        return obj

    # ------------------------------------------------------------------ persistence

    def save(self, path: str | os.PathLike) -> None:
        """Write the artifact to ``path`` atomically (temp file + fsync + rename)."""
        header = {k: v for k, v in self._header.items() if k != "format_version"}
        write_container(path, header, dict(self._arrays.items()))

    @classmethod
    def load(cls, path: str | os.PathLike, *, mmap: bool = True, verify: bool = True) -> ClusterMap:
        """Open an artifact written by :meth:`save`.

        Parameters
        ----------
        path : str or os.PathLike
        mmap : bool, default True
            Memory-map the file (arrays page in on use); False reads the whole file into memory.
        verify : bool, default True
            Check checksums and structural invariants (sorted keys, indices in range, one
            representative per cluster). Checksums of ``ids`` and ``extras`` are checked
            when first accessed. With False only the header and layout are checked: use it
            for trusted files when load time matters.

        Raises
        ------
        ArtifactNotFoundError
            The path does not exist or cannot be read.
        ArtifactError
            The file is corrupt, truncated, hostile, of a future major version, or not a ClusterMap.
        """
        header, arrays = read_container(path, mmap=mmap, verify=verify)
        spath = os.fspath(path)
        _validate_header(spath, header)
        _validate_arrays(spath, header, arrays, deep=verify)
        return cls(header, arrays, path=spath)

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
                ids = [raw[o[i] : o[i + 1]].decode("utf-8") for i in range(self._n)]
            except UnicodeDecodeError as exc:
                raise ArtifactError(f"artifact {self._path!r}: stored ids are not valid UTF-8 ({exc}). The file is corrupt.") from None
            self._lazy["ids"] = ids
        return ids

    def _str_blob(self) -> tuple[bytes, np.ndarray]:
        blob = self._lazy.get("blob")
        if blob is None:
            off = self._arrays["ids/str_offsets"]
            raw = self._arrays["ids/str_bytes"]
            if off.shape != (self._n + 1,) or (self._n >= 0 and (int(off[0]) != 0 or int(off[-1]) != raw.shape[0])) or (
                self._n and bool((off[1:] < off[:-1]).any())
            ):
                raise ArtifactError(
                    f"artifact {self._path!r}: `ids/str_offsets` must rise from 0 to the length of `ids/str_bytes`. The file is corrupt."
                )
            blob = (raw.tobytes(), off)
            self._lazy["blob"] = blob
        return blob

    def _id_at(self, doc: int):
        if self._kind == "int":
            return int(self._arrays["ids/int"][doc])
        ids = self._lazy.get("ids")
        if ids is not None:
            return ids[doc]
        raw, off = self._str_blob()
        try:
            return raw[int(off[doc]) : int(off[doc + 1])].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ArtifactError(f"artifact {self._path!r}: stored id {doc} is not valid UTF-8 ({exc}). The file is corrupt.") from None

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
        import copy

        return copy.deepcopy(self._header)

    @property
    def extras(self) -> dict[str, np.ndarray]:
        """Incremental state stored by the builder: name -> read-only array (may be empty)."""
        return {name[len(_EXTRA_PREFIX) :]: self._arrays[name] for name in self._arrays if name.startswith(_EXTRA_PREFIX)}

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
        pos, miss = self._find(ids)
        if pos is None:
            return np.full(miss, -1, dtype=np.int64)
        out = self._lcluster.take(pos)
        out[miss] = -1
        return out

    def doc_index(self, ids) -> np.ndarray:
        """Document index of each id (int64), ``-1`` when unknown. Same rules as :meth:`lookup`."""
        pos, miss = self._find(ids)
        if pos is None:
            return np.full(miss, -1, dtype=np.int64)
        out = self._arrays["lookup/doc"].take(pos)
        out[miss] = -1
        return out

    def _find(self, ids):
        """(positions in the lookup table, miss mask), or (None, m) when nothing can match."""
        keys, valid = query_keys(ids, self._kind)
        m = keys.shape[0]
        n = self._n
        if n == 0 or m == 0:
            return None, m
        slots = keys * _MULT
        if self._use_buckets:
            lo = self._starts.take((slots >> self._shift).view(np.int64))
            # Shift windows that would run past the end left: [lo, hi) stays inside.
            np.minimum(lo, n - self._window, out=lo)
            match = self._keys.take(lo[:, None] + self._arange) == slots[:, None]
            pos = lo + match.argmax(axis=1)
            miss = ~match.any(axis=1)
        else:
            pos = self._keys.searchsorted(slots)
            np.minimum(pos, n - 1, out=pos)
            miss = self._keys.take(pos) != slots
        if valid is not None:
            miss |= ~valid
        return pos, miss

    def cluster_of(self, id) -> int | None:
        """Cluster id of one document id, or None when the id is not in the artifact."""
        kind = id_kind_of(id)
        if kind is None:
            raise InputTypeError(
                f"`id` must be a str or int document id; got {type(id).__name__} {id!r}. Convert it to str or int."
            )
        c = int(self.lookup([id])[0])
        return None if c < 0 else c

    def __contains__(self, id) -> bool:
        if id_kind_of(id) is None:
            return False
        return bool(self.lookup([id])[0] >= 0)

    def __len__(self) -> int:
        return self._n

    # ------------------------------------------------------------------ clusters

    def _aliases(self) -> dict[int, int]:
        al = self._lazy.get("aliases")
        if al is None:
            al = {}
            raw = self._arrays.get(_EXTRA_PREFIX + "aliases")
            if raw is not None:
                res = _safe_resolve(raw, self._n)
                if res is not None and raw.shape[0]:
                    al = {int(s): int(res[s]) for s in raw[:, 0].tolist()}
            self._lazy["aliases"] = al
        return al

    def _cluster_row(self, cluster_id) -> int:
        if id_kind_of(cluster_id) != "int":
            raise InputTypeError(f"`cluster_id` must be an int; got {type(cluster_id).__name__} {cluster_id!r}.")
        c = int(cluster_id)
        cids = self._arrays["cluster/id"]
        j = int(cids.searchsorted(c)) if self._k else 0
        if j < self._k and int(cids[j]) == c:
            return j
        alias = self._aliases().get(c)
        if alias is not None:
            j = int(cids.searchsorted(alias))
            if j < self._k and int(cids[j]) == alias:
                return j
        raise InputError(
            f"`cluster_id` {c} is not a cluster of this artifact ({self._k} clusters). "
            "Use an id returned by lookup()/cluster_of() on this artifact."
        )

    def resolve_cluster(self, cluster_id: int) -> int:
        """The current id of a cluster (follows merges recorded in ``extras["aliases"]``)."""
        return int(self._arrays["cluster/id"][self._cluster_row(cluster_id)])

    def _member_docs(self, cluster_id) -> np.ndarray:
        j = self._cluster_row(cluster_id)
        indptr = self._arrays["cluster/indptr"]
        return self._arrays["cluster/members"][int(indptr[j]) : int(indptr[j + 1])]

    def members(self, cluster_id: int) -> list:
        """Ids of the cluster's members, in document order."""
        return [self._id_at(int(d)) for d in self._member_docs(cluster_id).tolist()]

    def member_indices(self, cluster_id: int) -> np.ndarray:
        """Document indices of the cluster's members (int64, ascending)."""
        return self._member_docs(cluster_id)

    def representative_of(self, cluster_id: int):
        """Id of the cluster's representative document."""
        j = self._cluster_row(cluster_id)
        return self._id_at(int(self._arrays["cluster/representative"][j]))

    def cluster_sizes(self) -> tuple[np.ndarray, np.ndarray]:
        """``(cluster_ids, sizes)``: int64 arrays of shape (n_clusters,), cluster ids ascending."""
        indptr = self._arrays["cluster/indptr"]
        return self._arrays["cluster/id"], np.diff(indptr)

    def cluster_stages(self, cluster_id: int) -> int:
        """Bitwise OR of the members' stage bitmasks (1 exact, 2 minhash, 4 simhash vectors, 8 simhash text)."""
        docs = self._member_docs(cluster_id)
        return int(np.bitwise_or.reduce(self.doc_stages[docs])) if docs.size else 0

    def __repr__(self) -> str:
        fp = self.fingerprint
        fp = fp[:12] + "…" if len(fp) > 12 else fp
        where = f", path={self._path!r}" if self._path else ""
        return (
            f"ClusterMap(n_docs={self._n}, n_clusters={self._k}, n_duplicates={self._n - self._k}, "
            f"id_kind={self._kind!r}, fingerprint={fp!r}, created_at={self.created_at!r}, "
            f"format_version={'.'.join(map(str, self.format_version))}{where})"
        )


def _safe_resolve(raw: np.ndarray, n: int) -> np.ndarray | None:
    try:
        return _resolve_aliases(raw, n)
    except (InputError, InputTypeError):
        return None


# --------------------------------------------------------------------------- load checks


_HEADER_TYPES = {
    "format": str,
    "library_version": str,
    "config": dict,
    "fingerprint": str,
    "seed": int,
    "hash_scheme": str,
    "created_at": str,
    "counts": dict,
    "build_info": dict,
    "metadata": dict,
    "id_kind": str,
    "id_key_scheme": str,
}


def _bad(path: str, what: str) -> ArtifactError:
    return ArtifactError(f"artifact {path!r}: {what}")


def _validate_header(path: str, h: dict) -> None:
    if h.get("format") != FORMAT_NAME:
        raise _bad(path, f"`format` must be {FORMAT_NAME!r}; got {h.get('format')!r}. This container is not a ClusterMap.")
    for key, typ in _HEADER_TYPES.items():
        v = h.get(key)
        if not isinstance(v, typ) or (typ is int and isinstance(v, bool)):
            raise _bad(path, f"header key `{key}` must be a {typ.__name__}; got {type(v).__name__}. The file is corrupt.")
    if h["id_kind"] not in ("str", "int"):
        raise _bad(path, f"header `id_kind` must be 'str' or 'int'; got {h['id_kind']!r}. The file is corrupt.")
    if h["id_key_scheme"] != ID_KEY_SCHEME:
        raise _bad(
            path,
            f"id key scheme {h['id_key_scheme']!r} is not supported (this library uses {ID_KEY_SCHEME!r}). "
            "Upgrade diversify or rebuild the artifact.",
        )
    lk = h.get("lookup")
    if (
        not isinstance(lk, dict)
        or lk.get("slot_multiplier") != SLOT_MULTIPLIER
        or type(lk.get("bucket_bits")) is not int
        or type(lk.get("window")) is not int
    ):
        raise _bad(path, f"header `lookup` must hold slot_multiplier={SLOT_MULTIPLIER:#x}, bucket_bits and window ints; got {lk!r:.200}. The file is corrupt.")
    c = h["counts"]
    for key in ("n_docs", "n_clusters", "n_duplicates"):
        if type(c.get(key)) is not int or c[key] < 0:
            raise _bad(path, f"header `counts.{key}` must be a non-negative int; got {c.get(key)!r}. The file is corrupt.")
    if c["n_clusters"] > c["n_docs"] or c["n_duplicates"] != c["n_docs"] - c["n_clusters"] or (c["n_docs"] and not c["n_clusters"]):
        raise _bad(path, f"header `counts` are inconsistent: {c}. The file is corrupt.")
    n = c["n_docs"]
    bits, window = lk["bucket_bits"], lk["window"]
    if not 0 <= bits <= _MAX_BUCKET_BITS or (1 << bits) > max(n, 1) or not 0 <= window <= n:
        raise _bad(
            path,
            f"header `lookup` is out of range (bucket_bits={bits}, window={window}, n_docs={n}); "
            "bucket_bits must satisfy 2**bucket_bits <= n_docs and window <= n_docs. The file is corrupt or hostile.",
        )


def _validate_arrays(path: str, h: dict, arrays, *, deep: bool) -> None:
    n, k = h["counts"]["n_docs"], h["counts"]["n_clusters"]
    want = {"n": (n,), "k": (k,), "k+1": (k + 1,), "b": ((1 << h["lookup"]["bucket_bits"]) + 1,)}
    required = dict(_CORE)
    if h["id_kind"] == "int":
        required["ids/int"] = ("i8", "n")
    else:
        required["ids/str_offsets"] = ("u8", None)
        required["ids/str_bytes"] = ("u1", None)
    for name, (code, shape_kind) in required.items():
        if name not in arrays:
            raise _bad(path, f"required array {name!r} is missing. The file is corrupt or was written by an incompatible tool.")
        e = arrays.entry(name)
        if e["dtype"] != code:
            raise _bad(path, f"array {name!r} must have dtype {code}; got {e['dtype']}. The file is corrupt.")
        shape = want[shape_kind] if shape_kind else ((n + 1,) if name == "ids/str_offsets" else None)
        if shape is not None and tuple(e["shape"]) != shape:
            raise _bad(path, f"array {name!r} must have shape {shape}; got {tuple(e['shape'])}. The file is corrupt.")
        if shape is None and len(e["shape"]) != 1:
            raise _bad(path, f"array {name!r} must be 1-D; got shape {tuple(e['shape'])}. The file is corrupt.")
    for name in arrays:
        if name not in required and not name.startswith(_EXTRA_PREFIX):
            pass  # unknown arrays from a newer minor version are ignored
    # The lookup arrays are needed immediately: access (and so checksum) them now.
    keys = arrays["lookup/key"]
    lcl = arrays["lookup/cluster"]
    if not deep or n == 0:
        return
    try:
        if not bool((keys[1:] > keys[:-1]).all()):
            raise _bad(path, "`lookup/key` must be strictly increasing. The file is corrupt.")
        starts = arrays["lookup/bucket_start"]
        bits = h["lookup"]["bucket_bits"]
        per_bucket = np.diff(starts)
        if int(starts[0]) != 0 or int(starts[-1]) != n or int(per_bucket.min()) < 0:
            raise _bad(path, "`lookup/bucket_start` must rise from 0 to n_docs. The file is corrupt.")
        if int(per_bucket.max()) != h["lookup"]["window"]:
            raise _bad(path, "header `lookup.window` must equal the largest bucket. The file is corrupt.")
        if bits:
            counts = np.bincount((keys >> np.uint64(64 - bits)).view(np.int64), minlength=1 << bits)
            if not bool((counts == per_bucket).all()):
                raise _bad(path, "`lookup/bucket_start` disagrees with `lookup/key`. The file is corrupt.")
        cl = arrays["doc/cluster_id"]
        ldoc = arrays["lookup/doc"]
        for name, arr, hi in (("doc/cluster_id", cl, n), ("lookup/cluster", lcl, n), ("lookup/doc", ldoc, n)):
            if int(arr.min()) < 0 or int(arr.max()) >= hi:
                raise _bad(path, f"`{name}` values must lie in [0, {hi}). The file is corrupt.")
        if not bool((np.bincount(ldoc, minlength=n) == 1).all()):
            raise _bad(path, "`lookup/doc` must be a permutation of the document indices. The file is corrupt.")
        if not bool((cl[ldoc] == lcl).all()):
            raise _bad(path, "`lookup/cluster` disagrees with `doc/cluster_id`. The file is corrupt.")
        if h["id_kind"] == "int" and not bool((arrays["ids/int"].view(np.uint64)[ldoc] * _MULT == keys).all()):
            raise _bad(path, "`lookup/key` disagrees with `ids/int`. The file is corrupt.")
        cids = arrays["cluster/id"]
        indptr = arrays["cluster/indptr"]
        members = arrays["cluster/members"]
        reps = arrays["cluster/representative"]
        if not bool((cids[1:] > cids[:-1]).all()) or int(cids[0]) < 0 or int(cids[-1]) >= n:
            raise _bad(path, "`cluster/id` must be strictly increasing within [0, n_docs). The file is corrupt.")
        if int(indptr[0]) != 0 or int(indptr[-1]) != n or not bool((indptr[1:] > indptr[:-1]).all()):
            raise _bad(path, "`cluster/indptr` must rise strictly from 0 to n_docs. The file is corrupt.")
        if int(members.min()) < 0 or int(members.max()) >= n or int(reps.min()) < 0 or int(reps.max()) >= n:
            raise _bad(path, "`cluster/members` and `cluster/representative` must be document indices. The file is corrupt.")
        owner = np.repeat(cids, np.diff(indptr))
        if not bool((cl[members] == owner).all()) or not bool((np.bincount(members, minlength=n) == 1).all()):
            raise _bad(path, "`cluster/members` disagrees with `doc/cluster_id`. The file is corrupt.")
        isrep = arrays["doc/is_representative"]
        if not bool((cl[reps] == cids).all()) or not bool(isrep[reps].all()) or int(isrep.sum()) != k:
            raise _bad(path, "`cluster/representative` must name exactly one representative per cluster. The file is corrupt.")
    except ArtifactError:
        raise
    except (IndexError, ValueError, TypeError, OverflowError) as exc:  # pragma: no cover - defensive
        raise _bad(path, f"inconsistent arrays ({type(exc).__name__}: {exc}). The file is corrupt.") from None


def load(path: str | os.PathLike, *, mmap: bool = True, verify: bool = True) -> ClusterMap:
    """Open a ClusterMap artifact. See :meth:`ClusterMap.load`."""
    return ClusterMap.load(path, mmap=mmap, verify=verify)
