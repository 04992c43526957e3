"""`diversify index add | query | delete | export | stats` (in process, on SQLite)."""

from __future__ import annotations

import json

import pytest

from diversify.cli.main import main
from index.contract import _doc, _near


def _run(capsys, *argv) -> tuple[int, list, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    lines = [json.loads(x) for x in out.splitlines() if x.strip()]
    return status, lines, err


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "c.jsonl"
    with open(path, "w") as f:
        for i in range(12):
            f.write(json.dumps({"id": f"d{i}", "text": _doc(i)}) + "\n")
        for i in range(3):
            f.write(json.dumps({"id": f"n{i}", "text": _near(i)}) + "\n")
    return path


def test_index_commands_end_to_end(tmp_path, capsys, corpus):
    import diversify

    url = f"sqlite:///{tmp_path}/i.db"
    status, lines, _ = _run(capsys, "index", "add", url, str(corpus), "--batch-size", "4")
    assert status == 0 and [x["id"] for x in lines] == [f"d{i}" for i in range(12)] + ["n0", "n1", "n2"]
    assert [x["joined"] for x in lines] == [False] * 12 + [True] * 3
    assert [x["representative"] for x in lines[12:]] == ["d0", "d1", "d2"]
    q = tmp_path / "q.jsonl"
    q.write_text(json.dumps({"id": "q", "text": _near(5)}) + "\n")
    status, lines, _ = _run(capsys, "index", "query", url, str(q))
    assert status == 0 and lines == [{"id": "q", "cluster": lines[0]["cluster"], "joined": True, "representative": "d5",
                                      "similarity": lines[0]["similarity"], "matched": [
                                          {"id": "d5", "similarity": lines[0]["similarity"]}]}]
    status, lines, _ = _run(capsys, "index", "query", url, "--text", "nothing like it", "--text", _doc(7))
    assert status == 0 and [x["cluster"] is None for x in lines] == [True, False]
    ids = tmp_path / "ids.txt"
    ids.write_text("d0\n\nn1\nnope\n")
    status, lines, _ = _run(capsys, "index", "delete", url, "--ids", str(ids))
    assert status == 0 and lines == [{"deleted": 2, "missing": ["nope"], "reassigned": 1}]
    status, lines, _ = _run(capsys, "index", "export", url, "-o", str(tmp_path / "x.dvf"))
    assert status == 0 and lines[0]["documents"] == 13
    cm = diversify.load(tmp_path / "x.dvf")
    assert cm.lookup(["n0"])[0] != cm.lookup(["d1"])[0] and cm.n_docs == 13
    status, lines, _ = _run(capsys, "index", "stats", url, "--check")
    assert status == 0 and lines[0]["documents"] == 13 and lines[0]["problems"] == []


def test_index_command_failures_are_one_line(tmp_path, capsys, corpus):
    url = f"sqlite:///{tmp_path}/i.db"
    cases = [
        (["index", "stats", f"sqlite:///{tmp_path}/none.db"], "no index at"),
        (["index", "query", f"sqlite:///{tmp_path}/none.db", "--text", "x"], "no index at"),
        (["index"], "give an ACTION"),
        (["index", "add", "ftp://host/x", str(corpus)], "scheme must be one of"),
        (["index", "add", url, str(corpus), "--batch-size", "0"], "--batch-size"),
    ]
    for argv, msg in cases:
        status, lines, err = _run(capsys, *argv)
        assert status == 2 and lines == [] and msg in err and len(err.strip().splitlines()) == 1, (argv, err)
    assert _run(capsys, "index", "add", url, str(corpus))[0] == 0
    status, _, err = _run(capsys, "index", "add", url, str(corpus), "--threshold", "0.7")
    assert status == 2 and "minhash.threshold: 0.8 -> 0.7" in err
    status, _, err = _run(capsys, "index", "add", url, str(corpus))
    assert status == 2 and "in the index already" in err
    noid = tmp_path / "noid.jsonl"
    noid.write_text(json.dumps({"text": _doc(99)}) + "\n")
    status, _, err = _run(capsys, "index", "add", url, str(noid))
    assert status == 2 and "needs document ids" in err
    status, _, err = _run(capsys, "index", "add", "postgresql://u:secret@127.0.0.1:1/db", str(corpus))
    assert status == 2 and "secret" not in err


def test_index_add_cli_with_a_bad_record_commits_exactly_what_it_printed(tmp_path, capsys):
    """A bad record (its block of the file is parsed before any batch of it is added) is reported in
    one line (exit 2), and the index holds exactly the documents printed, all of them whole batches."""
    import diversify

    path = tmp_path / "bad.jsonl"
    good = [json.dumps({"id": f"d{i}", "text": _doc(i)}) for i in range(6)]
    path.write_text("\n".join(good + ["{not json"]) + "\n")
    url = f"sqlite:///{tmp_path}/i.db"
    status = main(["index", "add", url, str(path), "--batch-size", "2"])
    out, err = capsys.readouterr()
    printed = [json.loads(x)["id"] for x in out.splitlines()]
    # the progress bar rewrites its line with \r and clears it: the error is the one line that ends
    assert status == 2 and "bad.jsonl:7" in err and err.count("\n") == 1 and "Traceback" not in err
    assert err.split("\r")[-1].startswith("diversify index add: error: ")
    assert len(printed) % 2 == 0
    with diversify.Index(url) as idx:
        assert sorted(r.id for r in idx.scan()) == sorted(printed)


def test_index_add_and_query_apply_source_thresholds(tmp_path, capsys):
    """--source-field and --source-threshold as in `build`: a pair folds at the stricter of its two
    documents' thresholds (they were read and silently dropped by `index add` before)."""
    path = tmp_path / "s.jsonl"
    recs = [("a", _doc(1), "strict"), ("a2", _near(1), "lax"), ("b", _doc(2), "lax"), ("b2", _near(2), "lax")]
    path.write_text("".join(json.dumps({"id": i, "text": t, "src": s}) + "\n" for i, t, s in recs))
    url = f"sqlite:///{tmp_path}/i.db"
    status, lines, err = _run(capsys, "index", "add", url, str(path), "--source-field", "src", "--source-threshold",
                              "strict=0.97", "--source-threshold", "lax=0.7", "--batch-size", "1", "--no-progress")
    assert status == 0 and err == ""
    assert [x["joined"] for x in lines] == [False, False, False, True] and lines[3]["representative"] == "b"
    q = tmp_path / "q.jsonl"
    q.write_text(json.dumps({"id": "q", "text": _near(2), "src": "strict"}) + "\n"
                 + json.dumps({"id": "r", "text": _near(2), "src": "lax"}) + "\n")
    status, lines, _ = _run(capsys, "index", "query", url, str(q), "--source-field", "src", "--no-progress")
    assert status == 0 and [x["joined"] for x in lines] == [False, True]
    status, lines, err = _run(capsys, "index", "query", url, "--text", _near(2))
    assert status == 2 and lines == [] and "--source-field" in err and err.count("\n") == 1
    status, lines, err = _run(capsys, "index", "add", url, str(path), "--no-progress")  # same ids: refused anyway
    assert status == 2 and "--source-field" in err


def test_index_add_and_query_report_progress_and_a_verbose_summary_on_stderr(tmp_path, capsys, corpus):
    url = f"sqlite:///{tmp_path}/i.db"
    status, lines, err = _run(capsys, "index", "add", url, str(corpus), "--batch-size", "4", "--verbose")
    assert status == 0 and len(lines) == 15
    assert "added:" in err and "joined 3" in err  # the bar, with the joined count of the last batch
    assert err.rstrip("\n").splitlines()[-1].endswith(" docs/s)")
    assert "diversify index add: added 15 documents (joined 3) in " in err
    status, lines, err = _run(capsys, "index", "query", url, str(corpus), "--no-progress", "--verbose")
    assert status == 0 and len(lines) == 15 and sum(x["joined"] for x in lines) == 15
    assert err.startswith("diversify index query: queried 15 documents (matched 15) in ") and err.count("\n") == 1
    status, lines, err = _run(capsys, "index", "query", url, str(corpus), "--no-progress")
    assert status == 0 and err == ""
