"""Document ids: the one home of their rules and of their fixed, platform-independent 64-bit keys.

Rules (checked here and nowhere else, :mod:`.rules`): an id is a ``str`` or an ``int`` (never
``bool``, which would collide with 0/1); ints lie in the int64 range; strs are encodable as UTF-8
(no lone surrogates); the ids of one corpus are all of one kind and unique. :func:`check_ids`
applies them to a corpus, :func:`check_id` to one id, :func:`check_id_type` only the type rule (the
online side treats an int outside int64 or an unencodable str as simply unknown).

The artifact looks documents up by a 64-bit key instead of the id itself (:mod:`.keys`), so the
online lookup table is two flat arrays (sorted keys + cluster ids, 16 bytes per document).

The key scheme is part of the artifact format (``id_key_scheme`` = ``"diversify.idkey.v1"``)
and is pinned by golden tests; changing it is a breaking format change.

* ``int`` ids (any value in the int64 range): the int64 value itself, reinterpreted as an
  unsigned 64-bit integer (two's complement). Exact: distinct ints never share a key.
* ``str`` ids: ``hashlib.blake2b(id.encode("utf-8"), digest_size=8).digest()`` read as a
  little-endian unsigned 64-bit integer. Distinct strings share a key with probability 2**-64
  per pair; :meth:`ClusterMap.from_arrays` refuses a corpus where that happens
  (:func:`check_distinct_keys`), so keys of the ids *in* an artifact are always distinct.

Never Python's ``hash()``: it is salted per process.

Nothing here keeps shared mutable state (no cache), so it is trivially thread-safe and cannot
go stale across artifact reloads. A memo ``str -> key`` does not pay on the online path: fresh
strings from a store must be hashed for the dict anyway, so it only wins at a high hit rate.

The parts: :mod:`.rules` (the checks), :mod:`.keys` (keys and online lookup), :mod:`.packed`
(:class:`PackedIds`, a streamed build's ids), :mod:`.uuids` (the ways a UUID is written).
"""

from __future__ import annotations

from .keys import ID_KEY_SCHEME, check_distinct_keys, id_key, id_keys, lookup_id, query_keys, utf8_id_keys
from .packed import PackedIds
from .rules import (
    INDEX_ID_MAX_BYTES,
    INT64_MAX,
    INT64_MIN,
    check_cluster_id,
    check_id,
    check_id_type,
    check_ids,
    check_index_ids,
    id_kind_of,
    normalize_ids,
    storable_index_id,
)
from .uuids import UUID_FORMS, format_uuid, parse_uuid, uuid_form

__all__ = [
    "ID_KEY_SCHEME",
    "INT64_MIN",
    "INT64_MAX",
    "id_kind_of",
    "check_id_type",
    "check_id",
    "check_ids",
    "check_cluster_id",
    "check_index_ids",
    "storable_index_id",
    "INDEX_ID_MAX_BYTES",
    "normalize_ids",
    "id_key",
    "id_keys",
    "utf8_id_keys",
    "check_distinct_keys",
    "PackedIds",
    "query_keys",
    "lookup_id",
    "UUID_FORMS",
    "uuid_form",
    "format_uuid",
    "parse_uuid",
]
