"""Artifacts: one self-describing ``.dvf`` file from the offline builder to the online side.

An *artifact* is the file; :class:`ClusterMap` is the Python object that reads (:func:`load`)
and writes (:meth:`ClusterMap.save`) it. ``import diversify.artifact`` loads numpy and msgpack
only (never numba). The byte layout is specified in ``docs/artifact-format.md``.

Modules, from the bytes up: :mod:`.layout` (constants and limits), :mod:`.header` (the msgpack
header), :mod:`.format` (the generic container), :mod:`.arrays` (where a loaded container's
array bytes live: private copies, or a memory map on request), :mod:`.schema` (what an artifact holds),
:mod:`.lookup` (id -> cluster tables), :mod:`.aliases` (merged cluster ids), :mod:`.assemble`
(the builder's arrays -> an artifact), :mod:`.validation` (the checks run at load),
:mod:`.state` (the rules of the state an ``add`` reads back) and :mod:`.clustermap` (the
:class:`ClusterMap` class).
"""

from __future__ import annotations

from diversify.artifact.clustermap import ClusterMap, load
from diversify.artifact.format import read_container, write_container
from diversify.artifact.layout import FORMAT_MAJOR, FORMAT_MINOR
from diversify.artifact.schema import (
    FORMAT_NAME,
    STAGE_EXACT,
    STAGE_MINHASH,
    STAGE_SIMHASH_TEXT,
    STAGE_SIMHASH_VECTORS,
)

__all__ = [
    "ClusterMap",
    "load",
    "read_container",
    "write_container",
    "FORMAT_NAME",
    "FORMAT_MAJOR",
    "FORMAT_MINOR",
    "STAGE_EXACT",
    "STAGE_MINHASH",
    "STAGE_SIMHASH_VECTORS",
    "STAGE_SIMHASH_TEXT",
]
