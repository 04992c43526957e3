"""Reading corpora for the CLI (JSONL, CSV, Parquet, a directory of text files, .npy vectors,
labeled pairs). Everything streams: JSONL in blocks of lines (:func:`read_blocks`), the rest
record by record.

Inputs are regular files (or a directory for ``--format dir``, or a glob or directory of JSONL or
Parquet shards: :mod:`diversify.corpus.shards`); named pipes, devices and sockets are refused
before anything is read (a FIFO would block forever, ``/dev/zero`` never ends).
The corpus INPUT of ``build``/``add`` may be ``-``: JSONL or CSV read from stdin.
"""

from __future__ import annotations

import contextlib
import csv
import io
import itertools
import json
import os
import stat
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any, Optional

import msgspec
import numpy as np

from ..errors import InputError, require
from .shards import Shards, expand_shards

__all__ = ["detect_format", "open_input", "read_records", "read_blocks", "read_vectors", "read_table", "column",
           "jsonl_records", "loads", "dir_files"]

FORMATS = ("jsonl", "csv", "parquet", "dir")
STDIN = "-"
_STDIN_FORMATS = ("jsonl", "csv")


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


def _missing_field(field: str, which: str, where: str, have) -> InputError:
    return InputError(
        f"`--{which}-field` {field!r} is missing in {where}; fields present: {sorted(have)[:12]}. "
        f"Pass --{which}-field NAME to use another field."
    )


class _Ids:
    """Where the ids come from: ``--id-field`` (given: required in every record) or, when it was not
    given, the field ``id`` if the first record has it (then every record needs it), else the
    record numbers. ``info["ids"]`` records the outcome for the caller: "field" or "numbers"."""

    def __init__(self, id_field: Optional[str], info: Optional[dict]):
        self.given = id_field is not None
        self.field = id_field if id_field is not None else "id"
        self.present: Optional[bool] = None
        self.info = info if info is not None else {}
        #: added to record numbers: the numbers the shards before this one used (diversify.corpus.shards)
        self.offset = 0
        #: record numbers this file used so far (JSONL: its lines; else its records)
        self.used = 0

    def next_shard(self) -> None:
        """The next file of a sharded input numbers its records after this one's."""
        self.offset += self.used
        self.used = 0

    def decide(self, present: bool, where: str, have) -> None:
        """Called with whether the first record (a CSV header, a Parquet schema) has the field; again
        for each later shard, which must agree with the first."""
        if self.present is not None:
            if present != self.present:
                raise InputError(
                    f"{where} {'has' if present else 'has no'} field {self.field!r} but the first shard "
                    f"{'does not' if present else 'does'}: ids come from that field in every shard, or from record "
                    f"numbers in none. {'Add' if present else 'Fill in'} {self.field!r} in every shard, or pass "
                    "--id-field NAME.")
            return
        if not present and self.given:
            raise InputError(f"`--id-field` {self.field!r} is missing in {where}; fields present: "
                             f"{sorted(have)[:12]}. Pass --id-field NAME with the field that holds the ids.")
        self.present = present
        self.info.update(ids="field" if present else "numbers", fields=sorted(have)[:12])

    def of(self, value, present: bool, recno: int, where: str, have):
        """The id of record ``recno`` (``value`` read from the field when ``present``)."""
        if self.present is None:
            self.decide(present, f"{where} (record {recno})", have)
        flag = f"`--id-field` {self.field!r}" if self.given else f"`--id-field` (default {self.field!r})"
        if not self.present:
            if present:
                raise InputError(
                    f"{where} (record {recno}) has the field {self.field!r} but the first record does not: ids come "
                    f"from that field in every record, or from record numbers in none. Add {self.field!r} to every "
                    "record, or pass --id-field NAME.")
            return None
        if not present:
            raise InputError(f"{flag} is missing in {where} (record {recno}); fields present: {sorted(have)[:12]}. "
                             "Every record needs its id; fill it in, or pass --id-field NAME.")
        if value is None or value == "":
            raise InputError(f"{flag}: {where} (record {recno}) has no value there (got {value!r}); every record "
                             "needs its id. Fill it in, or pass --id-field NAME.")
        return value


def read_records(path: str, *, fmt: Optional[str] = None, id_field: Optional[str] = None,
                 text_field: Optional[str] = None, key_field: Optional[str | Sequence[str]] = None,
                 encoding_errors: str = "strict", info: Optional[dict] = None) -> Iterator[tuple]:
    """Yield (id, text, key) per record.

    ``id_field`` given: every record must hold it (else :class:`InputError` naming the record and
    its fields). Not given (None): the field ``id`` when the first record has it (then every record
    must), else the record number (0-based line number for JSONL, row number for CSV/Parquet).
    ``info`` (a dict) receives ``ids`` = ``"field"`` or ``"numbers"`` and the first record's
    ``fields``. ``text_field`` defaults to ``text``; a directory has neither (its files are the
    documents, their relative paths the ids). ``key_field`` names one field (key = its value) or
    several (key = a tuple of their values). ``path`` ``-`` reads JSONL or CSV from stdin. A glob or a
    directory of JSONL or Parquet shards (:func:`~diversify.corpus.shards.expand_shards`) reads as
    their concatenation in sorted path order: record numbers count on across the shards.
    """
    for block_ids, texts, keys in read_blocks(path, fmt=fmt, id_field=id_field, text_field=text_field,
                                              key_field=key_field, encoding_errors=encoding_errors, info=info):
        yield from zip(block_ids, texts, keys if keys is not None else itertools.repeat(None))


#: documents per block of :func:`read_blocks` for the formats read record by record
_BLOCK_RECORDS = 8192


def read_blocks(path: str, *, fmt: Optional[str] = None, id_field: Optional[str] = None,
                text_field: Optional[str] = None, key_field: Optional[str | Sequence[str]] = None,
                encoding_errors: str = "strict", info: Optional[dict] = None) -> Iterator[tuple]:
    """The records of :func:`read_records` in blocks: (ids, texts, keys or None), three lists.

    Same rules, same errors, same order as :func:`read_records`. JSONL is read in large blocks of
    lines and its well-formed blocks are taken apart without Python work per document; a block with
    anything out of the ordinary (a blank line, a line the fast parser refuses, a record without its
    text) is read again record by record, which raises the error of the first bad line.
    """
    shards = expand_shards(path, fmt=fmt)
    if shards is not None:
        yield from _shard_blocks(shards, _Ids(id_field, info), "text" if text_field is None else text_field, key_field)
        return
    if path != STDIN and not os.path.exists(path):
        raise InputError(f"`input` path {path!r} does not exist. Check the path.")
    fmt = fmt or detect_format(path)
    if fmt not in FORMATS:
        raise InputError(f"`--format` must be one of {FORMATS}; got {fmt!r}.")
    if path == STDIN and fmt not in _STDIN_FORMATS:
        raise InputError(f"`input` '-' (stdin) must be JSONL or CSV (--format jsonl|csv); got --format {fmt}. "
                         f"{'Parquet needs a seekable file' if fmt == 'parquet' else 'A directory needs a path'}.")
    ids = _Ids(id_field, info)
    if fmt == "dir":
        for flag, value in (("--id-field", id_field), ("--text-field", text_field), ("--key-field", key_field)):
            if value is not None:
                raise InputError(f"`{flag}` does not apply to a directory input {path!r}: each file is one "
                                 "document and its id is its path inside the directory. Drop "
                                 f"{flag}, or pass a JSONL/CSV/Parquet file.")
        if not os.path.isdir(path):
            raise InputError(f"`--format dir` needs a directory; {path!r} is not one. Pass a directory, or the "
                             "file's own format.")
        ids.info.update(ids="paths")
        yield from _blocks_of(_read_dir(path, encoding_errors), key_field)
        return
    text_field = "text" if text_field is None else text_field
    f = open_input(path, "input", stdin=True)
    with contextlib.nullcontext(f) if f is sys.stdin.buffer else f:  # stdin stays open
        if fmt == "jsonl":
            yield from _jsonl_blocks(f, path, ids, text_field, key_field)
        elif fmt == "csv":
            yield from _blocks_of(_read_csv(f, path, ids, text_field, key_field, encoding_errors), key_field)
        else:
            yield from _blocks_of(_read_parquet(f, path, ids, text_field, key_field), key_field)


def _shard_blocks(shards: Shards, ids: _Ids, text_field: str, key_field) -> Iterator[tuple]:
    """The blocks of every shard in turn, as of one concatenated file: one id rule for all (set by
    the first record), record numbers counted on across the shards, errors naming the shard."""
    if shards.compressed:
        raise InputError(f"`input` {shards.source!r}: compressed shards ({shards.compressed[0]!r}) are read by "
                         "--engine dask only. Decompress them, or pass --engine dask.")
    for path in shards.paths:
        with open_input(path, "input") as f:
            if shards.fmt == "jsonl":
                yield from _jsonl_blocks(f, path, ids, text_field, key_field)
            else:
                yield from _blocks_of(_read_parquet(f, path, ids, text_field, key_field), key_field)
        ids.next_shard()


def _blocks_of(records: Iterable[tuple], key_field) -> Iterator[tuple]:
    """(ids, texts, keys or None) blocks of (id, text, key) records."""
    it = iter(records)
    while True:
        block = list(itertools.islice(it, _BLOCK_RECORDS))
        if not block:
            return
        block_ids, texts, keys = (list(c) for c in zip(*block))
        yield block_ids, texts, keys if key_field else None


def _key_of(get, key_field):
    """The record's key: None, one value, or a tuple of values for several key fields (in order)."""
    if not key_field:
        return None
    if isinstance(key_field, str):
        return get(key_field)
    return tuple(get(f) for f in key_field)


def _jsonl_record(rec, lineno: int, recno: int, path: str, ids: _Ids, text_field: str, key_field) -> tuple:
    """(id, text, key) of one parsed JSONL record: the reference rules and messages."""
    where = f"{path}:{lineno}"
    if text_field not in rec:
        raise _missing_field(text_field, "text", where, rec.keys())
    text = rec[text_field]
    if not isinstance(text, str):
        raise InputError(f"{where}: field {text_field!r} must be a string; got {type(text).__name__}.")
    id_ = ids.of(rec.get(ids.field), ids.field in rec, recno, where, rec.keys())
    return (ids.offset + lineno - 1 if id_ is None else id_), text, _key_of(rec.get, key_field)


#: bytes of JSONL read at a time (a block ends at the last newline in it)
_JSONL_BLOCK_BYTES = 1 << 24


def _line_blocks(f) -> Iterator[tuple[int, memoryview, np.ndarray, np.ndarray, int]]:
    """(number of the first line, data, starts, ends, base) per block of whole lines of ``f``: line
    i of the block is ``data[starts[i]:ends[i]]`` (int64 offsets, newline excluded) and starts at
    byte ``base + starts[i]`` of the file (counted from where ``f`` stood when the first block was
    read); lines are split at b"\\n" only, as iterating a binary file does, and the last line may
    lack its newline.

    ``data`` is a view of one buffer that the next block is read into: it is valid until the next
    block is asked for (copy what must outlive it). The file is read into that buffer and a line
    cut by the end of a read is moved to its front, so no block is copied whole; at 1M documents
    (3.3 GB) this and :func:`_newlines` took the reading from 2.2 s to 0.8 s of the command's one
    Python thread.
    """
    buf = bytearray(_JSONL_BLOCK_BYTES)
    lineno, base, held = 1, 0, 0  # held: bytes of a line not yet ended, at the front of buf
    readinto = getattr(f, "readinto", None)
    while True:
        if held == len(buf):  # one line fills the buffer: a larger buffer, the line's bytes moved over
            bigger = bytearray(2 * len(buf))
            bigger[:held] = buf
            buf = bigger
        if readinto is not None:
            got = readinto(memoryview(buf)[held:])
        else:  # a file object without readinto
            chunk = f.read(len(buf) - held)
            got = len(chunk)
            buf[held:held + got] = chunk
        if not got:
            break
        n = held + got
        ends = _newlines(buf, held, n)  # the held bytes hold no newline
        if ends.size == 0:
            held = n
            continue
        starts = np.empty_like(ends)
        starts[0] = 0
        starts[1:] = ends[:-1] + 1
        yield lineno, memoryview(buf)[:n], starts, ends, base
        cut = int(ends[-1]) + 1
        lineno += ends.size
        base += cut
        held = n - cut
        buf[:held] = buf[cut:n]
    if held:
        yield lineno, memoryview(buf)[:held], np.zeros(1, np.int64), np.array([held], np.int64), base


#: lines of this many bytes on average or more are found by ``bytearray.find`` (memchr), one call a
#: line; a block of shorter ones by numpy's comparison of every byte, whose cost does not depend on
#: the lines
_FIND_FROM = 256


def _newlines(buf: bytearray, lo: int, hi: int) -> np.ndarray:
    """Positions (int64, ascending) of the newlines in ``buf[lo:hi]``. numpy's comparison and the
    scan of its result ran at 2.8 GB/s; a memchr a line at 11 GB/s on lines of 3 KB."""
    found: list = []
    add, find = found.append, buf.find
    i = lo - 1
    for _ in range((hi - lo) // _FIND_FROM + 1):
        i = find(b"\n", i + 1, hi)
        if i < 0:
            return np.array(found, dtype=np.int64)
        add(i)
    # many short lines: the rest of the block by numpy
    rest = np.flatnonzero(np.frombuffer(buf, np.uint8, hi - i - 1, i + 1) == 0x0A) + (i + 1)
    return np.concatenate([np.array(found, dtype=np.int64), rest])


def _block_lines(data: bytes | memoryview, starts: np.ndarray, ends: np.ndarray) -> list:
    """The lines of a block as memoryviews into it (no copy)."""
    view = memoryview(data)
    return list(map(view.__getitem__, map(slice, starts.tolist(), ends.tolist())))


def _decode_block(data: bytes | memoryview, starts: np.ndarray, ends: np.ndarray) -> Optional[list]:
    """One parsed value per line of a block in one msgspec call, or None when the block is not
    plainly one object per line (the caller then parses line by line).

    ``decode_lines`` reads a stream of values separated by any JSON whitespace, so it would take
    ``{..} {..}`` on one line and a blank line elsewhere as two records of two lines. Hence the
    check first: every line starts with ``{`` and ends with ``}`` (before an optional ``\\r``), so
    a line holds whole top-level values only (a value cannot go on after ``}`` with a ``{``), and
    as many values as lines means one per line. A block that fails it (blank lines, indentation)
    takes the line-by-line path, which gives the same values.
    """
    b = np.frombuffer(data, dtype=np.uint8)
    last = ends - 1
    last[(last > starts) & (b[np.maximum(last, 0)] == 0x0D)] -= 1  # a CRLF line: the byte before the \r
    if (ends <= starts).any() or not ((b[starts] == 0x7B) & (last > starts) & (b[np.maximum(last, 0)] == 0x7D)).all():
        return None
    try:
        recs = _fast_lines(memoryview(data)[: int(ends[-1])])
    except (msgspec.DecodeError, RecursionError):
        return None
    return recs if len(recs) == starts.size else None


def _jsonl_blocks(f, path: str, ids: _Ids, text_field: str, key_field, spans: bool = False) -> Iterator[tuple]:
    """(ids, texts, keys or None) per block; with ``spans``, a fourth item: each record's line as a
    byte span of the file (int64 (m, 2), see :func:`_line_blocks`)."""
    recno = 0
    for first, data, starts, ends, base in _line_blocks(f):
        ids.used = first - 1 + int(starts.size)  # record numbers are line numbers
        fast = None
        rows = None  # the lines (0-based, within the block) the records came from; None: every line
        if not key_field:
            recs = _decode_block(data, starts, ends)
            if recs is not None:
                fast = _fast_columns(recs, first, recno, path, ids, text_field)
            del recs
        if fast is None:  # record by record: the first bad line raises its own error
            out, rows = [], []
            lines = map(bytes, _block_lines(data, starts, ends))
            for i, (lineno, rec) in enumerate(jsonl_records(lines, path, start=first)):
                out.append(_jsonl_record(rec, lineno, recno + i, path, ids, text_field, key_field))
                rows.append(lineno - first)
            fast = [o[0] for o in out], [o[1] for o in out], [o[2] for o in out] if key_field else None
            del out, lines
        del data
        recno += len(fast[1])
        if fast[1]:
            if spans:
                line_spans = np.stack([starts, ends], axis=1) + base
                yield (*fast, line_spans if rows is None else line_spans[rows])
            else:
                yield fast


def _fast_columns(recs: list, first: int, recno: int, path: str, ids: _Ids, text_field: str) -> Optional[tuple]:
    """(ids, texts, None) of a block of parsed records (one per line, no blank line), or None when a
    record breaks a rule (then the caller reads the block record by record for the error)."""
    if not recs or set(map(type, recs)) != {dict}:
        return None
    get = dict.get
    head: list = [[], []]
    if ids.present is None:  # the first record decides where the ids come from
        id0, text0, _ = _jsonl_record(recs[0], first, recno, path, ids, text_field, None)
        head = [[id0], [text0]]
        recs, first, recno = recs[1:], first + 1, recno + 1
    texts = list(map(get, recs, itertools.repeat(text_field)))
    if texts and set(map(type, texts)) != {str}:
        return None
    if ids.present:
        block_ids = list(map(get, recs, itertools.repeat(ids.field)))
        if None in block_ids or "" in block_ids:
            return None
    else:
        if any(map(dict.__contains__, recs, itertools.repeat(ids.field))):
            return None
        block_ids = list(range(ids.offset + first - 1, ids.offset + first - 1 + len(recs)))
    return head[0] + block_ids, head[1] + texts, None


def _read_csv(f, path, ids, text_field, key_field, encoding_errors):
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    delim = "\t" if path.lower().endswith(".tsv") else ","
    # utf-8-sig: a byte-order mark (Excel's "CSV UTF-8") is not part of the first column's name
    text = io.TextIOWrapper(f, encoding="utf-8-sig", errors=encoding_errors, newline="")
    try:
        reader = csv.DictReader(text, delimiter=delim)
        names = reader.fieldnames or []
        if text_field not in names:
            raise _missing_field(text_field, "text", path, names)
        ids.decide(ids.field in names, f"the header of {path}", names)
        for rowno, row in enumerate(reader):
            if None in row:
                raise InputError(f"{path}:{reader.line_num} (record {rowno}) has {len(names) + len(row[None])} "
                                 f"fields, more than the {len(names)} columns of the header. Quote fields that hold "
                                 f"{delim!r}, or fix the row.")
            id_ = ids.of(row.get(ids.field), ids.present, rowno, f"{path}:{reader.line_num}", names)
            yield (rowno if id_ is None else id_), row[text_field] or "", _key_of(row.get, key_field)
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not valid UTF-8 ({exc}). Re-encode the file as UTF-8, or pass "
                         "--encoding-errors replace.") from None
    except csv.Error as exc:
        raise InputError(f"{path}:{reader.line_num}: not a valid CSV row ({exc}).") from None
    finally:
        if f is sys.stdin.buffer:
            text.detach()  # closing the wrapper would close stdin


def _arrow_error(path: str, exc: Exception) -> InputError:
    return InputError(f"`input` {path!r} is not a readable Parquet file ({type(exc).__name__}: {exc}). Re-export "
                      "it, or check that the copy is complete.")


def _read_parquet(f, path, ids, text_field, key_field):
    pa = require("pyarrow", extra="parquet", purpose="Reading Parquet")
    pq = require("pyarrow.parquet", extra="parquet", purpose="Reading Parquet")
    try:
        pf = pq.ParquetFile(f)
        names = pf.schema_arrow.names
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise _arrow_error(path, exc) from None
    if text_field not in names:
        raise _missing_field(text_field, "text", path, names)
    ids.decide(ids.field in names, f"the columns of {path}", names)
    key_fields = [key_field] if isinstance(key_field, str) else list(key_field or [])
    cols = [c for c in (ids.field, text_field, *key_fields) if c and c in names]
    row = 0
    batches = pf.iter_batches(columns=cols, batch_size=65536)
    while True:
        try:
            d = next(batches).to_pydict()
        except StopIteration:
            break
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise _arrow_error(path, exc) from None
        texts = d[text_field]
        col = d.get(ids.field) if ids.present else None
        for i, t in enumerate(texts):
            if t is not None and not isinstance(t, str):
                raise InputError(f"{path} (record {row + i}): column {text_field!r} must hold strings; got "
                                 f"{type(t).__name__}. Cast the column to string.")
            id_ = ids.of(col[i] if col is not None else None, ids.present, row + i, path, names)
            yield (ids.offset + row + i if id_ is None else id_), t if t is not None else "", \
                _key_of(lambda f: d.get(f, [None] * len(texts))[i], key_field)
        row += len(texts)
        ids.used = row


def dir_files(path) -> list[Path]:
    """The documents of a directory input (``--format dir``), in reading order."""
    return sorted(p for p in Path(path).rglob("*") if p.is_file() and not p.name.startswith("."))


def _read_dir(path, encoding_errors):
    root = Path(path)
    for p in dir_files(root):
        try:
            data = p.read_bytes()
        except OSError as exc:
            raise InputError(f"{p}: cannot be read ({exc.strerror}). Check the file.") from None
        try:
            text = data.decode("utf-8", errors=encoding_errors)
        except UnicodeDecodeError as exc:
            raise InputError(
                f"{p}: not valid UTF-8 at byte {exc.start} ({data[exc.start:exc.start + 4]!r}). Re-encode the file, or "
                "pass --encoding-errors replace to substitute U+FFFD for bad bytes."
            ) from None
        yield p.relative_to(root).as_posix(), text, None


def read_vectors(path: str, ids_path: Optional[str] = None, *, param: str = "--vectors"):
    """Load ``.npy`` vectors (never pickled objects; memory-mapped) and optional ids (one per line).

    The array's values are checked where they are used (:func:`diversify.sketches.simhash.normalize_vectors`:
    real numbers, 2-D, finite, nonzero).
    """
    check_input_file(path, param)
    try:
        vecs = np.load(path, allow_pickle=False, mmap_mode="r")
    except (ValueError, EOFError, OSError, SyntaxError, TypeError, UnicodeError) as exc:
        raise InputError(f"`{param}` {path!r} is not a numeric .npy array ({exc}). Save it with "
                         "np.save(path, array).") from None
    if not isinstance(vecs, np.ndarray):  # an .npz archive
        raise InputError(f"`{param}` {path!r} is an .npz archive, not one .npy array. Save the vectors with "
                         "np.save(path, array).")
    ids = None
    if ids_path:
        with open_input(ids_path, "--ids") as f:
            data = f.read()
        try:
            lines = data.decode("utf-8").split("\n")
        except UnicodeDecodeError as exc:
            raise InputError(f"`--ids` {ids_path!r}: not valid UTF-8 at byte {exc.start}. Re-encode the file as "
                             "UTF-8 (one id per line).") from None
        ids = [line.rstrip("\r") for line in lines if line.strip()]
    return vecs, ids


def read_table(path: str, columns: Optional[Sequence[str]] = None, delimiter: Optional[str] = None,
               *, param: str = "--pairs") -> list[dict]:
    """All records of a small JSONL / CSV / TSV file as dicts (for labels and labeled pairs).

    TSV is read without quote processing (as MRPC and STS-B need); a UTF-8 BOM is ignored.
    ``columns`` names the columns of a CSV/TSV file that has no header row; ``delimiter`` overrides
    the one implied by the extension (``,`` for .csv, a tab for .tsv).
    """
    if not os.path.exists(path):
        raise InputError(f"`{param}` file {path!r} does not exist. Check the path.")
    fmt = detect_format(path, param=param)
    if fmt not in ("jsonl", "csv"):
        raise InputError(f"`{param}` must be JSONL, CSV or TSV; got {path!r}.")
    if delimiter is not None and len(delimiter) != 1:
        raise InputError(f"`--delimiter` must be one character (e.g. ',' or '\\t'); got {delimiter!r}.")
    with open_input(path, param) as f:
        if fmt == "jsonl":
            return [rec for _, rec in jsonl_records(f, path)]
        csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
        tsv = path.lower().endswith(".tsv")
        text = io.TextIOWrapper(f, encoding="utf-8-sig", newline="")
        reader = csv.DictReader(text, fieldnames=list(columns) if columns else None,
                                delimiter=delimiter or ("\t" if tsv else ","),
                                quoting=csv.QUOTE_NONE if tsv else csv.QUOTE_MINIMAL)
        rows = []
        try:
            for row in reader:
                if None in row:
                    n = len(reader.fieldnames or [])
                    raise InputError(f"{path}:{reader.line_num} has more fields than the {n} columns "
                                     f"{'of --columns' if columns else 'of the header'}; columns: "
                                     f"{list(reader.fieldnames or [])[:12]}. Name every column, or fix the row.")
                rows.append(row)
        except UnicodeDecodeError as exc:
            raise InputError(f"`{param}` {path!r}: not valid UTF-8 ({exc}). Re-encode the file as UTF-8.") from None
        except csv.Error as exc:
            raise InputError(f"{path}:{reader.line_num}: not a valid CSV row ({exc}).") from None
        return rows


_fast_decode = msgspec.json.Decoder().decode
_fast_lines = msgspec.json.Decoder().decode_lines


def loads(raw: bytes) -> Any:
    """One JSON value from ``raw``, as :func:`json.loads` reads it, at msgspec's speed.

    msgspec gives the values ``json.loads`` gives (ints of any size exactly, the same floats and
    strings) and refuses a superset of what ``json.loads`` refuses (NaN, Infinity, numbers out of
    float range, lone surrogates, a byte-order mark): those lines go to ``json.loads``, whose
    answer, value or error, is the answer. So the values and errors are the standard library's.
    """
    try:
        return _fast_decode(raw)
    except (msgspec.DecodeError, RecursionError):
        return json.loads(raw)


def jsonl_records(lines: Iterable[bytes], where: str, *, start: int = 1) -> Iterator[tuple[int, dict]]:
    """(line number, record) of every non-blank JSONL line; the one JSONL parser of both engines.

    ``where`` names the source in errors (``"{where}:{lineno}: ..."``); ``start`` is the number of
    the first line.
    """
    for lineno, raw in enumerate(lines, start):
        if not raw.strip():
            continue
        try:
            rec = loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError, or an int of > 4300 digits
            raise InputError(f"{where}:{lineno}: not valid JSON ({exc}). Each line must be one JSON object.") from None
        except RecursionError:
            raise InputError(f"{where}:{lineno}: the JSON value is nested too deeply to read. Each line must be one "
                             "JSON object of a record's fields.") from None
        if not isinstance(rec, dict):
            raise InputError(f"{where}:{lineno}: each line must be a JSON object; got {type(rec).__name__}.")
        yield lineno, rec


def column(rows: list[dict], name: str, path: str, flag: str = "the matching --*-field/--label option") -> list:
    """The values of column ``name`` in every row; refused when a row lacks it (``flag`` names the option)."""
    if not rows:
        raise InputError(f"{path} holds no records{' after its header row' if path.lower().endswith(('.csv', '.tsv')) else ''}. "
                         "Give a file with one labeled record per line or row.")
    out = []
    for i, r in enumerate(rows):
        v = r.get(name)
        if v is None:
            have = sorted(k for k in r if isinstance(k, str))[:12]
            what = "is missing" if name not in r else "has no value"
            raise InputError(f"column {name!r} {what} in {path} (record {i}); columns: {have}. Name it with "
                             f"{flag}, or fill it in.")
        out.append(v)
    return out
