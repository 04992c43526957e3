"""A build's largest per-document arrays kept in temporary files instead of memory.

``diversify.build(texts, spill_dir=DIR)`` (the console script's ``build --stream``) writes each
chunk's MinHash signatures (4 bytes x ``num_perm`` a document: 512 MB at 1M documents) to an
unnamed file in ``DIR`` as it is sketched; the MinHash stage writes its band keys to one file per
band (:func:`diversify.linking.spilled.spilled_bands`). The files are written past the page cache
where the file system allows it (:class:`SpillFile`).

The stages read the signatures back a block at a time (:func:`row_blocks`, :func:`gather_rows`):
the linking and the cut into clusters keep in memory only the rows of the documents they compare, at most
:data:`HELD_BYTES` of them at a time (:class:`HeldRows`), and the artifact's writer copies the
signatures block by block (:func:`mapped_slices`). The build's result
still holds the signatures as an array (``cluster_map.extras["minhash"]``): a private mapping of
the file, which nothing writes to and no stage reads at random.

The files are unnamed (``tempfile.TemporaryFile``): they disappear when they are closed (the
signatures' file with its mapping, held by the build's result) or the process ends, however it
ends.
"""

from __future__ import annotations

import errno
import mmap
import os
import tempfile
import weakref
import zlib
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import IO, Optional

import numpy as np

from .errors import ConfigError, DiversifyError
from .files import DIRECT_ALIGN as _ALIGN
from .files import aligned_buffer

try:
    import fcntl
except ImportError:  # Windows: no O_DIRECT either
    fcntl = None  # type: ignore[assignment]

__all__ = ["Spill", "SpillFile", "drop_pages", "gather_rows", "HeldRows", "known_crc", "mapped_slices", "row_blocks"]

#: bytes a direct spill file gathers before each write (sixteen band files are written at once)
_STAGE = 1 << 20
#: writes that may wait for the writing thread (chunks of signatures: ~8 MB each)
_PENDING = 4
#: signatures a stage of a spilled build holds at once (:class:`HeldRows`): 64 MB (131,072 documents
#: at 128 permutations), or 16 bytes a document of the corpus if that is more (beyond 4M documents:
#: each group costs a pass over the signatures' file, so a bound that did not grow with the corpus
#: would make those passes grow with its square)
HELD_BYTES = 64 << 20
HELD_PER_DOC = 16
#: rows of a spilled array read at a time by :func:`gather_rows` (signatures: 32 MB)
GATHER_ROWS = 65536
#: bytes of a spilled array a writer or a checksum takes at a time (:func:`mapped_slices`)
SLICE_BYTES = 32 << 20


class SpillFile:
    """One unnamed temporary file, written at its end and read at any offset.

    Where the file system allows it, the bytes go past the page cache (``O_DIRECT``) through an
    aligned staging buffer, and are read back the same way. Why: a buffered write makes every page
    of the file a fresh page of the page cache, and on virtual machines whose free memory is handed
    back to the host each is a fault into the hypervisor (docs/building.md has the measured cost).
    Elsewhere (tmpfs, or a refusal) the file is written and read buffered: the same bytes.
    """

    def __init__(self, f: IO[bytes]) -> None:
        self.f = f
        self.fd = f.fileno()
        self.size = 0  # bytes appended
        self.crc = 0  # CRC-32 of the bytes appended
        self.direct = _set_direct(self.fd, True)
        self._stage: Optional[np.ndarray] = None
        self._fill = 0  # bytes waiting in the stage
        self._on_disk = 0  # bytes written to the file (a multiple of _ALIGN while direct)

    def append(self, data: np.ndarray) -> None:
        """Append the bytes of the C-contiguous array ``data``."""
        src = data.reshape(-1).view(np.uint8)
        self.size += src.size
        self.crc = zlib.crc32(src.data, self.crc)  # here, beside sketching: the artifact's checksum needs no read
        if not self.direct:
            _write_all(self.fd, src.data)
            self._on_disk += src.size
            return
        if self._stage is None:
            self._stage = aligned_buffer(_STAGE)
        pos = 0
        while pos < src.size:
            k = min(self._stage.size - self._fill, src.size - pos)
            self._stage[self._fill: self._fill + k] = src[pos: pos + k]
            self._fill += k
            pos += k
            if self._fill == self._stage.size:
                self._put(self._fill)

    def _put(self, nbytes: int) -> None:
        assert self._stage is not None
        try:
            _write_all(self.fd, self._stage.data[:nbytes])
        except OSError as exc:
            if exc.errno != errno.EINVAL or self._on_disk:
                raise
            self.direct = _set_direct(self.fd, False)  # took the flag, not the writes: buffered from here
            _write_all(self.fd, self._stage.data[:nbytes])
        self._on_disk += nbytes
        self._fill = 0

    def finish(self) -> None:
        """Write what waits in the stage (padded to the alignment, then cut to the true size)."""
        if self._fill:
            pad = -(-self._fill // _ALIGN) * _ALIGN
            assert self._stage is not None
            self._stage[self._fill: pad] = 0
            self._put(pad)
            os.ftruncate(self.fd, self.size)
            self._on_disk = self.size
        self._stage = None

    def read_into(self, buf: np.ndarray, offset: int, nbytes: int) -> None:
        """Read ``nbytes`` of the file from ``offset`` into the uint8 buffer ``buf`` (from
        :func:`~diversify.files.aligned_buffer`). While the file is direct, ``offset`` is a multiple
        of the alignment and whole aligned blocks are read, the last up to the end of the file."""
        done = 0
        while done < nbytes:
            want = nbytes - done
            if self.direct:
                want = min(buf.size - done, -(-want // _ALIGN) * _ALIGN)
            got = os.preadv(self.fd, [buf.data[done: done + want]], offset + done)
            if got <= 0:
                raise DiversifyError(f"a temporary file of the build ended early ({offset + done:,} of "
                                     f"{offset + nbytes:,} bytes); was its directory cleaned while the build ran?")
            done += got

    def close(self) -> None:
        self.f.close()


def _set_direct(fd: int, on: bool) -> bool:
    """Turn ``O_DIRECT`` on or off for ``fd``; whether it is on."""
    flag = getattr(os, "O_DIRECT", 0)
    if not flag or fcntl is None:
        return False
    try:
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        fcntl.fcntl(fd, fcntl.F_SETFL, (flags | flag) if on else (flags & ~flag))
    except OSError:
        return False
    return on


def _write_all(fd: int, view) -> None:
    view = memoryview(view)
    while view.nbytes:
        k = os.write(fd, view)
        view = view[k:]


class Spill:
    """Temporary files of one build in ``directory`` (checked when made)."""

    def __init__(self, directory, *, param: str = "spill_dir") -> None:
        path = os.fspath(directory)
        if not os.path.isdir(path):
            raise ConfigError(f"`{param}` must be an existing directory for the build's temporary files; got {path!r}. "
                              "Create it, or pick another directory on a disk with room for ~670 bytes a document "
                              "(~1.2 KB for one with near-duplicates).")
        self.directory = path
        self.param = param
        self._writer: Optional[ThreadPoolExecutor] = None
        self._pending: list[Future] = []
        #: (a spilled array, sorted documents, their rows as an array of their own file): what
        #: :class:`HeldRows` reads instead of the whole array when it can (see there)
        self.kept: Optional[tuple[np.ndarray, np.ndarray, np.ndarray]] = None
        self.new_file().close()  # a directory that refuses files fails here, before any work

    def new_file(self) -> SpillFile:
        try:
            f = tempfile.TemporaryFile(dir=self.directory, prefix=".diversify-spill-")
        except OSError as exc:
            raise ConfigError(f"`{self.param}` must be a directory the build can write temporary files to; "
                              f"{self.directory!r} refused one ({exc.strerror or exc}). Pick another directory.") from exc
        return SpillFile(f)

    def append(self, f: SpillFile, arr: np.ndarray, *, pending: int = _PENDING) -> None:
        """Append ``arr``'s bytes (C order) to ``f``, in a thread of its own (beside sketching).
        Writes keep their order; at most ``pending`` wait at a time."""
        if self._writer is None:
            self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="diversify-spill")
        while len(self._pending) >= max(1, pending):
            self._pending.pop(0).result()
        self._pending.append(self._writer.submit(self._write, f, np.ascontiguousarray(arr)))

    def _write(self, f: SpillFile, data: np.ndarray) -> None:
        try:
            f.append(data)
        except OSError as exc:
            raise DiversifyError(f"the build's temporary files in {self.directory!r} could not be written "
                                 f"({exc.strerror or exc}); they need ~670 bytes a document, ~1.2 KB for one with "
                                 f"near-duplicates. Free space there, or point them at another disk (`{self.param}`).") from exc

    def written(self) -> None:
        """Wait for every write (and raise the first that failed); the writing thread ends."""
        try:
            while self._pending:
                self._pending.pop(0).result()
        finally:
            if self._writer is not None:
                self._writer.shutdown(wait=True, cancel_futures=True)
                self._writer = None

    def _finished(self, f: SpillFile) -> None:
        self.written()
        try:
            f.finish()
        except OSError as exc:
            raise DiversifyError(f"the build's temporary files in {self.directory!r} could not be written "
                                 f"({exc.strerror or exc}). Free space there, or point them at another disk "
                                 f"(`{self.param}`).") from exc

    def mapped(self, f: SpillFile, dtype, shape: tuple) -> np.ndarray:
        """The bytes written to ``f`` as an array of ``shape``, through a private mapping of the file;
        :func:`row_blocks` reads it from the file instead, a block at a time."""
        self._finished(f)
        if int(np.prod(shape)) == 0:
            return np.zeros(shape, dtype=dtype)
        mm = mmap.mmap(f.fd, 0, access=mmap.ACCESS_COPY)
        _FILES[mm] = f  # the file closes (and, unnamed, is gone) with the mapping
        return np.frombuffer(mm, dtype=dtype).reshape(shape)

    def read(self, f: SpillFile, dtype) -> np.ndarray:
        """The whole of ``f`` read into memory as a 1-d array, and the file closed."""
        self._finished(f)
        itemsize = np.dtype(dtype).itemsize
        buf = aligned_buffer(f.size)
        if f.size:
            f.read_into(buf, 0, f.size)
        f.close()
        return buf[: f.size].view(dtype)[: f.size // itemsize]


#: the file behind each mapping Spill.mapped made
_FILES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _mapping_of(arr) -> Optional[mmap.mmap]:
    base = arr
    for _ in range(8):  # views of views: a short chain
        base = getattr(base, "base", None)
        if base is None:
            return None
        if isinstance(base, mmap.mmap):
            return base
        if isinstance(base, memoryview):
            base = base.obj
            if isinstance(base, mmap.mmap):
                return base
    return None


def drop_pages(arr) -> bool:
    """Give back the resident pages of the file mapping ``arr`` is a view of (the whole mapping);
    False, and nothing done, for an array in ordinary memory."""
    mm = _mapping_of(arr)
    if mm is None or not hasattr(mm, "madvise"):
        return False
    mm.madvise(mmap.MADV_DONTNEED)
    return True


def _whole_mapping(arr: np.ndarray, mm: mmap.mmap) -> bool:
    """Whether ``arr`` is all of ``mm``, from its first byte, in C order."""
    return bool(arr.flags.c_contiguous) and arr.nbytes == len(mm) \
        and arr.ctypes.data == np.frombuffer(mm, dtype=np.uint8).ctypes.data


def row_blocks(arr: np.ndarray, rows: int) -> Iterator[tuple[int, np.ndarray]]:
    """``(first row, arr[first: first + rows])`` over the whole of ``arr``. An array a spill mapped
    (:meth:`Spill.mapped`) is read from its file into one reused buffer instead (valid until the
    next block is asked for): the mapping itself is never touched, so no page of it becomes
    resident, and no page of it has to be faulted in (a direct read of the file is also the faster
    pass)."""
    n = arr.shape[0]
    mm = _mapping_of(arr)
    f: Optional[SpillFile] = _FILES.get(mm) if mm is not None else None
    if f is None or mm is None or not _whole_mapping(arr, mm):
        for lo in range(0, n, rows):
            yield lo, arr[lo: lo + rows]
        return
    row_bytes = arr.nbytes // max(n, 1)
    rows = -(-rows // _ALIGN) * _ALIGN  # every block starts at an aligned offset (a direct read needs it)
    raw = aligned_buffer(min(rows, n) * row_bytes)
    for lo in range(0, n, rows):
        k = min(rows, n - lo)
        f.read_into(raw, lo * row_bytes, k * row_bytes)
        yield lo, raw[: k * row_bytes].view(arr.dtype).reshape((k,) + arr.shape[1:])


def known_crc(arr: np.ndarray) -> Optional[int]:
    """The CRC-32 of ``arr``'s bytes when ``arr`` is all of a file a spill mapped (taken as the file
    was written: :meth:`SpillFile.append`), else None."""
    mm = _mapping_of(arr)
    f: Optional[SpillFile] = _FILES.get(mm) if mm is not None else None
    if f is None or mm is None or not _whole_mapping(arr, mm):
        return None
    return f.crc


def mapped_slices(arr: np.ndarray, size: Optional[int] = None) -> Iterator[memoryview]:
    """The bytes of the C-contiguous ``arr``: in one piece, or for an array a spill mapped, in
    blocks of about ``size`` (default :data:`SLICE_BYTES`) bytes read from its file (:func:`row_blocks`), each valid until the next
    is asked for, so that writing or checksumming it makes none of it resident."""
    if _mapping_of(arr) is None or arr.ndim == 0 or arr.shape[0] == 0:
        yield arr.reshape(-1).view(np.uint8).data
        return
    rows = max(1, (SLICE_BYTES if size is None else size) // max(1, arr.nbytes // arr.shape[0]))
    for _, block in row_blocks(arr, rows):
        yield block.reshape(-1).view(np.uint8).data


def gather_rows(arr: np.ndarray, rows: np.ndarray, out: Optional[np.ndarray] = None, *,
                copy: Optional[tuple[np.ndarray, Spill, SpillFile]] = None) -> np.ndarray:
    """``arr[rows]`` for sorted ``rows``, in memory (into ``out`` when given): for an array a spill
    mapped, in one pass over its file a block of :data:`GATHER_ROWS` rows at a time (:func:`row_blocks`).
    ``copy`` (sorted rows, a spill, one of its files): those rows are appended to that file on the
    way (``arr`` must be a spill's mapping).

    Why not ``arr[rows]`` through the mapping: a read at random makes resident the pages around it
    too (a whole page-cache folio; docs/building.md), and every page is a fault.
    """
    if out is None:
        out = np.empty((rows.size,) + arr.shape[1:], dtype=arr.dtype)
    if _mapping_of(arr) is None:
        assert copy is None, "gather_rows copies rows of a spilled array only"
        np.take(arr, rows, axis=0, out=out)
        return out
    more = np.zeros(0, dtype=np.int64) if copy is None else copy[0]
    if rows.size == 0 and more.size == 0:
        return out
    at = got = 0
    for lo, block in row_blocks(arr, GATHER_ROWS):
        hi = lo + block.shape[0]
        end = int(np.searchsorted(rows, hi, side="left"))
        if end > at:
            out[at:end] = block[rows[at:end] - lo]
            at = end
        if copy is not None:
            stop = int(np.searchsorted(more, hi, side="left"))
            if stop > got:
                copy[1].append(copy[2], block[more[got:stop] - lo], pending=1)  # ~10 MB a block in flight
                got = stop
        if at == rows.size and got == more.size:
            break
    return out


class HeldRows:
    """The rows of a spilled array that a stage holds at once, for the documents it compares next
    (the kernels' ``minhash`` and ``sig_rows``): one buffer, reused from group to group, and one
    map from document to row, -1 for a document not held.

    Why groups: holding the rows of every document a stage compares grows with the corpus; a group holds at most
    :data:`HELD_BYTES` (more only for one indivisible unit, a bucket or a component), at the cost
    of one pass per group (:func:`gather_rows`): the first over the whole file, the later ones over
    the rows it kept (``keep`` below), for about the same time and a lower peak than holding every
    compared row (docs/building.md).
    """

    def __init__(self, arr: np.ndarray, spill: Optional[Spill] = None) -> None:
        self.arr = arr
        self.spill = spill
        self.row_bytes = max(1, arr.nbytes // max(1, arr.shape[0]))
        #: rows a group may hold (:data:`HELD_BYTES`, :data:`HELD_PER_DOC`)
        self.budget = max(1, max(HELD_BYTES, HELD_PER_DOC * arr.shape[0]) // self.row_bytes)
        self.sig_rows = np.full(arr.shape[0], -1, dtype=np.int64)
        self._buf = np.zeros((0,) + arr.shape[1:], dtype=arr.dtype)
        self._docs = np.zeros(0, dtype=np.int64)

    def hold(self, docs: np.ndarray, keep: Optional[np.ndarray] = None) -> np.ndarray:
        """Read the rows of the sorted documents ``docs`` (dropping those held before) and return
        the buffer they are in; :attr:`sig_rows` maps each of them to its row.

        ``keep`` (sorted documents, with a spill): the pass also writes their rows to a file of their
        own (:attr:`Spill.kept`), from which any later group of documents among them is read: the
        linking keeps the documents it may compare, and later groups, the cut's too, read
        those rows instead of every signature.
        """
        self.release()
        if docs.size > self._buf.shape[0]:  # room for this group, and a quarter more for the next ones
            self._buf = np.empty((max(docs.size, min(self.budget, docs.size * 5 // 4)),) + self.arr.shape[1:],
                                 dtype=self.arr.dtype)
        out = self._buf[: docs.size]
        kept = self.spill.kept if self.spill is not None else None
        if keep is not None and self.spill is not None and _mapping_of(self.arr) is not None:
            f = self.spill.new_file()
            gather_rows(self.arr, docs, out=out, copy=(keep, self.spill, f))
            self.spill.kept = (self.arr, keep, self.spill.mapped(f, self.arr.dtype, (keep.size,) + self.arr.shape[1:]))
        elif kept is not None and kept[0] is self.arr and _within(docs, kept[1]):
            gather_rows(kept[2], np.searchsorted(kept[1], docs), out=out)
        else:
            gather_rows(self.arr, docs, out=out)
        self.sig_rows[docs] = np.arange(docs.size, dtype=np.int64)
        self._docs = docs
        return self._buf

    def release(self) -> None:
        self.sig_rows[self._docs] = -1
        self._docs = np.zeros(0, dtype=np.int64)


def _within(docs: np.ndarray, among: np.ndarray) -> bool:
    """Whether every one of the sorted ``docs`` is one of the sorted ``among``."""
    if docs.size == 0:
        return True
    at = np.searchsorted(among, docs)
    return bool((at < among.size).all() and (among[np.minimum(at, among.size - 1)] == docs).all())
