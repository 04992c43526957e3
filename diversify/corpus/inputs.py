"""Opening corpus inputs safely: the format a path implies, and a reader's file checked before
anything is read (named pipes, devices, sockets and directories are refused: a FIFO would block
forever, ``/dev/zero`` never ends)."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import IO

from ..errors import InputError

__all__ = ["FORMATS", "STDIN", "STDIN_FORMATS", "detect_format", "open_input", "check_input_file", "dir_files"]

FORMATS = ("jsonl", "csv", "parquet", "dir")
STDIN = "-"
STDIN_FORMATS = ("jsonl", "csv")


def detect_format(path: str, *, param: str = "input") -> str:
    """The format implied by ``path``'s name (or ``"dir"`` for a directory)."""
    if path == STDIN and param == "input":
        raise InputError(f"`{param}` '-' (stdin) has no name to tell its format from. Pass --format jsonl or "
                         "--format csv.")
    p = Path(path)
    if p.is_dir():
        return "dir"
    suffix = "".join(p.suffixes[-2:]).lower() if p.suffix.lower() == ".gz" else p.suffix.lower()
    for fmt, exts in (("jsonl", (".jsonl", ".ndjson", ".json")), ("csv", (".csv", ".tsv")), ("parquet", (".parquet", ".pq"))):
        if suffix in exts:
            return fmt
    raise InputError(
        f"`{param}` format could not be told from its name {path!r} (expected .jsonl, .csv, .parquet"
        f"{' or a directory' if param == 'input' else ''}). Pass --format "
        f"{'jsonl|csv|parquet|dir' if param == 'input' else 'jsonl|csv|parquet'}."
    )


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def open_input(path: str, param: str, *, stdin: bool = False) -> IO[bytes]:
    """Open an input file for reading (binary): a regular file, or ``-`` for stdin when ``stdin``.

    The file is opened with ``O_NONBLOCK`` and checked with ``fstat`` before anything is read, so
    a named pipe is refused instead of blocking, and a device or directory is refused instead of
    read (``/dev/zero`` would never end). Errors name ``param`` (the flag or argument).
    """
    if path == STDIN:
        if stdin:
            return sys.stdin.buffer
        raise InputError(f"`{param}` cannot be '-' (stdin): only the INPUT of build/add is read from stdin. "
                         "Pass a file path.")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except OSError as exc:
        what = "does not exist" if isinstance(exc, FileNotFoundError) else f"cannot be opened ({exc.strerror})"
        raise InputError(f"`{param}` path {path!r} {what}. Check the path.") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            hint = (" To stream from a pipe, feed it on stdin and pass '-' as INPUT (e.g. `zcat c.jsonl.gz | "
                    "diversify build - --format jsonl -o c.dvf`)." if stdin else "")
            if stat.S_ISDIR(mode):
                hint = " A file is expected here" + (" (a directory is read with --format dir)." if stdin else ".")
            raise InputError(f"`{param}` {path!r} is {_kind(mode)}, not a regular file; inputs are read from "
                             f"regular files.{hint}")
        if hasattr(os, "O_NONBLOCK"):
            import fcntl

            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def check_input_file(path: str, param: str) -> None:
    """Refuse ``path`` unless it is a regular file (for readers that take a path, such as ``np.load``)."""
    open_input(path, param).close()


def dir_files(path) -> list[Path]:
    """The documents of a directory input (``--format dir``), in reading order."""
    return sorted(p for p in Path(path).rglob("*") if p.is_file() and not p.name.startswith("."))
