"""How a failed `diversify` command ends: one stderr line and an exit status.

* exit 2: the command or its input is wrong and running it again will fail again: every
  :class:`~diversify.errors.DiversifyError` (bad input, config, artifact), a usage error, and an
  operating-system error about the path itself (missing, a directory, not permitted ...);
* exit 1: the machine failed a correct command (disk full, file size limit, I/O error, out of
  memory, too many open files): fix the environment and run it again;
* exit 130 on Ctrl-C, 143 on SIGTERM; exit 141 (as a tool killed by SIGPIPE) without a message
  when the reader of stdout went away (``diversify stats x.dvf | head -1``).

Every output is written to a temp file and renamed, so a command that fails or is interrupted
leaves no partial output behind.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator

from ..errors import DiversifyError
from .output import STDOUT

__all__ = ["failure", "writing", "Terminated"]

# errors that say the path given is wrong: the same command fails again until it is changed
_PATH_ERRNOS = frozenset(getattr(errno, name) for name in (
    "ENOENT", "ENOTDIR", "EISDIR", "ENAMETOOLONG", "ELOOP", "EACCES", "EPERM", "EEXIST", "ENXIO", "ENODEV",
    "EROFS", "EINVAL", "ETXTBSY", "ENOTEMPTY") if hasattr(errno, name))

_HINTS = {
    "ENOSPC": "free some space (or write elsewhere) and run it again",
    "EDQUOT": "the disk quota is used up; free some space (or write elsewhere) and run it again",
    "EFBIG": "the file is larger than this process or file system allows (see `ulimit -f`); raise the limit or "
             "write elsewhere",
    "EIO": "the device reported an I/O error; check the disk",
    "EMFILE": "too many open files (see `ulimit -n`)",
    "ENFILE": "too many open files on the system",
    "ENOMEM": "out of memory",
}


class Terminated(BaseException):
    """SIGTERM arrived: unwinds like Ctrl-C, so temp files of an unfinished write are removed."""


def _oserror_of(exc: BaseException) -> OSError | None:
    """The operating-system error behind ``exc`` (itself, its cause or its context), if any."""
    seen = 0
    cur: BaseException | None = exc
    while cur is not None and seen < 8:
        if isinstance(cur, OSError) and cur.errno is not None and not isinstance(cur, DiversifyError):
            return cur
        cur = cur.__cause__ or cur.__context__
        seen += 1
    return None


def _environment(exc: BaseException) -> bool:
    os_err = _oserror_of(exc)
    return os_err is not None and os_err.errno not in _PATH_ERRNOS


def describe_oserror(exc: OSError) -> str:
    name = errno.errorcode.get(exc.errno or 0, "")
    to_stdout = exc.filename == STDOUT
    where = "cannot write to stdout: " if to_stdout else (f"{exc.filename!r}: " if exc.filename is not None else "")
    text = f"{where}{exc.strerror or exc}" + (f" [{name}]" if name else "")
    hint = _HINTS.get(name)
    if not hint:
        return f"{text}."
    return f"{text}; {hint}." + ("" if to_stdout else " Nothing was written (outputs are replaced atomically).")


def failure(exc: BaseException) -> tuple[int, str]:
    """(exit status, message) of the exception that ended a command."""
    if isinstance(exc, DiversifyError):
        return (1 if _environment(exc) else 2), str(exc)
    if isinstance(exc, MemoryError):
        return 1, ("out of memory (MemoryError). Give the process more memory, or use --stream and a smaller "
                   "--chunk-size.")
    if isinstance(exc, OSError):
        return (2 if exc.errno in _PATH_ERRNOS else 1), describe_oserror(exc)
    return 1, (f"internal error, please report it: {type(exc).__name__}: {exc} "
               "(set DIVERSIFY_TRACEBACK=1 to see where it happened)")


@contextlib.contextmanager
def writing(path: str | os.PathLike) -> Iterator[None]:
    """Name ``path`` in an operating-system error raised while it is written.

    ``write()`` names no file, and a failed rename names the temp file; the user gave ``path``.
    """
    try:
        yield
    except OSError as exc:
        if isinstance(exc, DiversifyError) or exc.errno is None:
            raise
        raise OSError(exc.errno, exc.strerror, os.fspath(path)) from exc
