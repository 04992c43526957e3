"""From the builder's arrays to an artifact's header and arrays: the rules of :meth:`ClusterMap.from_arrays`.

Every input is checked here (ids by :func:`diversify.ids.check_ids`) before anything is derived:
the lookup table (:mod:`~diversify.artifact.lookup`), the clusters in CSR form, the stored ids
and the extras. The result is deterministic: the same inputs give the same header and arrays.
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np

from diversify.artifact.aliases import resolve_aliases
from diversify.artifact.format import prepare_arrays
from diversify.artifact.header import canonical
from diversify.artifact.layout import DTYPES, FORMAT_MAJOR, FORMAT_MINOR, MAX_NDIM, dtype_code
from diversify.artifact.lookup import bucket_directory, lookup_header, slot_keys
from diversify.artifact.schema import EXTRA_NAME_RE, EXTRA_PREFIX, FORMAT_NAME
from diversify.artifact.state import alias_violation, label_violation
from diversify.errors import InputError, InputTypeError
from diversify.ids import ID_KEY_SCHEME, PackedIds, check_distinct_keys, check_ids, utf8_id_keys

__all__ = ["assemble", "created_at_now", "check_created_at", "IdColumns", "id_columns"]


# --------------------------------------------------------------------------- header values


def created_at_now() -> str:
    """ISO-8601 UTC to the second: ``SOURCE_DATE_EPOCH`` when set (reproducible builds), else now."""
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


def check_created_at(value: Any) -> str:
    """``value`` if it is an ISO-8601 timestamp str, else raise naming ``created_at``."""
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


def _check_header_values(
    *, fingerprint: Any, hash_scheme: Any, seed: Any, library_version: Any, config: Any, build_info: Any, metadata: Any
) -> None:
    if not isinstance(fingerprint, str):
        raise InputTypeError(
            f"`fingerprint` must be a str; got {type(fingerprint).__name__}. Pass diversify.fingerprint(config)."
        )
    if not isinstance(hash_scheme, str):
        raise InputTypeError(
            f"`hash_scheme` must be a str; got {type(hash_scheme).__name__}. Pass the name of the builder's hash scheme."
        )
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
        raise InputTypeError(f"`seed` must be an int; got {type(seed).__name__} {seed!r}. Pass the build's seed.")
    if not isinstance(library_version, str):
        raise InputTypeError(
            f"`library_version` must be a str; got {type(library_version).__name__}. Leave it unset to record this version."
        )
    for pname, pval in (("config", config), ("build_info", build_info)):
        if not isinstance(pval, Mapping):
            raise InputTypeError(f"`{pname}` must be a dict; got {type(pval).__name__}. Pass a plain dict.")
    if metadata is not None and not isinstance(metadata, Mapping):
        raise InputTypeError(f"`metadata` must be a dict or None; got {type(metadata).__name__}. Pass a plain dict.")


# --------------------------------------------------------------------------- per-document arrays


def _int_column(x: Any, name: str, n: int, lo: int, hi: int, dtype: str) -> np.ndarray:
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


def _representative_flags(is_representative: Any, n: int) -> np.ndarray:
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
    return rep


def _check_cluster_rules(cl: np.ndarray, aliases: Any) -> None:
    """What a reader refuses is not written: cluster ids are member indices; aliases lead merged ids home."""
    bad = label_violation(cl)
    if bad is not None:
        raise InputError(
            f"`cluster_ids` must name each cluster by the document index of one of its members (after aliases); "
            f"got cluster {bad.cluster} (of position {bad.doc}) whose document {bad.cluster} is in cluster {bad.home}, "
            f"{bad.affected} documents affected. Use each cluster's first (smallest) member index as its id, not 0..k-1."
        )
    if aliases is not None:
        why = alias_violation(np.asarray(aliases), cl)
        if why is not None:
            raise InputError(f"`extras['aliases']` {why}. Record [merged_id, surviving_id] rows only for merged clusters.")


def _check_one_representative(cl: np.ndarray, rep: np.ndarray, n: int) -> None:
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


# --------------------------------------------------------------------------- ids, clusters, extras


class IdColumns(NamedTuple):
    """The checked ids of a corpus, as an artifact stores them."""

    kind: str  #: "str" or "int"
    keys: np.ndarray  #: uint64 (n,): the id keys (diversify.idkey.v1)
    arrays: dict[str, np.ndarray]  #: ``ids/int``, or ``ids/str_offsets`` + ``ids/str_bytes``
    id_at: Callable[[int], Any]  #: position -> id, for messages
    str_ids: list[str] | None  #: a private copy of str ids (saves decoding them again)


def id_columns(ids: Any) -> IdColumns:
    """Check ``ids`` (:func:`diversify.ids.check_ids`) and encode them as an artifact stores them."""
    if isinstance(ids, PackedIds):  # checked as they were gathered (PackedIds.check_unique)
        ids.check_unique()
        return IdColumns(ids.kind or "str", ids.keys(), ids.arrays(), ids.__getitem__, None)
    kind = check_ids(ids)
    if isinstance(ids, np.ndarray) and ids.dtype.kind in "iu":
        items: list = []
        vals = ids.astype(np.int64)
    else:
        items = ids.tolist() if isinstance(ids, np.ndarray) else list(ids)
        vals = np.array([int(x) for x in items], dtype=np.int64) if kind == "int" else np.zeros(0, np.int64)
    if kind == "int":
        return IdColumns("int", vals.view(np.uint64), {"ids/int": vals}, lambda p: int(vals[p]), None)
    encoded = [s.encode("utf-8") for s in items]
    offsets = np.zeros(len(encoded) + 1, dtype=np.uint64)
    np.cumsum(np.fromiter(map(len, encoded), dtype=np.uint64, count=len(encoded)), out=offsets[1:])
    arrays: dict[str, np.ndarray] = {"ids/str_offsets": offsets, "ids/str_bytes": np.frombuffer(b"".join(encoded), dtype=np.uint8)}
    return IdColumns("str", utf8_id_keys(encoded), arrays, items.__getitem__, items)


def _cluster_arrays(cl: np.ndarray, rep: np.ndarray) -> dict[str, np.ndarray]:
    """The clusters in CSR form: ids ascending, members grouped (ascending within), representatives."""
    cids, counts = np.unique(cl, return_counts=True)
    k = int(cids.shape[0])
    indptr = np.zeros(k + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    members = np.argsort(cl, kind="stable").astype(np.int64)
    rep_docs = np.flatnonzero(rep).astype(np.int64)
    representative = np.empty(k, dtype=np.int64)
    representative[np.searchsorted(cids, cl[rep_docs])] = rep_docs
    return {
        "cluster/id": cids.astype(np.int64),
        "cluster/indptr": indptr,
        "cluster/members": members,
        "cluster/representative": representative,
    }


def _extras_mapping(extras: Any) -> Mapping[str, Any]:
    extras = {} if extras is None else extras
    if not isinstance(extras, Mapping):
        raise InputTypeError(
            f"`extras` must be a dict of name -> numpy array or None; got {type(extras).__name__}. Pass a dict or None."
        )
    return extras


def _extra_arrays(extras: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """``extra/<name>`` arrays, checked and normalized (little-endian, C order); not copied when already so."""
    out = {}
    for name in sorted(extras, key=str):
        arr = extras[name]
        if not isinstance(name, str) or not EXTRA_NAME_RE.match(name):
            raise InputError(f"`extras` names must match {EXTRA_NAME_RE.pattern}; got {name!r}. Rename it.")
        if not isinstance(arr, np.ndarray):
            raise InputTypeError(f"`extras[{name!r}]` must be a numpy array; got {type(arr).__name__}. Wrap it with np.asarray().")
        if dtype_code(arr.dtype) is None or arr.ndim > MAX_NDIM:
            raise InputTypeError(
                f"`extras[{name!r}]` dtype must be one of {sorted(DTYPES)} with at most {MAX_NDIM} dimensions; "
                f"got dtype {arr.dtype}, shape {arr.shape}. Cast it with .astype() (e.g. np.uint64)."
            )
        if name == "aliases":  # the spec's dtype (resolve_aliases accepted any integer rows)
            arr = arr.astype(np.int64, copy=False)
        out[EXTRA_PREFIX + name] = arr
    return {name: arr for name, _, arr in prepare_arrays(out)}


# --------------------------------------------------------------------------- the whole artifact


def assemble(
    ids: Any,
    cluster_ids: Any,
    is_representative: Any,
    doc_stages: Any,
    doc_lengths: Any,
    *,
    config: Any,
    fingerprint: Any,
    seed: Any,
    hash_scheme: Any,
    build_info: Any,
    metadata: Any,
    created_at: Any,
    extras: Any,
    library_version: Any,
) -> tuple[dict[str, Any], dict[str, np.ndarray], list[str] | None]:
    """``(header, read-only arrays, str ids or None)`` of an artifact; see :meth:`ClusterMap.from_arrays`.
    ``ids`` may be their :func:`id_columns` already (a build encodes them beside its linking)."""
    cols = ids if isinstance(ids, IdColumns) else id_columns(ids)
    n = int(cols.keys.shape[0])
    slots = slot_keys(cols.keys)
    order = np.argsort(slots, kind="stable")
    sorted_slots = slots[order]
    check_distinct_keys(sorted_slots, order, cols.id_at)

    cl = _int_column(cluster_ids, "cluster_ids", n, 0, max(n - 1, 0), "i8")
    extras = _extras_mapping(extras)
    res = resolve_aliases(extras.get("aliases"), n)
    if res is not None:
        cl = res[cl]
    _check_cluster_rules(cl, extras.get("aliases"))
    rep = _representative_flags(is_representative, n)
    stages = _int_column(doc_stages, "doc_stages", n, 0, 255, "u1")
    lengths = _int_column(doc_lengths, "doc_lengths", n, 0, 2**32 - 1, "u4")
    _check_one_representative(cl, rep, n)
    _check_header_values(fingerprint=fingerprint, hash_scheme=hash_scheme, seed=seed, library_version=library_version,
                         config=config, build_info=build_info, metadata=metadata)
    created_at = created_at_now() if created_at is None else check_created_at(created_at)

    bits, window, bucket_start = bucket_directory(sorted_slots)
    arrays: dict[str, np.ndarray] = {
        "doc/cluster_id": cl,
        "doc/is_representative": rep,
        "doc/stages": stages,
        "doc/length": lengths,
        "lookup/key": sorted_slots,
        "lookup/bucket_start": bucket_start,
        "lookup/cluster": cl[order],
        "lookup/doc": order.astype(np.int64),
        **_cluster_arrays(cl, rep),
        **cols.arrays,
        **_extra_arrays(extras),
    }
    k = int(arrays["cluster/id"].shape[0])
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
        "id_kind": cols.kind,
        "id_key_scheme": ID_KEY_SCHEME,
        "lookup": lookup_header(bits, window),
        "format_version": [FORMAT_MAJOR, FORMAT_MINOR],
    }
    return header, {name: _read_only(arr) for name, arr in arrays.items()}, cols.str_ids


def _read_only(arr: np.ndarray) -> np.ndarray:
    view = arr.view()  # the artifact is immutable; a view, so extras are not copied
    view.flags.writeable = False
    return view
