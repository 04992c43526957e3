"""How diversify writes a file (artifacts, exports, plots alike): the one home of the output-path rules.

* **Output path rule** (:func:`check_output_path`): the target is a regular file or does not exist
  yet. Devices, FIFOs, sockets and directories are refused, and so is a symbolic link, dangling or
  not: the write never follows a link (a link planted in a shared directory would otherwise
  redirect it, e.g. onto a system file when run as root) and never silently turns a link into a
  regular file. Links in the directory part of the path are the operator's own and are used as
  given. The target's directory must exist and be writable, and the target must not be one of the
  command's inputs (the same file by inode: through another spelling, a hardlink or a symlink).
* **Atomic replace** (:func:`atomic_replace`): the content goes to a temp file in the target's
  directory, is flushed and fsynced, then renamed over the target; the directory is fsynced so the
  rename survives a crash. On any failure the temp file is removed and the target is untouched: a
  reader sees the old file or the new one, never a half-written one. A new file gets
  ``0666 & ~umask`` (0644 under the usual umask 022); a file that replaces an existing target keeps
  the target's permission bits (and its group where the writer may set it).
* **One writer at a time** (:func:`file_lock`): every write of a path holds an advisory ``flock``
  on the sidecar ``<name>.lock`` next to it. The kernel releases it when the holder exits, however
  it exits (SIGKILL included), so a lock that is held means a live process; waiting is bounded by
  a timeout that ends in :class:`~diversify.errors.LockTimeoutError` naming the holder.
* **Compare and swap** (``origin=``): a result derived from one version of a file (``add``)
  carries its :class:`FileIdentity`; writing it back to that file while holding the lock fails
  with :class:`~diversify.errors.WriteConflictError` if the file changed since it was read, so an
  update is never lost silently.
* **Orphaned temp files**: a writer that is SIGKILLed leaves its temp file
  ``.tmp-TTTTTTTT-XXXXXXXX<suffix>`` (``T``: a tag of the target's name). The next writer of the
  same target, holding the target's lock, removes the temp files with that target's tag that no
  live writer holds: every writer holds an ``flock`` on its temp file while writing it, so a tagged
  temp file that can be locked has no writer. Files of any other name are never touched.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterable
from typing import IO, Union

from .lock import DEFAULT_LOCK_TIMEOUT, fcntl, file_lock
from .paths import LOCK_SUFFIX, TEMP_PREFIX, FileIdentity, check_output_path, file_identity
from .replace import atomic_replace, atomic_write_text, remove_orphaned_temps, write_guard

__all__ = ["DEFAULT_LOCK_TIMEOUT", "FileIdentity", "file_identity", "check_output_path", "file_lock",
           "write_guard", "atomic_replace", "atomic_write_text", "remove_orphaned_temps",
           "TEMP_PREFIX", "LOCK_SUFFIX", "DIRECT_MIN_BYTES", "DIRECT_ALIGN", "aligned_buffer", "write_pieces"]


# ----------------------------------------------------------------------------- large writes
# (here rather than in a part of their own: callers and tests tune DIRECT_MIN_BYTES on this module)

#: writes of at least this many bytes bypass the page cache where the file system allows it
DIRECT_MIN_BYTES = 32 << 20
DIRECT_ALIGN = 4096  # O_DIRECT: buffer address, file offset and length in multiples of the block size
_DIRECT_BLOCK = 8 << 20  # the staging buffer: the pieces are copied through it, one block a write


def aligned_buffer(nbytes: int):
    """A numpy uint8 buffer of ``nbytes`` rounded up to :data:`DIRECT_ALIGN`, at an address it
    divides (what ``O_DIRECT`` needs of the memory it reads or writes)."""
    import numpy as np

    size = -(-max(nbytes, 1) // DIRECT_ALIGN) * DIRECT_ALIGN
    raw = np.empty(size + DIRECT_ALIGN, dtype=np.uint8)
    start = -raw.ctypes.data % DIRECT_ALIGN
    return raw[start : start + size]


def write_pieces(f: IO[bytes], pieces: Union[list, Callable[[], Iterable]], total: int) -> None:
    """Write the byte buffers ``pieces`` (``total`` bytes in all) to the start of the new, empty file ``f``.

    ``pieces`` is a list, or a function that gives them in order each time it is called (a buffer
    it yields may be reused for the next one: each is written before the next is asked for).

    A file of at least :data:`DIRECT_MIN_BYTES` goes past the page cache (``O_DIRECT``, Linux)
    through an aligned staging buffer, and is then truncated to ``total``: the same bytes. Why:
    buffered, every page of a new file is first a fresh page of the page cache, and on virtual
    machines whose free memory is handed back to the host a fresh page is a fault into the
    hypervisor (docs/building.md has the measured cost). A file system that refuses ``O_DIRECT``
    (e.g. tmpfs on older kernels) gets the buffered writes.
    """
    def given() -> Iterable:
        return pieces() if callable(pieces) else pieces

    if total >= DIRECT_MIN_BYTES and _write_direct(f, given(), total):
        return
    for piece in given():  # afresh: a refused direct write may have taken some pieces already
        f.write(piece)


def _write_direct(f: IO[bytes], pieces: Iterable, total: int) -> bool:
    """:func:`write_pieces` with ``O_DIRECT``; False (nothing written) where the file refuses it."""
    o_direct = getattr(os, "O_DIRECT", 0)
    if not o_direct or fcntl is None:
        return False
    import numpy as np

    f.flush()
    fd = f.fileno()
    try:  # a pipe or a socket cannot seek: not a file to write past the page cache
        if not stat.S_ISREG(os.fstat(fd).st_mode) or os.lseek(fd, 0, os.SEEK_CUR) != 0:
            return False
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        fcntl.fcntl(fd, fcntl.F_SETFL, flags | o_direct)
    except OSError:
        return False
    block = aligned_buffer(_DIRECT_BLOCK)
    done = 0  # bytes of the file written

    def put(n: int) -> None:
        nonlocal done
        view = block.data[:n]
        while view:
            k = os.write(fd, view)
            view = view[k:]
            done += k

    try:
        fill = 0
        for piece in pieces:
            src = np.frombuffer(piece, dtype=np.uint8)
            pos = 0
            while pos < src.size:
                n = min(_DIRECT_BLOCK - fill, src.size - pos)
                block[fill : fill + n] = src[pos : pos + n]
                fill += n
                pos += n
                if fill == _DIRECT_BLOCK:
                    put(fill)
                    fill = 0
        if fill:
            padded = -(-fill // DIRECT_ALIGN) * DIRECT_ALIGN
            block[fill:padded] = 0
            put(padded)
    except OSError as exc:
        if exc.errno != errno.EINVAL or done:
            raise
        return False  # the file system took the flag but not the writes; nothing was written
    finally:
        fcntl.fcntl(fd, fcntl.F_SETFL, flags)
    os.ftruncate(fd, total)
    os.lseek(fd, total, os.SEEK_SET)
    return True
