"""The corpus a build read, opened by the page (``diversify serve --corpus PATH``) to show texts.

Opening reads the file once, in order, and keeps a table from each document id to its record (the
id's 64-bit key, :mod:`diversify.ids`, and the record number, sorted by key), the ids packed as the
artifact stores them (:class:`~diversify.ids.PackedIds`) and where each record is; texts are then
read on demand, by offset, from the file:

* JSONL: each record's byte span in the file (:class:`diversify.corpus.filetexts.JsonlTexts`, the
  build's own reader), so one text is one ``pread`` of its line;
* Parquet: the row group and row of each record; a text is read from its row group's text column
  (the last :data:`ROW_GROUPS_KEPT` row groups read are kept).

Ids follow the build's rule (:func:`diversify.corpus.readers.read_records`): the ``id`` field when
the first record has it, else the record numbers. A file replaced (renamed over) or changed while it
is served is opened again at the next read that finds it so (by its inode, size and modification time).

Text search is a bounded scan in file order (:meth:`Corpus.scan`): a case-insensitive substring
test of at most :data:`SCAN_DOCS` documents and :data:`SCAN_CHARS` characters a request, from a
record number on, so a page of hits never costs more than that and the next page goes on from
where this one stopped.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Iterator
from typing import Optional

import numpy as np

from ..errors import InputError, require
from ..ids import PackedIds, query_keys

__all__ = ["Corpus", "open_corpus", "SCAN_DOCS", "SCAN_CHARS", "ROW_GROUPS_KEPT"]

#: documents one text search reads at most (the next request goes on from there)
SCAN_DOCS = 100_000
#: characters of text one text search reads at most
SCAN_CHARS = 32 << 20
#: Parquet row groups whose text column stays in memory after a read
ROW_GROUPS_KEPT = 2
#: texts read per step of a scan
_SCAN_STEP = 512
#: ids per block handed to the id table while the file is opened
_ID_BLOCK = 8192
_FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".parquet": "parquet", ".pq": "parquet"}


def _stamp(path: str) -> tuple[int, int, int, int]:
    st = os.stat(path)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _corpus_error(path: str, what: str, fix: str) -> InputError:
    return InputError(f"`--corpus` {path!r} {what}. {fix}")


class Corpus:
    """Texts of one corpus file by document id (see the module docstring). Thread-safe."""

    def __init__(self, path: str, *, id_field: Optional[str] = None, text_field: Optional[str] = None) -> None:
        self.path = os.fspath(path)
        fmt = _FORMATS.get(os.path.splitext(self.path)[1].lower())
        if fmt is None:
            raise _corpus_error(self.path, "is not a JSONL or Parquet file (by its name: .jsonl, .ndjson, .json, "
                                ".parquet, .pq)", "Pass the JSONL or Parquet file the build read.")
        if not os.path.isfile(self.path):
            raise _corpus_error(self.path, "is not a file", "Pass the path of the corpus file the build read.")
        self.format = fmt
        self._id_field, self._text_field = id_field, "text" if text_field is None else text_field
        self._lock = threading.Lock()
        self._groups: OrderedDict[int, list] = OrderedDict()
        self._open()

    # ------------------------------------------------------------------ opening

    def _open(self) -> None:
        self._stamp = _stamp(self.path)
        ids = PackedIds(param="--corpus ids")
        for block in (self._open_jsonl() if self.format == "jsonl" else self._open_parquet()):
            try:
                ids.extend(block)
            except (InputError, TypeError) as exc:
                raise _corpus_error(self.path, f"holds ids no build takes ({exc})",
                                    "Pass the corpus file the build read.") from None
        try:
            ids.check_unique()
        except InputError as exc:
            raise _corpus_error(self.path, f"holds ids no build takes ({exc})",
                                "Pass the corpus file the build read.") from None
        self._ids, self.n_docs, self.id_kind = ids, len(ids), ids.kind or "str"
        keys = ids.keys()
        order = np.argsort(keys, kind="stable")
        self._keys, self._rows = keys[order], order.astype(np.int64)

    def _open_jsonl(self) -> Iterator[list]:
        """Blocks of the ids, read with the texts (which are dropped: they are read again by offset)."""
        from ..corpus.filetexts import JsonlTexts

        texts = JsonlTexts(self.path, id_field=self._id_field, text_field=self._text_field)
        self._jsonl = texts
        block: list = []
        for id_, _text in zip(texts.ids(), texts):
            block.append(id_)
            if len(block) == _ID_BLOCK:
                yield block
                block = []
        yield block

    def _open_parquet(self) -> Iterator[list]:
        pq = require("pyarrow.parquet", extra="parquet", purpose="Reading a Parquet corpus")
        try:
            pf = pq.ParquetFile(self.path)
            names = pf.schema_arrow.names
        except Exception as exc:  # pyarrow raises several unrelated types for a bad file
            raise _corpus_error(self.path, f"is not a readable Parquet file ({type(exc).__name__}: {exc})",
                                "Pass the Parquet file the build read.") from None
        if self._text_field not in names:
            raise _corpus_error(self.path, f"has no column {self._text_field!r} (columns: {names[:12]})",
                                "Pass the corpus file the build read.")
        id_field = self._id_field or "id"
        if self._id_field is not None and id_field not in names:
            raise _corpus_error(self.path, f"has no column {id_field!r}", "Pass the corpus file the build read.")
        counts = [pf.metadata.row_group(g).num_rows for g in range(pf.num_row_groups)]
        self._group_start = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)])
        self._pf = pf
        for g in range(pf.num_row_groups):
            if id_field in names:
                yield pf.read_row_group(g, columns=[id_field]).column(0).to_pylist()
            else:
                yield list(range(int(self._group_start[g]), int(self._group_start[g + 1])))

    def _reopen_if_changed(self) -> bool:
        """Open the file again when the path now names another file, or the file changed."""
        try:
            if _stamp(self.path) == self._stamp:
                return False
        except OSError as exc:
            raise _corpus_error(self.path, f"cannot be read any more ({exc.strerror})",
                                "Leave the corpus file in place while it is served.") from None
        self._groups.clear()
        self._open()
        return True

    # ------------------------------------------------------------------ reading

    def rows_of(self, ids: list) -> list[Optional[int]]:
        """The record number of each id (None when the corpus has no such id, or an id of the other kind)."""
        keys, valid = query_keys(ids, self.id_kind)
        pos = np.searchsorted(self._keys, keys)
        out: list[Optional[int]] = []
        for j, p in enumerate(pos.tolist()):
            ok = (valid is None or bool(valid[j])) and p < self._keys.size and self._keys[p] == keys[j]
            out.append(int(self._rows[p]) if ok else None)
        return out

    def texts_of(self, ids: list) -> list[Optional[str]]:
        """The text of each id, None for an id the corpus does not hold."""
        with self._lock:
            self._reopen_if_changed()
            try:
                return self._texts_of(ids)
            except InputError:
                if not self._reopen_if_changed():
                    raise
                return self._texts_of(ids)

    def _texts_of(self, ids: list) -> list[Optional[str]]:
        rows = self.rows_of(ids)
        wanted = sorted({r for r in rows if r is not None})
        got = dict(zip(wanted, self._read_rows(wanted)))
        return [None if r is None else got[r] for r in rows]

    def _read_rows(self, rows: list[int]) -> list[str]:
        if self.format == "jsonl":
            return self._jsonl.take(rows)
        out = []
        for r in rows:
            g = int(np.searchsorted(self._group_start, r, side="right")) - 1
            out.append(self._group(g)[r - int(self._group_start[g])])
        return out

    def _group(self, g: int) -> list:
        col = self._groups.get(g)
        if col is None:
            try:
                col = self._pf.read_row_group(g, columns=[self._text_field]).column(0).to_pylist()
            except Exception as exc:  # a file changed or damaged since it was opened
                raise _corpus_error(self.path, f"could not be read again ({type(exc).__name__})",
                                    "Leave the corpus file unchanged while it is served.") from None
            col = ["" if t is None else str(t) for t in col]
            self._groups[g] = col
            while len(self._groups) > ROW_GROUPS_KEPT:
                self._groups.popitem(last=False)
        self._groups.move_to_end(g)
        return col

    # ------------------------------------------------------------------ search

    def scan(self, needle: str, *, start: int = 0, max_hits: int = 20) -> dict:
        """Records from ``start`` on whose text contains ``needle`` (case-insensitive), in file order.

        Reads at most :data:`SCAN_DOCS` documents and :data:`SCAN_CHARS` characters. Returns
        ``{"hits": [(record, text)], "next": record to go on from or None at the end, "scanned": n}``.
        """
        want = needle.casefold()
        hits: list[tuple[int, str]] = []
        chars = scanned = 0
        r = max(0, int(start))
        with self._lock:
            self._reopen_if_changed()
            while r < self.n_docs and scanned < SCAN_DOCS and chars < SCAN_CHARS and len(hits) < max_hits:
                hi = min(self.n_docs, r + _SCAN_STEP, r + SCAN_DOCS - scanned)
                for row, text in zip(range(r, hi), self._read_rows(list(range(r, hi)))):
                    scanned += 1
                    chars += len(text)
                    r = row + 1
                    if want in text.casefold():
                        hits.append((row, text))
                        if len(hits) >= max_hits or chars >= SCAN_CHARS:
                            break
        return {"hits": hits, "next": r if r < self.n_docs else None, "scanned": scanned}

    def ids_of_rows(self, rows: list[int]) -> list:
        """The document id of each record number (0 <= record < n_docs)."""
        return [self._ids[int(r)] for r in rows]


_OPEN: dict[tuple, Corpus] = {}
#: the last corpus that could not be opened: (key, the file's stamp then, the error)
_FAILED: list = []
_OPEN_LOCK = threading.Lock()


def open_corpus(path: str | os.PathLike, *, id_field: Optional[str] = None,
                text_field: Optional[str] = None) -> Corpus:
    """The :class:`Corpus` of ``path``, opened once per path and fields (a changed file is opened
    again). A file that could not be opened is not read again until it changes: the same error is
    raised (so a bad line deep in a large file costs one read, not one a request)."""
    key = (os.path.abspath(os.fspath(path)), id_field, text_field)
    with _OPEN_LOCK:
        c = _OPEN.get(key)
        if c is not None:
            return c
        try:
            stamp: Optional[tuple] = _stamp(key[0])
        except OSError:
            stamp = None
        if _FAILED and _FAILED[0][:2] == (key, stamp):
            raise _FAILED[0][2]
        try:
            c = Corpus(key[0], id_field=id_field, text_field=text_field)
        except InputError as exc:
            _FAILED[:] = [(key, stamp, exc)]
            raise
        _OPEN.clear()  # one corpus at a time: a server serves one
        _OPEN[key] = c
        return c
