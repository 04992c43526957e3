"""What the `diversify` command prints: escaped text on stdout, one line per failure on stderr.

Ids, metadata, column names and messages can come from files an operator did not write (an
artifact from a download, a corpus from a crawl). Printed raw, an ESC sequence in them could
rewrite the terminal (move the cursor, change the title, hide text) and a CR, a newline or a
bidi override (U+202E) could make one line look like another. Every string the command prints
goes through :func:`printable` first.
"""

from __future__ import annotations

import os
import sys
from typing import TextIO

__all__ = ["printable", "say", "say_line", "json_text", "warn_line", "error_line", "note_line", "STDOUT"]

STDOUT = "<stdout>"  # the file name of an error writing stdout


def _escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def printable(value: object, *, backslash: bool = True) -> str:
    r"""``str(value)`` with every character a terminal could act on written as a Python escape.

    Escaped: control characters (C0 such as ESC, BEL, CR, NUL; DEL; C1), format characters
    (bidi overrides U+202A-U+202E and U+2066-U+2069, zero-width joiners), line and paragraph
    separators, lone surrogates and every other character ``str.isprintable`` rejects, except the
    plain space. ``"\x1b[31mred"`` prints as ``\x1b[31mred``; a tab prints as ``\x09``.

    ``backslash=True`` (for a value: an id, a metadata entry) also doubles a backslash, so the
    escaped text is unambiguous (``a\b`` prints as ``a\\b``). ``backslash=False`` is for a line
    that is already made of escaped values, such as an error message built with ``!r``: it keeps
    backslashes and only removes what is still unsafe.
    """
    s = value if isinstance(value, str) else str(value)
    if s.isprintable() and (not backslash or "\\" not in s):
        return s
    out = []
    for ch in s:
        if ch == "\\":
            out.append("\\\\" if backslash else ch)
        elif ch == " " or ch.isprintable():
            out.append(ch)
        else:
            out.append(_escape(ch))
    return "".join(out)


def say(text: object = "", *, file: TextIO | None = None) -> None:
    """Print ``text`` (lines joined by ``\\n``) to stdout with each line escaped (backslashes kept).

    Only for text whose line breaks are the command's own; a line that carries a value read from a
    file (an artifact header, an id, a metadata entry) is printed with :func:`say_line`.
    """
    stream = sys.stdout if file is None else file
    out = "\n".join(printable(line, backslash=False) for line in str(text).split("\n")) + "\n"
    try:
        _write_all(stream, out)
    except BrokenPipeError:
        raise
    except OSError as exc:  # e.g. stdout redirected to a full disk: say so, not which write() failed
        raise OSError(exc.errno, exc.strerror, STDOUT) from exc


def say_line(text: object = "", *, file: TextIO | None = None) -> None:
    """Print ``text`` as exactly ONE line of stdout: every line break inside it (``\\n``, ``\\r``,
    U+2028, U+2029, U+0085, vertical tab, form feed) is escaped like any other control character,
    so a value read from an artifact or an index cannot start a line of its own. Values in it
    should also go through :func:`printable` (which doubles their backslashes)."""
    stream = sys.stdout if file is None else file
    try:
        _write_all(stream, printable(text, backslash=False) + "\n")
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, STDOUT) from exc


def _json_escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def json_text(encoded: str) -> str:
    """JSON text (from an encoder with ``ensure_ascii=False``) with every character :func:`printable`
    would escape written as a JSON ``\\uXXXX`` escape instead: still valid JSON that decodes to the
    same values, and one line that a terminal shows as it is (C1 controls, U+2028/U+2029, bidi
    overrides, lone surrogates... are legal raw in JSON strings; the encoder only escapes C0)."""
    if encoded.isprintable():
        return encoded
    return "".join(ch if ch == " " or ch.isprintable() else _json_escape(ch) for ch in encoded)


def _write_all(stream: TextIO, text: str) -> None:
    """Write ``text`` whole or raise: a buffered text stream drops the rest of a write that a closed
    pipe cut short, without an error, so a file descriptor is written with ``os.write`` until done."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):  # not a real file (a test's capture, a StringIO)
        stream.write(text)
        return
    stream.flush()  # what print() wrote before stays in order
    data = memoryview(text.encode(stream.encoding or "utf-8", getattr(stream, "errors", None) or "strict"))
    while data:
        data = data[os.write(fd, data):]


def warn_line(prog: str, message: object) -> None:
    """One ``PROG: warning: MESSAGE`` line on stderr (``prog`` is ``diversify CMD``; escaped, one line)."""
    _stderr_line(f"{prog}: warning: {message}")


def error_line(prog: str, message: object) -> None:
    """One ``PROG: error: MESSAGE`` line on stderr (``prog`` is ``diversify CMD``; escaped, one line)."""
    _stderr_line(f"{prog}: error: {message}")


def note_line(prog: str, message: object) -> None:
    """One ``PROG: MESSAGE`` line on stderr, for what a command reports beside its output."""
    _stderr_line(f"{prog}: {message}")


def _stderr_line(line: str) -> None:
    text = " ".join(line.split("\n"))  # messages never span lines: a CLI reader parses one line
    try:
        sys.stderr.write(printable(text, backslash=False) + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):  # stderr closed too: nothing left to tell
        pass
