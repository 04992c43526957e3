"""The checks run when an artifact is loaded: header keys and types, then the arrays against the schema.

:func:`validate_header` and the layout part of :func:`validate_arrays` always run (cheap); with
``deep=True`` (``load(verify=True)``) the O(n) numpy checks run too: sorted keys, indices in
range, the bucket directory, CSR and representatives consistent with ``doc/cluster_id``, cluster
ids that are member indices (:func:`~diversify.artifact.state.label_violation`). None loops in
Python over the documents. What an ``add`` reads on top (``extra/*``) is checked by
:mod:`~diversify.artifact.state` when it runs. Every failure is an :class:`~diversify.errors.ArtifactError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from diversify.artifact.format import ArrayTable
from diversify.artifact.layout import artifact_error
from diversify.artifact.lookup import MAX_BUCKET_BITS, SLOT_MULTIPLIER, slot_keys
from diversify.artifact.schema import FORMAT_NAME, HEADER_TYPES, expected_shape, required_arrays
from diversify.artifact.state import label_violation
from diversify.errors import ArtifactError
from diversify.ids import ID_KEY_SCHEME

__all__ = ["validate_header", "validate_arrays"]


def _a(typ: type) -> str:
    return f"an {typ.__name__}" if typ.__name__[0] in "aeiou" else f"a {typ.__name__}"


# --------------------------------------------------------------------------- header


def validate_header(path: str, h: dict[str, Any]) -> None:
    """Check the header of the artifact at ``path`` (see ``docs/artifact-format.md`` section 2)."""
    if h.get("format") != FORMAT_NAME:
        raise artifact_error(
            path,
            f"`format` must be {FORMAT_NAME!r}; got {h.get('format')!r}. The file is not a diversify artifact "
            "(another format in the same container); pass a file written by ClusterMap.save or `diversify build`.",
        )
    for key, typ in HEADER_TYPES.items():
        v = h.get(key)
        if not isinstance(v, typ) or (typ is int and isinstance(v, bool)):
            raise artifact_error(
                path, f"header key `{key}` must be {_a(typ)}; got {type(v).__name__}. The file is corrupt."
            )
    if h["id_kind"] not in ("str", "int"):
        raise artifact_error(path, f"header `id_kind` must be 'str' or 'int'; got {h['id_kind']!r}. The file is corrupt.")
    if h["id_key_scheme"] != ID_KEY_SCHEME:
        raise artifact_error(
            path,
            f"id key scheme {h['id_key_scheme']!r} is not supported (this library uses {ID_KEY_SCHEME!r}). "
            "Upgrade diversify or rebuild the artifact.",
        )
    lk = h.get("lookup")
    _check_lookup_keys(path, lk)
    _check_counts(path, h["counts"])
    _check_lookup_range(path, h["lookup"], h["counts"]["n_docs"])


def _check_counts(path: str, c: dict[str, Any]) -> None:
    for key in ("n_docs", "n_clusters", "n_duplicates"):
        if type(c.get(key)) is not int or c[key] < 0:
            raise artifact_error(
                path, f"header `counts.{key}` must be a non-negative int; got {c.get(key)!r}. The file is corrupt."
            )
    n, k = c["n_docs"], c["n_clusters"]
    if k > n or c["n_duplicates"] != n - k or (n and not k):
        raise artifact_error(path, f"header `counts` are inconsistent: {c}. The file is corrupt.")


def _check_lookup_keys(path: str, lk: Any) -> None:
    if (
        not isinstance(lk, dict)
        or lk.get("slot_multiplier") != SLOT_MULTIPLIER
        or type(lk.get("bucket_bits")) is not int
        or type(lk.get("window")) is not int
    ):
        raise artifact_error(
            path,
            f"header `lookup` must hold slot_multiplier={SLOT_MULTIPLIER:#x}, bucket_bits and window ints; "
            f"got {lk!r:.200}. The file is corrupt.",
        )


def _check_lookup_range(path: str, lk: dict[str, Any], n: int) -> None:
    bits, window = lk["bucket_bits"], lk["window"]
    if not 0 <= bits <= MAX_BUCKET_BITS or (1 << bits) > max(n, 1) or not 0 <= window <= n:
        raise artifact_error(
            path,
            f"header `lookup` is out of range (bucket_bits={bits}, window={window}, n_docs={n}); "
            "bucket_bits must satisfy 2**bucket_bits <= n_docs and window <= n_docs. The file is corrupt or hostile.",
        )


# --------------------------------------------------------------------------- arrays


def validate_arrays(path: str, h: dict[str, Any], arrays: ArrayTable, *, deep: bool) -> None:
    """Check the arrays of the artifact at ``path`` against its (validated) header.

    Always: every required array is present with its dtype and shape, and the lookup arrays are
    read (so, with checksums on, verified) now rather than in the first query. ``deep``: the
    O(n) consistency checks. Unknown arrays (from a newer minor version) are ignored.
    """
    n, k = h["counts"]["n_docs"], h["counts"]["n_clusters"]
    bits = h["lookup"]["bucket_bits"]
    for name, (code, shape_kind) in required_arrays(h["id_kind"]).items():
        if name not in arrays:
            raise artifact_error(
                path, f"required array {name!r} is missing. The file is corrupt or was written by an incompatible tool."
            )
        e = arrays.entry(name)
        if e["dtype"] != code:
            raise artifact_error(path, f"array {name!r} must have dtype {code}; got {e['dtype']}. The file is corrupt.")
        shape = expected_shape(shape_kind, n=n, k=k, bucket_bits=bits)
        if shape is not None and tuple(e["shape"]) != shape:
            raise artifact_error(
                path, f"array {name!r} must have shape {shape}; got {tuple(e['shape'])}. The file is corrupt."
            )
        if shape is None and len(e["shape"]) != 1:
            raise artifact_error(path, f"array {name!r} must be 1-D; got shape {tuple(e['shape'])}. The file is corrupt.")
    _ = arrays["lookup/key"], arrays["lookup/cluster"]  # the lookup needs them at once: checksum them now
    if not deep or n == 0:
        return
    try:
        _check_lookup(path, h, arrays)
        _check_documents(path, h, arrays)
        _check_clusters(path, h, arrays)
    except ArtifactError:
        raise
    except (IndexError, ValueError, TypeError, OverflowError) as exc:  # pragma: no cover - defensive
        raise artifact_error(path, f"inconsistent arrays ({type(exc).__name__}: {exc}). The file is corrupt.") from None


def _check_lookup(path: str, h: dict[str, Any], arrays: Mapping[str, np.ndarray]) -> None:
    n, bits = h["counts"]["n_docs"], h["lookup"]["bucket_bits"]
    keys, starts = arrays["lookup/key"], arrays["lookup/bucket_start"]
    if not bool((keys[1:] > keys[:-1]).all()):
        raise artifact_error(path, "`lookup/key` must be strictly increasing. The file is corrupt.")
    per_bucket = np.diff(starts)
    if int(starts[0]) != 0 or int(starts[-1]) != n or int(per_bucket.min()) < 0:
        raise artifact_error(path, "`lookup/bucket_start` must rise from 0 to n_docs. The file is corrupt.")
    if int(per_bucket.max()) != h["lookup"]["window"]:
        raise artifact_error(path, "header `lookup.window` must equal the largest bucket. The file is corrupt.")
    if bits:
        counts = np.bincount((keys >> np.uint64(64 - bits)).view(np.int64), minlength=1 << bits)
        if not bool((counts == per_bucket).all()):
            raise artifact_error(path, "`lookup/bucket_start` disagrees with `lookup/key`. The file is corrupt.")


def _check_documents(path: str, h: dict[str, Any], arrays: Mapping[str, np.ndarray]) -> None:
    n = h["counts"]["n_docs"]
    cl, lcl, ldoc = arrays["doc/cluster_id"], arrays["lookup/cluster"], arrays["lookup/doc"]
    for name, arr in (("doc/cluster_id", cl), ("lookup/cluster", lcl), ("lookup/doc", ldoc)):
        if int(arr.min()) < 0 or int(arr.max()) >= n:
            raise artifact_error(path, f"`{name}` values must lie in [0, {n}). The file is corrupt.")
    if not bool((np.bincount(ldoc, minlength=n) == 1).all()):
        raise artifact_error(path, "`lookup/doc` must be a permutation of the document indices. The file is corrupt.")
    if not bool((cl[ldoc] == lcl).all()):
        raise artifact_error(path, "`lookup/cluster` disagrees with `doc/cluster_id`. The file is corrupt.")
    if h["id_kind"] == "int" and not bool((slot_keys(arrays["ids/int"].view(np.uint64)[ldoc]) == arrays["lookup/key"]).all()):
        raise artifact_error(path, "`lookup/key` disagrees with `ids/int`. The file is corrupt.")


def _check_clusters(path: str, h: dict[str, Any], arrays: Mapping[str, np.ndarray]) -> None:
    n, k = h["counts"]["n_docs"], h["counts"]["n_clusters"]
    cl = arrays["doc/cluster_id"]
    cids, indptr = arrays["cluster/id"], arrays["cluster/indptr"]
    members, reps = arrays["cluster/members"], arrays["cluster/representative"]
    if not bool((cids[1:] > cids[:-1]).all()) or int(cids[0]) < 0 or int(cids[-1]) >= n:
        raise artifact_error(path, "`cluster/id` must be strictly increasing within [0, n_docs). The file is corrupt.")
    if int(indptr[0]) != 0 or int(indptr[-1]) != n or not bool((indptr[1:] > indptr[:-1]).all()):
        raise artifact_error(path, "`cluster/indptr` must rise strictly from 0 to n_docs. The file is corrupt.")
    if int(members.min()) < 0 or int(members.max()) >= n or int(reps.min()) < 0 or int(reps.max()) >= n:
        raise artifact_error(
            path, "`cluster/members` and `cluster/representative` must be document indices. The file is corrupt."
        )
    bad = label_violation(cl)
    if bad is not None:
        raise artifact_error(
            path,
            "`doc/cluster_id` must name each cluster by the document index of one of its members "
            f"(doc/cluster_id[c] == c); got cluster {bad.cluster} (of document {bad.doc}) whose document {bad.cluster} "
            f"is in cluster {bad.home}, {bad.affected} documents affected (dense labels 0..k-1 do this). The file was "
            "written by another tool: rebuild it, or write each cluster's smallest member index as its id.",
        )
    owner = np.repeat(cids, np.diff(indptr))
    if not bool((cl[members] == owner).all()) or not bool((np.bincount(members, minlength=n) == 1).all()):
        raise artifact_error(path, "`cluster/members` disagrees with `doc/cluster_id`. The file is corrupt.")
    isrep = arrays["doc/is_representative"]
    if not bool((cl[reps] == cids).all()) or not bool(isrep[reps].all()) or int(isrep.sum()) != k:
        raise artifact_error(
            path, "`cluster/representative` must name exactly one representative per cluster. The file is corrupt."
        )
