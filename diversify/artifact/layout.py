"""The container's fixed layout and limits, and the one wording of an error about an artifact file.

An *artifact* is one ``.dvf`` file; this module names its byte-level constants (specified in
``docs/artifact-format.md``, sections 1 and 5): the prefix, the alignment, the dtype codes and
every size limit a reader enforces before it allocates anything.
"""

from __future__ import annotations

import re
import struct

import numpy as np

from diversify.errors import ArtifactError

__all__ = [
    "MAGIC",
    "FORMAT_MAJOR",
    "FORMAT_MINOR",
    "PREFIX",
    "ALIGN",
    "ARTIFACT_SUFFIX",
    "MAX_HEADER_BYTES",
    "MAX_ARRAYS",
    "MAX_NDIM",
    "MAX_DEPTH",
    "MAX_HEADER_VALUES",
    "MAX_ARRAY_BYTES",
    "MAX_NAME_LEN",
    "NAME_RE",
    "RESERVED_KEYS",
    "TABLE_KEYS",
    "DTYPES",
    "align",
    "dtype_code",
    "artifact_error",
]

MAGIC = b"\x89DVRSFY\n"
FORMAT_MAJOR = 1
FORMAT_MINOR = 0
PREFIX = struct.Struct("<8sHHIQ")  # magic, major, minor, header crc32, header length
assert PREFIX.size == 24
ALIGN = 64
#: the file name extension of an artifact
ARTIFACT_SUFFIX = ".dvf"

MAX_HEADER_BYTES = 16 * 1024 * 1024
MAX_ARRAYS = 4096
MAX_NDIM = 8
MAX_DEPTH = 32
#: msgpack values (scalars, arrays and maps, each map key counted) in one header: a decoded value
#: costs up to ~100 bytes of Python objects however few bytes encode it (an empty map is 1 byte)
MAX_HEADER_VALUES = 1 << 17
#: the byte size of an array's shape without its zero dimensions: what a reader can index with int64
MAX_ARRAY_BYTES = 2**63 - 1
MAX_NAME_LEN = 128
NAME_RE = re.compile(r"^[A-Za-z0-9_.\-/]{1,128}$")
RESERVED_KEYS = ("arrays", "data_nbytes", "format_version")  # format_version is added on read
TABLE_KEYS = frozenset({"name", "dtype", "shape", "offset", "nbytes", "crc32"})

# File dtype code -> numpy dtype (all little-endian).
DTYPES: dict[str, np.dtype] = {
    "u1": np.dtype("<u1"),
    "u2": np.dtype("<u2"),
    "u4": np.dtype("<u4"),
    "u8": np.dtype("<u8"),
    "i1": np.dtype("<i1"),
    "i2": np.dtype("<i2"),
    "i4": np.dtype("<i4"),
    "i8": np.dtype("<i8"),
    "f4": np.dtype("<f4"),
    "f8": np.dtype("<f8"),
    "bool": np.dtype("bool"),
}
_CODE_OF = {(dt.kind, dt.itemsize): code for code, dt in DTYPES.items()}


def align(x: int) -> int:
    """``x`` rounded up to a multiple of :data:`ALIGN`."""
    return -(-x // ALIGN) * ALIGN


def dtype_code(dtype: np.dtype) -> str | None:
    """The file dtype code of ``dtype`` (any byte order), or None when the format does not allow it."""
    return _CODE_OF.get((dtype.kind, dtype.itemsize)) if dtype.kind in "uifb" else None


def artifact_error(path: str, what: str, cls: type[ArtifactError] = ArtifactError) -> ArtifactError:
    """``cls("artifact '<path>': <what>")``: every error about an artifact file starts this way."""
    return cls(f"artifact {path!r}: {what}")
