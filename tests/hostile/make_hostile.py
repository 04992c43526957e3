"""Generate the hostile artifact fixtures in this folder.

Run ``python tests/hostile/make_hostile.py`` after a deliberate format change; the bytes are
deterministic, and ``tests/unit/test_artifact_hostile_files.py`` checks that the committed files equal what
this script generates (so fixture and generator cannot drift apart).

Each fixture targets something the hand-forged cases of ``tests/unit/test_artifact_format.py`` and
``tests/unit/test_artifact_clustermap.py`` do not already cover: truncation of a *real ClusterMap* at
every section boundary, integer overflows that wrap to a plausible size in 64-bit arithmetic,
length claims inside the msgpack header, recursion bombs, ext types nested in the table or the
metadata, non-int types where ints are expected, checksums of the arrays a query needs, and a
few hostile-but-harmless inputs that must load (unknown arrays named like paths).

``CASES`` maps a file name to ``(expected, why)``: ``expected`` is a regex the ``ArtifactError``
message must match, or ``None`` when the file must load (see ``LOADS``).
"""

from __future__ import annotations

import struct
import sys
import zlib
from pathlib import Path

import msgpack
import numpy as np

HERE = Path(__file__).resolve().parent
MAGIC = b"\x89DVRSFY\n"
MAX_HEADER = 16 * 1024 * 1024
TRUNCATED = "truncated|shorter than|magic"


def base_map():
    """A small valid ClusterMap: 12 str ids, 5 clusters, an alias and an extra array."""
    from diversify.artifact import ClusterMap

    ids = [f"doc-{i}" for i in range(12)]
    cids = np.array([0, 0, 0, 3, 3, 5, 6, 6, 6, 6, 10, 11], np.int64)
    rep = np.zeros(12, bool)
    rep[[0, 3, 5, 6, 10, 11]] = True
    stages = np.where(rep, 0, 2).astype(np.uint8)
    return ClusterMap.from_arrays(
        ids, cids, rep, stages, np.arange(12, dtype=np.uint32) * 7,
        config={"note": "hostile fixture base"}, fingerprint="f" * 64, seed=1, hash_scheme="test",
        build_info={}, metadata={"source": "tests/hostile/make_hostile.py"}, created_at="2026-01-01T00:00:00Z",
        extras={"aliases": np.array([[1, 0]], np.int64), "minhash": np.arange(24, dtype=np.uint32).reshape(12, 2)},
    )


def base_bytes() -> bytes:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "valid.dvf"
        base_map().save(p)
        return p.read_bytes()


def parse(data: bytes):
    """(header dict, header length, data start, data bytes) of a valid container."""
    hlen = struct.unpack_from("<Q", data, 16)[0]
    header = msgpack.unpackb(data[24 : 24 + hlen], raw=False)
    start = -(-(24 + hlen) // 64) * 64
    return header, hlen, start, data[start:]


def container(raw_header, data: bytes = b"", *, hlen=None, hcrc=None, major=1) -> bytes:
    """Prefix + header + zero padding + data, with a correct header CRC unless overridden."""
    raw = raw_header if isinstance(raw_header, bytes) else msgpack.packb(raw_header, use_bin_type=True)
    hl = len(raw) if hlen is None else hlen
    crc = zlib.crc32(raw) if hcrc is None else hcrc
    head = struct.pack("<8sHHIQ", MAGIC, major, 0, crc, hl) + raw
    start = -(-len(head) // 64) * 64
    return head + b"\0" * (start - len(head)) + data


def repack(data: bytes, change) -> bytes:
    """Apply ``change(header)`` to a valid file's header and re-emit it with a correct CRC."""
    header, _, _, body = parse(data)
    change(header)
    return container(header, body)


def with_array_bytes(data: bytes, name: str, mutate) -> bytes:
    """Change the bytes of array ``name`` in place (its CRC in the header is left stale)."""
    header, _, start, _ = parse(data)
    e = next(e for e in header["arrays"] if e["name"] == name)
    out = bytearray(data)
    lo = start + e["offset"]
    out[lo : lo + e["nbytes"]] = mutate(bytes(out[lo : lo + e["nbytes"]]))
    return bytes(out)


def with_arrays(data: bytes, change) -> bytes:
    """Apply ``change(arrays)`` (name -> writable copy) to a valid file and re-emit it with correct checksums."""
    import tempfile

    from diversify.artifact import read_container, write_container

    with tempfile.TemporaryDirectory() as d:
        src, dst = Path(d) / "in.dvf", Path(d) / "out.dvf"
        src.write_bytes(data)
        header, arrays = read_container(src)
        arrays = {k: np.array(v) for k, v in arrays.items()}
        change(arrays)
        write_container(dst, {k: v for k, v in header.items() if k != "format_version"}, arrays)
        return dst.read_bytes()


def rekey(arrays, key) -> None:
    """Rebuild the lookup arrays (consistently with each other) from ``key(id bytes)`` instead of the spec's key."""
    raw, off = arrays["ids/str_bytes"].tobytes(), arrays["ids/str_offsets"].tolist()
    keys = np.array([key(raw[off[i] : off[i + 1]]) for i in range(len(off) - 1)], dtype=np.uint64)
    slots = keys * np.uint64(0x9E3779B97F4A7C15)
    order = np.argsort(slots, kind="stable")
    arrays["lookup/key"], arrays["lookup/doc"] = slots[order], order.astype(np.int64)
    arrays["lookup/cluster"] = arrays["doc/cluster_id"][order]
    bits = int(np.log2(arrays["lookup/bucket_start"].shape[0] - 1))
    per = np.bincount((slots[order] >> np.uint64(64 - bits)).astype(np.int64), minlength=1 << bits)
    arrays["lookup/bucket_start"] = np.concatenate([[0], np.cumsum(per)]).astype(np.int64)


def truncated_blake2b_512(b: bytes) -> int:
    import hashlib

    return int.from_bytes(hashlib.blake2b(b).digest()[:8], "little")


def values_in(obj) -> int:
    """msgpack values as the spec counts them (each scalar, array, map, and each map key)."""
    if isinstance(obj, dict):
        return 1 + sum(1 + values_in(v) for v in obj.values())
    if isinstance(obj, list):
        return 1 + sum(values_in(v) for v in obj)
    return 1


def entry(name, dtype, shape, offset, nbytes, crc=0):
    return {"name": name, "dtype": dtype, "shape": shape, "offset": offset, "nbytes": nbytes, "crc32": crc}


def nest_maps(depth):
    obj: object = 0
    for _ in range(depth):
        obj = {"d": obj}
    return obj


def flip_first(b: bytes) -> bytes:
    return bytes([b[0] ^ 0xFF]) + b[1:]


A8 = np.arange(2, dtype="<i8").tobytes()


def generate() -> dict[str, bytes]:
    """File name -> bytes for every fixture (deterministic)."""
    good = base_bytes()
    header, hlen, start, _ = parse(good)
    files = {"valid.dvf": good}

    # -- truncated at every section of a real ClusterMap
    cuts = {
        "empty": 0, "magic": 5, "prefix": 20, "header-start": 24, "header-mid": 24 + hlen // 2,
        "header-end": 24 + hlen, "data-start": start, "last-byte": len(good) - 1,
    }
    for e in header["arrays"]:
        cuts["array-" + e["name"].replace("/", "-")] = start + e["offset"] + max(1, e["nbytes"] // 2)
    for name, cut in cuts.items():
        files[f"trunc-{name}.dvf"] = good[:cut]

    # -- sizes and lengths in the prefix
    files["header-len-u64-max.dvf"] = good[:16] + struct.pack("<Q", 2**64 - 1) + good[24:]
    files["header-len-limit-plus-one.dvf"] = good[:16] + struct.pack("<Q", MAX_HEADER + 1) + good[24:]
    files["header-len-zero.dvf"] = container(b"")

    # -- msgpack header: length claims, recursion, ext types, bad UTF-8, duplicate keys
    files["msgpack-str32-claims-4gib.dvf"] = container(b"\x81\xa1k\xdb\xff\xff\xff\xff")
    files["msgpack-bin32-claims-4gib.dvf"] = container(b"\x81\xa1k\xc6\xff\xff\xff\xff")
    files["msgpack-array32-claims-4g-items.dvf"] = container(b"\x81\xa1k\xdd\xff\xff\xff\xff")
    files["msgpack-recursion-bomb-100k.dvf"] = container(b"\x91" * 100_000 + b"\xc0")
    files["msgpack-invalid-utf8-str.dvf"] = container(b"\x81\xa1k\xa2\xff\xfe")
    files["msgpack-nested-maps-depth-33.dvf"] = repack(good, lambda h: h["metadata"].update(deep=nest_maps(33)))
    ext_meta = dict(header, metadata={"x": msgpack.ExtType(42, b"payload")})
    files["msgpack-ext-in-metadata.dvf"] = container(msgpack.packb(ext_meta, use_bin_type=True), good[start:])
    ext_table = dict(header, arrays=[dict(header["arrays"][0], crc32=msgpack.ExtType(1, b"\0" * 4))] + header["arrays"][1:])
    files["msgpack-ext-in-array-table.dvf"] = container(msgpack.packb(ext_table, use_bin_type=True), good[start:])
    # a key written twice: msgpack-python keeps the last, another reader may keep the first
    raw = msgpack.packb(header, use_bin_type=True)
    assert raw[0] == 0xDE or 0x80 <= raw[0] <= 0x8F
    count = (raw[0] & 0x0F) if raw[0] < 0x90 else struct.unpack_from(">H", raw, 1)[0]
    body = raw[1:] if raw[0] < 0x90 else raw[3:]
    dup = msgpack.packb("format") + msgpack.packb("not.a.clustermap")
    files["msgpack-duplicate-key.dvf"] = container(b"\xde" + struct.pack(">H", count + 1) + dup + body, good[start:])

    # -- array table: limits, integer overflow, wrong types
    files["table-4097-arrays.dvf"] = container({"arrays": [0] * 4097, "data_nbytes": 0})
    files["shape-product-wraps-to-zero.dvf"] = container(
        {"arrays": [entry("a", "u1", [2**32, 2**32], 0, 0)], "data_nbytes": 0})
    files["shape-product-wraps-to-8.dvf"] = container(
        {"arrays": [entry("a", "i1", [2**61 + 1, 8], 0, 8, zlib.crc32(b"\0" * 8))], "data_nbytes": 8}, b"\0" * 8)
    files["offset-negative.dvf"] = container({"arrays": [entry("a", "i8", [2], -64, 16, zlib.crc32(A8))], "data_nbytes": 16}, A8)
    files["nbytes-negative.dvf"] = container({"arrays": [entry("a", "i8", [-2], 0, -16)], "data_nbytes": 0})
    files["offset-float.dvf"] = container({"arrays": [entry("a", "i8", [2], 0.0, 16, zlib.crc32(A8))], "data_nbytes": 16}, A8)
    files["shape-float.dvf"] = container({"arrays": [entry("a", "i8", [2.0], 0, 16, zlib.crc32(A8))], "data_nbytes": 16}, A8)
    files["shape-bool.dvf"] = container({"arrays": [entry("a", "i8", [True, 2], 0, 16, zlib.crc32(A8))], "data_nbytes": 16}, A8)
    files["data-nbytes-bool.dvf"] = container({"arrays": [], "data_nbytes": False})
    files["dtype-big-endian.dvf"] = container({"arrays": [entry("a", ">i8", [2], 0, 16, zlib.crc32(A8))], "data_nbytes": 16}, A8)
    files["dtype-float16.dvf"] = container({"arrays": [entry("a", "f2", [8], 0, 16, zlib.crc32(A8))], "data_nbytes": 16}, A8)
    files["dtype-list.dvf"] = container({"arrays": [entry("a", ["i8"], [2], 0, 16, zlib.crc32(A8))], "data_nbytes": 16}, A8)
    files["dtype-map-in-clustermap.dvf"] = repack(good, lambda h: h["arrays"][3].update(dtype={"i8": 1}))
    files["dtype-object-in-clustermap.dvf"] = repack(
        good, lambda h: h["arrays"][0].update(dtype="O"))

    # -- checksums of the arrays a query needs (eager) and of an extra (lazy)
    files["crc-lookup-key.dvf"] = with_array_bytes(good, "lookup/key", flip_first)
    files["crc-lookup-cluster.dvf"] = with_array_bytes(good, "lookup/cluster", flip_first)
    files["crc-cluster-members.dvf"] = with_array_bytes(good, "cluster/members", flip_first)
    files["crc-ids-str-bytes.dvf"] = with_array_bytes(good, "ids/str_bytes", flip_first)
    files["crc-extra-aliases.dvf"] = with_array_bytes(good, "extra/aliases", flip_first)

    # -- hostile but harmless: must load (unknown arrays are ignored; names are never paths)
    def add_traversal(h):
        h["arrays"] = h["arrays"] + [entry("../../etc/passwd", "u1", [0], header["data_nbytes"] + (-header["data_nbytes"] % 64), 0)]
        h["data_nbytes"] = h["arrays"][-1]["offset"]

    hdr, _, _, body = parse(good)
    add_traversal(hdr)
    files["loads-array-named-like-a-path.dvf"] = container(hdr, body + b"\0" * (hdr["data_nbytes"] - len(body)))
    files["loads-future-minor.dvf"] = good[:10] + struct.pack("<H", 9) + good[12:]

    # -- valid checksums and layout, but the lookup table does not belong to the ids
    files["lookup-key-truncated-blake2b-512.dvf"] = with_arrays(good, lambda a: rekey(a, truncated_blake2b_512))

    def permute(a):
        a["lookup/doc"], a["lookup/cluster"] = a["lookup/doc"][::-1].copy(), a["lookup/cluster"][::-1].copy()

    files["lookup-permuted-against-ids.dvf"] = with_arrays(good, permute)

    # -- costs: a header of more values than the limit; empty arrays with dimensions beyond int64
    pad = (1 << 17) + 1 - values_in(header) - 2  # the "bomb" key and its list
    files["header-values-limit-plus-one.dvf"] = repack(good, lambda h: h["metadata"].update(bomb=[{}] * pad))

    def add_empty(code, shape):
        hdr, _, _, body = parse(good)
        end = hdr["data_nbytes"]
        off = end + (-end % 64)
        hdr["arrays"] = hdr["arrays"] + [entry("extra/empty", code, shape, off, 0)]
        hdr["data_nbytes"] = off
        return container(hdr, body + b"\0" * (off - end))

    files["shape-empty-dims-beyond-int64.dvf"] = add_empty("i8", [0, 2**62])
    return files


#: file -> (regex the ArtifactError message must match, or None if it must load; why)
CASES: dict[str, tuple] = {
    "valid.dvf": (None, "the base every other fixture is derived from"),
    "header-len-u64-max.dvf": ("exceeds the limit", "u64 max header length: no allocation, no overflow"),
    "header-len-limit-plus-one.dvf": ("exceeds the limit", "one byte over the 16 MiB header limit"),
    "header-len-zero.dvf": ("malformed", "empty header"),
    "msgpack-str32-claims-4gib.dvf": ("malformed", "a str claiming 4 GiB inside a 9-byte header"),
    "msgpack-bin32-claims-4gib.dvf": ("malformed", "a bin claiming 4 GiB"),
    "msgpack-array32-claims-4g-items.dvf": ("malformed", "an array claiming 2**32-1 items"),
    "msgpack-recursion-bomb-100k.dvf": ("malformed|nested deeper", "100,000 nested arrays (recursion bomb)"),
    "msgpack-invalid-utf8-str.dvf": ("malformed", "a str that is not UTF-8"),
    "msgpack-nested-maps-depth-33.dvf": ("nested deeper", "maps nested one level past the limit, in real metadata"),
    "msgpack-ext-in-metadata.dvf": ("malformed", "an ext type nested in the user metadata"),
    "msgpack-ext-in-array-table.dvf": ("malformed", "an ext type in the array table"),
    "msgpack-duplicate-key.dvf": ("duplicate|not a diversify artifact", "a header key written twice (parser differential)"),
    "table-4097-arrays.dvf": ("limit is 4096", "one array past the table limit"),
    "shape-product-wraps-to-zero.dvf": ("needs", "2**32 x 2**32 u1: 2**64 bytes, 0 in 64-bit arithmetic"),
    "shape-product-wraps-to-8.dvf": ("needs", "(2**61+1) x 8 i1: wraps to 8 bytes in 64-bit arithmetic"),
    "offset-negative.dvf": ("invalid offset", "offset -64"),
    "nbytes-negative.dvf": ("invalid shape|invalid offset", "negative nbytes and shape"),
    "offset-float.dvf": ("invalid offset", "offset 0.0 (float)"),
    "shape-float.dvf": ("invalid shape", "shape [2.0]"),
    "shape-bool.dvf": ("invalid shape", "shape [True, 2]"),
    "data-nbytes-bool.dvf": ("data_nbytes", "data_nbytes False (bool is an int in Python)"),
    "dtype-big-endian.dvf": ("not in the allowed set", "'>i8': byte-order confusion"),
    "dtype-float16.dvf": ("not in the allowed set", "'f2' (float16)"),
    "dtype-list.dvf": ("not in the allowed set", "dtype ['i8'] (a list: unhashable)"),
    "dtype-map-in-clustermap.dvf": ("not in the allowed set", "dtype {'i8': 1} (a map) in a real ClusterMap"),
    "dtype-object-in-clustermap.dvf": ("not in the allowed set", "'O' (object: pickle) in a real ClusterMap"),
    "crc-lookup-key.dvf": ("fails its checksum", "lookup/key corrupted: refused at load, not mid-query"),
    "crc-lookup-cluster.dvf": ("fails its checksum", "lookup/cluster corrupted"),
    "crc-cluster-members.dvf": ("fails its checksum", "cluster/members corrupted"),
    "crc-ids-str-bytes.dvf": ("fails its checksum", "the ids blob corrupted (checked on first access)"),
    "crc-extra-aliases.dvf": ("fails its checksum", "an extra corrupted (checked on first access)"),
    "loads-array-named-like-a-path.dvf": (None, "an unknown array named ../../etc/passwd: ignored, never a path"),
    "loads-future-minor.dvf": (None, "minor version 9: additive, accepted"),
    "lookup-key-truncated-blake2b-512.dvf": ("does not belong to the stored ids.*none of their keys",
                                             "keys from a truncated BLAKE2b-512, table otherwise consistent"),
    "lookup-permuted-against-ids.dvf": ("does not belong to the stored ids",
                                        "lookup/doc and lookup/cluster reversed together (consistent with doc/cluster_id)"),
    "header-values-limit-plus-one.dvf": ("msgpack values", "one value more than the header's value limit (2**17)"),
    "shape-empty-dims-beyond-int64.dvf": ("no reader can index", "an empty i8 array of shape (0, 2**62): 2**65 bytes"),
}


def _register_truncations():
    for name in generate():
        if name.startswith("trunc-"):
            CASES.setdefault(name, (TRUNCATED, f"a real ClusterMap cut inside section {name[6:-4]}"))


def main() -> int:
    files = generate()
    _register_truncations()
    missing = sorted(set(files) ^ set(CASES))
    if missing:
        print(f"CASES and generate() disagree on: {missing}", file=sys.stderr)
        return 1
    for old in HERE.glob("*.dvf"):
        if old.name not in files:
            old.unlink()
    for name, data in files.items():
        (HERE / name).write_bytes(data)
    print(f"wrote {len(files)} fixtures ({sum(map(len, files.values())):,} bytes) to {HERE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
