"""Generic, safe container for a msgpack header plus raw little-endian arrays.

Byte layout (see ``docs/artifact-format.md`` for the full specification)::

    offset 0   8 bytes   magic  b"\\x89DVRSFY\\n"
    offset 8   u16 LE    format major version
    offset 10  u16 LE    format minor version
    offset 12  u32 LE    CRC-32 of the header bytes
    offset 16  u64 LE    header length H in bytes
    offset 24  H bytes   msgpack header (a map, keys sorted)
               zeros     padding up to the next multiple of 64 = data start D
    D + off_i  ...       array i (little-endian, C order); off_i is a multiple of 64,
                         off_0 = 0, off_i = align64(off_{i-1} + nbytes_{i-1}); zeros between.
    end of file = D + data_nbytes (no trailing bytes)

The header map has two container keys, ``"arrays"`` (the array table, in file order) and
``"data_nbytes"``; every other key belongs to the caller. No pickle, no code, bounded sizes.
The constants and limits live in :mod:`~diversify.artifact.layout`, the header codec in
:mod:`~diversify.artifact.header`, where the array bytes are read from (private copies, or a
memory map on request) in :mod:`~diversify.artifact.arrays`.
"""

from __future__ import annotations

import math
import os
import stat
import zlib
from collections.abc import Iterator, Mapping
from typing import IO, Any

import numpy as np

from diversify._spill import mapped_slices
from diversify.artifact.arrays import ArrayTable, BufferBytes, FileBytes, crc32_of, open_source
from diversify.artifact.header import canonical, pack_header, unpack_header
from diversify.artifact.layout import (
    ALIGN,
    ARTIFACT_SUFFIX,
    DTYPES,
    FORMAT_MAJOR,
    FORMAT_MINOR,
    MAGIC,
    MAX_ARRAY_BYTES,
    MAX_ARRAYS,
    MAX_HEADER_BYTES,
    MAX_NDIM,
    NAME_RE,
    PREFIX,
    RESERVED_KEYS,
    TABLE_KEYS,
    align,
    artifact_error,
    dtype_code,
)
from diversify.errors import ArtifactError, ArtifactNotFoundError, InputError, InputTypeError
from diversify.files import atomic_replace, write_pieces

__all__ = [
    "MAGIC",
    "FORMAT_MAJOR",
    "FORMAT_MINOR",
    "ALIGN",
    "MAX_HEADER_BYTES",
    "DTYPES",
    "ArrayTable",
    "canonical",
    "prepare_arrays",
    "read_container",
    "write_container",
]

# --------------------------------------------------------------------------- writing


def prepare_arrays(arrays: Mapping[str, Any]) -> list[tuple[str, str, np.ndarray]]:
    """Check ``arrays`` and return ``(name, dtype code, little-endian C-order array)``, sorted by name."""
    if not isinstance(arrays, Mapping):
        raise InputTypeError(f"`arrays` must be a dict of name -> numpy array; got {type(arrays).__name__}.")
    if len(arrays) > MAX_ARRAYS:
        raise InputError(f"`arrays` may hold at most {MAX_ARRAYS} arrays; got {len(arrays)}. Merge some arrays.")
    out = []
    for name in sorted(arrays):
        if not isinstance(name, str) or not NAME_RE.match(name):
            raise InputError(
                f"`arrays` names must match {NAME_RE.pattern}; got {name!r}. Rename the array."
            )
        arr = arrays[name]
        if not isinstance(arr, np.ndarray):
            raise InputTypeError(
                f"`arrays[{name!r}]` must be a numpy array; got {type(arr).__name__}. Wrap it with np.asarray()."
            )
        code = dtype_code(arr.dtype)
        if code is None:
            raise InputTypeError(
                f"`arrays[{name!r}]` dtype must be one of {sorted(DTYPES)}; got {arr.dtype}. "
                "Cast it with .astype() to a supported dtype."
            )
        if arr.ndim > MAX_NDIM:
            raise InputError(f"`arrays[{name!r}]` may have at most {MAX_NDIM} dimensions; got {arr.ndim}. Reshape it.")
        arr = np.asarray(arr, dtype=DTYPES[code], order="C")  # (ascontiguousarray makes 0-d 1-d)
        out.append((name, code, arr))
    return out


def write_container(path: str | os.PathLike, header: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> None:
    """Write ``header`` and ``arrays`` to ``path`` atomically.

    Parameters
    ----------
    path : str or os.PathLike
        Target file. It is replaced atomically: the bytes go to a temporary file in the same
        directory, which is fsynced and then renamed over ``path``. On any failure the
        temporary file is removed and an existing ``path`` is left untouched.
    header : dict
        Plain data (see :func:`canonical`); keys ``"arrays"``, ``"data_nbytes"`` and
        ``"format_version"`` are reserved.
    arrays : dict[str, numpy.ndarray]
        Arrays of a whitelisted dtype (u1..u8, i1..i8, f4, f8, bool), written little-endian,
        C order, sorted by name.

    Notes
    -----
    Deterministic: the same header and arrays always give the same bytes.
    """
    if not isinstance(header, Mapping):
        raise InputTypeError(f"`header` must be a dict; got {type(header).__name__}.")
    for key in RESERVED_KEYS:
        if key in header:
            raise InputError(f"`header` must not use the reserved key {key!r}; rename it.")
    prepared = prepare_arrays(arrays)
    table = []
    offsets = []
    pos = 0
    for name, code, arr in prepared:
        pos = align(pos)
        offsets.append(pos)
        table.append(
            {
                "name": name,
                "dtype": code,
                "shape": [int(s) for s in arr.shape],
                "offset": pos,
                "nbytes": int(arr.nbytes),
                "crc32": crc32_of(arr),
            }
        )
        pos += arr.nbytes
    full = canonical(dict(header))
    full["arrays"] = table
    full["data_nbytes"] = pos
    raw = pack_header(canonical(full))
    prefix = PREFIX.pack(MAGIC, FORMAT_MAJOR, FORMAT_MINOR, zlib.crc32(raw), len(raw))
    head_end = PREFIX.size + len(raw)

    pieces: list = [prefix, raw, b"\0" * (align(head_end) - head_end)]
    written = 0
    for offset, (_, _, arr) in zip(offsets, prepared):
        if offset > written:
            pieces.append(b"\0" * (offset - written))
        if arr.nbytes:
            pieces.append(arr)
        written = offset + arr.nbytes

    def in_order() -> Iterator:  # an array in one buffer, or a spilled one in blocks read from its file
        for p in pieces:
            yield from (mapped_slices(p) if isinstance(p, np.ndarray) else (p,))

    with atomic_replace(path, what="the artifact", param="path", error=ArtifactError, suffix=ARTIFACT_SUFFIX) as f:
        write_pieces(f, in_order, align(head_end) + pos)


# --------------------------------------------------------------------------- the array table


def _parse_entry(path: str, i: int, e: Any, seen: set[str]) -> dict[str, Any]:
    """One array table entry, type-checked: name (not in ``seen``), dtype code, shape (tuple), offset, nbytes, crc32."""
    if not isinstance(e, dict) or set(e) != TABLE_KEYS:
        raise artifact_error(
            path, f"array table entry {i} must be a map with keys {sorted(TABLE_KEYS)}; got {e!r:.200}. The file is corrupt."
        )
    name, code, shape, off, nb, crc = (e["name"], e["dtype"], e["shape"], e["offset"], e["nbytes"], e["crc32"])
    if not isinstance(name, str) or not NAME_RE.match(name) or name in seen:
        raise artifact_error(path, f"array table entry {i} has an invalid or repeated name {name!r}. The file is corrupt.")
    if not isinstance(code, str) or code not in DTYPES:
        raise artifact_error(
            path,
            f"array {name!r} has dtype {code!r}, which is not in the allowed set {sorted(DTYPES)}. "
            "The file is hostile or from an incompatible writer.",
        )
    if not isinstance(shape, list) or len(shape) > MAX_NDIM or not all(type(s) is int and s >= 0 for s in shape):
        raise artifact_error(
            path, f"array {name!r} has an invalid shape {shape!r:.200} (at most {MAX_NDIM} non-negative ints). The file is corrupt."
        )
    if not all(type(v) is int and v >= 0 for v in (off, nb, crc)) or crc > 0xFFFFFFFF:
        raise artifact_error(
            path, f"array {name!r} has invalid offset/nbytes/crc32 ({off!r}, {nb!r}, {crc!r}). The file is corrupt."
        )
    itemsize = DTYPES[code].itemsize
    need = math.prod(shape) * itemsize  # Python ints: cannot overflow
    if need != nb:
        raise artifact_error(
            path, f"array {name!r}: shape {shape} of {code} needs {need} bytes but nbytes is {nb}. The file is corrupt or hostile."
        )
    if math.prod(s for s in shape if s) * itemsize > MAX_ARRAY_BYTES:  # an empty array's other dimensions
        raise artifact_error(
            path,
            f"array {name!r} has shape {shape!r:.200}: without its zero dimensions it would span more than "
            f"{MAX_ARRAY_BYTES} bytes (2**63 - 1), which no reader can index. The file is corrupt or hostile.",
        )
    return {"name": name, "dtype": code, "shape": tuple(shape), "offset": off, "nbytes": nb, "crc32": crc}


def _parse_table(path: str, header: dict, file_size: int, data_start: int) -> list[dict[str, Any]]:
    table = header.get("arrays")
    data_nbytes = header.get("data_nbytes")
    if not isinstance(table, list) or type(data_nbytes) is not int or data_nbytes < 0:
        raise artifact_error(
            path, "the header lacks a valid `arrays` list or non-negative `data_nbytes` int; the file is corrupt. Rebuild it."
        )
    if len(table) > MAX_ARRAYS:
        raise artifact_error(
            path, f"the header lists {len(table)} arrays; the limit is {MAX_ARRAYS}. The file is hostile or corrupt."
        )
    if data_start + data_nbytes != file_size:
        raise artifact_error(
            path,
            f"the file is {file_size} bytes but the header declares {data_start + data_nbytes} "
            f"(data start {data_start} + data_nbytes {data_nbytes}); it is truncated or has trailing bytes. "
            "Re-copy or rebuild the artifact.",
        )
    seen: set[str] = set()
    expected = 0
    out = []
    for i, raw_entry in enumerate(table):
        e = _parse_entry(path, i, raw_entry, seen)
        name, off, nb = e["name"], e["offset"], e["nbytes"]
        seen.add(name)
        if off % ALIGN:
            raise artifact_error(path, f"array {name!r} offset {off} is not a multiple of {ALIGN}. The file is corrupt.")
        if off != align(expected):
            raise artifact_error(
                path,
                f"array {name!r} starts at data offset {off} but must start at {align(expected)} "
                "(arrays are packed in table order with no holes or overlaps). The file is corrupt or hostile.",
            )
        if off + nb > data_nbytes:
            raise artifact_error(
                path,
                f"array {name!r} spans data bytes [{off}, {off + nb}) beyond the data section of {data_nbytes} bytes. "
                "The file is truncated or hostile.",
            )
        expected = off + nb
        out.append(e)
    if expected != data_nbytes:
        raise artifact_error(
            path, f"the arrays end at data offset {expected} but data_nbytes is {data_nbytes}. The file is corrupt."
        )
    return out


# --------------------------------------------------------------------------- reading


def _open_regular(spath: str) -> IO[bytes]:
    def not_found(exc: OSError) -> ArtifactError:
        return artifact_error(
            spath,
            f"cannot be opened ({exc.strerror or exc}). Check the path, or build the artifact first (`diversify build`).",
            ArtifactNotFoundError,
        )

    try:
        st = os.stat(spath)
    except OSError as exc:
        raise not_found(exc) from None
    if not stat.S_ISREG(st.st_mode):
        # a FIFO would block open() forever; devices and directories are never artifacts
        raise artifact_error(spath, "is not a regular file. Pass the artifact file's path.", ArtifactNotFoundError)
    try:
        return open(spath, "rb")
    except OSError as exc:
        raise not_found(exc) from None


def _read_prefix(spath: str, f: IO[bytes]) -> tuple[int, int, int, int, int]:
    """``(file_size, major, minor, header crc32, header length)`` after the magic and version checks."""
    try:
        file_size = os.fstat(f.fileno()).st_size
        prefix = f.read(PREFIX.size)
    except OSError as exc:
        raise artifact_error(spath, f"cannot be read ({exc}). Check permissions.", ArtifactNotFoundError) from None
    if len(prefix) < PREFIX.size:
        raise artifact_error(
            spath,
            f"the file is {file_size} bytes, shorter than the {PREFIX.size}-byte prefix; it is truncated or "
            "not a diversify artifact. Rebuild it.",
        )
    magic, major, minor, hcrc, hlen = PREFIX.unpack(prefix)
    if magic != MAGIC:
        raise artifact_error(
            spath,
            f"the magic bytes must be {MAGIC!r}; got {magic!r}. This is not a diversify artifact "
            "(or it was altered, e.g. by a text-mode transfer).",
        )
    if major > FORMAT_MAJOR:
        raise artifact_error(
            spath,
            f"format version {major}.{minor} is newer than this library supports "
            f"(major {FORMAT_MAJOR}). Upgrade diversify (pip install -U diversify-retrieval) to read it.",
        )
    if major != FORMAT_MAJOR:
        raise artifact_error(
            spath,
            f"format major version {major} is not supported (this library reads major {FORMAT_MAJOR}). "
            "Rebuild the artifact with this version of diversify.",
        )
    return file_size, major, minor, hcrc, hlen


def _read_header_bytes(spath: str, f: IO[bytes], file_size: int, hcrc: int, hlen: int) -> bytes:
    if hlen > MAX_HEADER_BYTES:
        raise artifact_error(
            spath, f"header length {hlen} exceeds the limit of {MAX_HEADER_BYTES} bytes; the file is corrupt or hostile."
        )
    if PREFIX.size + hlen > file_size:
        raise artifact_error(
            spath,
            f"header length {hlen} runs past the end of the {file_size}-byte file; it is truncated. "
            "Re-copy or rebuild the artifact.",
        )
    raw = f.read(hlen)
    if len(raw) != hlen or zlib.crc32(raw) != hcrc:
        raise artifact_error(spath, "the header fails its checksum; the file is corrupt. Re-copy or rebuild the artifact.")
    return raw


def _check_gaps(spath: str, source: FileBytes | BufferBytes, data_start: int, table: list[dict[str, Any]]) -> None:
    """Padding between arrays must be zeros (cheap: < 64 bytes per array)."""
    prev_end = 0
    for e in table:
        lo, hi = data_start + prev_end, data_start + e["offset"]
        gap = source.bytes_at(lo, hi, f"the padding before array {e['name']!r}") if hi > lo else b""
        if gap.strip(b"\0"):
            raise artifact_error(spath, f"the padding before array {e['name']!r} holds non-zero bytes. The file is corrupt.")
        prev_end = e["offset"] + e["nbytes"]


def read_container(path: str | os.PathLike, *, mmap: bool = False, verify: bool = True) -> tuple[dict, ArrayTable]:
    """Read and validate a container written by :func:`write_container`.

    Parameters
    ----------
    path : str or os.PathLike
        The artifact file.
    mmap : bool, default False
        False: each array is read into memory of its own on first access (``pread`` from the
        file, kept open but never mapped), so nothing that happens to the file later changes an
        array already read or kills the process. True: arrays are read-only views of a shared
        read-only memory map (pages load on use, shared between processes); truncating or
        overwriting the file in place then raises SIGBUS or changes the arrays (see
        ``docs/security.md``, "Live files").
    verify : bool, default True
        Check each array's CRC-32 (on first access) and that bool arrays hold 0/1.
        The header CRC-32 and the whole layout are always checked.

    Returns
    -------
    header : dict
        The caller's header keys (without the container's ``arrays``/``data_nbytes``), plus
        ``"format_version"``: ``[major, minor]`` from the prefix.
    arrays : ArrayTable
        Read-only mapping name -> numpy array.

    Raises
    ------
    ArtifactNotFoundError
        ``path`` does not exist or cannot be opened.
    ArtifactError
        Anything wrong with the file: magic, future major version, sizes, header,
        array table, checksums.
    """
    spath = os.fspath(path)
    f = _open_regular(spath)
    try:
        file_size, major, minor, hcrc, hlen = _read_prefix(spath, f)
        full = unpack_header(_read_header_bytes(spath, f, file_size, hcrc, hlen), spath)
        data_start = align(PREFIX.size + hlen)
        table = _parse_table(spath, full, file_size, data_start)
        pad = f.read(data_start - PREFIX.size - hlen)
        if pad.strip(b"\0"):
            raise artifact_error(spath, "the padding after the header holds non-zero bytes. The file is corrupt.")
    except BaseException:
        f.close()
        raise
    source = open_source(spath, f, file_size, mmap=mmap)
    _check_gaps(spath, source, data_start, table)
    header = {k: v for k, v in full.items() if k not in RESERVED_KEYS}
    header["format_version"] = [major, minor]
    return header, ArrayTable(spath, source, data_start, table, verify)
