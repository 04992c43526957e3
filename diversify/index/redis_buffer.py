"""The Redis backend's write transaction: a read-your-writes buffer committed in one MULTI/EXEC.

Inside :meth:`RedisStorage.write <diversify.index.redis.RedisStorage.write>` nothing reaches the
server before the commit: :class:`RedisTransaction` keeps the batch's state, document rows and band
rows in this process, answers every read with the committed state (read through
:class:`~diversify.index.redis_view.RedisView`, under the writer lease) overlaid with them, and at
the end turns them into the commit script's arguments and the bulk commands that follow it
(:meth:`RedisTransaction.commit_args`).
"""

from __future__ import annotations

import struct
import time
from collections.abc import Sequence
from typing import Any, Optional

import numpy as np

from .._arrays import unique_sorted
from ..errors import StorageError
from .records import state_fields
from .redis_view import RedisView, Server
from .redis_wire import band_pairs, bytes8, cluster_records, encode_doc, resp_rows, seq8
from .storage import Assignment, Counts, DocRow, State, Transaction

__all__ = ["RedisTransaction"]


class RedisTransaction(RedisView, Transaction):
    """Reads of the committed state plus this batch's buffered writes; one MULTI/EXEC commits them."""

    def __init__(self, st: Server, token: str):
        super().__init__(st)
        self.token = token
        self.renewed = time.monotonic()
        self.lost = False  # set by the heartbeat when another writer took the lease
        self._state: Optional[State] = None
        self._orig: dict[int, Optional[DocRow]] = {}  # committed rows of the seqs this batch touched
        self._docs: dict[int, Optional[DocRow]] = {}  # their rows after this batch (None: deleted)
        self._band_ops: list[tuple[np.ndarray, np.ndarray, bool]] = []  # (keys, seqs, inserted?) in order
        self._absent: list[np.ndarray] = []  # band keys looked up under this lease and not there

    def _call(self, fn, *args):
        if self.lost:
            raise StorageError(self.st.lease_lost())
        if time.monotonic() - self.renewed > self.st.lease / 2:
            ok = self.st.call(self.st.scripts["renew"], [self.st.p + "lock", self.st.p + "fence"],
                              [self.token, int(self.st.lease * 1000)], rolled_back=True)
            if not ok:
                raise StorageError(self.st.lease_lost())
            self.renewed = time.monotonic()
        return self.st.call(fn, *args, rolled_back=True)

    # ---- reads (committed state + overlay)
    def state(self) -> State:
        return self._state if self._state is not None else super().state()

    def _overlay(self, rows: list[DocRow], payload: bool, keep) -> list[DocRow]:
        by_seq = {r.seq: r for r in rows if r.seq not in self._docs}
        for seq, row in self._docs.items():
            if row is not None and keep(row):
                by_seq[seq] = row if payload else DocRow(**{**row.__dict__, "payload": b""})
        return list(by_seq.values())

    def docs_by_seq(self, seqs: Sequence[int], *, payload: bool = True) -> list[DocRow]:
        want = set(int(s) for s in seqs)
        return self._overlay(super().docs_by_seq(seqs, payload=payload), payload, lambda r: r.seq in want)

    def docs_by_id(self, ids: Sequence[str], *, payload: bool = True) -> list[DocRow]:
        want = set(ids)
        return self._overlay(super().docs_by_id(ids, payload=payload), payload, lambda r: r.id in want)

    def docs_in_clusters(self, clusters: Sequence[int], *, payload: bool = True) -> list[DocRow]:
        want = set(int(c) for c in clusters)
        return self._overlay(super().docs_in_clusters(clusters, payload=payload), payload, lambda r: r.cluster in want)

    def _bands(self, keys: Optional[np.ndarray] = None) -> dict[tuple[int, int], bool]:
        """(key, seq) -> present after this batch, for the pairs it touched (among ``keys``)."""
        out: dict[tuple[int, int], bool] = {}
        for k, s, present in self._band_ops:
            if keys is not None:
                hit = np.isin(k, keys)
                k, s = k[hit], s[hit]
            for pair in zip(k.tolist(), s.tolist()):
                out[pair] = present
        return out

    def candidates(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        uniq = unique_sorted(np.asarray(keys, dtype=np.int64))
        k, s, found = self._lookup(uniq)
        self._absent.append(uniq[~found])
        if not self._band_ops:
            return k, s
        pairs = {p: True for p in zip(k.tolist(), s.tolist())}
        pairs.update(self._bands(np.asarray(keys, dtype=np.int64)))
        live = [p for p, present in pairs.items() if present]
        return np.array([p[0] for p in live], dtype=np.int64), np.array([p[1] for p in live], dtype=np.int64)

    def _scan_end(self) -> int:
        # the committed range, then this batch's rows (docs_by_seq overlays them page by page)
        return max(super()._scan_end(), max(self._docs, default=-1) + 1)

    def counts(self) -> Counts:
        c = super().counts()
        dd, dr = self._doc_deltas()
        db = 0
        if self._band_ops:
            touched = self._bands()
            k, s = RedisView.candidates(self, np.array([p[0] for p in touched], dtype=np.int64))
            there = set(zip(k.tolist(), s.tolist()))
            db = sum((p not in there) if v else -(p in there) for p, v in touched.items())
        return Counts(documents=c.documents + dd, representatives=c.representatives + dr, band_rows=c.band_rows + db)

    # ---- writes (buffered)
    def set_state(self, state: State) -> None:
        self._state = state

    def _remember(self, seqs: Sequence[int]) -> None:
        """Fetch the committed rows of seqs this batch has not touched yet (for cluster bookkeeping)."""
        new = [s for s in dict.fromkeys(int(s) for s in seqs) if s not in self._orig]
        if not new:
            return
        found = {r.seq: r for r in RedisView.docs_by_seq(self, new)}
        for s in new:
            self._orig[s] = found.get(s)
            self._docs.setdefault(s, found.get(s))

    def insert_docs(self, rows: Sequence[DocRow]) -> None:
        for r in rows:
            self._orig.setdefault(r.seq, None)
            self._docs[r.seq] = r

    def update_docs(self, changes: Sequence[Assignment]) -> None:
        self._remember([a.seq for a in changes if a.seq not in self._docs])
        for a in changes:
            row = self._docs.get(a.seq)
            if row is None:
                continue
            self._docs[a.seq] = DocRow(seq=row.seq, id=row.id, cluster=a.cluster, is_rep=a.is_rep,
                                       similarity=a.similarity, stages=a.stages, payload=row.payload)

    def delete_docs(self, seqs: Sequence[int]) -> None:
        self._remember(seqs)
        for s in seqs:
            self._docs[int(s)] = None

    def insert_bands(self, keys: np.ndarray, seqs: np.ndarray) -> None:
        self._band_op(keys, seqs, True)

    def delete_bands(self, keys: np.ndarray, seqs: np.ndarray) -> None:
        self._band_op(keys, seqs, False)

    def _band_op(self, keys: np.ndarray, seqs: np.ndarray, present: bool) -> None:
        k = np.array(keys, dtype=np.int64).reshape(-1)
        s = np.array(seqs, dtype=np.int64).reshape(-1)
        if k.shape != s.shape:
            raise ValueError(f"band keys and seqs differ in length: {k.size} != {s.size}")
        if k.size:
            self._band_ops.append((k, s, present))

    def _band_changes(self) -> tuple[bytes, bytes, int, list[Any]]:
        """The batch's band rows as script records: removed pairs, then the added pairs (sorted by
        key) of keys this batch saw absent (MSETNX) and of the others (appended)."""
        deletes_none = all(present for _, _, present in self._band_ops)
        if deletes_none:  # the usual batch: inserts only
            k = np.concatenate([op[0] for op in self._band_ops] or [np.zeros(0, np.int64)])
            s = np.concatenate([op[1] for op in self._band_ops] or [np.zeros(0, np.int64)])
            rem = b""
        else:
            final = self._bands()
            add = np.array([p for p, v in final.items() if v], dtype=np.int64).reshape(-1, 2)
            gone = np.array([p for p, v in final.items() if not v], dtype=np.int64).reshape(-1, 2)
            k, s, rem = add[:, 0], add[:, 1], band_pairs(gone[:, 0], gone[:, 1])
        order = np.lexsort((s, k))
        k, s = k[order], s[order]
        keep = np.ones(k.size, dtype=bool)
        keep[1:] = (k[1:] != k[:-1]) | (s[1:] != s[:-1])
        k, s = k[keep], s[keep]
        absent = np.concatenate(self._absent) if self._absent and deletes_none else np.zeros(0, np.int64)
        fresh = np.isin(k, absent)  # a delete in the batch: the careful path for every key
        fk, fs = k[fresh], s[fresh]
        pairs: list[Any] = []
        if fk.size:
            base = self.st.p.encode() + b"b:"
            starts = np.flatnonzero(np.r_[True, fk[1:] != fk[:-1]])
            sizes = np.diff(np.r_[starts, fk.size])
            one = starts[sizes == 1]  # the usual: a new band key of one new representative
            pairs.append(resp_rows(one.size, [base, bytes8(fk[one], ">")], [bytes8(fs[one], "<")]))
            seq8 = fs.astype("<i8").tobytes()
            for a, m in zip(starts[sizes > 1].tolist(), sizes[sizes > 1].tolist()):
                pairs += (base + int(fk[a]).to_bytes(8, "big", signed=True), seq8[8 * a:8 * (a + m)])
        return rem, band_pairs(k[~fresh], s[~fresh]), int(fk.size), pairs

    # ---- commit
    def _doc_deltas(self) -> tuple[int, int]:
        dd = dr = 0
        for seq, row in self._docs.items():
            old = self._orig.get(seq)
            dd += (row is not None) - (old is not None)
            dr += (row is not None and row.is_rep) - (old is not None and old.is_rep)
        return dd, dr

    def commit_args(self) -> tuple[list[Any], list[list[Any]]]:
        """(the commit script's ARGV, the bulk commands that follow it in the same MULTI/EXEC)."""
        st = self.state()
        dd, dr = self._doc_deltas()
        top = max((s for s, r in self._docs.items() if r is not None), default=-1)
        cl_del: list[tuple[int, int]] = []
        cl_add: list[tuple[int, int]] = []
        dels: list[bytes] = []
        docs: list[bytes] = []
        names: list[bytes] = []
        u32 = struct.Struct("<I").pack
        base = self.st.p.encode() + b"d:"
        for seq, row in self._docs.items():
            old = self._orig.get(seq)
            if old is not None and (row is None or row.cluster != old.cluster):
                cl_del.append((old.cluster, seq))
            if row is not None and (old is None or row.cluster != old.cluster):
                cl_add.append((row.cluster, seq))
            if old is not None and (row is None or row.id != old.id):
                idb = old.id.encode("utf-8")
                dels += (u32(len(idb)), seq8(seq), idb)
            if row is not None and row != old:
                s8 = seq8(seq)
                docs += (base + s8, encode_doc(row))
                names += (row.id.encode("utf-8"), s8)

        def cblob(pairs):
            return cluster_records([c for c, _ in pairs], [s for _, s in pairs]) if pairs else b""

        rem, other, fresh_rows, fresh = self._band_changes()
        f = state_fields(st)
        script = [self.st.p, self.token, f["next_seq"], f["next_cluster"], f["id_kind"], f["layout"], dd, dr, top,
                  rem, cblob(cl_del), cblob(cl_add), other, b"".join(dels), fresh_rows]
        bulk = []
        if fresh:
            bulk.append([b"MSETNX", *fresh])
        if docs:
            bulk += [[b"MSET", *docs], [b"HSET", self.st.p + "ids", *names]]
        return script, bulk
