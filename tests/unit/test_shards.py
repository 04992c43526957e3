"""`diversify build 'dir/*.jsonl'` and `diversify build dir/` with the local engine: the shards
read as their concatenation (same clusters, same bytes), one expansion shared with the Dask engine,
and clear errors for what is not a set of shards."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys

import pytest

from diversify.artifact import load
from diversify.cli.main import main
from diversify.corpus.datagen import generate_corpus
from diversify.corpus.readers import read_records
from diversify.corpus.shards import expand_shards
from diversify.errors import InputError

EPOCH = "1767225600"


@pytest.fixture(scope="module")
def docs():
    c = generate_corpus(300, words_per_doc=40, dup_fraction=0.3, seed=5)
    return [(f"d{i:03d}", t) for i, t in enumerate(c.texts)]


def write_jsonl(path, rows, *, ids=True, blank_after=()):
    with open(path, "w", encoding="utf-8") as f:
        for k, (i, t) in enumerate(rows):
            f.write(json.dumps({"id": i, "text": t} if ids else {"text": t}) + "\n")
            if k in blank_after:
                f.write("\n")


def build(src, out, monkeypatch, capsys, *extra):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", EPOCH)
    rc = main(["build", str(src), "-o", str(out), "--no-progress", *map(str, extra)])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def split(rows, cuts):
    bounds = [0, *cuts, len(rows)]
    return [rows[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


@pytest.mark.parametrize("ids", [True, False])
def test_jsonl_shards_build_the_bytes_of_the_concatenated_file(tmp_path, docs, monkeypatch, capsys, ids):
    write_jsonl(tmp_path / "all.jsonl", docs, ids=ids)
    d = tmp_path / "shards"
    d.mkdir()
    # names sort in another order than they were written: the order is the sorted path order
    for name, part in zip(["part-00.jsonl", "part-01.jsonl", "part-10.jsonl"], split(docs, [97, 200])):
        write_jsonl(d / name, part, ids=ids)
    (d / "_SUCCESS").write_text("")  # a job's marker files are skipped
    (d / ".part-00.jsonl.crc").write_bytes(b"\x00\x01")
    assert build(tmp_path / "all.jsonl", tmp_path / "all.dvf", monkeypatch, capsys)[0] == 0
    want = (tmp_path / "all.dvf").read_bytes()
    for src in (d, str(d) + "/", str(d / "*.jsonl"), str(d / "part-*")):
        rc, out, err = build(src, tmp_path / "s.dvf", monkeypatch, capsys)
        assert rc == 0, err
        assert (tmp_path / "s.dvf").read_bytes() == want, f"{src}: not the concatenated file's bytes"
    got = load(tmp_path / "s.dvf")
    assert got.n_docs == len(docs)
    assert list(got.ids) == ([i for i, _ in docs] if ids else list(range(len(docs))))


def test_record_numbers_count_on_across_shards_with_blank_lines(tmp_path, docs):
    """Without an id field the ids are line numbers of the concatenation: unique across shards."""
    d = tmp_path / "s"
    d.mkdir()
    a, b = split(docs[:10], [5])
    write_jsonl(d / "a.jsonl", a, ids=False, blank_after=(1,))  # 6 lines
    write_jsonl(d / "b.jsonl", b, ids=False)
    got = [r[0] for r in read_records(str(d))]
    cat = tmp_path / "cat.jsonl"
    cat.write_bytes((d / "a.jsonl").read_bytes() + (d / "b.jsonl").read_bytes())
    assert got == [r[0] for r in read_records(str(cat))] == [0, 1, 3, 4, 5, 6, 7, 8, 9, 10]


def test_parquet_directory_equals_the_parquet_file(tmp_path, docs, monkeypatch, capsys):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")

    def table(rows, ids=True):
        cols = {"text": [t for _, t in rows]}
        return pa.table({"id": [i for i, _ in rows], **cols} if ids else cols)

    for ids in (True, False):
        pq.write_table(table(docs, ids), tmp_path / "all.parquet")
        d = tmp_path / f"pq{ids}"
        (d / "year=2024").mkdir(parents=True)  # partitioned output: shards in subfolders
        parts = split(docs, [120, 250])
        pq.write_table(table(parts[0], ids), d / "a.parquet", row_group_size=50)
        pq.write_table(table(parts[1], ids), d / "b.parquet")
        pq.write_table(table(parts[2], ids), d / "year=2024" / "c.parquet")
        (d / "_metadata").write_bytes(b"not parquet")
        assert build(tmp_path / "all.parquet", tmp_path / "all.dvf", monkeypatch, capsys)[0] == 0
        rc, _, err = build(d, tmp_path / "d.dvf", monkeypatch, capsys)
        assert rc == 0, err
        assert (tmp_path / "d.dvf").read_bytes() == (tmp_path / "all.dvf").read_bytes()


def test_add_reads_shards_too(tmp_path, docs, monkeypatch, capsys):
    write_jsonl(tmp_path / "base.jsonl", docs[:100])
    assert build(tmp_path / "base.jsonl", tmp_path / "a.dvf", monkeypatch, capsys)[0] == 0
    for j, part in enumerate(split(docs[100:], [80])):
        write_jsonl(tmp_path / f"more-{j}.jsonl", part)
    rc = main(["add", str(tmp_path / "a.dvf"), str(tmp_path / "more-*.jsonl"), "--no-progress"])
    assert rc == 0, capsys.readouterr().err
    assert list(load(tmp_path / "a.dvf").ids) == [i for i, _ in docs]


def _err(src, tmp_path, monkeypatch, capsys, *extra):
    rc, out, err = build(src, tmp_path / "x.dvf", monkeypatch, capsys, *extra)
    assert rc == 2 and err.count("\n") == 1 and err.startswith("diversify build: error: "), (rc, err)
    assert not (tmp_path / "x.dvf").exists()
    return err


def test_errors_name_the_input_and_the_fix(tmp_path, docs, monkeypatch, capsys):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    err = _err(tmp_path / "none-*.jsonl", tmp_path, monkeypatch, capsys)
    assert "no file matches the glob" in err and "none-*.jsonl" in err
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    write_jsonl(mixed / "a.jsonl", docs[:3])
    pq.write_table(pa.table({"id": ["z"], "text": ["zz"]}), mixed / "b.parquet")
    assert "mixes JSONL and Parquet" in _err(mixed, tmp_path, monkeypatch, capsys)
    other = tmp_path / "other"
    other.mkdir()
    write_jsonl(other / "a.jsonl", docs[:3])
    (other / "notes.txt").write_text("hello")
    err = _err(other, tmp_path, monkeypatch, capsys)
    assert "JSONL shards and other files" in err and "notes.txt" in err and "--format dir" in err
    assert "a glob" in err and "*.jsonl" in err
    err = _err(str(other / "*"), tmp_path, monkeypatch, capsys)
    assert "notes.txt" in err and "neither JSONL" in err
    # the fix the message names works: --format dir reads every file as one document
    assert build(other, tmp_path / "dir.dvf", monkeypatch, capsys, "--format", "dir")[0] == 0
    assert sorted(load(tmp_path / "dir.dvf").ids) == ["a.jsonl", "notes.txt"]
    gz = tmp_path / "gz"
    gz.mkdir()
    with gzip.open(gz / "a.jsonl.gz", "wt") as f:
        f.write(json.dumps({"id": "a", "text": "x"}) + "\n")
    assert "--engine dask" in _err(gz, tmp_path, monkeypatch, capsys)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "holds no file" in _err(empty, tmp_path, monkeypatch, capsys, "--format", "jsonl")
    # --format names the shards' format: files without a suffix (Hadoop's part-00000) are read in it
    hadoop = tmp_path / "hadoop"
    hadoop.mkdir()
    write_jsonl(hadoop / "part-00000", docs[:4])
    write_jsonl(hadoop / "part-00001", docs[4:6])
    assert build(hadoop, tmp_path / "h.dvf", monkeypatch, capsys, "--format", "jsonl")[0] == 0
    assert load(tmp_path / "h.dvf").n_docs == 6
    err = _err(other, tmp_path, monkeypatch, capsys, "--format", "jsonl")
    assert "notes.txt" in err and "which is not one" in err and "--format dir" in err
    assert "`--format` csv does not read a directory" in _err(other, tmp_path, monkeypatch, capsys, "--format", "csv")


def test_shards_must_agree_on_ids(tmp_path, docs, monkeypatch, capsys):
    d = tmp_path / "ids"
    d.mkdir()
    write_jsonl(d / "a.jsonl", docs[:3])
    write_jsonl(d / "b.jsonl", docs[3:6], ids=False)
    err = _err(d, tmp_path, monkeypatch, capsys)
    assert "b.jsonl:1" in err and "'id'" in err
    dup = tmp_path / "dup"
    dup.mkdir()
    write_jsonl(dup / "a.jsonl", docs[:3])
    write_jsonl(dup / "b.jsonl", docs[2:5])  # d002 in both
    err = _err(dup, tmp_path, monkeypatch, capsys)
    assert "d002" in err and "unique" in err
    assert f"({dup / 'a.jsonl'}:3 and {dup / 'b.jsonl'}:1)" in err, "the repeat is named in the shards"


def test_a_directory_of_text_files_is_still_documents(tmp_path, monkeypatch, capsys):
    d = tmp_path / "texts"
    (d / "sub").mkdir(parents=True)
    (d / "a.txt").write_text("one two three four five six")
    (d / "sub" / "b.md").write_text("one two three four five six")
    assert expand_shards(str(d)) is None
    assert build(d, tmp_path / "t.dvf", monkeypatch, capsys)[0] == 0
    assert sorted(load(tmp_path / "t.dvf").ids) == ["a.txt", "sub/b.md"]


def test_expansion_is_sorted_and_shared_with_dask(tmp_path):
    d = tmp_path / "s"
    d.mkdir()
    for name in ("b.jsonl", "a.jsonl", "c.ndjson", "_x.jsonl", ".y.jsonl"):
        (d / name).write_text("")
    sh = expand_shards(str(d))
    assert sh is not None and sh.fmt == "jsonl"
    assert [os.path.basename(p) for p in sh.paths] == ["a.jsonl", "b.jsonl", "c.ndjson"]
    # a glob takes what it matches (a name with "_" too; "*" skips dot files, as the shell's does)
    assert list(expand_shards(str(d / "*.jsonl")).paths) == [str(d / n) for n in ("_x.jsonl", "a.jsonl", "b.jsonl")]
    assert expand_shards(str(d / "a.jsonl")) is None, "one file is not shards"
    assert expand_shards(str(d), fmt="dir") is None
    with pytest.raises(InputError, match="no file matches"):
        expand_shards(str(d / "zz*"))
    pytest.importorskip("fsspec")
    from diversify.engines.dask.inputs import _expand_paths

    _, paths, fmt = _expand_paths(str(d), None)
    assert paths == list(sh.paths) and fmt == "jsonl"


def test_glob_as_users_run_it(tmp_path, docs):
    for j, part in enumerate(split(docs[:40], [20])):
        write_jsonl(tmp_path / f"p{j}.jsonl", part)
    r = subprocess.run([sys.executable, "-m", "diversify", "build", "*.jsonl", "-o", "g.dvf", "--no-progress"],
                       cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert load(tmp_path / "g.dvf").n_docs == 40
