"""The generic container: round trip, determinism, atomic writes, hostile files, fuzzing."""

from __future__ import annotations

import os
import struct
import zlib

import msgpack
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diversify.artifact import format as fmt
from diversify.artifact.format import read_container, write_container
from diversify.errors import ArtifactError, ArtifactNotFoundError, InputError, InputTypeError

ALL_DTYPES = ["u1", "u2", "u4", "u8", "i1", "i2", "i4", "i8", "f4", "f8", "bool"]


def sample_arrays(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for i, code in enumerate(ALL_DTYPES):
        shape = (3 + i, 2) if i % 2 else (5 + i,)
        if code == "bool":
            out[f"a{i}/{code}"] = rng.integers(0, 2, shape).astype(bool)
        elif code[0] == "f":
            out[f"a{i}/{code}"] = rng.standard_normal(shape).astype(code)
        else:
            info = np.iinfo(code)
            out[f"a{i}/{code}"] = rng.integers(info.min, info.max, shape, dtype=code, endpoint=True)
    out["empty"] = np.zeros((0, 4), dtype=np.int64)
    out["scalar"] = np.array(7, dtype=np.int32)
    return out


HEADER = {"format": "test", "nested": {"b": [1, 2.5, None, True, b"\x00raw", "ü"], "a": {"x": -(2**63)}}, "big": 2**64 - 1}


@pytest.fixture()
def container(tmp_path):
    path = tmp_path / "c.dvf"
    write_container(path, HEADER, sample_arrays())
    return path


# --------------------------------------------------------------------------- round trip


@pytest.mark.parametrize("mmap", [True, False])
def test_round_trip(container, mmap):
    header, arrays = read_container(container, mmap=mmap)
    assert header["format_version"] == [fmt.FORMAT_MAJOR, fmt.FORMAT_MINOR]
    assert {k: v for k, v in header.items() if k != "format_version"} == HEADER
    expected = sample_arrays()
    assert sorted(arrays) == sorted(expected)
    for name, want in expected.items():
        got = arrays[name]
        assert got.dtype == want.dtype.newbyteorder("<") or got.dtype == want.dtype, name
        assert got.shape == want.shape, name
        np.testing.assert_array_equal(got, want, err_msg=name)
        assert not got.flags.writeable, f"{name} must be read-only"


def test_layout_is_aligned_and_exact(container):
    data = container.read_bytes()
    magic, major, minor, hcrc, hlen = struct.unpack_from("<8sHHIQ", data)
    assert magic == fmt.MAGIC and (major, minor) == (1, 0)
    raw = data[24 : 24 + hlen]
    assert zlib.crc32(raw) == hcrc
    full = msgpack.unpackb(raw)
    start = -(-(24 + hlen) // 64) * 64
    assert len(data) == start + full["data_nbytes"]
    for e in full["arrays"]:
        assert (start + e["offset"]) % 64 == 0
        chunk = data[start + e["offset"] : start + e["offset"] + e["nbytes"]]
        assert zlib.crc32(chunk) == e["crc32"]
    names = [e["name"] for e in full["arrays"]]
    assert names == sorted(names)


def test_big_endian_and_non_contiguous_inputs_are_normalized(tmp_path):
    a = np.arange(12, dtype=">u4").reshape(3, 4)[:, ::2]
    write_container(tmp_path / "x", {}, {"a": a})
    _, arrays = read_container(tmp_path / "x")
    np.testing.assert_array_equal(arrays["a"], a)
    assert arrays["a"].dtype == np.dtype("<u4")


def test_deterministic_bytes(tmp_path):
    h1 = {"b": 1, "a": {"y": 2, "x": 1}}
    h2 = {"a": {"x": 1, "y": 2}, "b": 1}
    arrays = sample_arrays()
    write_container(tmp_path / "1", h1, arrays)
    write_container(tmp_path / "2", h2, dict(reversed(list(arrays.items()))))
    assert (tmp_path / "1").read_bytes() == (tmp_path / "2").read_bytes()


def test_reserved_and_bad_header_values_rejected(tmp_path):
    with pytest.raises(InputError, match="reserved"):
        write_container(tmp_path / "x", {"arrays": 1}, {})
    with pytest.raises(InputTypeError, match=r"header\.s.*set"):
        write_container(tmp_path / "x", {"s": {1, 2}}, {})
    with pytest.raises(InputTypeError, match="keys must be str"):
        write_container(tmp_path / "x", {"m": {1: 2}}, {})
    with pytest.raises(InputTypeError, match="dtype must be one of"):
        write_container(tmp_path / "x", {}, {"o": np.array(["a"], dtype=object)})
    with pytest.raises(InputTypeError, match="dtype must be one of"):
        write_container(tmp_path / "x", {}, {"h": np.zeros(2, np.float16)})
    with pytest.raises(InputError, match="names must match"):
        write_container(tmp_path / "x", {}, {"bad name!": np.zeros(2)})
    assert not (tmp_path / "x").exists()


# --------------------------------------------------------------------------- atomic writes


def test_failed_write_leaves_old_file_and_no_temp(tmp_path, monkeypatch):
    path = tmp_path / "a.dvf"
    write_container(path, {"v": 1}, {"x": np.arange(10)})
    before = path.read_bytes()
    real = fmt.write_pieces

    def exploding(f, pieces, total):
        real(f, list(pieces())[:-1], total)  # all but the last array written, then the failure
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(fmt, "write_pieces", exploding)
    with pytest.raises(RuntimeError, match="disk on fire"):
        write_container(path, {"v": 2}, {"x": np.arange(1000), "y": np.arange(1000)})
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["a.dvf"], "temp file must be removed"
    monkeypatch.undo()
    header, _ = read_container(path)
    assert header["v"] == 1


def test_failed_serialization_leaves_old_file(tmp_path):
    path = tmp_path / "a.dvf"
    write_container(path, {"v": 1}, {"x": np.arange(10)})
    before = path.read_bytes()
    with pytest.raises(InputTypeError):
        write_container(path, {"v": 2, "bad": object()}, {"x": np.arange(10)})
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["a.dvf"]


# --------------------------------------------------------------------------- hostile files


def raw_container(header_obj, data: bytes = b"", *, major=1, minor=0, hlen=None, hcrc=None, pad_byte=b"\0") -> bytes:
    """Assemble a container by hand (checksums right unless overridden) to forge hostile files."""
    raw = msgpack.packb(header_obj, use_bin_type=True) if not isinstance(header_obj, bytes) else header_obj
    hl = len(raw) if hlen is None else hlen
    crc = zlib.crc32(raw) if hcrc is None else hcrc
    head = struct.pack("<8sHHIQ", fmt.MAGIC, major, minor, crc, hl) + raw
    start = -(-len(head) // 64) * 64
    return head + pad_byte * (start - len(head)) + data


def entry(name, dtype, shape, offset, nbytes, data=b""):
    return {"name": name, "dtype": dtype, "shape": shape, "offset": offset, "nbytes": nbytes, "crc32": zlib.crc32(data)}


def load_bytes(tmp_path, data: bytes, **kw):
    p = tmp_path / "hostile.dvf"
    p.write_bytes(data)
    header, arrays = read_container(p, **kw)
    for name in arrays:  # touch every array: lazily verified
        np.asarray(arrays[name]).sum()
    return header, arrays


def test_handmade_container_is_valid(tmp_path):
    a = np.arange(4, dtype="<i8").tobytes()
    b = np.arange(3, dtype="<u1").tobytes()
    table = [entry("a", "i8", [4], 0, 32, a), entry("b", "u1", [3], 64, 3, b)]
    data = a + b"\0" * 32 + b
    header, arrays = load_bytes(tmp_path, raw_container({"arrays": table, "data_nbytes": 67, "k": 1}, data))
    assert header["k"] == 1 and arrays["b"].tolist() == [0, 1, 2]


HOSTILE_CASES = {
    "bad magic": (lambda good: b"PK\x03\x04" + good[4:], "magic bytes"),
    "text-mode mangled magic": (lambda good: good[:6] + b"\r\n" + good[8:], "magic bytes"),
    "future major": (lambda good: good[:8] + struct.pack("<H", 2) + good[10:], "newer than this library"),
    "old major": (lambda good: good[:8] + struct.pack("<H", 0) + good[10:], "not supported"),
    "oversized header length": (lambda good: good[:16] + struct.pack("<Q", 2**40) + good[24:], "exceeds the limit"),
    "header length past end": (lambda good: good[:16] + struct.pack("<Q", len(good)) + good[24:], "truncated"),
    "header checksum": (lambda good: good[:30] + bytes([good[30] ^ 0x01]) + good[31:], "checksum"),
    "data checksum": (lambda good: good[:-3] + bytes([good[-3] ^ 0xFF]) + good[-2:], "checksum"),
    "trailing bytes": (lambda good: good + b"\0" * 64, "trailing"),
    "one byte short": (lambda good: good[:-1], "truncated"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_CASES))
def test_hostile_mutations(tmp_path, container, case):
    mutate, message = HOSTILE_CASES[case]
    with pytest.raises(ArtifactError, match=message):
        load_bytes(tmp_path, mutate(container.read_bytes()))


def test_newer_minor_is_accepted(tmp_path, container):
    good = container.read_bytes()
    header, _ = load_bytes(tmp_path, good[:10] + struct.pack("<H", 7) + good[12:])
    assert header["format_version"] == [1, 7]


def test_truncated_everywhere(tmp_path, container):
    good = container.read_bytes()
    cuts = sorted({0, 1, 7, 8, 12, 23, 24, 25, 40, 100, len(good) // 2, len(good) - 64, len(good) - 1})
    for cut in cuts:
        with pytest.raises(ArtifactError) as info:
            load_bytes(tmp_path, good[:cut])
        msg = str(info.value)
        assert "truncated" in msg or "checksum" in msg or "magic" in msg, (cut, msg)


A8 = np.arange(2, dtype="<i8").tobytes()  # 16 bytes


@pytest.mark.parametrize(
    "name,header,data,message",
    [
        ("overlap", {"arrays": [entry("a", "i8", [2], 0, 16, A8), entry("b", "i8", [2], 0, 16, A8)], "data_nbytes": 16}, A8, "must start at"),
        ("hole", {"arrays": [entry("a", "i8", [2], 0, 16, A8), entry("b", "i8", [2], 128, 16, A8)], "data_nbytes": 144}, A8 + b"\0" * 112 + A8, "must start at"),
        ("unaligned", {"arrays": [entry("a", "i8", [2], 8, 16, A8)], "data_nbytes": 24}, b"\0" * 8 + A8, "not a multiple of 64"),
        ("out of range", {"arrays": [entry("a", "i8", [2], 0, 16, A8)], "data_nbytes": 8}, A8[:8], "beyond the data section"),
        ("declared size mismatch", {"arrays": [entry("a", "i8", [2], 0, 16, A8)], "data_nbytes": 16}, A8 + b"\0" * 8, "truncated or has trailing"),
        ("not whitelisted dtype", {"arrays": [entry("a", "O", [2], 0, 16, A8)], "data_nbytes": 16}, A8, "not in the allowed set"),
        ("unicode dtype", {"arrays": [entry("a", "<U2", [2], 0, 16, A8)], "data_nbytes": 16}, A8, "not in the allowed set"),
        ("shape overflow", {"arrays": [entry("a", "i8", [2**62, 2**62, 2**62], 0, 16, A8)], "data_nbytes": 16}, A8, "needs"),
        ("negative shape", {"arrays": [entry("a", "i8", [-2], 0, 16, A8)], "data_nbytes": 16}, A8, "invalid shape"),
        ("too many dims", {"arrays": [entry("a", "i8", [1] * 9 + [2], 0, 16, A8)], "data_nbytes": 16}, A8, "invalid shape"),
        ("nbytes lies", {"arrays": [entry("a", "i8", [3], 0, 16, A8)], "data_nbytes": 16}, A8, "needs 24 bytes"),
        ("duplicate names", {"arrays": [entry("a", "i8", [2], 0, 16, A8), entry("a", "i8", [0], 16 + 48, 0)], "data_nbytes": 16}, A8, "repeated name"),
        ("extra table key", {"arrays": [dict(entry("a", "i8", [2], 0, 16, A8), code="x")], "data_nbytes": 16}, A8, "table entry 0"),
        ("no table", {"data_nbytes": 0}, b"", "arrays"),
        ("bad checksum value", {"arrays": [dict(entry("a", "i8", [2], 0, 16, A8), crc32=2**40)], "data_nbytes": 16}, A8, "invalid offset/nbytes/crc32"),
        ("wrong checksum", {"arrays": [dict(entry("a", "i8", [2], 0, 16, A8), crc32=12345)], "data_nbytes": 16}, A8, "fails its checksum"),
        ("bool not 0/1", {"arrays": [entry("a", "bool", [2], 0, 2, b"\x00\x07")], "data_nbytes": 2}, b"\x00\x07", "other than 0/1"),
    ],
)
def test_hostile_tables(tmp_path, name, header, data, message):
    with pytest.raises(ArtifactError, match=message):
        load_bytes(tmp_path, raw_container(header, data))


def test_hostile_headers(tmp_path):
    base = {"arrays": [], "data_nbytes": 0}
    cases = [
        (msgpack.packb([1, 2]), "must be a msgpack map"),
        (msgpack.packb({1: 2}), "malformed"),  # strict_map_key
        (msgpack.packb({"x": msgpack.ExtType(5, b"abc"), **base}), "malformed"),
        (msgpack.packb({"t": msgpack.Timestamp(1, 0), **base}), "malformed"),
        (msgpack.packb(base) + b"\xc0", "malformed"),  # trailing data inside the header
        (b"\xdf\xff\xff\xff\xff", "malformed"),  # a map claiming 2**32-1 entries
        (msgpack.packb({"deep": _nest(40), **base}), "nested deeper"),
        (b"\xc1", "malformed"),  # never-used msgpack byte
    ]
    for raw, message in cases:
        with pytest.raises(ArtifactError, match=message):
            load_bytes(tmp_path, raw_container(raw))
    with pytest.raises(ArtifactError, match="non-zero"):
        load_bytes(tmp_path, raw_container(base, pad_byte=b"\x01"))


def _nest(depth):
    obj = 0
    for _ in range(depth):
        obj = [obj]
    return obj


def test_missing_path_and_directory(tmp_path):
    with pytest.raises(ArtifactNotFoundError, match="cannot be opened"):
        read_container(tmp_path / "nope.dvf")
    with pytest.raises(ArtifactNotFoundError):
        read_container(tmp_path)
    assert issubclass(ArtifactNotFoundError, FileNotFoundError)


def test_verify_false_skips_checksums_but_not_layout(tmp_path, container):
    good = container.read_bytes()
    bad = good[:-3] + bytes([good[-3] ^ 0xFF]) + good[-2:]
    load_bytes(tmp_path, bad, verify=False)  # data checksum not checked
    with pytest.raises(ArtifactError, match="truncated"):
        load_bytes(tmp_path, good[:-1], verify=False)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    edits=st.lists(st.tuples(st.integers(min_value=0), st.integers(0, 255)), min_size=1, max_size=4),
    cut=st.one_of(st.none(), st.integers(min_value=0)),
    mmap=st.booleans(),
)
def test_fuzz_mutated_bytes_load_or_artifact_error(tmp_path, container, edits, cut, mmap):
    data = bytearray(container.read_bytes())
    for pos, value in edits:
        data[pos % len(data)] = value
    if cut is not None:
        data = data[: cut % (len(data) + 1)]
    original = container.read_bytes()
    try:
        header, arrays = load_bytes(tmp_path, bytes(data), mmap=mmap)
    except ArtifactError as exc:
        assert bytes(data) != original, f"the unchanged container was refused: {exc}"
        assert str(exc).strip()
        return
    # loaded: a header of this major version, and arrays that the file's bytes can hold
    assert header["format_version"][0] == fmt.FORMAT_MAJOR
    assert all(np.asarray(arr).nbytes <= len(data) for arr in arrays.values())
    if bytes(data) == original:
        assert set(arrays) == set(sample_arrays())
