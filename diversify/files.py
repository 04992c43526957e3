"""Atomic file replacement: the one way diversify writes a file (artifacts and exports alike).

The content goes to a temp file in the target's directory, is flushed and fsynced, then renamed
over the target; the directory is fsynced so the rename survives a crash. On any failure the temp
file is removed and the target is untouched: a reader sees the old file or the new one, never a
half-written one.
"""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
from collections.abc import Iterator
from typing import IO

from .errors import DiversifyError, InputError

__all__ = ["atomic_replace", "atomic_write_text"]


@contextlib.contextmanager
def atomic_replace(path: str | os.PathLike, *, what: str = "the file", param: str = "path",
                   error: type[DiversifyError] = InputError, suffix: str = "") -> Iterator[IO[bytes]]:
    """Yield a binary file that replaces ``path`` atomically when the block ends without error.

    ``what``, ``param`` and ``error`` shape the message when the directory is missing or not
    writable (the parameter the caller's user passed, and the error class they catch).
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path)) or "."
    if not os.path.isdir(directory):
        raise error(
            f"cannot write {what} to `{param}` {path!r}: the directory {directory!r} does not exist. "
            "Create it first (e.g. mkdir -p) or choose another path."
        )
    try:
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=suffix, dir=directory)
    except OSError as exc:
        raise error(
            f"cannot write {what} to `{param}` {path!r}: {exc.strerror or exc} in directory {directory!r}. "
            "Check its permissions and free space."
        ) from None
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
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
