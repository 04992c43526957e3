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
"""

from __future__ import annotations

import math
import mmap as _mmap
import os
import re
import stat
import struct
import zlib
from collections.abc import Mapping
from typing import Any

import msgpack
import numpy as np

from diversify.errors import ArtifactError, ArtifactNotFoundError, InputError, InputTypeError
from diversify.files import atomic_replace

__all__ = [
    "MAGIC",
    "FORMAT_MAJOR",
    "FORMAT_MINOR",
    "ALIGN",
    "MAX_HEADER_BYTES",
    "DTYPES",
    "write_container",
    "read_container",
    "canonical",
]

MAGIC = b"\x89DVRSFY\n"
FORMAT_MAJOR = 1
FORMAT_MINOR = 0
ALIGN = 64
PREFIX = struct.Struct("<8sHHIQ")  # magic, major, minor, header crc32, header length
assert PREFIX.size == 24
#: the file name extension of a cluster map
ARTIFACT_SUFFIX = ".dvf"

MAX_HEADER_BYTES = 16 * 1024 * 1024
MAX_ARRAYS = 4096
MAX_NDIM = 8
MAX_DEPTH = 32
MAX_NAME_LEN = 128
_NAME_RE = re.compile(r"^[A-Za-z0-9_.\-/]{1,128}$")
_RESERVED = ("arrays", "data_nbytes", "format_version")  # format_version is added on read

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

_TABLE_KEYS = {"name", "dtype", "shape", "offset", "nbytes", "crc32"}


def _align(x: int) -> int:
    return -(-x // ALIGN) * ALIGN


# --------------------------------------------------------------------------- header values


def canonical(obj: Any, *, path: str = "header", depth: int = 0) -> Any:
    """Return ``obj`` as plain msgpack-able data with every map's keys sorted.

    Accepts None, bool, int (-2**63 .. 2**64-1), float, str, bytes, list/tuple and dicts with
    str keys; numpy scalars are converted to the matching Python type. Anything else raises
    :class:`InputTypeError` naming the path of the offending value.
    """
    if depth > MAX_DEPTH:
        raise InputError(
            f"`{path}` is nested deeper than {MAX_DEPTH} levels. Flatten the structure before storing it."
        )
    if obj is None or isinstance(obj, (bool, str, bytes)):
        return obj
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        v = int(obj)
        if not -(2**63) <= v < 2**64:
            raise InputError(
                f"`{path}` must be an integer in [-2**63, 2**64); got {v}. Store it as a str instead."
            )
        return v
    if isinstance(obj, (float, np.floating)):
        return float(obj)
    if isinstance(obj, (list, tuple)):
        return [canonical(v, path=f"{path}[{i}]", depth=depth + 1) for i, v in enumerate(obj)]
    if isinstance(obj, Mapping):
        out = {}
        for k in sorted(obj, key=lambda k: (not isinstance(k, str), str(k))):
            if not isinstance(k, str):
                raise InputTypeError(
                    f"`{path}` keys must be str; got {type(k).__name__} {k!r}. Convert the key with str()."
                )
            out[k] = canonical(obj[k], path=f"{path}.{k}", depth=depth + 1)
        return out
    raise InputTypeError(
        f"`{path}` must hold only None/bool/int/float/str/bytes/list/dict values; got {type(obj).__name__}. "
        "Convert it (e.g. arrays with .tolist(), paths with str())."
    )


def _pack(obj: Any) -> bytes:
    return msgpack.packb(obj, use_bin_type=True, use_single_float=False)


def _ext_hook(code: int, data: bytes) -> Any:
    raise ValueError(f"msgpack extension type {code} is not allowed")


def _no_duplicate_keys(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate map key {k!r} (readers could disagree on its value)")
        out[k] = v
    return out


def _unpack_header(raw: bytes) -> dict:
    try:
        obj = msgpack.unpackb(
            raw,
            raw=False,
            strict_map_key=True,
            use_list=True,
            object_pairs_hook=_no_duplicate_keys,
            ext_hook=_ext_hook,
            max_str_len=MAX_HEADER_BYTES,
            max_bin_len=MAX_HEADER_BYTES,
            max_array_len=1 << 20,
            max_map_len=1 << 20,
            max_ext_len=0,
        )
    except Exception as exc:  # msgpack raises ValueError, ExtraData, FormatError, StackError...
        raise ArtifactError(
            f"artifact header: the msgpack header is malformed ({type(exc).__name__}: {exc}). "
            "The file is corrupt or not a diversify artifact; rebuild it."
        ) from None
    if not isinstance(obj, dict):
        raise ArtifactError(
            f"artifact header: must be a msgpack map; got {type(obj).__name__}. "
            "The file is corrupt or not a diversify artifact; rebuild it."
        )
    _check_plain(obj, "header", 0)
    return obj


def _check_plain(obj: Any, path: str, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise ArtifactError(
            f"artifact header: `{path}` is nested deeper than {MAX_DEPTH} levels. The file is hostile or corrupt."
        )
    if isinstance(obj, dict):
        for k, v in obj.items():
            if not isinstance(k, str):
                raise ArtifactError(f"artifact header: `{path}` has a non-str key {k!r}. The file is corrupt.")
            _check_plain(v, f"{path}.{k}", depth + 1)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            _check_plain(v, f"{path}[{i}]", depth + 1)
    elif not (obj is None or isinstance(obj, (bool, int, float, str, bytes))):
        raise ArtifactError(
            f"artifact header: `{path}` holds a {type(obj).__name__}, which the format does not allow. "
            "The file is hostile or corrupt."
        )


# --------------------------------------------------------------------------- writing


def _prepare_arrays(arrays: Mapping[str, Any]) -> list[tuple[str, str, np.ndarray]]:
    if not isinstance(arrays, Mapping):
        raise InputTypeError(f"`arrays` must be a dict of name -> numpy array; got {type(arrays).__name__}.")
    if len(arrays) > MAX_ARRAYS:
        raise InputError(f"`arrays` may hold at most {MAX_ARRAYS} arrays; got {len(arrays)}. Merge some arrays.")
    out = []
    for name in sorted(arrays):
        if not isinstance(name, str) or not _NAME_RE.match(name):
            raise InputError(
                f"`arrays` names must match {_NAME_RE.pattern}; got {name!r}. Rename the array."
            )
        arr = arrays[name]
        if not isinstance(arr, np.ndarray):
            raise InputTypeError(
                f"`arrays[{name!r}]` must be a numpy array; got {type(arr).__name__}. Wrap it with np.asarray()."
            )
        code = _CODE_OF.get((arr.dtype.kind, arr.dtype.itemsize)) if arr.dtype.kind in "uifb" else None
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


def _write_array(f, arr: np.ndarray) -> None:
    if arr.nbytes:
        f.write(memoryview(arr.reshape(-1)).cast("B"))


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
    for key in _RESERVED:
        if key in header:
            raise InputError(f"`header` must not use the reserved key {key!r}; rename it.")
    prepared = _prepare_arrays(arrays)
    table = []
    pos = 0
    for name, code, arr in prepared:
        pos = _align(pos)
        table.append(
            {
                "name": name,
                "dtype": code,
                "shape": [int(s) for s in arr.shape],
                "offset": pos,
                "nbytes": int(arr.nbytes),
                "crc32": zlib.crc32(arr.reshape(-1).view(np.uint8)) if arr.nbytes else 0,
            }
        )
        pos += arr.nbytes
    full = canonical(dict(header))
    full["arrays"] = table
    full["data_nbytes"] = pos
    full = canonical(full)
    raw = _pack(full)
    if len(raw) > MAX_HEADER_BYTES:
        raise InputError(
            f"`header` packs to {len(raw)} bytes; the limit is {MAX_HEADER_BYTES}. "
            "Move large values into arrays."
        )
    prefix = PREFIX.pack(MAGIC, FORMAT_MAJOR, FORMAT_MINOR, zlib.crc32(raw), len(raw))
    head_end = PREFIX.size + len(raw)
    data_start = _align(head_end)

    with atomic_replace(path, what="the artifact", param="path", error=ArtifactError, suffix=ARTIFACT_SUFFIX) as f:
        f.write(prefix)
        f.write(raw)
        f.write(b"\0" * (data_start - head_end))
        written = 0
        for entry, (_, _, arr) in zip(table, prepared):
            f.write(b"\0" * (entry["offset"] - written))
            _write_array(f, arr)
            written = entry["offset"] + entry["nbytes"]


# --------------------------------------------------------------------------- reading


def _fail(path: str, what: str) -> ArtifactError:
    return ArtifactError(f"artifact {path!r}: {what}")


def _parse_table(path: str, header: dict, file_size: int, data_start: int) -> list[dict]:
    table = header.get("arrays")
    data_nbytes = header.get("data_nbytes")
    if not isinstance(table, list) or type(data_nbytes) is not int or data_nbytes < 0:
        raise _fail(path, "the header lacks a valid `arrays` list or non-negative `data_nbytes` int; the file is corrupt. Rebuild it.")
    if len(table) > MAX_ARRAYS:
        raise _fail(path, f"the header lists {len(table)} arrays; the limit is {MAX_ARRAYS}. The file is hostile or corrupt.")
    if data_start + data_nbytes != file_size:
        raise _fail(
            path,
            f"the file is {file_size} bytes but the header declares {data_start + data_nbytes} "
            f"(data start {data_start} + data_nbytes {data_nbytes}); it is truncated or has trailing bytes. "
            "Re-copy or rebuild the artifact.",
        )
    seen = set()
    expected = 0
    out = []
    for i, e in enumerate(table):
        if not isinstance(e, dict) or set(e) != _TABLE_KEYS:
            raise _fail(path, f"array table entry {i} must be a map with keys {sorted(_TABLE_KEYS)}; got {e!r:.200}. The file is corrupt.")
        name, code, shape, off, nb, crc = (e["name"], e["dtype"], e["shape"], e["offset"], e["nbytes"], e["crc32"])
        if not isinstance(name, str) or not _NAME_RE.match(name) or name in seen:
            raise _fail(path, f"array table entry {i} has an invalid or repeated name {name!r}. The file is corrupt.")
        seen.add(name)
        if not isinstance(code, str) or code not in DTYPES:
            raise _fail(
                path,
                f"array {name!r} has dtype {code!r}, which is not in the allowed set {sorted(DTYPES)}. "
                "The file is hostile or from an incompatible writer.",
            )
        if (
            not isinstance(shape, list)
            or len(shape) > MAX_NDIM
            or not all(type(s) is int and s >= 0 for s in shape)
        ):
            raise _fail(path, f"array {name!r} has an invalid shape {shape!r:.200} (at most {MAX_NDIM} non-negative ints). The file is corrupt.")
        if not all(type(v) is int and v >= 0 for v in (off, nb, crc)) or crc > 0xFFFFFFFF:
            raise _fail(path, f"array {name!r} has invalid offset/nbytes/crc32 ({off!r}, {nb!r}, {crc!r}). The file is corrupt.")
        count = math.prod(shape)  # Python ints: cannot overflow
        if count * DTYPES[code].itemsize != nb:
            raise _fail(
                path,
                f"array {name!r}: shape {shape} of {code} needs {count * DTYPES[code].itemsize} bytes but "
                f"nbytes is {nb}. The file is corrupt or hostile.",
            )
        if off % ALIGN:
            raise _fail(path, f"array {name!r} offset {off} is not a multiple of {ALIGN}. The file is corrupt.")
        if off != _align(expected):
            raise _fail(
                path,
                f"array {name!r} starts at data offset {off} but must start at {_align(expected)} "
                "(arrays are packed in table order with no holes or overlaps). The file is corrupt or hostile.",
            )
        if off + nb > data_nbytes:
            raise _fail(
                path,
                f"array {name!r} spans data bytes [{off}, {off + nb}) beyond the data section of {data_nbytes} bytes. "
                "The file is truncated or hostile.",
            )
        expected = off + nb
        out.append({"name": name, "dtype": code, "shape": tuple(shape), "offset": off, "nbytes": nb, "crc32": crc})
    if expected != data_nbytes:
        raise _fail(path, f"the arrays end at data offset {expected} but data_nbytes is {data_nbytes}. The file is corrupt.")
    return out


class ArrayTable(Mapping):
    """Read-only mapping ``name -> numpy array`` over a validated container.

    With ``verify=True`` each array's CRC-32 is checked the first time it is accessed (so a
    large, rarely used array costs nothing until it is used); a mismatch raises
    :class:`ArtifactError`. Arrays are read-only views of the memory map (or of the bytes
    read into memory when ``mmap=False``).
    """

    def __init__(self, path: str, buf, data_start: int, table: list[dict], verify: bool):
        self._path = path
        self._buf = buf
        self._data_start = data_start
        self._table = {e["name"]: e for e in table}
        self._verify = verify
        self._cache: dict[str, np.ndarray] = {}

    def entry(self, name: str) -> dict:
        """The array table entry (dtype code, shape, offset, nbytes, crc32) of ``name``."""
        return dict(self._table[name])

    def __getitem__(self, name: str) -> np.ndarray:
        arr = self._cache.get(name)
        if arr is not None:
            return arr
        e = self._table[name]
        dt = DTYPES[e["dtype"]]
        if e["nbytes"] == 0:
            arr = np.empty(e["shape"], dtype=dt)
        else:
            arr = np.frombuffer(
                self._buf, dtype=dt, count=e["nbytes"] // dt.itemsize, offset=self._data_start + e["offset"]
            ).reshape(e["shape"])
        if self._verify:
            got = zlib.crc32(arr.reshape(-1).view(np.uint8)) if e["nbytes"] else 0
            if got != e["crc32"]:
                raise _fail(
                    self._path,
                    f"array {name!r} fails its checksum (crc32 {got:#010x}, header says {e['crc32']:#010x}); "
                    "the file is corrupt. Re-copy or rebuild the artifact.",
                )
            if e["dtype"] == "bool" and e["nbytes"] and arr.reshape(-1).view(np.uint8).max() > 1:
                raise _fail(path=self._path, what=f"array {name!r} is bool but holds bytes other than 0/1. The file is corrupt.")
        arr.flags.writeable = False
        self._cache[name] = arr  # idempotent; a race only repeats the work
        return arr

    def __iter__(self):
        return iter(self._table)

    def __len__(self) -> int:
        return len(self._table)

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}: {e['dtype']}{list(e['shape'])}" for n, e in self._table.items())
        return f"ArrayTable({inner})"


def read_container(
    path: str | os.PathLike, *, mmap: bool = True, verify: bool = True
) -> tuple[dict, ArrayTable]:
    """Read and validate a container written by :func:`write_container`.

    Parameters
    ----------
    path : str or os.PathLike
        The artifact file.
    mmap : bool, default True
        True: arrays are read-only views of a read-only memory map (pages load on use).
        False: the whole file is read into memory.
    verify : bool, default True
        Check each array's CRC-32 (lazily, on first access) and that bool arrays hold 0/1.
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
    try:
        st = os.stat(spath)
    except OSError as exc:
        raise ArtifactNotFoundError(
            f"artifact {spath!r}: cannot be opened ({exc.strerror or exc}). "
            "Check the path, or build the artifact first (`diversify build`)."
        ) from None
    if not stat.S_ISREG(st.st_mode):
        # a FIFO would block open() forever; devices and directories are never artifacts
        raise ArtifactNotFoundError(f"artifact {spath!r}: is not a regular file. Pass the artifact file's path.")
    try:
        f = open(spath, "rb")
    except OSError as exc:
        raise ArtifactNotFoundError(
            f"artifact {spath!r}: cannot be opened ({exc.strerror or exc}). "
            "Check the path, or build the artifact first (`diversify build`)."
        ) from None
    with f:
        try:
            file_size = os.fstat(f.fileno()).st_size
            prefix = f.read(PREFIX.size)
        except OSError as exc:
            raise ArtifactNotFoundError(f"artifact {spath!r}: cannot be read ({exc}). Check permissions.") from None
        if len(prefix) < PREFIX.size:
            raise _fail(
                spath,
                f"the file is {file_size} bytes, shorter than the {PREFIX.size}-byte prefix; it is truncated or "
                "not a diversify artifact. Rebuild it.",
            )
        magic, major, minor, hcrc, hlen = PREFIX.unpack(prefix)
        if magic != MAGIC:
            raise _fail(
                spath,
                f"the magic bytes must be {MAGIC!r}; got {magic!r}. This is not a diversify artifact "
                "(or it was altered, e.g. by a text-mode transfer).",
            )
        if major != FORMAT_MAJOR:
            if major > FORMAT_MAJOR:
                raise _fail(
                    spath,
                    f"format version {major}.{minor} is newer than this library supports "
                    f"(major {FORMAT_MAJOR}). Upgrade diversify (pip install -U diversify-retrieval) to read it.",
                )
            raise _fail(
                spath,
                f"format major version {major} is not supported (this library reads major {FORMAT_MAJOR}). "
                "Rebuild the artifact with this version of diversify.",
            )
        if hlen > MAX_HEADER_BYTES:
            raise _fail(
                spath,
                f"header length {hlen} exceeds the limit of {MAX_HEADER_BYTES} bytes; the file is corrupt or hostile.",
            )
        if PREFIX.size + hlen > file_size:
            raise _fail(
                spath,
                f"header length {hlen} runs past the end of the {file_size}-byte file; it is truncated. "
                "Re-copy or rebuild the artifact.",
            )
        raw = f.read(hlen)
        if len(raw) != hlen or zlib.crc32(raw) != hcrc:
            raise _fail(spath, "the header fails its checksum; the file is corrupt. Re-copy or rebuild the artifact.")
        full = _unpack_header(raw)
        data_start = _align(PREFIX.size + hlen)
        table = _parse_table(spath, full, file_size, data_start)
        pad = f.read(data_start - PREFIX.size - hlen)
        if pad.strip(b"\0"):
            raise _fail(spath, "the padding after the header holds non-zero bytes. The file is corrupt.")
        if mmap and file_size > 0:
            try:
                buf = _mmap.mmap(f.fileno(), 0, access=_mmap.ACCESS_READ)
            except (OSError, ValueError) as exc:
                raise _fail(spath, f"cannot be memory-mapped ({exc}). Try mmap=False.") from None
            if len(buf) != file_size:
                raise _fail(spath, "the file changed size while it was being opened. Retry once writing has finished.")
        else:
            f.seek(0)
            buf = f.read()
            if len(buf) != file_size:
                raise _fail(spath, "the file changed size while it was being read. Retry once writing has finished.")
    # Padding between arrays must be zeros (cheap: < 64 bytes per array).
    prev_end = 0
    for e in table:
        gap = bytes(buf[data_start + prev_end : data_start + e["offset"]])
        if gap.strip(b"\0"):
            raise _fail(spath, f"the padding before array {e['name']!r} holds non-zero bytes. The file is corrupt.")
        prev_end = e["offset"] + e["nbytes"]
    header = {k: v for k, v in full.items() if k not in _RESERVED}
    header["format_version"] = [major, minor]
    return header, ArrayTable(spath, buf, data_start, table, verify)
