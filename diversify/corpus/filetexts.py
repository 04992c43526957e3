"""The texts of a JSONL file as a sequence that stays on disk (what `diversify build FILE` passes).

A build reads every text once, in order, to sketch it; afterwards it needs only the few texts whose
pairs or folds it decides by exact Jaccard (``verify="auto"``). Holding the whole corpus in memory
for those few cost the command line memory in proportion to the corpus and a read phase that could
not overlap the sketching (docs/building.md). :class:`JsonlTexts` is read in blocks while it is iterated
(the sketch pass overlaps the reading with the kernels, as ``--stream`` does), keeps each record's
byte span in the file (16 bytes a document), and gives any text again by its offset afterwards.
The decisions, and so the artifact's bytes, are those of a build from the list of texts.

The file must not change while the build runs: every read-back checks its size and modification
time against those seen when it was opened, and refuses a changed file with an error naming it.
"""

from __future__ import annotations

import collections
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Optional

import numpy as np

from ..errors import InputError

__all__ = ["BlockColumns", "JsonlTexts"]

#: texts read back per call of the reader when a finished sequence is iterated again
_READ_BACK = 4096
#: lines read back in one read when the bytes between them are at most _GAP and the read at most
#: _READ_BYTES (one read a line cost the exact checks of a large build seconds of system calls)
_GAP = 64 << 10
_READ_BYTES = 4 << 20


class BlockColumns:
    """Lazy columns of one iterator of blocks (tuples whose first items are lists of the same
    length), each block dropped as soon as every column has passed it; ``on_block`` sees each block
    as it is read, ``on_end`` is called once the blocks are exhausted.

    Not ``itertools.tee``: tee frees its buffer in links of 57 items, so with blocks of ~5,000
    documents a streamed build kept the texts of the last ~280,000 documents alive (peak memory
    grew with every document).
    """

    def __init__(self, blocks: Iterable[tuple], width: int = 2, on_block: Optional[Callable[[tuple], None]] = None,
                 on_end: Optional[Callable[[], None]] = None) -> None:
        self._blocks: Optional[Iterator[tuple]] = iter(blocks)
        self._pending: tuple[collections.deque, ...] = tuple(collections.deque() for _ in range(width))
        self._on_block, self._on_end = on_block, on_end

    def pull(self) -> bool:
        """Read one more block into the columns; False once there is none."""
        if self._blocks is None:
            return False
        block = next(self._blocks, None)
        if block is None:
            self._blocks = None
            if self._on_end is not None:
                self._on_end()
            return False
        for queue, items in zip(self._pending, block):
            queue.append(items)
        if self._on_block is not None:
            self._on_block(block)
        return True

    def column(self, k: int) -> Iterator:
        queue = self._pending[k]
        while queue or self.pull():
            yield from queue.popleft()

    def drain(self) -> None:
        """Read the remaining blocks, keeping none of their items (their hooks still run)."""
        while self.pull():
            for queue in self._pending:
                queue.clear()


class JsonlTexts(Sequence):
    """Texts of a JSONL file: read by iterating once in order, then by index from the file.

    ``ids()`` is the column of ids of the same records (pulled from the same blocks; the two
    columns may be consumed in any interleaving). The length is known once the first pass has
    reached the end of the file (:attr:`length_known`); indexing before that raises ``IndexError``.
    Errors of the file (a bad line, a missing field) are raised while it is iterated, as
    :func:`diversify.corpus.readers.read_blocks` raises them.
    """

    def __init__(self, path: str, *, id_field: Optional[str] = None, text_field: Optional[str] = None,
                 info: Optional[dict] = None) -> None:
        from .inputs import STDIN, open_input
        from .readers import _Ids, _jsonl_blocks

        if path == STDIN:
            raise InputError("`input` '-' (stdin) cannot be read twice; a build from stdin holds its texts in memory "
                             "(or use --stream). Pass a file path to keep the texts on disk.")
        self.path = path
        self._text_field = "text" if text_field is None else text_field
        self._file = open_input(path, "input", stdin=True)  # stdin=True: the hints of the INPUT argument
        st = os.fstat(self._file.fileno())
        self._stamp = (st.st_size, st.st_mtime_ns)
        self._span_parts: list[np.ndarray] = []
        self._spans: Optional[np.ndarray] = None  # int64 (n, 2), once the file has been read to its end
        self._columns = BlockColumns(_jsonl_blocks(self._file, path, _Ids(id_field, info), self._text_field, None,
                                                   spans=True),
                                     on_block=lambda block: self._span_parts.append(block[3]), on_end=self._ended)
        self._iterated = False

    # -- the one pass in order -------------------------------------------------------------------

    def _ended(self) -> None:
        parts, self._span_parts = self._span_parts, []
        self._spans = np.concatenate(parts) if parts else np.zeros((0, 2), np.int64)

    def ids(self) -> Iterator:
        """The ids of the records, in order (read with the texts: see the class docstring)."""
        return self._columns.column(0)

    def __iter__(self) -> Iterator[str]:
        if not self._iterated:
            self._iterated = True
            return self._columns.column(1)
        return self._again()

    def _again(self) -> Iterator[str]:
        self._columns.drain()  # the first pass may have been left unfinished: read the rest of the spans
        for lo in range(0, len(self), _READ_BACK):
            yield from self.take(range(lo, min(lo + _READ_BACK, len(self))))

    # -- reading back by index -------------------------------------------------------------------

    def __length_hint__(self) -> int:
        """The number of records, or before the end of the file an estimate from its size and the
        lines read so far (the first block is read for it if nothing was), 2% over: the build sizes
        its signature array with it (a short estimate only costs a copy at the end)."""
        if self._spans is not None:
            return int(self._spans.shape[0])
        if not self._span_parts:
            self._columns.pull()  # the first block, kept for the columns
            if self._spans is not None:
                return int(self._spans.shape[0])
        if not self._span_parts:
            return 0
        first, last = self._span_parts[0], self._span_parts[-1]
        count = sum(p.shape[0] for p in self._span_parts)
        per_line = max(1.0, (int(last[-1, 1]) + 1 - int(first[0, 0])) / count)
        return count + int((self._stamp[0] - int(last[-1, 1])) / per_line * 1.02) + 1

    @property
    def length_known(self) -> bool:
        """Whether the first pass has reached the end of the file (``len`` works from then on)."""
        return self._spans is not None

    def __len__(self) -> int:
        if self._spans is None:
            raise TypeError(f"the number of records of {self.path!r} is known once the file has been read to its end")
        return int(self._spans.shape[0])

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return self.take(range(*i.indices(len(self))))
        return self.take([i])[0]

    def take(self, indices: Iterable[int]) -> list[str]:
        """The texts of records ``indices`` (0-based, in the order given), read from the file in
        offset order, neighbouring lines in one read (see _GAP)."""
        idx = [int(i) for i in indices]
        spans = self._spans
        n = 0 if spans is None else spans.shape[0]
        for i in idx:
            if not -n <= i < n:
                raise IndexError(f"record {i} of {self.path!r} is out of range ({n} records read)")
        if spans is None:  # nothing read yet, and nothing asked for (an index would have raised above)
            return []
        self._check_unchanged()
        fd = self._file.fileno()
        want = spans[np.asarray(idx, dtype=np.int64)] if idx else np.zeros((0, 2), np.int64)
        order = np.argsort(want[:, 0], kind="stable").tolist()
        out: list = [None] * len(idx)
        group: list[int] = []  # positions in ``idx`` whose lines one read covers
        lo = hi = 0
        for j in order + [-1]:
            if j >= 0:
                s, e = int(want[j, 0]), int(want[j, 1])
                if group and s - hi <= _GAP and max(hi, e) - lo <= _READ_BYTES:
                    group.append(j)
                    hi = max(hi, e)
                    continue
            if group:
                self._decode_group(fd, lo, hi, group, want, out)
            if j >= 0:
                group, lo, hi = [j], s, e
        return out

    def _decode_group(self, fd: int, lo: int, hi: int, group: list[int], want: np.ndarray, out: list) -> None:
        """The texts of the lines ``want[group]``, all within bytes ``lo .. hi`` of the file, from one read."""
        from .jsonl import loads

        raw = os.pread(fd, hi - lo, lo)
        if len(raw) != hi - lo:
            raise self._changed()
        for j in group:
            s, e = int(want[j, 0]) - lo, int(want[j, 1]) - lo
            try:
                text = loads(raw[s:e])  # bytes: json.loads, the fallback, takes no memoryview
                text = text[self._text_field]
            except (ValueError, UnicodeDecodeError, RecursionError, TypeError, KeyError):
                text = None
            if not isinstance(text, str):
                raise self._changed()
            out[j] = text

    def _check_unchanged(self) -> None:
        st = os.fstat(self._file.fileno())
        if (st.st_size, st.st_mtime_ns) != self._stamp:
            raise self._changed()

    def _changed(self) -> InputError:
        return InputError(f"`input` {self.path!r} changed while it was being read (its size, modification time or "
                          "records differ from the first read); a build reads some documents twice. Leave the file "
                          "unchanged until the command ends (write a new file, then rename it into place), and run "
                          "the command again.")

    def close(self) -> None:
        self._file.close()

    def __del__(self) -> None:
        f = getattr(self, "_file", None)
        if f is not None:
            f.close()
