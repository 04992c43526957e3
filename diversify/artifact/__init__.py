"""The ClusterMap artifact: one self-describing file from the offline builder to the online side.

``import diversify.artifact`` loads numpy and msgpack only (never numba). The byte layout is
specified in ``docs/artifact-format.md``.
"""

from __future__ import annotations

from diversify.artifact.clustermap import (
    FORMAT_NAME,
    STAGE_EXACT,
    STAGE_MINHASH,
    STAGE_SIMHASH_TEXT,
    STAGE_SIMHASH_VECTORS,
    ClusterMap,
    load,
)
from diversify.artifact.format import FORMAT_MAJOR, FORMAT_MINOR, read_container, write_container

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
