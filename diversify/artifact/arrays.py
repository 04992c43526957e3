"""Where a loaded artifact's array bytes live: private copies read from the open file, or a memory map.

The container's layout is validated by :mod:`~diversify.artifact.format`; this module only serves
the bytes of the arrays it listed, through :class:`ArrayTable`. Two sources:

* :class:`FileBytes` (the default, ``mmap=False``): each array is read with ``pread`` into a
  buffer of its own the first time it is accessed, then kept. The file stays open (so an extra
  read later comes from the same inode even after the path was replaced) but is never mapped: a
  file truncated or overwritten after load can no longer change or kill what was read; an array
  read later from a changed file is refused (short read, or checksum with ``verify=True``).
* :class:`BufferBytes` over a memory map (``mmap=True``): read-only views of one shared read-only
  map; pages load on use and are shared between processes, but they *are* the file: truncating
  it makes a later access raise SIGBUS, overwriting it in place changes the arrays under the
  reader. Where the OS has no ``pread`` (Windows), ``mmap=False`` reads the whole file into one
  private buffer at load instead, and closes it (an open file could not be replaced there).
"""

from __future__ import annotations

import mmap as _mmap
import os
import weakref
import zlib
from collections.abc import Iterator, Mapping
from typing import IO, Any

import numpy as np

from diversify.artifact.layout import DTYPES, artifact_error

__all__ = ["ArrayTable", "FileBytes", "BufferBytes", "open_source", "crc32_of"]

#: most bytes asked of one read call (Linux caps one read at ~2 GiB)
_READ_CHUNK = 1 << 30


def crc32_of(arr: np.ndarray) -> int:
    """CRC-32 of a C-contiguous array's bytes (0 when empty), without a copy; an array read through
    a file mapping a slice at a time, its pages given back (:func:`diversify._spill.mapped_slices`)."""
    from .._spill import known_crc, mapped_slices

    crc = known_crc(arr)  # a spilled array's, taken as its file was written
    if crc is not None:
        return crc
    crc = 0
    if arr.nbytes:
        for piece in mapped_slices(arr):
            crc = zlib.crc32(piece, crc)
    return crc


class FileBytes:
    """Byte ranges of an open artifact file, copied into private buffers on request.

    ``os.preadv``/``os.pread`` read at an offset without moving the file position, so threads,
    and processes forked after the load, can share the descriptor. The file is closed when the
    object is garbage-collected.
    """

    def __init__(self, path: str, f: IO[bytes]):
        self._path = path
        self._f = f
        self._fd = f.fileno()
        weakref.finalize(self, f.close)

    def readinto(self, out: np.ndarray, offset: int, what: str) -> None:
        """Fill the uint8 C-contiguous ``out`` with the file's bytes from ``offset`` on."""
        view = out.data  # a uint8 C-contiguous array: a flat writable byte view
        done, size = 0, view.nbytes
        while done < size:
            part = view[done : min(size, done + _READ_CHUNK)]
            try:
                got = self._read_at(part, offset + done)
            except OSError as exc:
                raise artifact_error(self._path, f"{what} cannot be read ({exc.strerror or exc}). Reload the artifact.") from None
            if got == 0:
                raise artifact_error(
                    self._path,
                    f"{what} cannot be read: the file now ends at byte {offset + done}, before the {size} bytes at "
                    f"offset {offset}; it was truncated or overwritten in place after it was loaded. "
                    "Replace artifacts by renaming a new file over the path, then reload.",
                )
            done += got

    def _read_at(self, part: memoryview, pos: int) -> int:
        if hasattr(os, "preadv"):
            return os.preadv(self._fd, [part], pos)
        chunk = os.pread(self._fd, part.nbytes, pos)  # pragma: no cover - no preadv (macOS < 11)
        part[: len(chunk)] = chunk  # pragma: no cover
        return len(chunk)  # pragma: no cover

    def bytes_at(self, lo: int, hi: int, what: str) -> bytes:
        out = np.empty(hi - lo, dtype=np.uint8)
        self.readinto(out, lo, what)
        return out.tobytes()


class BufferBytes:
    """The whole file as one buffer: a read-only shared memory map, or (no ``pread``) its bytes."""

    def __init__(self, buf: _mmap.mmap | bytes):
        self.buf = buf

    def bytes_at(self, lo: int, hi: int, what: str) -> bytes:
        return bytes(self.buf[lo:hi])


def open_source(path: str, f: IO[bytes], file_size: int, *, mmap: bool) -> FileBytes | BufferBytes:
    """Where the arrays of the open artifact ``f`` will be read from; takes ownership of ``f``."""
    buf: _mmap.mmap | bytes
    if not mmap and hasattr(os, "pread"):
        return FileBytes(path, f)  # owns f from here: closed when the arrays are collected
    try:
        if mmap:
            try:
                buf = _mmap.mmap(f.fileno(), 0, access=_mmap.ACCESS_READ)
            except (OSError, ValueError) as exc:
                raise artifact_error(path, f"cannot be memory-mapped ({exc}). Load it with mmap=False.") from None
        else:  # pragma: no cover - Windows: read it all, close it
            f.seek(0)
            buf = f.read()
    finally:
        f.close()  # a map holds its own reference to the file
    if len(buf) != file_size:
        raise artifact_error(path, "the file changed size while it was being opened. Retry once writing has finished.")
    return BufferBytes(buf)


class ArrayTable(Mapping[str, np.ndarray]):
    """Read-only mapping ``name -> numpy array`` over a validated container.

    An array is materialized on first access (read into its own buffer from
    :class:`FileBytes`, or viewed in :class:`BufferBytes`) and kept. With ``verify=True`` its
    CRC-32 is checked then (so a large, rarely used array costs nothing until it is used); a
    mismatch raises :class:`ArtifactError`. Every array is read-only.
    """

    def __init__(self, path: str, source: FileBytes | BufferBytes, data_start: int, table: list[dict[str, Any]],
                 verify: bool):
        self._path = path
        self._source = source
        self._data_start = data_start
        self._table = {e["name"]: e for e in table}
        self._verify = verify
        self._cache: dict[str, np.ndarray] = {}

    def entry(self, name: str) -> dict[str, Any]:
        """The array table entry (dtype code, shape, offset, nbytes, crc32) of ``name``."""
        return dict(self._table[name])

    def __getitem__(self, name: str) -> np.ndarray:
        arr = self._cache.get(name)
        if arr is not None:
            return arr
        e = self._table[name]
        dt = DTYPES[e["dtype"]]
        start = self._data_start + e["offset"]
        if e["nbytes"] == 0:
            arr = np.empty(e["shape"], dtype=dt)  # the table's shape rule keeps this representable
        elif isinstance(self._source, BufferBytes):
            arr = np.frombuffer(self._source.buf, dtype=dt, count=e["nbytes"] // dt.itemsize, offset=start)
            arr = arr.reshape(e["shape"])
        else:
            arr = np.empty(e["shape"], dtype=dt)
            self._source.readinto(arr.reshape(-1).view(np.uint8), start, f"array {name!r}")
        if self._verify:
            got = crc32_of(arr)
            if got != e["crc32"]:
                raise artifact_error(
                    self._path,
                    f"array {name!r} fails its checksum (crc32 {got:#010x}, header says {e['crc32']:#010x}); "
                    "the file is corrupt. Re-copy or rebuild the artifact.",
                )
            if e["dtype"] == "bool" and e["nbytes"] and arr.reshape(-1).view(np.uint8).max() > 1:
                raise artifact_error(self._path, f"array {name!r} is bool but holds bytes other than 0/1. The file is corrupt.")
        arr.flags.writeable = False
        self._cache[name] = arr  # idempotent; a race only repeats the work
        return arr

    def __contains__(self, name: object) -> bool:  # Mapping's default would read the array
        return name in self._table

    def __iter__(self) -> Iterator[str]:
        return iter(self._table)

    def __len__(self) -> int:
        return len(self._table)

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}: {e['dtype']}{list(e['shape'])}" for n, e in self._table.items())
        return f"ArrayTable({inner})"
