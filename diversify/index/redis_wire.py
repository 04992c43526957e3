"""The Redis backend's wire: commands packed in the Redis protocol, the records its scripts read, the
document value, and the Lua scripts (package data files under ``diversify/index/lua/``).

A batch sends tens of thousands of arguments, so commands are packed here in one pass
(:func:`pack`) and fixed-width rows with numpy (:func:`resp_rows`) rather than by redis-py's packer
one argument at a time. Integers travel as 8 bytes: band keys and cluster buckets big-endian (so the
keys sort as the numbers do), seqs little-endian (``seq8``).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple, Optional

import numpy as np

from .records import damaged, stored_id_text
from .storage import DocRow

__all__ = ["Raw", "pack", "resp_rows", "bytes8", "seq8", "band_pairs", "cluster_records", "text", "text_key",
           "encode_doc", "decode_doc", "lua", "SCRIPTS", "HEADER", "I64"]

HEADER = struct.Struct("<BqdqI")  # is_rep, cluster, similarity, stages, id length
I64 = np.dtype("<i8")
#: the scripts under diversify/index/lua/ (``<name>.lua``)
SCRIPTS = ("init", "renew", "release", "commit", "band_get", "docs_by_id", "docs_in_clusters")
_LUA: dict[str, str] = {}
#: the scripts' folder, installed beside this module as package data
_LUA_DIR = Path(__file__).resolve().parent / "lua"


def lua(name: str) -> str:
    """The source of the Lua script ``name`` (one of :data:`SCRIPTS`), read from the package data once."""
    source = _LUA.get(name)
    if source is None:
        if name not in SCRIPTS:
            raise KeyError(f"no Lua script {name!r}; the scripts are {list(SCRIPTS)}")
        source = _LUA[name] = (_LUA_DIR / f"{name}.lua").read_text("utf-8")
    return source


class Raw(NamedTuple):
    """``n`` arguments already in the Redis protocol (see :func:`resp_rows`)."""

    n: int
    data: bytes


def pack(args: Sequence[Any]) -> bytes:
    """One command in the Redis protocol (RESP), built in one pass: redis-py's own packer costs
    several microseconds an argument, and a batch has tens of thousands."""
    count = 0
    out = [b""]
    append = out.append
    heads: dict[int, bytes] = {}
    for a in args:
        if a.__class__ is not bytes:
            if isinstance(a, Raw):
                append(b"\r\n" + a.data[:-2])
                count += a.n
                continue
            a = a if isinstance(a, bytes) else str(a).encode("utf-8")
        n = len(a)
        h = heads.get(n)
        if h is None:
            h = heads[n] = b"\r\n$%d\r\n" % n
        append(h)
        append(a)
        count += 1
    out[0] = b"*%d" % count
    append(b"\r\n")
    return b"".join(out)


def resp_rows(n: int, *strings: Sequence[Any]) -> Raw:
    """``n`` rows of fixed-width bulk strings in the Redis protocol, built with numpy: each of
    ``strings`` is a list of columns, a ``bytes`` constant or an (n, w) uint8 array."""
    if n == 0:
        return Raw(0, b"")
    blocks: list[np.ndarray] = []

    def const(b: bytes) -> np.ndarray:
        return np.broadcast_to(np.frombuffer(b, dtype=np.uint8), (n, len(b)))

    for cols in strings:
        width = sum(len(c) if isinstance(c, bytes) else c.shape[1] for c in cols)
        blocks.append(const(b"$%d\r\n" % width))
        blocks += [const(c) if isinstance(c, bytes) else c for c in cols]
        blocks.append(const(b"\r\n"))
    return Raw(n * len(strings), np.hstack(blocks).tobytes())


def bytes8(values: np.ndarray, order: str) -> np.ndarray:
    """int64 values as an (n, 8) uint8 array, big (">") or little ("<") endian."""
    return np.ascontiguousarray(np.asarray(values, dtype=np.int64).astype(order + "i8")).view(np.uint8).reshape(-1, 8)


def seq8(seq: int) -> bytes:
    """A seq as 8 little-endian bytes (how the key layout stores it)."""
    return int(seq).to_bytes(8, "little", signed=True)


def _records(buckets: np.ndarray, fields: np.ndarray, seqs: Optional[np.ndarray]) -> bytes:
    """bucket8 + field8 (big-endian) [+ seq8] per row, as one blob for the scripts."""
    if buckets.size == 0:
        return b""
    cols = [buckets.astype(">i8").view(np.uint8).reshape(-1, 8), fields.astype(">i8").view(np.uint8).reshape(-1, 8)]
    if seqs is not None:
        cols.append(seqs.astype("<i8").view(np.uint8).reshape(-1, 8))
    return np.ascontiguousarray(np.hstack(cols)).tobytes()


def band_pairs(keys: np.ndarray, seqs: np.ndarray) -> bytes:
    """key8 + seq8 per band row, one blob."""
    if keys.size == 0:
        return b""
    cols = [np.asarray(keys, dtype=np.int64).astype(">i8").view(np.uint8).reshape(-1, 8),
            np.asarray(seqs, dtype=np.int64).astype("<i8").view(np.uint8).reshape(-1, 8)]
    return np.ascontiguousarray(np.hstack(cols)).tobytes()


def cluster_records(clusters: Sequence[int], seqs: Optional[Sequence[int]] = None) -> bytes:
    """Cluster c lives in bucket c >> 7 (128 clusters a bucket), field c."""
    c = np.asarray(list(clusters), dtype=np.int64)
    return _records(c >> 7, c, None if seqs is None else np.asarray(list(seqs), dtype=np.int64))


def text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def text_key(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def encode_doc(row: DocRow) -> bytes:
    """A document's value: the header (is_rep, cluster, similarity, stages, id length), the id, the payload."""
    idb = row.id.encode("utf-8")
    return HEADER.pack(1 if row.is_rep else 0, row.cluster, row.similarity, row.stages, len(idb)) + idb + row.payload


def decode_doc(s8: bytes, value: bytes, payload: bool, url: str = "redis") -> DocRow:
    """A document value (:func:`encode_doc`) back as a DocRow, or StorageError when it is damaged."""
    seq = int.from_bytes(s8, "little", signed=True)
    start = HEADER.size
    is_rep, cluster, sim, stages, n = HEADER.unpack_from(value) if len(value) >= start else (0, 0, 0.0, 0, -1)
    if n < 0 or len(value) < start + n:
        raise damaged(url, f"document (seq {seq})", f"it is shorter ({len(value)} bytes) than its header says")
    return DocRow(seq=seq, id=stored_id_text(value[start:start + n], url, seq),
                  cluster=cluster, is_rep=bool(is_rep), similarity=sim, stages=stages,
                  payload=bytes(value[start + n:]) if payload else b"")
