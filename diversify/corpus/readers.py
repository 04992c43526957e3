"""Reading corpora for the CLI (JSONL, CSV, Parquet, a directory of text files). Everything
streams: JSONL in blocks of lines (:func:`read_blocks`), the rest record by record.

Inputs are regular files (or a directory for ``--format dir``, or a glob or directory of JSONL or
Parquet shards: :mod:`diversify.corpus.shards`), opened by :mod:`diversify.corpus.inputs`. The
corpus INPUT of ``build``/``add`` may be ``-``: JSONL or CSV read from stdin. The side inputs
(vectors, label tables) are read by :mod:`diversify.corpus.tables`; JSONL lines are parsed by
:mod:`diversify.corpus.jsonl`.
"""

from __future__ import annotations

import contextlib
import csv
import io
import itertools
import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Optional

import msgspec
import numpy as np

from ..errors import InputError, require
from .inputs import FORMATS, STDIN, STDIN_FORMATS, detect_format, dir_files, open_input
from .jsonl import jsonl_records, loads
from .shards import Shards, expand_shards

__all__ = ["read_records", "read_blocks", "jsonl_records", "loads"]

#: the batch JSONL decoder of :func:`_decode_block` (one call per block of lines)
_fast_lines = msgspec.json.Decoder().decode_lines


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
    if path == STDIN and fmt not in STDIN_FORMATS:
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
    cut by the end of a read is moved to its front, so no block is copied whole (docs/building.md
    has what this and :func:`_newlines` saved).
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
    """Positions (int64, ascending) of the newlines in ``buf[lo:hi]``, by a memchr a line (``bytes.find``),
    which outran numpy's comparison and the scan of its result."""
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
