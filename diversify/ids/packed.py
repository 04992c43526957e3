"""The ids of a streamed build, held packed as the artifact stores them (:class:`PackedIds`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .keys import check_distinct_keys, utf8_id_keys
from .rules import _duplicate, _first_repeat, _mixed_kinds, check_id_type, check_ids

__all__ = ["PackedIds"]


class PackedIds(Sequence):
    """The ids of a corpus gathered block by block (a streamed build), held as an artifact stores
    them rather than as Python objects: str ids as their UTF-8 bytes and offsets (~20 bytes an
    id of ten characters, where a list of ``str`` costs ~70), int ids as int64.

    :meth:`extend` applies every rule but uniqueness to each block as it comes, so a bad id stops
    a streamed build at its block; :meth:`check_unique` applies that one over all of them, by
    their 64-bit keys (:meth:`keys`, kept for the artifact). Indexing decodes one id.
    """

    def __init__(self, *, param: str = "ids") -> None:
        self.param = param
        self.kind: str | None = None  # of the first id
        self._n = 0
        self._parts: list[bytes] = []  # str ids: each block's UTF-8 bytes, joined
        self._lengths: list[np.ndarray] = []  # str ids: the byte length of each id (uint64)
        self._ints: list[np.ndarray] = []  # int ids: int64 per block
        self._done: tuple[np.ndarray, np.ndarray] | None = None  # (values, offsets) once joined
        self._keys: np.ndarray | None = None
        self._unique = False  # check_unique passed

    def extend(self, block: list) -> None:
        """Append a block of ids (the rules of :func:`check_ids`, uniqueness aside)."""
        if not block:
            return
        if self._done is not None:
            raise RuntimeError("PackedIds.extend after its ids were joined")
        if self.kind is not None:  # the corpus's kind is its first id's: name the first id of another
            exact = str if self.kind == "str" else int
            for i, x in enumerate(block):
                if type(x) is not exact:
                    k = check_id_type(x, param=self.param, position=self._n + i)
                    if k != self.kind:
                        raise _mixed_kinds(self.kind, 0, k, x, self._n + i, self.param)
        kind = check_ids(block, param=self.param, offset=self._n, unique=False)
        if self.kind is None:
            self.kind = kind
        if kind == "int":
            self._ints.append(np.array([int(x) for x in block], dtype=np.int64))
        else:
            encoded = [s.encode("utf-8") for s in block]
            self._parts.append(b"".join(encoded))
            self._lengths.append(np.fromiter(map(len, encoded), dtype=np.uint64, count=len(encoded)))
        self._n += len(block)

    def _joined(self) -> tuple[np.ndarray, np.ndarray]:
        """(int64 values, or the UTF-8 bytes as uint8; for str ids their offsets, uint64 (n+1,))."""
        if self._done is None:
            if self.kind == "int":
                values = np.concatenate(self._ints) if self._ints else np.zeros(0, np.int64)
                offsets = np.zeros(0, np.uint64)
            else:
                values = np.frombuffer(b"".join(self._parts), dtype=np.uint8)
                offsets = np.zeros(self._n + 1, dtype=np.uint64)
                if self._n:
                    np.cumsum(np.concatenate(self._lengths), out=offsets[1:])
            self._parts, self._lengths, self._ints = [], [], []
            self._done = (values, offsets)
        return self._done

    def arrays(self) -> dict[str, np.ndarray]:
        """The artifact's id arrays: ``ids/int``, or ``ids/str_offsets`` and ``ids/str_bytes``."""
        values, offsets = self._joined()
        if self.kind == "int":
            return {"ids/int": values}
        return {"ids/str_offsets": offsets, "ids/str_bytes": values}

    def keys(self) -> np.ndarray:
        """The ids' keys (uint64 (n,), :data:`ID_KEY_SCHEME`), computed once."""
        if self._keys is None:
            values, offsets = self._joined()
            if self.kind == "int":
                self._keys = values.view(np.uint64)
            else:
                raw = values.data
                bounds = offsets.tolist()
                self._keys = utf8_id_keys(map(raw.__getitem__, map(slice, bounds[:-1], bounds[1:])))
        return self._keys

    def check_unique(self) -> None:
        """Raise :class:`DuplicateIdError` for an id that occurs twice (the message names the
        earliest repeat and where the id came first, as :func:`check_ids` does); refuse two ids
        that share a key (:func:`check_distinct_keys`)."""
        if self._unique:
            return
        keys = self.keys()
        repeat = _first_repeat(keys)
        if repeat is None:
            self._unique = True
            return
        first, second = repeat
        if self[first] != self[second]:  # pragma: no cover - needs a 64-bit blake2b collision
            order = np.argsort(keys, kind="stable")
            check_distinct_keys(keys[order], order, self.__getitem__, param=self.param)
        raise _duplicate(self[second], first, second, self.param)

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self._n))]
        i = int(i)
        if not -self._n <= i < self._n:
            raise IndexError(f"id position {i} is out of range ({self._n} ids)")
        i %= self._n
        values, offsets = self._joined()
        if self.kind == "int":
            return int(values[i])
        return bytes(values[int(offsets[i]): int(offsets[i + 1])]).decode("utf-8")
