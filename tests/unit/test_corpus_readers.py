"""The JSONL reader reads in blocks of lines with msgspec (diversify/corpus/readers.py) and must give
what the rule of ``read_records`` gives, line by line with ``json.loads``: the same ids, texts and
errors (with their line numbers), for every block size.

The reference below is written from the reader's documented rule, not from its code: non-blank
lines are records; ids come from ``id`` when the first record has it, else from 0-based line
numbers; every value as ``json.loads`` reads it.
"""

from __future__ import annotations

import io
import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import diversify.corpus.readers as readers
from diversify.errors import InputError

# Lines whose values msgspec and json.loads could disagree on, or that msgspec refuses and
# json.loads reads: each must come out as json.loads reads it.
LINES = [
    '{"id": 123456789012345678901234567890, "text": "big int id"}',
    '{"id": -9223372036854775809, "text": "below int64"}',
    '{"id": 18446744073709551616, "text": "above uint64"}',
    '{"id": 7, "text": "lone surrogate \\ud800 escape"}',
    '{"id": 8, "text": "nan elsewhere", "score": NaN}',
    '{"id": 9, "text": "infinity elsewhere", "score": -Infinity}',
    '{"id": 10, "text": "out of float range", "score": 1e400}',
    '{"id": 11, "text": "duplicate key", "text": "the last one wins"}',
    '{"id": 12, "text": "nul \\u0000 inside"}',
    '{"id": 13, "text": "crlf line"}\r',
    '  {"id": 14, "text": "spaces around"}  ',
    '{"id": 15, "text": "non-ASCII: Ελληνικά, кириллица, 日本語, é"}',
    '{"id": 16.5, "text": "a float id"}',
    '{"id": 17, "text": "deep but fine", "m": ' + "[" * 200 + "]" * 200 + "}",
    '{"id": "18", "text": ""}',
]


def reference(data: bytes) -> list[tuple]:
    """(id, text) per record by the documented rule, with json.loads."""
    out, first_has_id = [], None
    for lineno, raw in enumerate(data.split(b"\n"), 1):
        if not raw.strip():
            continue
        rec = json.loads(raw)
        if first_has_id is None:
            first_has_id = "id" in rec
        out.append((rec["id"] if first_has_id else lineno - 1, rec["text"]))
    return out


def read(path, block_bytes: int, monkeypatch, **kw) -> list[tuple]:
    monkeypatch.setattr(readers, "_JSONL_BLOCK_BYTES", block_bytes)
    return [(i, t) for i, t, _ in readers.read_records(str(path), **kw)]


def same(a: list[tuple], b: list[tuple]) -> bool:
    """Equal, with types (1 vs 1.0 vs True differ) and NaN-free values."""
    return len(a) == len(b) and all(x == y and type(x[0]) is type(y[0]) for x, y in zip(a, b))


@pytest.mark.parametrize("block_bytes", [1, 7, 64, 333, 1 << 24])
def test_values_are_json_loads_values_at_every_block_size(tmp_path, monkeypatch, block_bytes):
    data = ("\n".join(LINES) + "\n").encode("utf-8")
    p = tmp_path / "c.jsonl"
    p.write_bytes(data)
    got = read(p, block_bytes, monkeypatch)
    assert same(got, reference(data)), got
    assert got[0][0] == 123456789012345678901234567890 and isinstance(got[0][0], int)
    assert got[3][1] == "lone surrogate \ud800 escape"


@pytest.mark.parametrize("block_bytes", [5, 50, 1 << 24])
@pytest.mark.parametrize("tail", ["\n", "", "\n\n\n", "\n   \n"])
def test_line_numbers_are_the_ids_across_blank_lines_and_blocks(tmp_path, monkeypatch, block_bytes, tail):
    lines = []
    for i in range(40):
        lines.append(json.dumps({"text": f"doc {i} " + "w " * (i % 7)}))
        if i % 9 == 4:
            lines.append("")  # a blank line: the next record's id skips a number
        if i % 13 == 6:
            lines.append(" \t ")
    data = ("\n".join(lines) + tail).encode()
    p = tmp_path / "c.jsonl"
    p.write_bytes(data)
    info: dict = {}
    got = read(p, block_bytes, monkeypatch, info=info)
    assert same(got, reference(data))
    assert info["ids"] == "numbers"
    assert len({i for i, _ in got}) == 40 and got[-1][0] > 40  # line numbers, past the skipped blank lines


# (line, the error's start): each on line 30 of a file whose lines 1-29 are good, so the error is
# raised from a later block, after good blocks went by; the message must be the record-by-record one.
BAD = {
    "not JSON": ('{"id": 30, "text": "x"', ":30: not valid JSON ("),
    "an array": ('[1, 2]', ":30: each line must be a JSON object; got list."),
    "text missing": ('{"id": 30, "body": "x"}', "`--text-field` 'text' is missing in"),
    "text not str": ('{"id": 30, "text": 5}', ":30: field 'text' must be a string; got int."),
    "id missing": ('{"text": "x"}', "`--id-field` (default 'id') is missing in"),
    "id null": ('{"id": null, "text": "x"}', "has no value there (got None)"),
    "id empty": ('{"id": "", "text": "x"}', "has no value there (got '')"),
    "int of 5000 digits": ('{"id": ' + "1" * 5000 + ', "text": "x"}', ":30: not valid JSON ("),
    "nested 100,000 deep": ('{"id": 30, "text": "x", "m": ' + "[" * 100_000 + "]" * 100_000 + "}",
                            ":30: the JSON value is nested too deeply to read."),
    "invalid UTF-8": (b'{"id": 30, "text": "\xff"}', ":30: not valid JSON ("),
}


@pytest.mark.parametrize("block_bytes", [40, 4096, 1 << 24])
@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_line_in_a_later_block_raises_its_own_error(tmp_path, monkeypatch, case, block_bytes):
    line, expected = BAD[case]
    good = b"".join(json.dumps({"id": i, "text": f"good {i}"}).encode() + b"\n" for i in range(1, 30))
    bad = line if isinstance(line, bytes) else line.encode()
    p = tmp_path / "c.jsonl"
    p.write_bytes(good + bad + b"\n" + b'{"id": 31, "text": "after"}\n')
    monkeypatch.setattr(readers, "_JSONL_BLOCK_BYTES", block_bytes)
    with pytest.raises(InputError) as err:
        list(readers.read_records(str(p)))
    assert expected in str(err.value), str(err.value)[:300]
    if ":30" not in expected:
        assert f"{p}:30" in str(err.value)


def test_ids_rule_is_decided_by_the_first_record_even_when_later_ones_differ(tmp_path, monkeypatch):
    p = tmp_path / "c.jsonl"
    p.write_text('{"text": "no id"}\n' * 20 + '{"id": 5, "text": "has one"}\n')
    for block in (16, 1 << 24):
        monkeypatch.setattr(readers, "_JSONL_BLOCK_BYTES", block)
        with pytest.raises(InputError, match=r":21 \(record 20\) has the field 'id' but the first record does not"):
            list(readers.read_records(str(p)))


def test_loads_is_json_loads():
    for raw in [b'{"a": NaN}', b'{"a": 1e400}', b'\xef\xbb\xbf{"a": 1}', b'{"a": "\\udc00"}', b'{"a": 2.5e-324}',
                b'{"a": 0.1}', b'{"a": 123456789012345678901234567890}', b'{"a": -0.0}']:
        a, b = readers.loads(raw), json.loads(raw)
        assert repr(a) == repr(b) or (math.isnan(a["a"]) and math.isnan(b["a"])), raw


def test_blocks_hold_every_record_once(tmp_path, monkeypatch):
    p = tmp_path / "c.jsonl"
    n = 1000
    p.write_text("".join(json.dumps({"id": f"d{i}", "text": f"t{i}"}) + "\n" for i in range(n)))
    monkeypatch.setattr(readers, "_JSONL_BLOCK_BYTES", 997)
    blocks = list(readers.read_blocks(str(p)))
    assert len(blocks) > 10
    ids = [i for b in blocks for i in b[0]]
    texts = [t for b in blocks for t in b[1]]
    assert ids == [f"d{i}" for i in range(n)] and texts == [f"t{i}" for i in range(n)]
    assert all(b[2] is None for b in blocks)


@pytest.mark.parametrize("two", ['{"id": 3, "text": "a"} {"id": 4, "text": "b"}', '{"id": 3, "text": "a"}{"id": 4, "text": "b"}',
                                 '{"id": 3, "text": "a"}\r{"id": 4, "text": "b"}'])
@pytest.mark.parametrize("blank", ["", "   ", "\r"])
def test_two_values_on_one_line_are_refused_even_beside_a_blank_line(tmp_path, monkeypatch, two, blank):
    """A block is parsed in one call only when every line is one object: two values on a line and a
    blank line elsewhere make as many values as lines, which must not pass for one record per line."""
    lines = [json.dumps({"id": 1, "text": "x"}), blank, two, json.dumps({"id": 5, "text": "y"})]
    p = tmp_path / "c.jsonl"
    p.write_text("\n".join(lines) + "\n")
    for block in (1 << 24, 64):
        monkeypatch.setattr(readers, "_JSONL_BLOCK_BYTES", block)
        with pytest.raises(InputError, match=":3: not valid JSON"):
            list(readers.read_records(str(p)))


def test_blocks_of_plain_lines_are_parsed_in_one_call(tmp_path, monkeypatch):
    """The one-call path is the one taken for plain JSONL (CRLF included), and gives the per-line values."""
    p = tmp_path / "c.jsonl"
    p.write_bytes(b"".join(json.dumps({"id": i, "text": f"t{i}"}).encode() + (b"\r\n" if i % 2 else b"\n")
                           for i in range(300)))
    calls = []
    one_call = readers._fast_lines

    def spy(buf):
        calls.append(len(buf))
        return one_call(buf)

    monkeypatch.setattr(readers, "_fast_lines", spy)
    got = [(i, t) for i, t, _ in readers.read_records(str(p))]
    assert got == [(i, f"t{i}") for i in range(300)]
    assert calls and sum(calls) >= p.stat().st_size - 2


class _ReadOnly:
    """A file object with ``read`` and no ``readinto``."""

    def __init__(self, data: bytes) -> None:
        self._f = io.BytesIO(data)

    def read(self, n: int) -> bytes:
        return self._f.read(n)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=60),
       st.booleans(), st.sampled_from([1, 3, 16, 64, 1000]), st.sampled_from([1, 256]), st.booleans())
def test_line_blocks_cut_the_file_at_every_newline(lines, trailing, block_bytes, find_from, plain_read):
    """Every line of the file once, in order, at its byte offset, whatever the buffer size (lines
    longer than it grow it), the way newlines are found (``_FIND_FROM`` 1: numpy after the first
    line) and the reading (``readinto`` or ``read``)."""
    data = b"\n".join(lines) + (b"\n" if trailing and lines else b"")
    f = _ReadOnly(data) if plain_read else io.BytesIO(data)
    old = readers._JSONL_BLOCK_BYTES, readers._FIND_FROM
    readers._JSONL_BLOCK_BYTES, readers._FIND_FROM = block_bytes, find_from
    try:
        got, numbers = [], []
        for first, block, starts, ends, base in readers._line_blocks(f):
            assert first == len(got) + 1
            for s, e in zip(starts.tolist(), ends.tolist()):
                line = bytes(block[s:e])  # copied now: the buffer is read into again
                assert data[base + s: base + e] == line
                got.append(line)
            numbers.append(first)
    finally:
        readers._JSONL_BLOCK_BYTES, readers._FIND_FROM = old
    want = data.split(b"\n")
    if want[-1] == b"":  # what follows the last newline is a line only when it holds bytes
        want.pop()
    assert got == want
    assert numbers == sorted(numbers)
