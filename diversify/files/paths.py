"""What a file is (:class:`FileIdentity`, to tell that it changed) and which paths diversify may
write (:func:`check_output_path`); see :mod:`diversify.files`."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import stat
from collections.abc import Iterable
from typing import Optional

from ..errors import DiversifyError, InputError, WriteConflictError

__all__ = ["FileIdentity", "file_identity", "check_output_path", "TEMP_PREFIX", "LOCK_SUFFIX"]

TEMP_PREFIX = ".tmp-"
LOCK_SUFFIX = ".lock"
_HEAD_BYTES = 4096  # hashed into FileIdentity: an artifact's prefix and header checksum live here


# --------------------------------------------------------------------------- file identity


@dataclasses.dataclass(frozen=True)
class FileIdentity:
    """One version of a file: where it was read from, its inode, size, times and first bytes.

    Writers replace files by rename (a new inode); an in-place change moves ``mtime_ns``; an inode
    number reused by a later file still differs in its times or ``head`` (BLAKE2b of the first
    4 KiB, which for an artifact holds the header checksum).
    """

    path: str  # os.path.realpath of the path it was read from
    dev: int
    ino: int
    size: int
    mtime_ns: int
    ctime_ns: int
    head: str

    def same_version(self, other: Optional[FileIdentity]) -> bool:
        """True if ``other`` is the same version of the same file (wherever it was read from)."""
        return other is not None and dataclasses.astuple(self)[1:] == dataclasses.astuple(other)[1:]

    def names(self, path: str | os.PathLike) -> bool:
        """True if ``path`` is the file this identity was taken from (same real path, or same inode now)."""
        if os.path.realpath(os.fspath(path)) == self.path:
            return True
        try:
            st = os.stat(path)
        except OSError:
            return False
        return (st.st_dev, st.st_ino) == (self.dev, self.ino)


def file_identity(path: str | os.PathLike) -> Optional[FileIdentity]:
    """The :class:`FileIdentity` of the regular file at ``path`` now; None if there is none."""
    spath = os.fspath(path)
    try:
        fd = os.open(spath, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        head = hashlib.blake2b(os.pread(fd, _HEAD_BYTES, 0), digest_size=16).hexdigest()
    except OSError:
        return None
    finally:
        os.close(fd)
    return FileIdentity(os.path.realpath(spath), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, head)


def _check_unchanged(path: str, origin: Optional[FileIdentity], what: str) -> None:
    """Compare and swap: if ``origin`` names ``path``, the file there must still be that version."""
    if origin is None or not origin.names(path):
        return
    now = file_identity(path)
    if origin.same_version(now):
        return
    change = "it no longer exists" if now is None else (
        f"it is now {now.size:,} bytes, modified at {now.mtime_ns / 1e9:.3f}" if now.ino == origin.ino
        else "another file was put there (a new inode)")
    raise WriteConflictError(
        f"cannot write {what} to {path!r}: it was read from that file, which has changed since ({change}); writing "
        "would silently lose the other writer's update. Read the file again and redo the change (e.g. run "
        "`diversify add` again, which holds the lock from read to write), or pass overwrite=True to replace it anyway."
    )


# --------------------------------------------------------------------------- output path rule


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISDIR, "a directory"), (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return name
    return "not a regular file"


def check_output_path(path: str | os.PathLike, *, param: str = "path", what: str = "the file",
                      error: type[DiversifyError] = InputError,
                      inputs: Iterable[tuple[str, Optional[str | os.PathLike]]] = ()) -> str:
    """Refuse an output path that diversify must not write; return it as a str.

    Parameters
    ----------
    path : the target
    param, what, error : the parameter the user passed (``"-o"``), what is written, the error class
    inputs : (parameter, path) pairs the same command reads; the target must not be any of them

    Raises
    ------
    error
        The target is a symlink, a device, a FIFO, a socket or a directory; its directory does not
        exist or is not writable; or it is the same file as one of ``inputs``.
    """
    spath = os.fspath(path)
    if not spath:
        raise error(f"`{param}` must be a file path; got an empty string.")
    head = f"cannot write {what} to `{param}` {spath!r}"
    try:
        st: Optional[os.stat_result] = os.lstat(spath)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise error(f"{head}: {exc.strerror or exc}. Check the path.") from None
    except ValueError as exc:  # a NUL byte, or a lone surrogate the file system encoding cannot write
        raise error(f"{head}: a file name cannot hold it ({exc}). Remove the NUL or unencodable character from "
                    "the path.") from None
    if st is not None and stat.S_ISLNK(st.st_mode):
        try:
            dest = os.readlink(spath)
        except OSError:
            dest = "?"
        try:
            to = _kind(os.stat(spath).st_mode)
            to = "a regular file" if to == "not a regular file" else to
        except OSError:
            to = "nothing (dangling)"
        raise error(
            f"{head}: it is a symbolic link (to {dest!r}, {to}). diversify never writes through a link (a link in a "
            "shared directory could redirect the write) nor replaces one. Pass the real target path, or remove the link."
        )
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise error(
            f"{head}: it is {_kind(st.st_mode)}, not a regular file; writing would replace it. Choose a file path "
            "(a new name or an existing regular file)."
        )
    directory = os.path.dirname(os.path.abspath(spath)) or "."
    if not os.path.isdir(directory):
        raise error(f"{head}: the directory {directory!r} does not exist. Create it first (e.g. mkdir -p) or choose "
                    "another path.")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise error(f"{head}: the directory {directory!r} is not writable by this user (a temp file and a lock file "
                    "are created there). Check its permissions or choose another path.")
    if st is not None:
        for iparam, ipath in inputs:
            if ipath is None:
                continue
            try:
                same = os.path.samefile(spath, ipath)
            except OSError:
                continue
            if same:
                raise error(f"{head}: it is the same file as `{iparam}` {os.fspath(ipath)!r}, which this command "
                            "reads; writing would destroy the input. Write to another path.")
    return spath
