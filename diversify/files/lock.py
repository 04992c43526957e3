"""The writer lock of a path (:func:`file_lock`): an ``flock`` on the sidecar ``<name>.lock``; see
:mod:`diversify.files`."""

from __future__ import annotations

import contextlib
import errno
import logging
import math
import os
import socket
import stat
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Optional

from ..errors import ConfigError, DiversifyError, DiversifyWarning, InputError, LockTimeoutError
from .paths import LOCK_SUFFIX

try:  # POSIX; elsewhere writers are not serialized (see docs/security.md)
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["DEFAULT_LOCK_TIMEOUT", "file_lock"]

log = logging.getLogger("diversify")

#: seconds a writer waits for another writer of the same path before it gives up. A lock is only
#: ever held by a live process (the kernel drops it when its holder dies), typically for the
#: seconds of a save or the minutes of a large `diversify add`.
DEFAULT_LOCK_TIMEOUT = 600.0

_held = threading.local()  # lock path -> [fd, depth, pid] of the locks this thread holds
_no_lock_warned: set[str] = set()


def _lock_path(path: str) -> tuple[str, str, str]:
    """(directory, base name, lock file path); the directory with its links resolved."""
    directory = os.path.realpath(os.path.dirname(os.path.abspath(path)) or ".")
    base = os.path.basename(path)
    return directory, base, os.path.join(directory, base + LOCK_SUFFIX)


def _holder(lock_path: str) -> str:
    try:
        with open(lock_path, encoding="utf-8", errors="replace") as f:
            text = f.read(200).split()
    except OSError:
        text = []
    if len(text) >= 2 and text[0].isdigit():
        return f"pid {text[0]} on host {text[1]}"
    return "a process that has not recorded its pid yet"


def _check_timeout(timeout: Optional[float], param: str) -> Optional[float]:
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or math.isnan(timeout) or timeout < 0:
        raise ConfigError(f"`{param}` must be a number of seconds >= 0 (0: do not wait; None: wait as long as it "
                          f"takes); got {timeout!r}. The default {DEFAULT_LOCK_TIMEOUT:g} suits most writes.")
    return float(timeout)


@contextlib.contextmanager
def file_lock(path: str | os.PathLike, *, timeout: Optional[float] = DEFAULT_LOCK_TIMEOUT, what: str = "the file",
              param: str = "path", timeout_param: str = "lock_timeout", error: type[DiversifyError] = InputError,
              on_wait: Optional[Callable[[str], None]] = None) -> Iterator[bool]:
    """Hold the writer lock of ``path`` (an ``flock`` on ``<path>.lock``) for the block.

    Every diversify writer of ``path`` takes it, so holding it across read -> modify -> write makes
    the whole update exclusive: ``with file_lock(p): res = diversify.add(p, ...); res.save(p)``.
    Re-entrant within a thread. The lock file is removed on release. Yields True, or False where
    the file system does not support locks (then writes are not serialized; one warning).

    Raises
    ------
    LockTimeoutError
        Another live process held the lock for longer than ``timeout`` seconds.
    ConfigError
        ``timeout`` is negative or not a number.
    """
    timeout = _check_timeout(timeout, timeout_param)
    spath = os.fspath(path)
    directory, _, lock_path = _lock_path(spath)
    held = _held.__dict__.setdefault("locks", {})
    entry = held.get(lock_path)
    if entry is not None and entry[2] == os.getpid():  # not after a fork: the child does not own it
        entry[1] += 1
        try:
            yield True
        finally:
            entry[1] -= 1
        return
    if fcntl is None:  # pragma: no cover - Windows
        yield False
        return
    fd = _acquire(spath, directory, lock_path, timeout=timeout, what=what, param=param,
                  timeout_param=timeout_param, error=error, on_wait=on_wait)
    if fd is None:
        yield False
        return
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {socket.gethostname()}\n".encode(), 0)
    except OSError:
        pass  # only informs the message of a waiting writer
    held[lock_path] = [fd, 1, os.getpid()]
    try:
        yield True
    finally:
        del held[lock_path]
        try:
            os.unlink(lock_path)
        except OSError:
            pass
        os.close(fd)


def _acquire(spath: str, directory: str, lock_path: str, *, timeout: Optional[float], what: str, param: str,
             timeout_param: str, error: type[DiversifyError], on_wait: Optional[Callable[[str], None]]) -> Optional[int]:
    """Open and ``flock`` the lock file of :func:`file_lock`, waiting up to ``timeout``: its descriptor,
    or None where the file system does not support locks."""
    deadline = None if timeout is None else time.monotonic() + timeout
    delay = 0.005
    waited = False
    started = time.monotonic()
    fd: Optional[int] = None
    while True:
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
                         | getattr(os, "O_CLOEXEC", 0), 0o666)
        except OSError as exc:
            raise error(f"cannot write {what} to `{param}` {spath!r}: cannot create its lock file {lock_path!r} "
                        f"({exc.strerror or exc}). Check that the directory is writable and that the lock path is "
                        "not a link or a directory.") from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise error(f"cannot write {what} to `{param}` {spath!r}: its lock file {lock_path!r} is not a regular "
                            "file. Remove it.")
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            if deadline is not None and time.monotonic() >= deadline:
                raise LockTimeoutError(
                    f"cannot write {what} to `{param}` {spath!r}: another writer holds its lock {lock_path!r} "
                    f"({_holder(lock_path)}) and did not release it within {timeout:g} s. Wait for that process to "
                    f"finish and retry, or raise `{timeout_param}`. The lock is released by the system when its holder "
                    "exits (even if killed), so a held lock means that process is still running."
                ) from None
            if not waited and time.monotonic() - started >= 1.0:  # short waits stay quiet
                waited = True
                note = f"waiting for the lock {lock_path!r} held by {_holder(lock_path)}" + (
                    f" (up to {timeout:g} s)" if timeout is not None else "")
                log.info("%s", note)
                if on_wait is not None:
                    on_wait(note)
            time.sleep(delay if deadline is None else max(0.0, min(delay, deadline - time.monotonic())))
            delay = min(delay * 2, 0.1)
            continue
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                if directory not in _no_lock_warned:
                    _no_lock_warned.add(directory)
                    warnings.warn(f"file locks are not supported in {directory!r} ({exc.strerror}); concurrent "
                                  "writers of the same file are not serialized there.", DiversifyWarning, stacklevel=5)
                return None
            raise
        except BaseException:
            os.close(fd)
            raise
        try:  # the holder removes the lock file while holding it: a lock on a removed file is not the lock
            same = os.path.samestat(os.fstat(fd), os.stat(lock_path, follow_symlinks=False))
        except OSError:
            same = False
        if same:
            return fd
        os.close(fd)
