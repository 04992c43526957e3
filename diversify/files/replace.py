"""Atomic replacement of a file through a locked temp file, and the removal of the temp files of
killed writers (:func:`atomic_replace`, :func:`remove_orphaned_temps`); see :mod:`diversify.files`."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import logging
import os
import stat
from collections.abc import Iterator
from typing import IO, Optional

from ..errors import DiversifyError, InputError
from .lock import DEFAULT_LOCK_TIMEOUT, _lock_path, fcntl, file_lock
from .paths import TEMP_PREFIX, FileIdentity, _check_unchanged, check_output_path

__all__ = ["write_guard", "atomic_replace", "atomic_write_text", "remove_orphaned_temps"]

log = logging.getLogger("diversify")


def _temp_tag(base: str) -> str:
    return hashlib.blake2b(os.fsencode(base), digest_size=4).hexdigest()


def remove_orphaned_temps(path: str | os.PathLike, suffix: str = "") -> list[str]:
    """Remove the temp files of killed writers of ``path``; return their names.

    Call it holding :func:`file_lock` of ``path``. Only names ``.tmp-<tag of path>-*<suffix>`` in
    the target's directory are considered, and of those only regular files on which no process
    holds an ``flock`` (every writer locks its temp file until it is renamed or removed).
    """
    if fcntl is None:  # pragma: no cover - Windows
        return []
    directory, base, _ = _lock_path(os.fspath(path))
    start = f"{TEMP_PREFIX}{_temp_tag(base)}-"
    removed: list[str] = []
    try:
        names = [e.name for e in os.scandir(directory) if e.name.startswith(start) and e.name.endswith(suffix)]
    except OSError:
        return removed
    for name in names:
        full = os.path.join(directory, name)
        try:
            fd = os.open(full, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            continue
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                continue
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises if a live writer holds it
            if os.path.samestat(st, os.stat(full, follow_symlinks=False)):
                os.unlink(full)
                removed.append(name)
        except OSError:
            continue
        finally:
            os.close(fd)
    if removed:
        log.info("removed %d orphaned temp file(s) of killed writers next to %r: %s", len(removed), os.fspath(path),
                 ", ".join(removed))
    return removed


def _create_temp(directory: str, base: str, suffix: str, like: Optional[os.stat_result]) -> tuple[int, str]:
    """A new temp file for ``base``, locked, with the target's permission bits (or 0666 & ~umask)."""
    tag = _temp_tag(base)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = os.path.join(directory, f"{TEMP_PREFIX}{tag}-{os.urandom(4).hex()}{suffix}")
        try:
            fd = os.open(tmp, flags, 0o666)  # the kernel applies the umask
        except FileExistsError:
            continue
        break
    else:  # pragma: no cover - 100 collisions of 32 random bits
        raise FileExistsError(errno.EEXIST, "no free temp file name", directory)
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        pass  # a file system without locks: the temp is then never removed as an orphan (it stays tagged)
    if like is not None:  # replacing a file: keep its permissions (and group) rather than widen or narrow them
        with contextlib.suppress(OSError):
            os.fchown(fd, -1, like.st_gid)
        with contextlib.suppress(OSError):
            os.fchmod(fd, stat.S_IMODE(like.st_mode) & 0o777)
    return fd, tmp


@contextlib.contextmanager
def write_guard(path: str | os.PathLike, *, what: str = "the file", param: str = "path",
                error: type[DiversifyError] = InputError, origin: Optional[FileIdentity] = None,
                lock_timeout: Optional[float] = DEFAULT_LOCK_TIMEOUT) -> Iterator[bool]:
    """The checks and the lock every write of ``path`` runs under; yields whether the lock is real.

    :func:`check_output_path`, then :func:`file_lock`, then the path is checked again (no other
    writer can race now) and, with ``origin``, compared with it (:class:`WriteConflictError` if
    ``path`` is the file ``origin`` was taken from and it has changed since).
    """
    spath = check_output_path(path, param=param, what=what, error=error)
    with file_lock(spath, timeout=lock_timeout, what=what, param=param, error=error) as locked:
        check_output_path(spath, param=param, what=what, error=error)
        _check_unchanged(spath, origin, what)
        yield locked


@contextlib.contextmanager
def atomic_replace(path: str | os.PathLike, *, what: str = "the file", param: str = "path",
                   error: type[DiversifyError] = InputError, suffix: str = "", origin: Optional[FileIdentity] = None,
                   lock_timeout: Optional[float] = DEFAULT_LOCK_TIMEOUT) -> Iterator[IO[bytes]]:
    """Yield a binary file that replaces ``path`` atomically when the block ends without error.

    Runs under :func:`write_guard` (the output rule, the writer lock, the compare and swap with
    ``origin``); ``what``, ``param`` and ``error`` shape its messages. Orphaned temp files of
    ``path`` are removed before the new one is created.
    """
    spath = os.fspath(path)
    directory, base, _ = _lock_path(spath)
    with write_guard(spath, what=what, param=param, error=error, origin=origin, lock_timeout=lock_timeout) as locked:
        if locked:
            remove_orphaned_temps(spath, suffix)
        try:
            like: Optional[os.stat_result] = os.stat(spath, follow_symlinks=False)
        except OSError:
            like = None
        try:
            fd, tmp = _create_temp(directory, base, suffix, like)
        except OSError as exc:
            raise error(
                f"cannot write {what} to `{param}` {spath!r}: {exc.strerror or exc} in directory {directory!r}. "
                "Check its permissions and free space."
            ) from None
        try:
            with os.fdopen(fd, "wb") as f:
                yield f
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, spath)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        _fsync_dir(directory)


def atomic_write_text(path: str | os.PathLike, write, **kwargs) -> None:
    """Call ``write(text_file)`` (UTF-8, no newline translation) and replace ``path`` atomically."""
    with atomic_replace(path, **kwargs) as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8", newline="")
        write(text)
        text.flush()
        text.detach()


def _fsync_dir(directory: str) -> None:
    try:  # make the rename durable; not possible on every platform
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass
