"""The Redis backend's reads of the committed state: every call one atomic command or script.

:class:`RedisView` is what :meth:`RedisStorage.read <diversify.index.redis.RedisStorage.read>`
yields; the write transaction (:mod:`diversify.index.redis_buffer`) reads through it and lays its
buffered writes over the answers. It talks to the server through the few members of the storage
object named by :class:`Server` (so this module does not import :mod:`diversify.index.redis`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from .._arrays import unique_sorted
from .records import STATE_FIELDS, checked_int, checked_state
from .redis_wire import I64, bytes8, cluster_records, decode_doc, resp_rows, seq8
from .storage import Counts, DocRow, State, View

__all__ = ["RedisView", "Server", "CHUNK"]

CHUNK = 4096  # keys per command / script call


class Server(Protocol):
    """What a view needs of :class:`~diversify.index.redis.RedisStorage`."""

    url: str
    p: str
    lease: float
    client: Any
    scripts: dict[str, Any]

    def call(self, fn, *args, action: str = ..., rolled_back: bool = ...) -> Any: ...

    def evalsha(self, name: str, keys: Sequence[Any], args: Sequence[Any]) -> Any: ...

    def lease_lost(self) -> str: ...


class RedisView(View):
    """Committed state, each call one atomic command or script."""

    def __init__(self, st: Server):
        self.st = st

    def _call(self, fn, *args):
        return self.st.call(fn, *args)

    def state(self) -> State:
        r = self.st.client
        nxt, ncl, kind, layout = self._call(r.hmget, self.st.p + "state", *STATE_FIELDS)
        # the creation script writes the state with the meta: an index whose state is gone is damaged
        # (reading it as empty would reuse seq 0 and overwrite stored documents)
        return checked_state(self.st.url, nxt, ncl, kind, layout)

    def docs_by_seq(self, seqs: Sequence[int], *, payload: bool = True) -> list[DocRow]:
        s8 = [seq8(s) for s in dict.fromkeys(int(s) for s in seqs)]
        out: list[DocRow] = []
        for lo in range(0, len(s8), CHUNK):
            part = s8[lo:lo + CHUNK]
            vals = self._call(self.st.client.mget, [self.st.p.encode() + b"d:" + s for s in part])
            out += [decode_doc(s, v, payload, self.st.url) for s, v in zip(part, vals) if v is not None]
        return out

    def docs_by_id(self, ids: Sequence[str], *, payload: bool = True) -> list[DocRow]:
        uniq = list(dict.fromkeys(ids))
        out: list[DocRow] = []
        for lo in range(0, len(uniq), CHUNK):
            flat = self._call(self.st.evalsha, "docs_by_id", [], [self.st.p, *uniq[lo:lo + CHUNK]])
            out += [decode_doc(flat[i], flat[i + 1], payload, self.st.url) for i in range(0, len(flat), 2)]
        return out

    def docs_in_clusters(self, clusters: Sequence[int], *, payload: bool = True) -> list[DocRow]:
        uniq = list(dict.fromkeys(int(c) for c in clusters))
        out: list[DocRow] = []
        for lo in range(0, len(uniq), CHUNK):
            blob = cluster_records(uniq[lo:lo + CHUNK])
            flat = self._call(self.st.scripts["docs_in_clusters"], [], [self.st.p, blob])
            out += [decode_doc(flat[i], flat[i + 1], payload, self.st.url) for i in range(0, len(flat), 2)]
        return out

    def candidates(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self._lookup(unique_sorted(np.asarray(keys, dtype=np.int64)))[:2]

    def _lookup(self, uniq: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(keys, seqs) of the band rows of the sorted unique ``uniq``, and a mask of the keys found."""
        base = self.st.p.encode() + b"b:"
        found = np.zeros(uniq.size, dtype=bool)
        ks: list[np.ndarray] = []
        ss: list[bytes] = []
        step = CHUNK * 4
        for lo in range(0, uniq.size, step):
            part = uniq[lo:lo + step]
            keys = resp_rows(part.size, [base, bytes8(part, ">")])
            meta, vals = self._call(self.st.evalsha, "band_get", [keys], [])
            if not meta:
                continue
            pos_len = np.frombuffer(meta, dtype="<u4").reshape(-1, 2).astype(np.int64)
            found[lo + pos_len[:, 0]] = True
            ks.append(np.repeat(part[pos_len[:, 0]], pos_len[:, 1] // 8))
            ss.append(vals)
        if not ks:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), found
        return np.concatenate(ks), np.frombuffer(b"".join(ss), dtype=I64).astype(np.int64), found

    def _scan_end(self) -> int:
        top = self._call(self.st.client.hget, self.st.p + "state", "max_seq")
        return (checked_int(self.st.url, "state", "max_seq", top, -1) if top is not None else -1) + 1

    def scan(self, after_seq: int, limit: int, *, payload: bool = True) -> list[DocRow]:
        end = self._scan_end()
        out: list[DocRow] = []
        seq = max(int(after_seq) + 1, 0)
        while len(out) < limit and seq < end:
            hi = min(end, seq + max(limit - len(out), 64) * 2)
            out += self.docs_by_seq(range(seq, hi), payload=payload)
            seq = hi
        return out[:limit]

    def counts(self) -> Counts:
        got = self._call(self.st.client.hmget, self.st.p + "state", "docs", "reps", "band_rows")
        d, r, b = (checked_int(self.st.url, "state", name, v, 0) if v is not None else 0
                   for name, v in zip(("docs", "reps", "band_rows"), got))
        return Counts(documents=d, representatives=r, band_rows=b)
