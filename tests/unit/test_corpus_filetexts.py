"""``diversify build FILE.jsonl`` keeps the texts in the file (diversify/corpus/filetexts.py): read
once in blocks while the build sketches them, the few it checks exactly read again by their byte
offsets. The sequence must give what ``read_records`` gives, by iterating and by index, at every
block size and with the lines the fast parser refuses; a build from it must give the bytes of a
build from the list of texts; a file changed under it must be refused, never read wrong.
"""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_corpus_readers import LINES

import diversify
import diversify.corpus.readers as readers
from diversify.config import BuildConfig, MinHashConfig
from diversify.corpus.datagen import generate_corpus
from diversify.corpus.filetexts import JsonlTexts
from diversify.errors import InputError


def records(path) -> list[tuple]:
    return [(i, t) for i, t, _ in readers.read_records(str(path))]


def write(tmp_path, lines: list[str], tail: str = "\n"):
    p = tmp_path / "c.jsonl"
    p.write_bytes(("\n".join(lines) + tail).encode("utf-8"))
    return p


@pytest.mark.parametrize("block_bytes", [1, 7, 64, 333, 1 << 24])
def test_iteration_and_indexing_give_the_records_of_the_reader(tmp_path, monkeypatch, block_bytes):
    lines = []
    for k, line in enumerate(LINES):  # msgspec refuses some of these: those blocks go record by record
        lines.append(line)
        if k % 4 == 1:
            lines.append("   ")  # blank lines: records and lines part ways
    p = write(tmp_path, lines, tail="")
    want = records(p)
    monkeypatch.setattr(readers, "_JSONL_BLOCK_BYTES", block_bytes)
    t = JsonlTexts(str(p))
    ids = t.ids()
    assert not t.length_known
    got_texts = list(t)
    got_ids = list(ids)
    assert t.length_known and len(t) == len(want)
    assert got_texts == [w[1] for w in want]
    assert got_ids == [w[0] for w in want]
    assert [t[i] for i in range(len(t))] == got_texts
    order = [5, 0, len(t) - 1, 3, 3, -1]
    assert t.take(order) == [got_texts[i] for i in order]
    assert list(t) == got_texts  # a second pass reads back by index
    assert t[1:4] == got_texts[1:4]


@given(st.lists(st.text(max_size=40), min_size=1, max_size=30), st.integers(1, 200))
@settings(max_examples=60, deadline=None)
def test_any_texts_come_back_by_index(tmp_path_factory, texts, block_bytes):
    p = tmp_path_factory.mktemp("ft") / "c.jsonl"
    p.write_text("".join(json.dumps({"id": f"d{i}", "text": s}) + "\n" for i, s in enumerate(texts)), "utf-8")
    old = readers._JSONL_BLOCK_BYTES
    readers._JSONL_BLOCK_BYTES = block_bytes
    try:
        t = JsonlTexts(str(p))
        assert list(zip(t.ids(), t)) == [(f"d{i}", s) for i, s in enumerate(texts)]
    finally:
        readers._JSONL_BLOCK_BYTES = old
    assert t.take(range(len(texts) - 1, -1, -1)) == texts[::-1]


def test_ids_may_be_read_ahead_of_the_texts(tmp_path, monkeypatch):
    p = write(tmp_path, [json.dumps({"id": i, "text": f"text {i}"}) for i in range(50)])
    monkeypatch.setattr(readers, "_JSONL_BLOCK_BYTES", 64)
    t = JsonlTexts(str(p))
    assert list(t.ids()) == list(range(50))
    assert not t.length_known or len(t) == 50
    assert list(t) == [f"text {i}" for i in range(50)]
    assert t[49] == "text 49"


def test_index_out_of_range_and_before_the_end(tmp_path):
    p = write(tmp_path, [json.dumps({"text": "a"}), json.dumps({"text": "b"})])
    t = JsonlTexts(str(p))
    with pytest.raises(IndexError):
        t[0]  # nothing read yet
    with pytest.raises(TypeError, match="known once the file has been read"):
        len(t)
    list(t)
    with pytest.raises(IndexError, match="out of range"):
        t[2]
    assert t[-2] == "a"


@pytest.mark.parametrize("change", ["append", "rewrite same size", "truncate"])
def test_a_file_changed_during_the_build_is_refused(tmp_path, change):
    lines = [json.dumps({"id": i, "text": f"text {i:03d}"}) for i in range(20)]
    p = write(tmp_path, lines)
    t = JsonlTexts(str(p))
    list(t)
    assert t[7] == "text 007"
    st0 = os.stat(p)
    if change == "append":
        with open(p, "ab") as f:
            f.write(b'{"id": 99, "text": "late"}\n')
    elif change == "rewrite same size":
        with open(p, "r+b") as f:
            f.write(json.dumps({"id": 0, "text": "TEXT 000"}).encode())
        os.utime(p, ns=(st0.st_atime_ns, st0.st_mtime_ns + 1_000_000))
    else:
        with open(p, "r+b") as f:
            f.truncate(40)
    with pytest.raises(InputError, match="changed while it was being read"):
        t.take([0, 7])


def corpus(n: int = 400) -> list[str]:
    """Documents with many pairs near the threshold, so that borderline pairs and folds are decided
    by exact Jaccard (which reads texts back)."""
    base = generate_corpus(n // 4, seed=3, dup_fraction=0.0).texts
    out = []
    for i, text in enumerate(base):
        words = text.split()
        out.append(text)
        for k in (8, 11, 14):  # copies with k words changed: Jaccards of word 5-shingles around 0.8
            w = list(words)
            for j in range(i % 5, len(w), len(w) // k):
                w[j] = w[j] + "x"
            out.append(" ".join(w))
    return out


def test_a_build_from_the_file_has_the_bytes_of_a_build_from_the_list(tmp_path, monkeypatch):
    texts = corpus()
    ids = [f"doc-{i}" for i in range(len(texts))]
    p = tmp_path / "c.jsonl"
    p.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in zip(ids, texts)), "utf-8")
    cfg = BuildConfig(minhash=MinHashConfig(verify="auto"))
    want = diversify.build(texts, ids=ids, config=cfg, created_at="2026-01-01T00:00:00Z")
    monkeypatch.setattr(readers, "_JSONL_BLOCK_BYTES", 4096)
    reads: list[int] = []
    take = JsonlTexts.take

    def counting(self, indices):
        got = take(self, indices)
        reads.append(len(got))
        return got

    monkeypatch.setattr(JsonlTexts, "take", counting)
    ft = JsonlTexts(str(p))
    got = diversify.build(ft, ids=ft.ids(), config=cfg, chunk_size=97, created_at="2026-01-01T00:00:00Z")
    assert sum(reads) > 0, "no exact check read a text back: the corpus does not test the read-back"
    a, b = tmp_path / "a.dvf", tmp_path / "b.dvf"
    want.save(str(a))
    got.save(str(b))
    assert a.read_bytes() == b.read_bytes()
    assert want.stats == got.stats and got.stats["exact_checks"]["minhash"] > 0


def test_the_command_line_build_reads_the_file_lazily_and_writes_the_same_bytes(tmp_path, monkeypatch):
    from diversify.cli.main import main

    texts = corpus(200)
    p = tmp_path / "c.jsonl"
    p.write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(texts)), "utf-8")
    made: list = []
    init = JsonlTexts.__init__

    def spy(self, *args, **kw):
        made.append(self)
        init(self, *args, **kw)

    monkeypatch.setattr(JsonlTexts, "__init__", spy)
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")
    assert main(["build", str(p), "-o", str(tmp_path / "cli.dvf"), "--no-progress"]) == 0
    assert len(made) == 1 and made[0].length_known
    assert main(["build", str(p), "-o", str(tmp_path / "stream.dvf"), "--no-progress", "--stream"]) == 0
    assert len(made) == 1  # --stream reads blocks and drops them
    want = diversify.build(texts, ids=[f"d{i}" for i in range(len(texts))], created_at="2026-01-01T00:00:00Z")
    want.save(str(tmp_path / "api.dvf"))
    assert (tmp_path / "cli.dvf").read_bytes() == (tmp_path / "api.dvf").read_bytes()


@given(st.lists(st.integers(0, 59), max_size=80), st.sampled_from([0, 1, 40, 1 << 16]),
       st.sampled_from([1, 50, 300, 4 << 20]))
@settings(max_examples=80, deadline=None)
def test_lines_read_back_in_shared_reads_are_the_lines_asked_for(tmp_path_factory, order, gap, read_bytes):
    """take() reads neighbouring lines in one read (bounded by the gap between them and the read's
    size): any indices, in any order and with repeats, give the texts of those lines."""
    import diversify.corpus.filetexts as ft

    p = tmp_path_factory.mktemp("ft") / "c.jsonl"
    texts = [f"text {i} " + "é" * (i % 7) + "x" * (i * 13 % 50) for i in range(60)]
    p.write_text("".join(json.dumps({"text": t}) + ("\n\n" if i % 11 == 3 else "\n") for i, t in enumerate(texts)),
                 "utf-8")
    t = JsonlTexts(str(p))
    list(t)
    old = ft._GAP, ft._READ_BYTES
    ft._GAP, ft._READ_BYTES = gap, read_bytes
    try:
        assert t.take(order) == [texts[i] for i in order]
    finally:
        ft._GAP, ft._READ_BYTES = old


def test_neighbouring_lines_share_a_read(tmp_path, monkeypatch):
    import diversify.corpus.filetexts as ft

    p = write(tmp_path, [json.dumps({"text": f"doc {i}"}) for i in range(1000)])
    t = JsonlTexts(str(p))
    list(t)
    reads = []
    pread = os.pread

    def counting(fd, n, offset):
        reads.append(n)
        return pread(fd, n, offset)

    monkeypatch.setattr(ft.os, "pread", counting)
    assert t.take(range(999, -1, -3)) == [f"doc {i}" for i in range(999, -1, -3)]
    assert len(reads) == 1
    monkeypatch.setattr(ft, "_GAP", 0)
    reads.clear()
    assert t.take([0, 2, 4]) == ["doc 0", "doc 2", "doc 4"]
    assert len(reads) == 3  # a gap of one line is more than 0 bytes: a read each


def test_length_hint_estimates_from_the_first_block_and_is_exact_at_the_end(tmp_path, monkeypatch):
    import operator

    p = write(tmp_path, [json.dumps({"id": f"{i:05d}", "text": f"doc {i:05d} " + "w" * 40}) for i in range(2000)])
    monkeypatch.setattr(readers, "_JSONL_BLOCK_BYTES", 4096)
    t = JsonlTexts(str(p))
    hint = operator.length_hint(t)
    assert 2000 <= hint <= 2000 * 1.03 + 2  # equal lines: the 2% margin and no more
    assert list(t)[:2] == ["doc 00000 " + "w" * 40, "doc 00001 " + "w" * 40]  # the block read for it is not lost
    assert operator.length_hint(t) == len(t) == 2000


@pytest.mark.parametrize("short_first", [True, False])
def test_a_wrong_length_hint_gives_the_same_build(tmp_path, monkeypatch, short_first):
    import operator

    """Lines of very different lengths make the estimate too high or too low: the signatures must
    come out the same either way (the array sized by the hint, the rest copied in at the end)."""
    texts = corpus(200)
    cut = (lambda k: k < 30) if short_first else (lambda k: k >= 30)  # which lines are cut short
    texts = [t[:60] if cut(k) else t for k, t in enumerate(texts)]
    p = tmp_path / "c.jsonl"
    p.write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(texts)), "utf-8")
    monkeypatch.setattr(readers, "_JSONL_BLOCK_BYTES", 2048)
    ft = JsonlTexts(str(p))
    hint = operator.length_hint(ft)
    assert (hint > len(texts)) if short_first else (hint < len(texts))
    got = diversify.build(ft, ids=ft.ids(), chunk_size=37, created_at="2026-01-01T00:00:00Z")
    want = diversify.build(texts, ids=[f"d{i}" for i in range(len(texts))], created_at="2026-01-01T00:00:00Z")
    a, b = tmp_path / "a.dvf", tmp_path / "b.dvf"
    got.save(str(a))
    want.save(str(b))
    assert a.read_bytes() == b.read_bytes()
