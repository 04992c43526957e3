"""The Redis backend (redis-py): one index = the keys under one prefix of one Redis database.

URL: ``redis://[user:password@]host:port/db?index=name`` (also ``rediss://``, ``unix://``); the
prefix is ``dvf:{name}:`` (the braces are a hash tag: every key of an index lands in one slot).
``lease=SECONDS`` (default 10) sets the writer lease described below; every other query parameter
goes to redis-py. Redis Cluster is not supported (the scripts touch keys they do not declare).

Key layout (``P`` = the prefix; a seq is stored as 8 little-endian bytes, ``seq8``):

* ``P meta`` hash: the :class:`Meta` fields + ``layout`` (this module's :data:`LAYOUT`);
* ``P state`` hash: ``next_seq``, ``next_cluster``, ``id_kind``, ``layout``, the counters ``docs``, ``reps``,
  ``band_rows`` and ``last_commit`` (the fencing token of the last committed batch);
* ``P d:<seq8>`` string, one per document: a 29-byte header (is_rep, cluster, similarity, stages,
  id length), the id (UTF-8), the payload;
* ``P ids`` hash: id -> seq8;
* ``P b:<key8>`` strings, the band table: one per band key (8 big-endian bytes), its value the
  seq8s of the representatives with that key. A batch looks its keys up with one MGET per 4,000
  and writes the new ones with MSETNX, so neither side handles band rows one by one (~120 bytes
  a row with the key on Redis 7.0; hash buckets in listpack encoding measured ~21 bytes a row
  once full, but need one command per row inside the script, ~10x slower commits);
* ``P c:<bucket8>`` hashes, cluster -> member seq8s, 128 clusters per bucket (small hashes stay
  listpacks: ~20 bytes a member);
* ``P lock`` string: the fencing token of the writer holding the lease; ``P fence`` its counter.

Writer assignment (why two writers never interleave, and a stale one cannot commit):

1. :meth:`RedisStorage.write` takes a fencing token (``INCR P fence``) and the lease
   (``SET P lock <token> NX PX lease``), waiting up to ``lock_timeout``.
2. Inside the block every read goes to the server (the latest committed state: nobody else can
   commit while we hold the lease). A thread renews the lease every lease/3 (a script:
   compare-and-PEXPIRE), so a live writer keeps it however long its batch takes. Writes are buffered in this process only; reads inside the block see
   them (read-your-writes), the server sees nothing yet.
3. On a normal exit ONE MULTI/EXEC commits: under WATCH of ``P lock`` and ``P fence`` the writer
   checks that the lock still holds its token, then queues the commit script (it applies the
   writes that read before they write, records the token as ``last_commit`` and deletes the lock)
   and the bulk of the batch as plain commands (MSETNX of the new band keys, MSET of the
   documents, HSET of the ids). A MULTI/EXEC runs with no other command in between and is written
   to the append-only file as one unit (a server killed while writing it loads without it), so the
   batch is applied entirely or not at all, also when the server is killed; a change of the lock
   or fence between the check and EXEC (a takeover, or our own renewal) makes EXEC apply nothing.
4. A writer whose lease expired (the whole process stalled longer than the lease: SIGSTOP, a frozen VM)
   finds another token (or none) in ``P lock``: its check refuses to write, and the batch is
   reported as rolled back. The writer that took over read the state after the stale one's last
   commit, so assignments stay serializable: two near-duplicates added at once by two writers are
   assigned one after the other and the second finds the first as a representative.
5. A SIGKILLed writer leaves only its lease, which expires after ``lease`` seconds; it never wrote
   anything else. An exception inside the block releases the lease (compare-and-delete).
6. The server going away: before the commit the batch is simply not applied (StorageError says
   so). If the connection breaks during the commit the outcome is unknown to the client,
   so it reconnects once and compares ``last_commit`` with its token: committed -> success, else
   the error says the batch was not applied (or, with the server still gone, that it was applied
   entirely or not at all).

Readers take no lock; every read call is one command or one script, so atomic by itself, but two
calls of one :meth:`read` block may see different commits (the contract allows it).
"""

from __future__ import annotations

import contextlib
import struct
import threading
import time
import urllib.parse
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple, Optional

import numpy as np
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from .._arrays import unique_sorted
from ..errors import ConfigError, IncompatibleIndexError, StorageError
from .records import checked_int, checked_meta, checked_state, stored_id_text
from .storage import (
    Assignment,
    Counts,
    DocRow,
    Meta,
    State,
    Storage,
    StorageOptions,
    Transaction,
    View,
    index_name,
    mask_url,
    storage_errors,
)

__all__ = ["RedisStorage", "LAYOUT", "DEFAULT_LEASE"]

#: version of this module's key layout (stored in ``P meta``; a larger one is refused)
LAYOUT = 1
#: seconds a writer's lease lasts without renewal (a killed writer blocks others this long at most)
DEFAULT_LEASE = 10.0

_HEADER = struct.Struct("<BqdqI")  # is_rep, cluster, similarity, stages, id length
_META_KEYS = ("schema_version", "config_json", "fingerprint", "created_by")
_OUR_PARAMS = ("index", "lease")
_CHUNK = 4096  # keys per command / script call
_COMMIT_TRIES = 5  # EXECs a batch tries when a renewal of its own lease raced it (see RedisStorage._commit)
_I64 = np.dtype("<i8")

_INIT = """
local p = ARGV[1]
if redis.call('EXISTS', p .. 'meta') == 0 then
  redis.call('HSET', p .. 'meta', 'schema_version', ARGV[2], 'config_json', ARGV[3], 'fingerprint', ARGV[4],
             'created_by', ARGV[5], 'layout', ARGV[6])
  redis.call('HSET', p .. 'state', 'next_seq', 0, 'next_cluster', 0, 'id_kind', '', 'layout', '', 'docs', 0, 'reps', 0,
             'band_rows', 0, 'max_seq', -1, 'last_commit', '')
end
return redis.call('HGETALL', p .. 'meta')
"""

# KEYS: lock, fence. Renew our lease; an expired one only if no other writer asked for it since.
_RENEW = """
local lock = redis.call('GET', KEYS[1])
if lock == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
if lock == false and redis.call('GET', KEYS[2]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
"""

# KEYS: lock, fence
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('INCR', KEYS[2])
  return redis.call('DEL', KEYS[1])
end
return 0
"""

# Multimap fields (band keys, clusters): the value is a string of seq8s; add/remove one seq8.
_MM_LUA = """
local function mm_has(v, m)
  for i = 1, #v, 8 do if string.sub(v, i, i + 7) == m then return true end end
  return false
end
local function mm_add(h, f, m)
  if redis.call('HSETNX', h, f, m) == 1 then return 1 end  -- the common case: a new field
  local v = redis.call('HGET', h, f)
  if mm_has(v, m) then return 0 end
  redis.call('HSET', h, f, v .. m)
  return 1
end
local function mm_del(h, f, m)
  local v = redis.call('HGET', h, f)
  if not v then return 0 end
  for i = 1, #v, 8 do
    if string.sub(v, i, i + 7) == m then
      local rest = string.sub(v, 1, i - 1) .. string.sub(v, i + 8)
      if #rest == 0 then redis.call('HDEL', h, f) else redis.call('HSET', h, f, rest) end
      return 1
    end
  end
  return 0
end
"""

# ARGV: 1 prefix, 2 token, 3 next_seq, 4 next_cluster, 5 id_kind, 6 layout, 7 d_docs, 8 d_reps, 9 max_seq,
#   10 band rows to remove (16-byte records key8 seq8), 11 / 12 cluster members to remove / add
#   (24-byte records bucket8 field8 seq8), 13 band rows to add to keys that may exist (key8 seq8,
#   sorted by key), 14 documents to remove ([u32 id length][seq8][id]...), 15 rows of the new band
#   keys (written by the MSETNX that follows the script in the same MULTI/EXEC).
# The script does the part of a commit that reads before it writes; the bulk (new band keys,
# documents, ids) follows it in the same MULTI/EXEC as plain MSETNX / MSET / HSET, so that it never
# passes through Lua (Lua copies every argument into a Lua string and back: the same 1,000-document
# batch cost the server 39 ms through the script, 22 ms as plain commands). The lease holds when the
# lock carries our token, or when it expired and no other writer has even asked for it since (the
# fence counter is still ours: nobody else can have committed in between); :meth:`RedisStorage._commit`
# checks it under WATCH before EXEC, the script again inside.
_COMMIT = _MM_LUA + """
local p = ARGV[1]
local lock = redis.call('GET', p .. 'lock')
if lock ~= ARGV[2] and not (lock == false and redis.call('GET', p .. 'fence') == ARGV[2]) then
  return redis.error_reply('DVF_LEASE_LOST')
end
local sub = string.sub
local band_rows = 0
local pb = p .. 'b:'
local blob = ARGV[10]
for j = 1, #blob, 16 do
  local k, m = pb .. sub(blob, j, j + 7), sub(blob, j + 8, j + 15)
  local v = redis.call('GET', k)
  if v then
    for x = 1, #v, 8 do
      if sub(v, x, x + 7) == m then
        local rest = sub(v, 1, x - 1) .. sub(v, x + 8)
        if #rest == 0 then redis.call('DEL', k) else redis.call('SET', k, rest) end
        band_rows = band_rows - 1
        break
      end
    end
  end
end
local function each(blob, tag, fn)
  local base = p .. tag
  for i = 1, #blob, 24 do fn(base .. sub(blob, i, i + 7), sub(blob, i + 8, i + 15), sub(blob, i + 16, i + 23)) end
end
each(ARGV[11], 'c:', mm_del)
each(ARGV[12], 'c:', mm_add)
local function append(k, add)
  local v = redis.call('GET', k) or ''
  for y = 1, #add, 8 do
    local m = sub(add, y, y + 7)
    if not mm_has(v, m) then v = v .. m band_rows = band_rows + 1 end
  end
  redis.call('SET', k, v)
end
blob = ARGV[13]
local j = 1
while j <= #blob do
  local k = sub(blob, j, j + 7)
  local e = j + 16
  while e <= #blob and sub(blob, e, e + 7) == k do e = e + 16 end
  local parts = {}
  for x = j, e - 1, 16 do parts[#parts + 1] = sub(blob, x + 8, x + 15) end
  append(pb .. k, table.concat(parts))
  j = e
end
local ids = p .. 'ids'
blob = ARGV[14]
local pos = 1
while pos <= #blob do
  local n
  n, pos = struct.unpack('<I4', blob, pos)
  local s, id = sub(blob, pos, pos + 7), sub(blob, pos + 8, pos + 7 + n)
  pos = pos + 8 + n
  redis.call('DEL', p .. 'd:' .. s)
  if redis.call('HGET', ids, id) == s then redis.call('HDEL', ids, id) end
end
band_rows = band_rows + tonumber(ARGV[15])  -- the new keys' rows: MSETNX after this script
local st = p .. 'state'
redis.call('HSET', st, 'next_seq', ARGV[3], 'next_cluster', ARGV[4], 'id_kind', ARGV[5], 'layout', ARGV[6],
           'last_commit', ARGV[2])
redis.call('HINCRBY', st, 'docs', ARGV[7])
redis.call('HINCRBY', st, 'reps', ARGV[8])
redis.call('HINCRBY', st, 'band_rows', band_rows)
if tonumber(ARGV[9]) > tonumber(redis.call('HGET', st, 'max_seq') or '-1') then
  redis.call('HSET', st, 'max_seq', ARGV[9])
end
redis.call('DEL', p .. 'lock')
redis.call('INCR', p .. 'fence')  -- a late renewal of this token can no longer take the lock back
return band_rows
"""

# KEYS: band keys -> {[u32 position, u32 length]..., values...}: two strings, so that the client
# parses two replies, not one per key (a batch of queries finds most of its keys)
_BAND_GET = """
local meta, vals = {}, {}
for lo = 1, #KEYS, 4000 do
  local got = redis.call('MGET', unpack(KEYS, lo, math.min(lo + 3999, #KEYS)))
  for j = 1, #got do
    if got[j] then
      meta[#meta + 1] = struct.pack('<I4I4', lo + j - 2, #got[j])
      vals[#vals + 1] = got[j]
    end
  end
end
return {table.concat(meta), table.concat(vals)}
"""


# ARGV: prefix, ids... -> the doc values of the live ids (absent ids omitted)
_DOCS_BY_ID = """
local p = ARGV[1]
local out = {}
for i = 2, #ARGV do
  local s = redis.call('HGET', p .. 'ids', ARGV[i])
  if s then
    local v = redis.call('GET', p .. 'd:' .. s)
    if v then out[#out + 1] = s out[#out + 1] = v end
  end
end
return out
"""

# ARGV: prefix, blob of 16-byte cluster records -> seq8, value pairs of every member
_DOCS_IN_CLUSTERS = """
local p = ARGV[1]
local out = {}
local blob = ARGV[2]
for i = 1, #blob, 16 do
  local v = redis.call('HGET', p .. 'c:' .. string.sub(blob, i, i + 7), string.sub(blob, i + 8, i + 15))
  if v then
    for j = 1, #v, 8 do
      local s = string.sub(v, j, j + 7)
      local d = redis.call('GET', p .. 'd:' .. s)
      if d then out[#out + 1] = s out[#out + 1] = d end
    end
  end
end
return out
"""


# --------------------------------------------------------------------------- encodings


class _Raw(NamedTuple):
    """``n`` arguments already in the Redis protocol (see :func:`_resp_rows`)."""

    n: int
    data: bytes


def _pack(args: Sequence[Any]) -> bytes:
    """One command in the Redis protocol (RESP), built in one pass: redis-py's own packer costs
    several microseconds an argument, and a batch has tens of thousands."""
    count = 0
    out = [b""]
    append = out.append
    heads: dict[int, bytes] = {}
    for a in args:
        if a.__class__ is not bytes:
            if isinstance(a, _Raw):
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


def _resp_rows(n: int, *strings: Sequence[Any]) -> _Raw:
    """``n`` rows of fixed-width bulk strings in the Redis protocol, built with numpy: each of
    ``strings`` is a list of columns, a ``bytes`` constant or an (n, w) uint8 array."""
    if n == 0:
        return _Raw(0, b"")
    blocks: list[np.ndarray] = []

    def const(b: bytes) -> np.ndarray:
        return np.broadcast_to(np.frombuffer(b, dtype=np.uint8), (n, len(b)))

    for cols in strings:
        width = sum(len(c) if isinstance(c, bytes) else c.shape[1] for c in cols)
        blocks.append(const(b"$%d\r\n" % width))
        blocks += [const(c) if isinstance(c, bytes) else c for c in cols]
        blocks.append(const(b"\r\n"))
    return _Raw(n * len(strings), np.hstack(blocks).tobytes())


def _bytes8(values: np.ndarray, order: str) -> np.ndarray:
    """int64 values as an (n, 8) uint8 array, big (">") or little ("<") endian."""
    return np.ascontiguousarray(np.asarray(values, dtype=np.int64).astype(order + "i8")).view(np.uint8).reshape(-1, 8)


def _seq8(seq: int) -> bytes:
    return int(seq).to_bytes(8, "little", signed=True)


def _records(buckets: np.ndarray, fields: np.ndarray, seqs: Optional[np.ndarray]) -> bytes:
    """bucket8 + field8 (big-endian) [+ seq8] per row, as one blob for the scripts."""
    if buckets.size == 0:
        return b""
    cols = [buckets.astype(">i8").view(np.uint8).reshape(-1, 8), fields.astype(">i8").view(np.uint8).reshape(-1, 8)]
    if seqs is not None:
        cols.append(seqs.astype("<i8").view(np.uint8).reshape(-1, 8))
    return np.ascontiguousarray(np.hstack(cols)).tobytes()


def _band_pairs(keys: np.ndarray, seqs: np.ndarray) -> bytes:
    """key8 + seq8 per band row, one blob."""
    if keys.size == 0:
        return b""
    cols = [np.asarray(keys, dtype=np.int64).astype(">i8").view(np.uint8).reshape(-1, 8),
            np.asarray(seqs, dtype=np.int64).astype("<i8").view(np.uint8).reshape(-1, 8)]
    return np.ascontiguousarray(np.hstack(cols)).tobytes()


def _cluster_records(clusters: Sequence[int], seqs: Optional[Sequence[int]] = None) -> bytes:
    """Cluster c lives in bucket c >> 7 (128 clusters a bucket), field c."""
    c = np.asarray(list(clusters), dtype=np.int64)
    return _records(c >> 7, c, None if seqs is None else np.asarray(list(seqs), dtype=np.int64))


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _text_key(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _encode_doc(row: DocRow) -> bytes:
    idb = row.id.encode("utf-8")
    return _HEADER.pack(1 if row.is_rep else 0, row.cluster, row.similarity, row.stages, len(idb)) + idb + row.payload


def _decode_doc(seq8: bytes, value: bytes, payload: bool, url: str = "redis") -> DocRow:
    seq = int.from_bytes(seq8, "little", signed=True)
    start = _HEADER.size
    is_rep, cluster, sim, stages, n = _HEADER.unpack_from(value) if len(value) >= start else (0, 0, 0.0, 0, -1)
    if n < 0 or len(value) < start + n:
        raise StorageError(f"the document record (seq {seq}) of the index at {url} is damaged: it is shorter "
                           f"({len(value)} bytes) than its header says. It was not changed; the index was altered "
                           "outside diversify or its storage is damaged: restore it from a backup, or create a new "
                           "index and add the documents again.")
    return DocRow(seq=seq, id=stored_id_text(value[start:start + n], url, seq),
                  cluster=cluster, is_rep=bool(is_rep), similarity=sim, stages=stages,
                  payload=bytes(value[start + n:]) if payload else b"")


def _split_url(url: str) -> tuple[str, str, float]:
    """(the URL for redis-py without our parameters, the index name, the lease in seconds)."""
    parts = urllib.parse.urlsplit(url)
    pairs = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    lease = DEFAULT_LEASE
    for k, v in pairs:
        if k == "lease":
            try:
                lease = float(v)
            except ValueError:
                lease = -1.0
            if not (0.05 <= lease <= 3600):
                raise ConfigError(f"the `lease` parameter of a redis URL is the writer lease in seconds, in "
                                  f"[0.05, 3600]; got {v!r} in {mask_url(url)}. Use e.g. ?lease=10.")
    rest = urllib.parse.urlencode([(k, v) for k, v in pairs if k not in _OUR_PARAMS])
    # not urlunsplit: it writes unix:///path as unix:/path, which redis-py refuses
    plain = url.split("?", 1)[0] + (f"?{rest}" if rest else "")
    return plain, index_name(url), lease


# --------------------------------------------------------------------------- views


class _RedisView(View):
    """Committed state, each call one atomic command or script."""

    def __init__(self, st: RedisStorage):
        self.st = st

    def _call(self, fn, *args):
        return self.st.call(fn, *args)

    def state(self) -> State:
        r = self.st.client
        nxt, ncl, kind, layout = self._call(r.hmget, self.st.p + "state", "next_seq", "next_cluster", "id_kind", "layout")
        # the creation script writes the state with the meta: an index whose state is gone is damaged
        # (reading it as empty would reuse seq 0 and overwrite stored documents)
        return checked_state(self.st.url, nxt, ncl, kind, layout)

    def docs_by_seq(self, seqs: Sequence[int], *, payload: bool = True) -> list[DocRow]:
        s8 = [_seq8(s) for s in dict.fromkeys(int(s) for s in seqs)]
        out: list[DocRow] = []
        for lo in range(0, len(s8), _CHUNK):
            part = s8[lo:lo + _CHUNK]
            vals = self._call(self.st.client.mget, [self.st.p.encode() + b"d:" + s for s in part])
            out += [_decode_doc(s, v, payload, self.st.url) for s, v in zip(part, vals) if v is not None]
        return out

    def docs_by_id(self, ids: Sequence[str], *, payload: bool = True) -> list[DocRow]:
        uniq = list(dict.fromkeys(ids))
        out: list[DocRow] = []
        for lo in range(0, len(uniq), _CHUNK):
            flat = self._call(self.st.evalsha, "docs_by_id", [], [self.st.p, *uniq[lo:lo + _CHUNK]])
            out += [_decode_doc(flat[i], flat[i + 1], payload, self.st.url) for i in range(0, len(flat), 2)]
        return out

    def docs_in_clusters(self, clusters: Sequence[int], *, payload: bool = True) -> list[DocRow]:
        uniq = list(dict.fromkeys(int(c) for c in clusters))
        out: list[DocRow] = []
        for lo in range(0, len(uniq), _CHUNK):
            blob = _cluster_records(uniq[lo:lo + _CHUNK])
            flat = self._call(self.st.scripts["docs_in_clusters"], [], [self.st.p, blob])
            out += [_decode_doc(flat[i], flat[i + 1], payload, self.st.url) for i in range(0, len(flat), 2)]
        return out

    def candidates(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self._lookup(unique_sorted(np.asarray(keys, dtype=np.int64)))[:2]

    def _lookup(self, uniq: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(keys, seqs) of the band rows of the sorted unique ``uniq``, and a mask of the keys found."""
        base = self.st.p.encode() + b"b:"
        found = np.zeros(uniq.size, dtype=bool)
        ks: list[np.ndarray] = []
        ss: list[bytes] = []
        step = _CHUNK * 4
        for lo in range(0, uniq.size, step):
            part = uniq[lo:lo + step]
            keys = _resp_rows(part.size, [base, _bytes8(part, ">")])
            meta, vals = self._call(self.st.evalsha, "band_get", [keys], [])
            if not meta:
                continue
            pos_len = np.frombuffer(meta, dtype="<u4").reshape(-1, 2).astype(np.int64)
            found[lo + pos_len[:, 0]] = True
            ks.append(np.repeat(part[pos_len[:, 0]], pos_len[:, 1] // 8))
            ss.append(vals)
        if not ks:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), found
        return np.concatenate(ks), np.frombuffer(b"".join(ss), dtype=_I64).astype(np.int64), found

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


class _RedisTransaction(_RedisView, Transaction):
    """Reads of the committed state plus this batch's buffered writes; one MULTI/EXEC commits them."""

    def __init__(self, st: RedisStorage, token: str):
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
            ok = self.st.call(self.st.scripts["renew"], [self.st.p + "lock", self.st.p + "fence"], [self.token, int(self.st.lease * 1000)],
                              rolled_back=True)
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
            k, s = _RedisView.candidates(self, np.array([p[0] for p in touched], dtype=np.int64))
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
        found = {r.seq: r for r in _RedisView.docs_by_seq(self, new)}
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
            k, s, rem = add[:, 0], add[:, 1], _band_pairs(gone[:, 0], gone[:, 1])
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
            pairs.append(_resp_rows(one.size, [base, _bytes8(fk[one], ">")], [_bytes8(fs[one], "<")]))
            seq8 = fs.astype("<i8").tobytes()
            for a, m in zip(starts[sizes > 1].tolist(), sizes[sizes > 1].tolist()):
                pairs += (base + int(fk[a]).to_bytes(8, "big", signed=True), seq8[8 * a:8 * (a + m)])
        return rem, _band_pairs(k[~fresh], s[~fresh]), int(fk.size), pairs

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
                dels += (u32(len(idb)), _seq8(seq), idb)
            if row is not None and row != old:
                s8 = _seq8(seq)
                docs += (base + s8, _encode_doc(row))
                names += (row.id.encode("utf-8"), s8)

        def cblob(pairs):
            return _cluster_records([c for c, _ in pairs], [s for _, s in pairs]) if pairs else b""

        rem, other, fresh_rows, fresh = self._band_changes()
        script = [self.st.p, self.token, st.next_seq, st.next_cluster, st.id_kind or "", st.layout, dd, dr, top,
                  rem, cblob(cl_del), cblob(cl_add), other, b"".join(dels), fresh_rows]
        bulk = []
        if fresh:
            bulk.append([b"MSETNX", *fresh])
        if docs:
            bulk += [[b"MSET", *docs], [b"HSET", self.st.p + "ids", *names]]
        return script, bulk


# --------------------------------------------------------------------------- the storage


class RedisStorage(Storage):
    """The live index in one Redis database (see the module docstring)."""

    def __init__(self, url: str, options: Optional[StorageOptions] = None):
        self.url = mask_url(url)
        self.options = options if options is not None else StorageOptions()
        plain, name, self.lease = _split_url(url)
        self.name = name
        self.p = f"dvf:{{{name}}}:"
        try:
            self.client = redis.Redis.from_url(
                plain, socket_connect_timeout=self.options.connect_timeout,
                socket_timeout=max(60.0, self.options.lock_timeout), retry=Retry(NoBackoff(), 0))
        except ValueError as exc:
            raise ConfigError(f"`url` is not a redis URL redis-py accepts: {exc}; got {self.url}.") from exc
        self.scripts = {name: self.client.register_script(src) for name, src in (
            ("init", _INIT), ("renew", _RENEW), ("release", _RELEASE),
            ("band_get", _BAND_GET), ("docs_by_id", _DOCS_BY_ID), ("docs_in_clusters", _DOCS_IN_CLUSTERS))}
        with storage_errors(self.url, "connecting to"):
            self.client.ping()

    # ---- plumbing
    def evalsha(self, name: str, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        """Run a script with its arguments packed by :func:`_pack` (loading it when the server lost it)."""
        script = self.scripts[name]
        nkeys = sum(a.n if isinstance(a, _Raw) else 1 for a in keys)
        packed = _pack([b"EVALSHA", script.sha, nkeys, *keys, *args])
        pool = self.client.connection_pool
        for attempt in (0, 1):
            conn = pool.get_connection()
            try:
                conn.send_packed_command([packed])
                return conn.read_response()
            except redis.exceptions.NoScriptError:
                if attempt:
                    raise
                self.client.script_load(script.script)
            except BaseException:
                conn.disconnect()  # never reuse a connection with a reply pending
                raise
            finally:
                pool.release(conn)

    def call(self, fn, *args, action: str = "reading from", rolled_back: bool = False):
        with storage_errors(self.url, action, rolled_back=rolled_back):
            return fn(*args)

    def lease_lost(self) -> str:
        return (f"the writer lease of index {self.name!r} on {self.url} expired before this batch was committed "
                f"(the writer stalled longer than lease={self.lease:g}s) and another writer may have taken over: "
                "the batch was rolled back; nothing of it was written. Run it again, or raise ?lease= in the URL.")

    # ---- meta
    def initialize(self, meta: Meta) -> Meta:
        flat = self.call(self.scripts["init"], [], [self.p, meta.schema_version, meta.config_json, meta.fingerprint,
                                                    meta.created_by, LAYOUT], action="creating the index on")
        return self._meta(flat)

    def read_meta(self) -> Optional[Meta]:
        flat = self.call(self.client.hgetall, self.p + "meta")
        if not flat:
            return None
        return self._meta([x for kv in flat.items() for x in kv])

    def _meta(self, flat: list) -> Meta:
        d = {_text_key(flat[i]): flat[i + 1] for i in range(0, len(flat), 2)}
        layout = checked_int(self.url, "meta", "layout", d.get("layout", 0), 0)
        if layout > LAYOUT:
            raise IncompatibleIndexError(
                f"the index {self.name!r} on {self.url} has Redis key layout {layout}, newer than this diversify "
                f"reads (layout {LAYOUT}); upgrade diversify-retrieval to open it.")
        return checked_meta(d, self.url)

    # ---- read / write
    @contextlib.contextmanager
    def read(self) -> Iterator[View]:
        yield _RedisView(self)

    def _acquire(self) -> str:
        token = str(self.call(self.client.incr, self.p + "fence", action="taking the writer lock of"))
        lock = self.p + "lock"
        deadline = time.monotonic() + self.options.lock_timeout
        pause = 0.001
        px = int(self.lease * 1000)
        while True:
            if self.call(lambda: self.client.set(lock, token, nx=True, px=px), action="taking the writer lock of"):
                return token
            if time.monotonic() >= deadline:
                holder = self.call(self.client.get, lock)
                ttl = self.call(self.client.pttl, lock)
                raise StorageError(
                    f"the writer lock of index {self.name!r} on {self.url} was not acquired within "
                    f"{self.options.lock_timeout:g}s: writer token {holder.decode() if holder else '?'} holds it "
                    f"(its lease ends in {max(ttl, 0) / 1000:.1f}s). Nothing was written; retry, or raise lock_timeout.")
            time.sleep(pause * (0.5 + np.random.random()))
            pause = min(pause * 2, 0.05)

    @contextlib.contextmanager
    def write(self) -> Iterator[Transaction]:
        token = self._acquire()
        tx = _RedisTransaction(self, token)
        stop = threading.Event()
        beat = threading.Thread(target=self._heartbeat, args=(tx, stop), daemon=True, name="diversify-redis-lease")
        beat.start()
        try:
            yield tx
            stop.set()  # no join: a renewal racing the commit finds the fence moved on and does nothing
            self._commit(tx)
        except BaseException:
            stop.set()
            with contextlib.suppress(Exception):  # compare-and-delete: a no-op when the lease is gone
                self.scripts["release"]([self.p + "lock", self.p + "fence"], [token])
            raise
        finally:
            stop.set()

    def _heartbeat(self, tx: _RedisTransaction, stop: threading.Event) -> None:
        """Renew the lease every lease/3 while the batch is open, so a long batch of a live writer
        keeps it; a killed or stopped (SIGSTOP, a frozen VM) writer stops renewing and loses it."""
        while not stop.wait(self.lease / 3):
            try:
                ok = self.scripts["renew"]([self.p + "lock", self.p + "fence"], [tx.token, int(self.lease * 1000)])
            except Exception:
                continue  # the batch's own next call reports a broken connection
            if not ok:
                tx.lost = True
                return
            tx.renewed = time.monotonic()

    def _commit(self, tx: _RedisTransaction) -> None:
        """Commit the batch in one MULTI/EXEC: the commit script, then the bulk commands.

        A MULTI/EXEC runs with no other command in between and goes to the append-only file as one
        unit (a server killed while writing it loads without it), as a script does; but unlike a
        script's own error it cannot stop the commands queued after it, so the lease is checked
        before EXEC under WATCH of ``P lock`` and ``P fence``: a writer that takes the lease over must
        INCR the fence first, which makes our EXEC return nil and apply nothing. A renewal racing the
        commit (the heartbeat's PEXPIRE touches the lock) aborts the EXEC the same way; then the check
        runs again. The script goes as EVAL, not EVALSHA: inside MULTI a script the server lost (SCRIPT
        FLUSH, a restart) fails only at EXEC, after the bulk commands were queued.
        """
        script, bulk = tx.commit_args()
        lock, fence = self.p + "lock", self.p + "fence"
        check = _pack([b"WATCH", lock, fence]) + _pack([b"GET", lock]) + _pack([b"GET", fence])
        body = b"".join([_pack([b"MULTI"]), _pack([b"EVAL", _COMMIT, 0, *script]), *(_pack(c) for c in bulk),
                         _pack([b"EXEC"])])
        pool = self.client.connection_pool
        for _ in range(_COMMIT_TRIES):
            conn = pool.get_connection()
            try:
                conn.send_packed_command([check])
                conn.read_response()
                held, counter = conn.read_response(), conn.read_response()
                if not (held is not None and _text(held) == tx.token
                        or held is None and counter is not None and _text(counter) == tx.token):
                    conn.send_packed_command([_pack([b"UNWATCH"])])
                    conn.read_response()
                    raise StorageError(self.lease_lost())
                conn.send_packed_command([body])
                queued = [conn.read_response() for _ in range(2 + len(bulk))]  # OK, QUEUED...
                done = conn.read_response()
            except redis.ResponseError as exc:  # refused while queueing (EXECABORT): nothing ran
                conn.disconnect()
                raise StorageError(f"committing a batch to {self.url} failed: {exc}. The batch was rolled back; "
                                   "nothing of it was written.") from exc
            except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
                conn.disconnect()  # never reuse a connection with replies pending
                msg = self._after_broken_commit(tx.token, exc)
                if msg is not None:
                    raise StorageError(msg) from exc
                return
            except BaseException:
                conn.disconnect()
                raise
            finally:
                pool.release(conn)
            del queued
            if done is None:  # a watched key changed between the check and EXEC: nothing ran; check again
                continue
            failed = [r for r in done if isinstance(r, Exception)]
            if failed:  # not expected (the lease was checked under WATCH); the queued commands ran regardless
                raise StorageError(f"committing a batch to {self.url} failed inside MULTI/EXEC: {failed[0]}. Part of "
                                   "the batch may have been written; check `diversify index stats`.")
            return
        raise StorageError(f"the commit of a batch to {self.url} was interrupted {_COMMIT_TRIES} times by changes to "
                           f"the writer lock of index {self.name!r}: the batch was rolled back; nothing of it was "
                           "written. Run it again.")

    def _after_broken_commit(self, token: str, exc: BaseException) -> Optional[str]:
        """The connection broke during the commit script: find out whether it ran (None: it did)."""
        cause = f"{type(exc).__name__}: {exc}"
        try:
            last = self.client.hget(self.p + "state", "last_commit")
        except Exception:
            return (f"the connection to {self.url} broke while a batch was being committed ({cause}); the server is "
                    "not reachable, so whether it ran is unknown: it ran entirely or not at all (one atomic script), "
                    "never half. Check `diversify index stats` and run the batch again if its documents are missing.")
        if last is not None and _text(last) == token:
            return None
        with contextlib.suppress(Exception):
            self.scripts["release"]([self.p + "lock", self.p + "fence"], [token])
        return (f"the connection to {self.url} broke while a batch was being committed ({cause}); the batch was "
                "rolled back: nothing of it was written. Run it again.")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.client.close()
