"""What a cluster-map artifact holds: its format name, header keys, required arrays and extras.

The container (:mod:`~diversify.artifact.format`) is generic; this is the schema on top of it,
specified in ``docs/artifact-format.md`` section 2. :mod:`~diversify.artifact.validation` checks
a loaded artifact against it and :mod:`~diversify.artifact.assemble` writes it.
"""

from __future__ import annotations

import re

from diversify.stages import STAGE_EXACT, STAGE_MINHASH
from diversify.stages import STAGE_SIMHASH as STAGE_SIMHASH_VECTORS
from diversify.stages import STAGE_TEXT_SIMHASH as STAGE_SIMHASH_TEXT

__all__ = [
    "FORMAT_NAME",
    "STAGE_EXACT",
    "STAGE_MINHASH",
    "STAGE_SIMHASH_VECTORS",
    "STAGE_SIMHASH_TEXT",
    "HEADER_TYPES",
    "CORE_ARRAYS",
    "EXTRA_PREFIX",
    "EXTRA_NAME_RE",
    "required_arrays",
    "expected_shape",
]

#: the header's ``format`` value: this container is a cluster-map artifact
FORMAT_NAME = "diversify.clustermap"

#: header key -> Python type of its value (``bool`` never counts as ``int``)
HEADER_TYPES: dict[str, type] = {
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

# name -> (dtype code, shape kind) of the arrays every artifact has. Shape kinds: "n" (n_docs,),
# "n+1" (n_docs + 1,), "k" (n_clusters,), "k+1" (n_clusters + 1,), "b" (2**bucket_bits + 1,),
# "1-d" (any length).
CORE_ARRAYS: dict[str, tuple[str, str]] = {
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
_ID_ARRAYS: dict[str, dict[str, tuple[str, str]]] = {
    "int": {"ids/int": ("i8", "n")},
    "str": {"ids/str_offsets": ("u8", "n+1"), "ids/str_bytes": ("u1", "1-d")},
}

#: builder state for incremental adds is stored as ``extra/<name>``; readers ignore what they do not know
EXTRA_PREFIX = "extra/"
EXTRA_NAME_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")


def required_arrays(id_kind: str) -> dict[str, tuple[str, str]]:
    """name -> (dtype code, shape kind) of every array an artifact with ``id_kind`` ids must hold."""
    return {**CORE_ARRAYS, **_ID_ARRAYS[id_kind]}


def expected_shape(shape_kind: str, *, n: int, k: int, bucket_bits: int) -> tuple[int, ...] | None:
    """The exact shape of a required array, or None for ``"1-d"`` (any length)."""
    sizes = {"n": n, "n+1": n + 1, "k": k, "k+1": k + 1, "b": (1 << bucket_bits) + 1}
    return (sizes[shape_kind],) if shape_kind in sizes else None
