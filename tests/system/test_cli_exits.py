"""Every failing path of the `diversify` command ends the same way (docs/security.md, "CLI paths").

Each row of ``CASES`` runs the real command (``python -m diversify``, what the console script
runs) in a fresh copy of a directory of crafted inputs, and checks: the exit status (2 bad input,
1 environment), exactly one stderr line ``diversify CMD: error: ...`` holding the expected words,
no traceback, no "internal error" (the catch-all for bugs), no file left behind and the artifact
unchanged. The other tests cover what does not fit a row: a closed stdout, Ctrl-C and SIGTERM,
escaping of hostile text, the CSV formula rule, the id-field rules and stdin input.
"""

from __future__ import annotations

import concurrent.futures
import csv
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np
import pytest

BASE = "the quick brown fox jumps over the lazy dog near the river bank today"
DOCS = [("a", BASE), ("b", BASE + " again"), ("c", "databases and query planners are another topic"),
        ("d", "nothing in common with the others at all really")]
TIMEOUT = 120


def _jsonl(docs, **extra) -> str:
    return "".join(json.dumps({"id": i, "text": t, **extra}) + "\n" for i, t in docs)


def _make_inputs(d: Path) -> None:
    """The crafted inputs every row starts from (regular files only: FIFOs are made per row)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    import diversify

    w = lambda name, data: (d / name).write_bytes(data if isinstance(data, bytes) else data.encode())  # noqa: E731
    w("ok.jsonl", _jsonl(DOCS))
    w("more.jsonl", _jsonl([("e", BASE + " and more"), ("f", "an unrelated sentence about weather")]))
    diversify.build([t for _, t in DOCS], ids=[i for i, _ in DOCS]).save(d / "ok.dvf")
    n = 3000
    diversify.build([f"document {i} with words {i * 7} and {i % 13}" for i in range(n)],
                    ids=[f"doc{i}" for i in range(n)]).save(d / "big.dvf")
    w("ok.csv", "id,text\n" + "".join(f"{i},{t}\n" for i, t in DOCS))
    w("empty.jsonl", "")
    w("garbage.jsonl", bytes(range(256)) * 4)
    w("latin1.csv", b"id,text\na,caf\xe9 au lait\n")
    w("wide.csv", "id,text\na,one two three,surplus\n")
    w("notext.csv", "id,body\na,one two three\n")
    w("emptyid.csv", "id,text\na,one two three\n,four five six\n")
    w("idgap.jsonl", _jsonl(DOCS[:2]) + json.dumps({"text": "no id here"}) + "\n")
    w("idlate.jsonl", json.dumps({"text": "no id here"}) + "\n" + _jsonl(DOCS[:1]))
    w("nullid.jsonl", _jsonl(DOCS[:1]) + json.dumps({"id": None, "text": "x y z"}) + "\n")
    w("deep.jsonl", '{"id": "a", "text": "x", "m": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    w("bigint.jsonl", '{"id": ' + "9" * 5000 + ', "text": "x"}\n')
    w("array.jsonl", '["a", "one two three"]\n')
    w("numtext.jsonl", '{"id": "a", "text": 12}\n')
    w("dup.jsonl", _jsonl([("a", BASE), ("a", BASE + " x")]))
    pq.write_table(pa.table({"id": [i for i, _ in DOCS], "text": [t for _, t in DOCS]}), d / "ok.parquet")
    pq.write_table(pa.table({"id": ["a", None], "text": ["x y", "z w"]}), d / "nullid.parquet")
    pq.write_table(pa.table({"id": ["a", "b"], "text": [1, 2]}), d / "inttext.parquet")
    w("bad.parquet", b"PAR1" + b"\x00garbage" * 50 + b"PAR1")
    w("cut.parquet", (d / "ok.parquet").read_bytes()[:300])
    rng = np.random.default_rng(0)
    v = rng.standard_normal((4, 8))
    np.save(d / "v.npy", v)
    np.save(d / "v5.npy", rng.standard_normal((5, 8)))
    np.save(d / "vc.npy", v + 1j)
    np.save(d / "vo.npy", np.array([[1.0, 2.0]] * 4, dtype=object), allow_pickle=True)
    np.save(d / "vn.npy", np.where(np.arange(32).reshape(4, 8) == 3, np.nan, v))
    np.save(d / "vi.npy", np.where(np.arange(32).reshape(4, 8) == 9, np.inf, v))
    np.save(d / "v3.npy", np.ones((4, 2, 4)))
    np.save(d / "vs.npy", np.array([["1.0", "2.0"]] * 4))
    np.save(d / "vdt.npy", np.zeros((4, 2), dtype="datetime64[D]"))
    np.savez(d / "v.npz", v=v)
    w("vt.npy", (d / "v.npy").read_bytes()[:100])
    w("ids.txt", "a\nb\nc\nd\n")
    w("latin1ids.txt", b"a\nb\xe9\nc\nd\n")
    w("pairs.csv", "id_a,id_b,label\na,b,1\na,c,0\n")
    w("pairs-empty.csv", "id_a,id_b,label\n")
    w("pairs-latin1.csv", b"id_a,id_b,label\na,\xe9,1\n")
    w("pairs-badlabel.csv", "id_a,id_b,label\na,b,maybe\n")
    w("pairs-unknown.csv", "id_a,id_b,label\na,zz,1\na,c,0\n")
    w("textpairs.csv", "text_a,text_b,label\none two three four five,one two three four five,1\n"
                       "one two three four five,six seven eight nine ten,0\n")
    w("positives.csv", "text_a,text_b,label\nx y,x y,1\n")
    w("notartifact.dvf", "just some text, not an artifact\n")
    w("empty.dvf", b"")
    (d / "adir").mkdir()
    w("adir/a.txt", "one two three")


def _socket(path: Path) -> None:
    import socket

    with socket.socket(socket.AF_UNIX) as s:  # the socket file stays after the socket is closed
        s.bind(str(path))


def _fifo(name: str) -> Callable[[Path], None]:
    return lambda d: os.mkfifo(d / name)


def _tmpfs(d: Path) -> None:
    """A 16 KiB file system at d/full (root only): writes beyond it fail with ENOSPC."""
    (d / "full").mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(d / "full")], capture_output=True)
    if r.returncode != 0:
        (d / "full").rmdir()
        raise _Unavailable(f"cannot mount a tmpfs here ({r.stderr.decode().strip()})")


class _Unavailable(Exception):
    pass


@dataclass
class Case:
    argv: list
    status: int
    needles: tuple
    setup: Optional[Callable[[Path], None]] = None
    fsize: Optional[int] = None  # RLIMIT_FSIZE in bytes
    stdout: Optional[str] = None  # a path to send stdout to
    stdin: Optional[bytes] = None
    result: dict = field(default_factory=dict)


NB = "--no-progress"
CASES: dict[str, Case] = {
    # --- build: the corpus input
    "build: missing input": Case(["build", "nope.jsonl", "-o", "x.dvf"], 2, ("'nope.jsonl' does not exist",)),
    "build: input is a FIFO": Case(["build", "in.jsonl", "-o", "x.dvf", NB], 2, ("named pipe", "'-'"), _fifo("in.jsonl")),
    "build: input is /dev/zero": Case(["build", "/dev/zero", "--format", "jsonl", "-o", "x.dvf", NB], 2,
                                      ("character device",)),
    "build: --format jsonl on a directory": Case(["build", "adir", "--format", "jsonl", "-o", "x.dvf", NB], 2,
                                                 ("'adir/a.txt', which is not one", "--format dir")),
    "build: --format dir on a file": Case(["build", "ok.jsonl", "--format", "dir", "-o", "x.dvf", NB], 2,
                                          ("needs a directory",)),
    "build: empty file": Case(["build", "empty.jsonl", "-o", "x.dvf", NB], 2, ("corpus is empty",)),
    "build: binary garbage": Case(["build", "garbage.jsonl", "-o", "x.dvf", NB], 2, ("garbage.jsonl:1", "not valid JSON")),
    "build: invalid UTF-8 CSV": Case(["build", "latin1.csv", "-o", "x.dvf", NB], 2, ("not valid UTF-8",)),
    "build: CSV row wider than the header": Case(["build", "wide.csv", "-o", "x.dvf", NB], 2,
                                                 ("wide.csv:2", "more than the 2 columns")),
    "build: CSV without the text column": Case(["build", "notext.csv", "-o", "x.dvf", NB], 2, ("--text-field", "'body'")),
    "build: CSV without the --key-field column": Case(
        ["build", "ok.csv", "-o", "x.dvf", "--representative", "key", "--key-field", "rank", NB], 2,
        ("--key-field", "'rank'")),
    "build: --id-field missing (JSONL)": Case(["build", "ok.jsonl", "-o", "x.dvf", "--id-field", "doc_id", NB], 2,
                                              ("`--id-field` 'doc_id'", "record 0", "['id', 'text']")),
    "build: --id-field missing (CSV)": Case(["build", "ok.csv", "-o", "x.dvf", "--id-field", "doc_id", NB], 2,
                                            ("`--id-field` 'doc_id'", "['id', 'text']")),
    "build: --id-field missing (Parquet)": Case(["build", "ok.parquet", "-o", "x.dvf", "--id-field", "doc_id", NB], 2,
                                                ("`--id-field` 'doc_id'", "['id', 'text']")),
    "build: --id-field on a directory": Case(["build", "adir", "-o", "x.dvf", "--id-field", "name", NB], 2,
                                             ("`--id-field` does not apply to a directory",)),
    "build: default id missing in a later record": Case(["build", "idgap.jsonl", "-o", "x.dvf", NB], 2,
                                                        ("idgap.jsonl:3 (record 2)", "default 'id'", "['text']")),
    "build: default id only in a later record": Case(["build", "idlate.jsonl", "-o", "x.dvf", NB], 2,
                                                     ("idlate.jsonl:2 (record 1)", "first record does not")),
    "build: null id": Case(["build", "nullid.jsonl", "-o", "x.dvf", NB], 2, ("record 1", "has no value")),
    "build: empty id cell (CSV)": Case(["build", "emptyid.csv", "-o", "x.dvf", NB], 2, ("emptyid.csv:3", "has no value")),
    "build: null id (Parquet)": Case(["build", "nullid.parquet", "-o", "x.dvf", NB], 2, ("record 1", "has no value")),
    "build: Parquet text column of ints": Case(["build", "inttext.parquet", "-o", "x.dvf", NB], 2, ("must hold strings",)),
    "build: corrupt Parquet": Case(["build", "bad.parquet", "-o", "x.dvf", NB], 2, ("not a readable Parquet file",)),
    "build: truncated Parquet": Case(["build", "cut.parquet", "-o", "x.dvf", NB], 2, ("not a readable Parquet file",)),
    "build: JSON nested 100,000 deep": Case(["build", "deep.jsonl", "-o", "x.dvf", NB], 2, ("nested too deeply",)),
    "build: JSON int of 5000 digits": Case(["build", "bigint.jsonl", "-o", "x.dvf", NB], 2, ("bigint.jsonl:1", "4300")),
    "build: JSON line that is an array": Case(["build", "array.jsonl", "-o", "x.dvf", NB], 2, ("JSON object", "list")),
    "build: text that is a number": Case(["build", "numtext.jsonl", "-o", "x.dvf", NB], 2, ("must be a string",)),
    "build: duplicate ids": Case(["build", "dup.jsonl", "-o", "x.dvf", NB], 2, ("must be unique",)),
    "build: input is a symlink loop": Case(["build", "loop.jsonl", "-o", "x.dvf", NB], 2, ("loop.jsonl",),
                                           lambda d: os.symlink("loop.jsonl", d / "loop.jsonl")),
    "build: input is a socket": Case(["build", "s.jsonl", "-o", "x.dvf", NB], 2, ("s.jsonl", "cannot be opened"),
                                     lambda d: _socket(d / "s.jsonl")),
    "build --stream: a bad record after good ones": Case(["build", "late.jsonl", "--stream", "-o", "x.dvf", NB], 2,
                                                         ("late.jsonl:5", "not valid JSON"),
                                                         lambda d: (d / "late.jsonl").write_text(_jsonl(DOCS) + "{no\n")),
    "build: a bad record after good ones (read while sketching)": Case(
        ["build", "late.jsonl", "-o", "x.dvf", NB], 2, ("late.jsonl:5", "not valid JSON"),
        lambda d: (d / "late.jsonl").write_text(_jsonl(DOCS) + "{no\n")),
    "add: a bad record after good ones (read while sketching)": Case(
        ["add", "ok.dvf", "late2.jsonl", "-o", "x.dvf", NB], 2, ("late2.jsonl:5", "not valid JSON"),
        lambda d: (d / "late2.jsonl").write_text(_jsonl([(f"n{i}", f"new text {i} here") for i in range(4)]) + "{no\n")),
    "build: --chunk-size 10**20": Case(["build", "ok.jsonl", "-o", "x.dvf", "--chunk-size", str(10**20), NB], 2,
                                       ("`chunk_size`", "--chunk-size")),
    "build: stdin without --format": Case(["build", "-", "-o", "x.dvf", NB], 2, ("--format jsonl",), stdin=b""),
    "build: stdin as Parquet": Case(["build", "-", "--format", "parquet", "-o", "x.dvf", NB], 2,
                                    ("JSONL or CSV", "seekable"), stdin=b""),
    # --- build: vectors and ids files
    "build: missing --vectors": Case(["build", "--vectors", "nope.npy", "-o", "x.dvf", "--no-minhash", NB], 2,
                                     ("`--vectors`", "does not exist")),
    "build: --vectors is a FIFO": Case(["build", "--vectors", "p.npy", "-o", "x.dvf", "--no-minhash", NB], 2,
                                       ("named pipe",), _fifo("p.npy")),
    "build: --vectors is a directory": Case(["build", "--vectors", "adir", "-o", "x.dvf", "--no-minhash", NB], 2,
                                            ("is a directory",)),
    "build: complex vectors": Case(["build", "--vectors", "vc.npy", "-o", "x.dvf", "--no-minhash", NB], 2,
                                   ("real numbers", "complex")),
    "build: object vectors": Case(["build", "--vectors", "vo.npy", "-o", "x.dvf", "--no-minhash", NB], 2,
                                  ("not a numeric .npy",)),
    "build: NaN vectors": Case(["build", "--vectors", "vn.npy", "-o", "x.dvf", "--no-minhash", NB], 2, ("finite",)),
    "build: inf vectors": Case(["build", "--vectors", "vi.npy", "-o", "x.dvf", "--no-minhash", NB], 2, ("finite",)),
    "build: 3-D vectors": Case(["build", "--vectors", "v3.npy", "-o", "x.dvf", "--no-minhash", NB], 2, ("2-D",)),
    "build: string vectors": Case(["build", "--vectors", "vs.npy", "-o", "x.dvf", "--no-minhash", NB], 2,
                                  ("real numbers", "strings")),
    "build: date vectors": Case(["build", "--vectors", "vdt.npy", "-o", "x.dvf", "--no-minhash", NB], 2,
                                ("real numbers", "dates")),
    "build: truncated .npy": Case(["build", "--vectors", "vt.npy", "-o", "x.dvf", "--no-minhash", NB], 2,
                                  ("not a numeric .npy",)),
    "build: .npz archive": Case(["build", "--vectors", "v.npz", "-o", "x.dvf", "--no-minhash", NB], 2, (".npz archive",)),
    "build: vectors not aligned with the input": Case(["build", "ok.jsonl", "--vectors", "v5.npy", "-o", "x.dvf", NB], 2,
                                                      ("one row per document",)),
    "build: missing --ids file": Case(["build", "--vectors", "v.npy", "--ids", "nope.txt", "-o", "x.dvf",
                                       "--no-minhash", NB], 2, ("`--ids`", "does not exist")),
    "build: --ids is a directory": Case(["build", "--vectors", "v.npy", "--ids", "adir", "-o", "x.dvf", "--no-minhash",
                                         NB], 2, ("`--ids`", "is a directory")),
    "build: --ids not UTF-8": Case(["build", "--vectors", "v.npy", "--ids", "latin1ids.txt", "-o", "x.dvf",
                                    "--no-minhash", NB], 2, ("`--ids`", "not valid UTF-8")),
    "build: --ids with an INPUT": Case(["build", "ok.jsonl", "--ids", "ids.txt", "-o", "x.dvf", NB], 2,
                                       ("`--ids`", "Drop --ids")),
    # --- build: options and the output
    "build: --threshold not a number": Case(["build", "ok.jsonl", "-o", "x.dvf", "--threshold", "x"], 2,
                                            ("--threshold", "invalid float")),
    "build: --threshold 1.5": Case(["build", "ok.jsonl", "-o", "x.dvf", "--threshold", "1.5", NB], 2, ("`threshold`",)),
    "build: no -o": Case(["build", "ok.jsonl"], 2, ("-o/--output", "required")),
    "build: unknown option": Case(["build", "ok.jsonl", "-o", "x.dvf", "--frobnicate"], 2, ("unrecognized", "--frobnicate")),
    "build: --metadata without =": Case(["build", "ok.jsonl", "-o", "x.dvf", "--metadata", "model", NB], 2,
                                        ("KEY=VALUE",)),
    "build: --chunk-size -1": Case(["build", "ok.jsonl", "-o", "x.dvf", "--chunk-size", "-1", NB], 2, ("`chunk_size`",)),
    "build: --engine dask on a FIFO": Case(["build", "in.jsonl", "--engine", "dask", "-o", "x.dvf", NB], 2,
                                           ("named pipe",), _fifo("in.jsonl")),
    "build: -o is a directory": Case(["build", "ok.jsonl", "-o", "adir", NB], 2, ("adir",)),
    "build: -o in a missing directory": Case(["build", "ok.jsonl", "-o", "nodir/x.dvf", NB], 2, ("nodir",)),
    # --- add
    "add: missing artifact": Case(["add", "nope.dvf", "more.jsonl", NB], 2, ("nope.dvf", "cannot be opened")),
    "add: artifact is a FIFO": Case(["add", "p.dvf", "more.jsonl", NB], 2, ("not a regular file",), _fifo("p.dvf")),
    "add: input is a FIFO": Case(["add", "ok.dvf", "in.jsonl", NB], 2, ("named pipe",), _fifo("in.jsonl")),
    "add: ids already in the artifact": Case(["add", "ok.dvf", "ok.jsonl", NB], 2,
                                             ("ok.jsonl:1", "already in the artifact", "--skip-existing")),
    "add: --id-field missing": Case(["add", "ok.dvf", "more.jsonl", "--id-field", "key", NB], 2,
                                    ("`--id-field` 'key'", "record 0")),
    # --- stats
    "stats: not an artifact": Case(["stats", "notartifact.dvf"], 2, ("magic bytes",)),
    "stats: empty file": Case(["stats", "empty.dvf"], 2, ("truncated",)),
    "stats: a directory": Case(["stats", "adir"], 2, ("not a regular file",)),
    "stats: --top -1": Case(["stats", "ok.dvf", "--top", "-1"], 2, ("`--top`", "-1")),
    "stats: --top x": Case(["stats", "ok.dvf", "--top", "x"], 2, ("--top", "invalid int")),
    "stats: stdout on a full device": Case(["stats", "big.dvf", "--json", "--top", "3000"], 1,
                                           ("stdout", "No space left", "ENOSPC"), stdout="/dev/full"),
    # --- export
    "export: missing artifact": Case(["export", "nope.dvf", "-o", "x.csv"], 2, ("nope.dvf",)),
    "export: artifact is a FIFO": Case(["export", "p.dvf", "-o", "x.csv"], 2, ("not a regular file",), _fifo("p.dvf")),
    "export: unknown output format": Case(["export", "ok.dvf", "-o", "x.xyz"], 2, ("`--output`", "--format")),
    "export: --format bogus": Case(["export", "ok.dvf", "-o", "x.csv", "--format", "xml"], 2, ("invalid choice",)),
    "export: -o is a directory": Case(["export", "ok.dvf", "-o", "adir", "--format", "csv"], 2, ("adir",)),
    "export: -o in a missing directory": Case(["export", "ok.dvf", "-o", "nodir/x.csv"], 2, ("nodir",)),
    "export: -o on a full disk (CSV)": Case(["export", "big.dvf", "-o", "full/x.csv"], 1,
                                            ("full/x.csv", "ENOSPC"), _tmpfs),
    "export: -o on a full disk (Parquet)": Case(["export", "big.dvf", "-o", "full/x.parquet"], 1,
                                                ("full/x.parquet", "ENOSPC"), _tmpfs),
    "export: file size limit (EFBIG)": Case(["export", "big.dvf", "-o", "x.jsonl"], 1, ("x.jsonl", "EFBIG"), fsize=4096),
    # --- eval
    "eval: neither --pairs nor --labels": Case(["eval", "ok.dvf"], 2, ("--pairs", "--labels")),
    "eval: --pairs is a FIFO": Case(["eval", "ok.dvf", "--pairs", "p.csv"], 2, ("`--pairs`", "named pipe"), _fifo("p.csv")),
    "eval: --pairs is a directory": Case(["eval", "ok.dvf", "--pairs", "adir"], 2, ("`--pairs`",)),
    "eval: --pairs holds no rows": Case(["eval", "ok.dvf", "--pairs", "pairs-empty.csv"], 2, ("holds no records",)),
    "eval: --pairs without the --id-a column": Case(["eval", "ok.dvf", "--pairs", "pairs.csv", "--id-a", "left"], 2,
                                                    ("'left'", "--id-a")),
    "eval: --columns fewer than the fields": Case(["eval", "ok.dvf", "--pairs", "pairs.csv", "--columns", "a,b"], 2,
                                                  ("more fields than the 2 columns",)),
    "eval: --pairs not UTF-8": Case(["eval", "ok.dvf", "--pairs", "pairs-latin1.csv"], 2, ("not valid UTF-8",)),
    "eval: --positive-min nan": Case(["eval", "ok.dvf", "--pairs", "pairs.csv", "--positive-min", "nan"], 2,
                                     ("`--positive-min`", "finite")),
    "eval: a label that is not 0/1": Case(["eval", "ok.dvf", "--pairs", "pairs-badlabel.csv"], 2, ("'maybe'",)),
    "eval: --delimiter of two characters": Case(["eval", "ok.dvf", "--pairs", "pairs.csv", "--delimiter", ";;"], 2,
                                                ("`--delimiter`",)),
    "eval: missing --corpus": Case(["eval", "--corpus", "nope.jsonl", "--pairs", "pairs.csv"], 2, ("does not exist",)),
    "eval: --labels without the --id-field column": Case(["eval", "ok.dvf", "--labels", "pairs.csv", "--id-field",
                                                          "doc"], 2, ("'doc'", "--id-field")),
    # --- tune
    "tune: missing --pairs": Case(["tune", "--pairs", "nope.csv"], 2, ("'nope.csv' does not exist",)),
    "tune: --plot in a missing directory": Case(["tune", "--pairs", "textpairs.csv", "--plot", "nodir/pr.png"], 2,
                                                ("`--plot`", "nodir")),
    "tune: --plot not a .png": Case(["tune", "--pairs", "textpairs.csv", "--plot", "pr.txt"], 2, ("`--plot`", ".png")),
    "tune: --plot a directory": Case(["tune", "--pairs", "textpairs.csv", "--plot", "adir"], 2, ("`--plot`", "adir", "directory")),
    "tune: complex --vectors": Case(["tune", "--pairs", "pairs.csv", "--corpus", "ok.jsonl", "--vectors", "vc.npy"], 2,
                                    ("real numbers", "complex")),
    "tune: string --vectors": Case(["tune", "--pairs", "pairs.csv", "--corpus", "ok.jsonl", "--vectors", "vs.npy"], 2,
                                   ("real numbers",)),
    "tune: NaN --vectors": Case(["tune", "--pairs", "pairs.csv", "--corpus", "ok.jsonl", "--vectors", "vn.npy"], 2,
                                ("finite",)),
    "tune: a pair id not in --corpus": Case(["tune", "--pairs", "pairs-unknown.csv", "--corpus", "ok.jsonl"], 2,
                                            ("'zz'", "--corpus")),
    "tune: only positive pairs": Case(["tune", "--pairs", "positives.csv"], 2, ("both positives and negatives",)),
    # --- demo and the command itself
    "demo: --n -5": Case(["demo", "--n", "-5"], 2, ("`--n`", "-5")),
    "demo: --seed -1": Case(["demo", "--n", "30", "--seed", "-1"], 2, ("`--seed`", "-1")),
    "demo: --n 10**20": Case(["demo", "--n", str(10**20)], 2, ("`--n`", "10,000,000")),
    "demo: --n x": Case(["demo", "--n", "x"], 2, ("--n", "invalid int")),
    "no command": Case([], 2, ("COMMAND",)),
    "unknown command": Case(["frobnicate"], 2, ("invalid choice", "'frobnicate'")),
}
# a full disk during `build -o`: the build itself must succeed, so give it a corpus without vectors
CASES["build: -o on a full disk"] = Case(["build", "big.jsonl", "-o", "full/x.dvf", NB], 1, ("full/x.dvf", "ENOSPC"),
                                         lambda d: (_tmpfs(d), _write_big_corpus(d)))


def _write_big_corpus(d: Path) -> None:
    (d / "big.jsonl").write_text(_jsonl([(f"doc{i}", f"document {i} with words {i * 7} and {i % 13}")
                                         for i in range(3000)]))


_LAUNCH = ("import resource, runpy, sys; lim = int(sys.argv.pop(1)); "
           "resource.setrlimit(resource.RLIMIT_FSIZE, (lim, lim)) if lim >= 0 else None; "
           "sys.argv[0] = 'diversify'; runpy.run_module('diversify', run_name='__main__', alter_sys=True)")


def _listing(d: Path) -> dict:
    return {str(p.relative_to(d)): (p.lstat().st_size if stat.S_ISREG(p.lstat().st_mode) else None)
            for p in sorted(d.rglob("*"))}


def _run_case(name: str, case: Case, base: Path, root: Path) -> dict:
    d = root / f"case{sorted(CASES).index(name):03d}"
    shutil.copytree(base, d)
    mounted = False
    try:
        if case.setup:
            case.setup(d)
        mounted = (d / "full").is_dir()
        before, art = _listing(d), (d / "ok.dvf").read_bytes()
        t0 = time.monotonic()
        argv = [sys.executable, "-c", _LAUNCH, str(case.fsize if case.fsize is not None else -1), *case.argv]
        out = open(case.stdout, "wb") if case.stdout else subprocess.PIPE
        try:
            r = subprocess.run(argv, cwd=d, input=case.stdin, stdout=out, stderr=subprocess.PIPE, timeout=TIMEOUT,
                               stdin=None if case.stdin is not None else subprocess.DEVNULL)
        finally:
            if case.stdout:
                out.close()
        return {"rc": r.returncode, "err": r.stderr.decode("utf-8", "replace"), "before": before, "t": time.monotonic() - t0,
                "after": _listing(d), "artifact_same": (d / "ok.dvf").read_bytes() == art}
    except _Unavailable as exc:
        return {"skip": str(exc)}
    except subprocess.TimeoutExpired:
        return {"rc": "timeout", "err": f"no exit after {TIMEOUT}s", "before": {}, "after": {}, "artifact_same": True}
    finally:
        if mounted:
            subprocess.run(["umount", str(d / "full")], capture_output=True)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    pytest.importorskip("pyarrow")
    base = tmp_path_factory.mktemp("inputs")
    _make_inputs(base)
    root = tmp_path_factory.mktemp("cases")
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        futures = {name: pool.submit(_run_case, name, case, base, root) for name, case in CASES.items()}
        return {name: f.result() for name, f in futures.items()}


@pytest.mark.parametrize("name", sorted(CASES))
def test_failure_is_one_line_and_a_status(name, results):
    case, res = CASES[name], results[name]
    if "skip" in res:
        pytest.skip(res["skip"])
    err = res["err"]
    lines = err.splitlines()
    command = case.argv[0] if case.argv and not case.argv[0].startswith("frob") else None
    prefix = f"diversify {command}: error: " if command else "diversify: error: "
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert len(lines) == 1 and lines[0].startswith(prefix), err
    assert "internal error" not in err, f"caught only by the catch-all: {err}"
    for needle in case.needles:
        assert needle in lines[0], (needle, lines[0])
    assert res["rc"] == case.status, (res["rc"], err)
    assert res["after"] == res["before"], "a failed command left files behind or changed them"
    assert res["artifact_same"]


# --------------------------------------------------------------------------- closed stdout, signals


def _cli(*args, **kwargs):
    return subprocess.Popen([sys.executable, "-m", "diversify", *args], **kwargs)


def test_stdout_closed_by_its_reader_ends_quietly(tmp_path):
    import diversify

    n = 3000
    diversify.build([f"document {i} with words {i * 7}" for i in range(n)], ids=[f"d{i}" for i in range(n)]).save(
        tmp_path / "a.dvf")
    p = _cli("stats", str(tmp_path / "a.dvf"), "--json", "--top", str(n), stdout=subprocess.PIPE,
             stderr=subprocess.PIPE)
    assert p.stdout is not None and p.stderr is not None
    p.stdout.readline()  # like `| head -1`: read a line, then go away
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(TIMEOUT) == 128 + signal.SIGPIPE, err
    assert err == "", "a closed stdout is not an error to report (no traceback, no 'Exception ignored')"


def _wait_reading_stdin(p: subprocess.Popen) -> None:
    """Until the process blocks reading its stdin pipe (Linux: its wchan names a pipe read)."""
    wchan = Path(f"/proc/{p.pid}/wchan")
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        try:
            if "pipe" in wchan.read_text():
                return
        except OSError:
            pytest.skip("no /proc/PID/wchan here")
        time.sleep(0.05)
    pytest.fail("the command never started reading stdin")


@pytest.mark.skipif(not Path("/proc/self/wchan").exists(), reason="needs Linux /proc")
@pytest.mark.parametrize("sig, status, word", [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")])
def test_interrupt_and_terminate_are_one_line(tmp_path, sig, status, word):
    # a shell's background job inherits SIGINT ignored (POSIX); the user's terminal delivers it, so
    # the child starts with the default disposition whatever launched this test
    p = _cli("build", "-", "--format", "jsonl", "-o", str(tmp_path / "x.dvf"), "--no-progress", cwd=tmp_path,
             stdin=subprocess.PIPE, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert p.stdin is not None and p.stderr is not None
    p.stdin.write(_jsonl(DOCS).encode())
    p.stdin.flush()  # the pipe stays open: the command waits for more records
    _wait_reading_stdin(p)
    p.send_signal(sig)
    try:
        code = p.wait(TIMEOUT)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        pytest.fail(f"the command did not end within {TIMEOUT} s of {sig.name}")
    err = p.stderr.read().decode()
    assert code == status, err
    assert err.count("\n") == 1 and err.startswith(f"diversify build: error: {word}"), err
    assert "Traceback" not in err
    p.stdin.close()
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- escaping


HOSTILE_IDS = ["\x1b[31mred\x1b[0m", "bel\x07", "cr\rover", "nul\x00x", "bidi\u202eevil", "back\\slash", "tab\tx"]
RAW = ["\x1b", "\x07", "\r", "\x00", "\u202e", "\t"]


def _hostile_artifact(path: Path) -> None:
    import diversify

    # two clusters of identical texts (4 and 3 members), so `stats` lists every id among its examples
    texts = [BASE] * 4 + ["another text about databases and query planners"] * 3
    diversify.build(texts, ids=HOSTILE_IDS, metadata={"k\x1b]0;owned\x07": "v\x1b[2J\u202e", "line": "a\nb"}).save(path)


def test_printable_escapes_what_a_terminal_acts_on():
    from diversify.cli.output import printable

    cases = {"\x1b[31m": "\\x1b[31m", "\x07": "\\x07", "\r": "\\x0d", "\x00": "\\x00", "\x7f": "\\x7f",
             "\x9b": "\\x9b", "\u202e": "\\u202e", "\u2066": "\\u2066", "\u200d": "\\u200d", "\u2028": "\\u2028",
             "\ud800": "\\ud800", "\t": "\\x09", "\n": "\\x0a", "a\\b": "a\\\\b", "café ☕ 漢字": "café ☕ 漢字",
             "plain id-1": "plain id-1"}
    for raw, shown in cases.items():
        assert printable(raw) == shown, (raw, printable(raw))
    assert printable("a\\x1b") == "a\\\\x1b", "an escaped-looking id stays distinguishable from an escape"
    assert printable("a\\b\x1b", backslash=False) == "a\\b\\x1b"


def test_stats_escapes_hostile_ids_and_metadata(tmp_path):
    _hostile_artifact(tmp_path / "h.dvf")
    for extra in ([], ["--json"]):
        r = subprocess.run([sys.executable, "-m", "diversify", "stats", str(tmp_path / "h.dvf"), *extra],
                           capture_output=True)
        assert r.returncode == 0, r.stderr
        out = r.stdout.decode()
        for ch in RAW:
            assert ch not in out, (repr(ch), extra)
        if not extra:
            assert "\\x1b[31mred\\x1b[0m" in out and "bidi\\u202eevil" in out and "back\\\\slash" in out
            assert "k\\x1b]0;owned\\x07=v\\x1b[2J\\u202e" in out and "line=a\\x0ab" in out


def test_error_lines_escape_hostile_text(tmp_path):
    _hostile_artifact(tmp_path / "h.dvf")
    (tmp_path / "dup.jsonl").write_text(json.dumps({"id": HOSTILE_IDS[0], "text": "x y z"}) + "\n")
    d = tmp_path / "docs"
    d.mkdir()
    (d / "\x1b[2Jbad\r.txt").write_bytes(b"caf\xe9")  # a file name is printed in the error
    hdr = tmp_path / "hdr.csv"
    hdr.write_text("id,\x1b]0;x\x07body\n1,one\n")
    for args, needle in ((["add", str(tmp_path / "h.dvf"), str(tmp_path / "dup.jsonl")], "\\x1b[31mred"),
                         (["build", str(d), "-o", str(tmp_path / "o.dvf")], "\\x1b[2Jbad\\x0d.txt"),
                         (["build", str(hdr), "-o", str(tmp_path / "o.dvf")], "\\x1b]0;x\\x07body")):
        r = subprocess.run([sys.executable, "-m", "diversify", *args, "--no-progress"], capture_output=True)
        err = r.stderr.decode()
        assert r.returncode == 2 and err.count("\n") == 1, err
        assert needle in err, (needle, err)
        for ch in RAW:
            assert ch not in err, (repr(ch), err)


# --------------------------------------------------------------------------- CSV formulas


def test_csv_export_neutralises_formulas_and_round_trips(tmp_path):
    import diversify
    from diversify.corpus.export import FORMULA_PREFIXES, csv_cell_id

    str_ids = ["=1+2", "+SUM(A1)", "-2+3", "@cmd", "\tx", "\rx", "'quoted", "''twice", "plain", "-5", "a=b", ""]
    int_ids = [-5, 0, 7, -(2**63), 2**63 - 1]
    for ids in (str_ids, int_ids):
        texts = [f"text number {i} alone" for i in range(len(ids))]
        art = tmp_path / "a.dvf"
        diversify.build(texts, ids=ids).save(art)
        out = tmp_path / "a.csv"
        r = subprocess.run([sys.executable, "-m", "diversify", "export", str(art), "-o", str(out)], capture_output=True)
        assert r.returncode == 0, r.stderr
        with open(out, newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))[1:]
        cells = [row[0] for row in rows]
        if ids is int_ids:
            assert cells == [str(i) for i in ids], "int ids are numbers: written as they are, never quoted"
        else:
            assert not [c for c in cells if c.startswith(FORMULA_PREFIXES)], cells
            assert [csv_cell_id(c) for c in cells] == ids
            assert cells[0] == "'=1+2" and cells[6] == "''quoted" and cells[8] == "plain"
        for fmt in ("jsonl", "parquet"):  # the other formats hold the ids unchanged
            o = tmp_path / f"a.{fmt}"
            assert subprocess.run([sys.executable, "-m", "diversify", "export", str(art), "-o", str(o)]).returncode == 0
            got = ([json.loads(line)["id"] for line in o.read_text().splitlines()] if fmt == "jsonl"
                   else __import__("pyarrow.parquet").parquet.read_table(o).column("id").to_pylist())
            assert got == ids


# --------------------------------------------------------------------------- ids (class 7, offline)


def _export_ids(path: Path) -> list:
    import diversify

    ids = diversify.load(path).ids
    return ids.tolist() if isinstance(ids, np.ndarray) else list(ids)


def test_csv_with_a_byte_order_mark_keeps_its_ids(tmp_path):
    src = tmp_path / "bom.csv"
    src.write_bytes(b"\xef\xbb\xbf" + ("id,text\n" + "".join(f"{i},{t}\n" for i, t in DOCS)).encode())
    r = subprocess.run([sys.executable, "-m", "diversify", "build", str(src), "-o", str(tmp_path / "a.dvf"),
                        "--no-progress"], capture_output=True)
    assert r.returncode == 0 and r.stderr == b"", r.stderr
    assert _export_ids(tmp_path / "a.dvf") == [i for i, _ in DOCS]


def test_records_without_ids_get_record_numbers_and_a_note(tmp_path):
    src = tmp_path / "noid.jsonl"
    src.write_text("".join(json.dumps({"doc_id": i, "text": t}) + "\n" for i, t in DOCS))
    r = subprocess.run([sys.executable, "-m", "diversify", "build", str(src), "-o", str(tmp_path / "a.dvf"),
                        "--no-progress"], capture_output=True)
    err = r.stderr.decode()
    assert r.returncode == 0, err
    assert err.count("\n") == 1 and err.startswith("diversify build: warning: ") and "--id-field" in err
    assert "doc_id" in err, "the note lists the fields, so a mistyped or missing --id-field is visible"
    assert _export_ids(tmp_path / "a.dvf") == [0, 1, 2, 3]
    r = subprocess.run([sys.executable, "-m", "diversify", "build", str(src), "-o", str(tmp_path / "b.dvf"),
                        "--id-field", "doc_id", "--no-progress"], capture_output=True)
    assert r.returncode == 0 and r.stderr == b"", r.stderr
    assert _export_ids(tmp_path / "b.dvf") == ["a", "b", "c", "d"]


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_stdin_input_builds_what_the_file_builds(tmp_path, fmt):
    data = (_jsonl(DOCS) if fmt == "jsonl" else "\ufeffid,text\n" + "".join(f"{i},{t}\n" for i, t in DOCS)).encode()
    (tmp_path / f"c.{fmt}").write_bytes(data)
    for src, out in ((str(tmp_path / f"c.{fmt}"), "file.dvf"), ("-", "stdin.dvf")):
        r = subprocess.run([sys.executable, "-m", "diversify", "build", src, "--format", fmt, "-o",
                            str(tmp_path / out), "--no-progress"], input=data, capture_output=True)
        assert r.returncode == 0, r.stderr
    import diversify

    a, b = diversify.load(tmp_path / "file.dvf"), diversify.load(tmp_path / "stdin.dvf")
    assert list(a.ids) == list(b.ids) == [i for i, _ in DOCS]
    assert a.cluster_ids.tolist() == b.cluster_ids.tolist()


# --------------------------------------------------------------------------- complex vectors in the API


def test_library_refuses_complex_vectors():
    import diversify
    from diversify.errors import InputError
    from diversify.evaluate import cosine_pairs

    v = np.random.default_rng(1).standard_normal((3, 4))
    for bad in (v + 1j, v.astype(np.complex64), [[1 + 1j, 2.0], [1.0, 2.0], [0.5, 1.0]],
                np.array([["1", "2"]] * 3), np.zeros((3, 2), dtype="datetime64[D]")):
        with pytest.raises(InputError, match="real numbers|could not convert"):
            diversify.build(vectors=bad)
        with pytest.raises(InputError, match="real numbers|could not convert"):
            cosine_pairs(bad, bad)
    with pytest.raises(InputError, match="finite"):
        cosine_pairs(np.full((2, 2), np.nan), np.ones((2, 2)))
