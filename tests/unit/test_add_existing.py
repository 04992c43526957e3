"""`add` of documents whose ids the artifact already has: the default error names the record in the
user's file and the flag; `--skip-existing` / on_existing="skip" leaves them out and equals an add of
the new documents alone."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import diversify
from diversify.artifact import load
from diversify.cli.main import main
from diversify.corpus.datagen import generate_corpus
from diversify.errors import ConfigError, DuplicateIdError, ExistingIdError

CREATED = "2026-01-01T00:00:00Z"
EPOCH = "1767225600"


@pytest.fixture(scope="module")
def corpus():
    c = generate_corpus(160, words_per_doc=40, dup_fraction=0.3, seed=9)
    return [f"d{i:03d}" for i in range(len(c.texts))], list(c.texts)


@pytest.fixture
def art(tmp_path, corpus):
    ids, texts = corpus
    p = tmp_path / "a.dvf"
    diversify.build(texts[:100], ids=ids[:100], created_at=CREATED).save(p)
    return p


def test_default_error_names_the_position_and_the_option(art, corpus):
    ids, texts = corpus
    before = art.read_bytes()
    new_ids = ids[100:110] + [ids[7], ids[3]]
    with pytest.raises(ExistingIdError) as e:
        diversify.add(art, texts[100:110] + ["x y z", "u v w"], ids=new_ids)
    assert (e.value.position, e.value.id, e.value.doc) == (10, ids[7], 7)
    msg = str(e.value)
    assert "`ids` must be new to the artifact: ids[10] 'd007' is already in it (its document 7)" in msg
    assert "2 of the 12 new ids" in msg and "on_existing='skip'" in msg
    assert isinstance(e.value, DuplicateIdError) and isinstance(e.value, ValueError)
    assert art.read_bytes() == before


@pytest.mark.parametrize("kind", [list, iter])
def test_skip_equals_an_add_of_the_new_documents_alone(art, corpus, tmp_path, kind):
    """A list stays a list (its texts at hand for the exact checks), a stream a stream."""
    ids, texts = corpus
    rng = np.random.default_rng(3)
    old = rng.choice(100, size=15, replace=False).tolist()
    # new and existing ids interleaved; the existing ones carry other texts (they must not count)
    mixed = [(ids[i], texts[i]) for i in range(100, 160)] + [(ids[i], "ignored " + texts[i]) for i in old]
    order = rng.permutation(len(mixed)).tolist()
    mixed = [mixed[i] for i in order]
    new_only = [(i, t) for i, t in mixed if int(i[1:]) >= 100]
    res = diversify.add(art, kind([t for _, t in mixed]), ids=[i for i, _ in mixed], on_existing="skip",
                        created_at=CREATED)
    want = diversify.add(art, kind([t for _, t in new_only]), ids=[i for i, _ in new_only], created_at=CREATED)
    assert sorted(res.skipped) == sorted(ids[i] for i in old)
    res.save(tmp_path / "got.dvf")
    want.save(tmp_path / "want.dvf")
    assert (tmp_path / "got.dvf").read_bytes() == (tmp_path / "want.dvf").read_bytes()


def test_skip_with_vectors_and_keys_keeps_rows_aligned(tmp_path):
    rng = np.random.default_rng(1)
    vecs = rng.standard_normal((40, 16)).astype(np.float32)
    texts = [f"document {i} " + " ".join(f"w{(i * 7 + j) % 50}" for j in range(12)) for i in range(40)]
    keys = np.arange(40, dtype=np.float64)
    cfg = {"representative": "key"}
    diversify.build(texts[:25], ids=list(range(25)), vectors=vecs[:25], keys=keys[:25], config=cfg,
                    created_at=CREATED).save(tmp_path / "v.dvf")
    pick = [3, 30, 31, 10, 35, 39, 0]
    res = diversify.add(tmp_path / "v.dvf", [texts[i] for i in pick], ids=pick, vectors=vecs[pick], keys=keys[pick],
                        on_existing="skip", created_at=CREATED)
    fresh = [30, 31, 35, 39]
    want = diversify.add(tmp_path / "v.dvf", [texts[i] for i in fresh], ids=fresh, vectors=vecs[fresh],
                         keys=keys[fresh], created_at=CREATED)
    assert res.skipped == [3, 10, 0]
    assert np.array_equal(res.cluster_ids, want.cluster_ids)
    assert np.array_equal(res.is_representative, want.is_representative)


def test_skip_of_everything_leaves_the_artifact_as_it_was(art, corpus):
    ids, texts = corpus
    before = art.read_bytes()
    res = diversify.add(art, texts[:5], ids=ids[:5], on_existing="skip")
    assert res.unchanged and res.skipped == ids[:5] and res.n_docs == 100
    res.save(art)
    assert art.read_bytes() == before


def test_on_existing_values(art, corpus):
    ids, texts = corpus
    with pytest.raises(ConfigError, match="live index"):
        diversify.add(art, texts[:1], ids=ids[:1], on_existing="replace")
    with pytest.raises(ConfigError, match="`on_existing` must be one of"):
        diversify.add(art, texts[:1], ids=ids[:1], on_existing="overwrite")
    with pytest.raises(DuplicateIdError, match="positions 0 and 2"):  # a repeat among the new ids themselves
        diversify.add(art, ["a", "b", "c"], ids=["n1", "n2", "n1"], on_existing="skip")


# --------------------------------------------------------------------------- the command line


def write_jsonl(path, rows, blank_at=()):
    with open(path, "w", encoding="utf-8") as f:
        for k, (i, t) in enumerate(rows):
            if k in blank_at:
                f.write("\n")
            f.write(json.dumps({"id": i, "text": t}) + "\n")


def run(args, capsys, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", EPOCH)
    rc = main([str(a) for a in args])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def test_cli_error_names_the_line_in_the_users_file(art, corpus, tmp_path, capsys, monkeypatch):
    ids, texts = corpus
    before = art.read_bytes()
    rows = [(ids[i], texts[i]) for i in range(100, 104)] + [(ids[5], "x")]
    write_jsonl(tmp_path / "more.jsonl", rows, blank_at=(2,))  # a blank line: record 4 is on line 6
    rc, out, err = run(["add", art, tmp_path / "more.jsonl", "--no-progress"], capsys, monkeypatch)
    assert rc == 2 and out == ""
    assert err.startswith(f"diversify add: error: {tmp_path / 'more.jsonl'}:6: id 'd005' is already in the artifact")
    assert "--skip-existing" in err and err.count("\n") == 1
    assert art.read_bytes() == before
    # in a directory of shards: the shard and its line
    d = tmp_path / "shards"
    d.mkdir()
    write_jsonl(d / "p0.jsonl", rows[:3])
    write_jsonl(d / "p1.jsonl", [rows[3], (ids[9], "y"), rows[4]])
    rc, _, err = run(["add", art, d, "--no-progress"], capsys, monkeypatch)
    assert rc == 2 and f"{d / 'p1.jsonl'}:2: id 'd009'" in err


def test_cli_repeat_within_the_new_records_names_both_lines(art, tmp_path, capsys, monkeypatch):
    write_jsonl(tmp_path / "more.jsonl", [("n1", "a b"), ("n2", "c d"), ("n1", "e f")], blank_at=(1,))
    rc, _, err = run(["add", art, tmp_path / "more.jsonl", "--no-progress", "--skip-existing"], capsys, monkeypatch)
    p = tmp_path / "more.jsonl"
    assert rc == 2 and f"id 'n1' occurs at positions 0 and 2 of the input ({p}:1 and {p}:4)" in err


def test_cli_error_in_parquet_names_the_row(art, corpus, tmp_path, capsys, monkeypatch):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    ids, texts = corpus
    pq.write_table(pa.table({"id": [ids[120], ids[121], ids[50]], "text": texts[120:122] + ["z"]}),
                   tmp_path / "more.parquet")
    rc, _, err = run(["add", art, tmp_path / "more.parquet", "--no-progress"], capsys, monkeypatch)
    assert rc == 2 and f"{tmp_path / 'more.parquet'} row 2: id 'd050'" in err


def test_cli_numbered_records_hint_at_id_field(tmp_path, capsys, monkeypatch):
    """Records without ids are numbered 0.. in both files: the message says where ids come from."""
    (tmp_path / "a.jsonl").write_text("".join(json.dumps({"text": f"first file text number {i} here"}) + "\n"
                                              for i in range(3)))
    (tmp_path / "b.jsonl").write_text(json.dumps({"text": "another one"}) + "\n")
    assert run(["build", tmp_path / "a.jsonl", "-o", tmp_path / "n.dvf", "--no-progress"], capsys, monkeypatch)[0] == 0
    rc, _, err = run(["add", tmp_path / "n.dvf", tmp_path / "b.jsonl", "--no-progress"], capsys, monkeypatch)
    assert rc == 2 and "b.jsonl:1: id 0 is already in the artifact" in err and "--id-field NAME" in err


def test_cli_skip_existing_equals_the_add_of_the_new_records(art, corpus, tmp_path, capsys, monkeypatch):
    ids, texts = corpus
    rows = [(ids[i], texts[i]) for i in range(100, 130)]
    hostile = "d001"  # an existing id, with a hostile text that must not be read into the clusters
    write_jsonl(tmp_path / "more.jsonl", rows[:10] + [(hostile, "\x1b[2J evil")] + rows[10:] + [(ids[2], "x")])
    write_jsonl(tmp_path / "new.jsonl", rows)
    other = tmp_path / "b.dvf"
    other.write_bytes(art.read_bytes())
    rc, out, err = run(["add", art, tmp_path / "more.jsonl", "--no-progress", "--skip-existing"], capsys, monkeypatch)
    assert rc == 0, err
    assert "skipped          2 records whose ids the artifact already has (--skip-existing)" in out
    assert run(["add", other, tmp_path / "new.jsonl", "--no-progress"], capsys, monkeypatch)[0] == 0
    assert art.read_bytes() == other.read_bytes()
    # again: every record is in the artifact now; nothing is written
    before = art.read_bytes()
    rc, out, _ = run(["add", art, tmp_path / "more.jsonl", "--no-progress", "--skip-existing"], capsys, monkeypatch)
    assert rc == 0 and out.startswith("nothing to add: the 32 records given have ids already in")
    assert art.read_bytes() == before


def test_cli_error_escapes_a_hostile_id(tmp_path, capsys, monkeypatch):
    evil = "x\n\x1b[31mforged line"
    write_jsonl(tmp_path / "a.jsonl", [(evil, "some text about one thing"), ("ok", "other text here entirely")])
    assert run(["build", tmp_path / "a.jsonl", "-o", tmp_path / "h.dvf", "--no-progress"], capsys, monkeypatch)[0] == 0
    write_jsonl(tmp_path / "b.jsonl", [(evil, "again")])
    r = subprocess.run([sys.executable, "-m", "diversify", "add", str(tmp_path / "h.dvf"), str(tmp_path / "b.jsonl"),
                        "--no-progress"], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "\x1b" not in r.stderr
    assert "b.jsonl:1: id 'x\\n" in r.stderr
    assert list(load(tmp_path / "h.dvf").ids) == [evil, "ok"]
