"""CLI: build / add / stats / export / demo over every input format, and its error messages."""

from __future__ import annotations

import csv
import json
import os
import platform
import subprocess
import sys

import numpy as np
import pytest

from diversify.cli import main

BASE = "the quick brown fox jumps over the lazy dog near the river bank today"
DOCS = [
    ("a", BASE),
    ("b", BASE.upper() + "  "),  # exact duplicate after normalization
    ("c", BASE + " again"),  # near duplicate
    ("d", "completely different words about databases and query planners here"),
    ("e", ""),  # empty: singleton
]


def _write_jsonl(path, docs):
    with open(path, "w", encoding="utf-8") as f:
        for i, t in docs:
            f.write(json.dumps({"id": i, "text": t}) + "\n")


def _clusters(tmp_path, artifact):
    out = tmp_path / "export.jsonl"
    assert main(["export", str(artifact), "-o", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    return {r["id"]: r["cluster_id"] for r in rows}, rows


@pytest.fixture
def jsonl(tmp_path):
    p = tmp_path / "corpus.jsonl"
    _write_jsonl(p, DOCS)
    return p


def test_build_jsonl_then_export(tmp_path, jsonl, capsys):
    art = tmp_path / "c.dvf"
    assert main(["build", str(jsonl), "-o", str(art), "--no-progress", "--threshold", "0.5"]) == 0
    out = capsys.readouterr().out
    assert "documents        5" in out and "wrote" in out
    cl, rows = _clusters(tmp_path, art)
    assert cl["a"] == cl["b"] == cl["c"] == 0
    assert cl["d"] == 3 and cl["e"] == 4
    assert sum(r["is_representative"] for r in rows) == 3


def test_build_csv_parquet_dir_agree(tmp_path, jsonl):
    pytest.importorskip("pyarrow")
    import pyarrow as pa
    import pyarrow.parquet as pq

    c = tmp_path / "corpus.csv"
    with open(c, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["id", "body"])
        w.writerows(DOCS)
    pq.write_table(pa.table({"id": [d[0] for d in DOCS], "text": [d[1] for d in DOCS]}), tmp_path / "corpus.parquet")
    d = tmp_path / "dir"
    d.mkdir()
    for i, t in DOCS:
        (d / f"{i}.txt").write_text(t, encoding="utf-8")
    results = []
    for src, extra in ((jsonl, []), (c, ["--text-field", "body"]), (tmp_path / "corpus.parquet", []), (d, [])):
        art = tmp_path / f"{src.name}.dvf"
        assert main(["build", str(src), "-o", str(art), "--no-progress", "--threshold", "0.5", *extra]) == 0
        cl, _ = _clusters(tmp_path, art)
        results.append(sorted(cl.values()))
    assert all(r == results[0] for r in results), results


def test_stats_text_and_json(tmp_path, jsonl, capsys):
    art = tmp_path / "c.dvf"
    main(["build", str(jsonl), "-o", str(art), "--no-progress", "--threshold", "0.5", "--metadata", "model=x"])
    capsys.readouterr()
    assert main(["stats", str(art)]) == 0
    out = capsys.readouterr().out
    assert "clusters         3" in out and "fingerprint" in out and "model" in out
    assert main(["stats", str(art), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["documents"] == 5 and info["would_be_removed"] == 2
    assert info["largest"][0]["size"] == 3


def test_add_keeps_ids_and_joins(tmp_path, jsonl):
    art = tmp_path / "c.dvf"
    main(["build", str(jsonl), "-o", str(art), "--no-progress", "--threshold", "0.5"])
    before, _ = _clusters(tmp_path, art)
    more = tmp_path / "more.jsonl"
    _write_jsonl(more, [("f", BASE + " again and again"), ("g", "nothing like the others at all really")])
    assert main(["add", str(art), str(more), "--no-progress"]) == 0
    after, _ = _clusters(tmp_path, art)
    assert all(after[k] == v for k, v in before.items())
    assert after["f"] == after["a"]
    assert after["g"] == 6


def test_vectors_npy(tmp_path):
    rng = np.random.default_rng(0)
    v = rng.standard_normal((50, 16))
    v[1] = v[0] + 1e-3
    np.save(tmp_path / "v.npy", v)
    (tmp_path / "ids.txt").write_text("\n".join(f"v{i}" for i in range(50)) + "\n")
    art = tmp_path / "v.dvf"
    assert main(["build", "--vectors", str(tmp_path / "v.npy"), "--ids", str(tmp_path / "ids.txt"), "-o", str(art),
                 "--no-progress", "--no-minhash"]) == 0
    cl, _ = _clusters(tmp_path, art)
    assert cl["v0"] == cl["v1"] == 0 and len(set(cl.values())) == 49


@pytest.mark.parametrize(
    "setup, needle",
    [
        (lambda p: None, "does not exist"),
        (lambda p: p.write_text('{"id": 1, "text": "ok"}\n{not json\n'), "not valid JSON"),
        (lambda p: p.write_text('{"id": 1, "body": "ok"}\n'), "--text-field"),
        (lambda p: p.write_text('{"id": 1, "text": "ok"}\n{"id": 1, "text": "dup"}\n'), "occurs at positions 0 and 1"),
    ],
)
def test_errors_are_clear_and_write_nothing(tmp_path, capsys, setup, needle):
    src = tmp_path / "in.jsonl"
    setup(src)
    art = tmp_path / "out.dvf"
    assert main(["build", str(src), "-o", str(art), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert needle in err, err
    assert not art.exists()


def test_non_utf8_file_in_dir(tmp_path, capsys):
    d = tmp_path / "d"
    d.mkdir()
    (d / "ok.txt").write_text("fine text here", encoding="utf-8")
    (d / "bad.txt").write_bytes(b"caf\xe9 latin-1")
    art = tmp_path / "o.dvf"
    assert main(["build", str(d), "-o", str(art), "--no-progress"]) == 2
    assert "not valid UTF-8" in capsys.readouterr().err
    assert main(["build", str(d), "-o", str(art), "--no-progress", "--encoding-errors", "replace"]) == 0


def test_bad_threshold_names_parameter(tmp_path, jsonl, capsys):
    assert main(["build", str(jsonl), "-o", str(tmp_path / "x"), "--threshold", "1.5"]) == 2
    assert "threshold" in capsys.readouterr().err


def test_help_on_every_command():
    for cmd in ("build", "add", "stats", "export", "demo"):
        r = subprocess.run([sys.executable, "-m", "diversify.cli", cmd, "--help"], capture_output=True, text=True)
        assert r.returncode == 0 and "usage" in r.stdout


def test_demo_small(capsys):
    assert main(["demo", "--n", "3000"]) == 0
    out = capsys.readouterr().out
    assert "recall" in out and "after (max one per cluster)" in out


# --- the command line builds what the library builds (options generated from the config models)


def test_build_with_no_options_has_the_library_default_fingerprint(tmp_path):
    import json as _json

    import diversify
    from diversify.config import fingerprint

    texts = [f"document number {i} about topic {i % 3} with some shared words here" for i in range(30)]
    texts += [texts[0] + " x", texts[1] + " y"]
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(_json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(texts)))
    out = tmp_path / "a.dvf"
    assert main(["build", str(corpus), "-o", str(out), "--no-progress"]) == 0
    cli_map = diversify.load(out)
    lib = diversify.build(texts, ids=[f"d{i}" for i in range(len(texts))])
    assert cli_map.fingerprint == lib.cluster_map.fingerprint == fingerprint(diversify.BuildConfig())
    assert cli_map.config == lib.cluster_map.config
    assert cli_map.cluster_ids.tolist() == lib.cluster_ids.tolist()


def test_every_clustering_flag_defaults_to_the_model_and_sets_only_its_field():
    from diversify.cli.main import make_parser
    from diversify.cli.options import CONFIG_OPTIONS, config_from_args, model_default
    from diversify.config import BuildConfig

    parser = make_parser()
    assert config_from_args(parser.parse_args(["build", "x", "-o", "y"])) == BuildConfig()
    base = BuildConfig().model_dump()
    samples = {int: 3, float: 0.66, str: None}
    for opt in CONFIG_OPTIONS:
        flag = opt.flags[-1]
        if opt.switch:
            argv, expected = [flag], opt.switch_value
        else:
            action = next(a for a in parser._subparsers._group_actions[0].choices["build"]._actions
                          if flag in a.option_strings)
            assert f"(default {'chosen automatically' if model_default(opt.field) is None else model_default(opt.field)})" \
                in action.help, (flag, action.help)
            if action.choices:
                expected = next(c for c in action.choices if c != model_default(opt.field))
            else:
                expected = {"minhash.num_perm": 64, "text.k": 3, "text.char_k": 4, "simhash.families": 3, "bucket_window": 16}.get(
                    opt.field, samples.get(action.type, 3))
            if opt.field == "minhash.bands":
                argv, expected = [flag, "4", "--rows", "8"], 4
            elif opt.field == "minhash.rows":
                argv, expected = ["--bands", "4", flag, "8"], 8
            elif opt.field == "seed":
                argv, expected = [flag, "7"], 7
            else:
                argv = [flag, str(expected)]
        cfg = config_from_args(parser.parse_args(["build", "x", "-o", "y", *argv])).model_dump()
        head, _, name = opt.field.rpartition(".")
        got = cfg[head][name] if head else cfg[name]
        assert got == expected, (flag, got, expected)
        changed = {k for k in base if cfg[k] != base[k]}
        assert changed == {head or name}, (flag, changed)


def test_missing_key_or_source_fields_are_named(tmp_path, capsys):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": "a", "text": "one two three", "auth": 1, "src": "x"}\n{"id": "b", "text": "four five"}\n')
    out = tmp_path / "o.dvf"
    assert main(["build", str(corpus), "-o", str(out), "--representative", "key", "--key-field", "auth",
                 "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "`--key-field`: record 1 (id 'b')" in err and "'auth'" in err
    assert main(["build", str(corpus), "-o", str(out), "--source-field", "src", "--source-threshold", "x=0.9",
                 "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "`--source-field` 'src': record 1 (id 'b')" in err
    assert not out.exists(), "nothing is written when the input is refused"


@pytest.mark.parametrize("ok", [True, False], ids=["success", "failure"])
def test_console_script_skips_teardown_but_keeps_status_output_and_exit_handlers(tmp_path, jsonl, ok):
    """``run()`` (the console script) leaves with os._exit after main(): the exit status, all
    of stdout and stderr through pipes, the written artifact and registered exit handlers survive."""
    marker = tmp_path / "handler-ran"
    src = str(jsonl) if ok else str(tmp_path / "missing.jsonl")
    code = ("import atexit, sys\n"
            f"atexit.register(lambda: open({str(marker)!r}, 'w').write('yes'))\n"
            f"sys.argv = ['diversify', 'build', {src!r}, '-o', {str(tmp_path / 'c.dvf')!r}, '--no-progress']\n"
            "from diversify.cli import run\n"
            "run()\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert marker.read_text() == "yes"
    if ok:
        assert r.returncode == 0, r.stderr
        assert r.stdout.rstrip().splitlines()[-1].startswith("wrote ")
        import diversify

        assert diversify.load(tmp_path / "c.dvf").n_docs == len(DOCS)
    else:
        assert r.returncode == 2 and "missing.jsonl" in r.stderr and not (tmp_path / "c.dvf").exists()


_FREED_PROBE = """
import os, sys
import numpy as np
import importlib
cli = importlib.import_module("diversify.cli.main")
if len(sys.argv) > 1:  # a command as the console script runs it, then the probe
    cli._TUNE_ALLOCATOR = True
    assert cli.main(sys.argv[1:]) == 0
    tuned = "command"
else:
    tuned = importlib.import_module("diversify._tuning").keep_freed_memory()
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) // 1024
def released(mib):
    a = np.ones(mib << 20, dtype=np.uint8)  # touched
    held = rss()
    del a
    return held - rss()
large = released(300)  # more than the heap's top pad (256 MiB): mapped on its own when the heap cannot serve it
print(tuned, released(48), large)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
                    reason="the allocator tuning applies to glibc on Linux only")
@pytest.mark.parametrize("env", [{}, {"MALLOC_ARENA_MAX": "2"}, {"GLIBC_TUNABLES": "glibc.malloc.tcache_count=7"}],
                         ids=["default", "user-MALLOC", "user-TUNABLES"])
def test_console_script_keeps_freed_memory_unless_the_user_tuned_malloc(env):
    """Under the console script's tuning a freed 48 MiB buffer stays mapped for reuse (the next
    stage does not fault it in again); by default glibc unmaps it. A buffer of 64 MiB or more is
    given back either way once the heap cannot serve it (diversify._tuning._MMAP_FROM). A user's own malloc
    settings win."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}
    r = subprocess.run([sys.executable, "-c", _FREED_PROBE], env={**clean, **env}, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    tuned, small, large = r.stdout.split()
    assert int(large) >= 290  # mapped on its own and unmapped when freed, tuned or not
    if env:
        assert tuned == "False" and int(small) >= 40  # glibc's default: the buffer goes back to the kernel
    else:
        assert tuned == "True" and int(small) <= 10  # kept for the next allocation


@pytest.mark.skipif(not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
                    reason="the allocator tuning applies to glibc on Linux only")
@pytest.mark.parametrize("stream", [False, True], ids=["held", "stream"])
def test_build_tunes_the_allocator_except_under_stream(tmp_path, jsonl, stream):
    """A console-script build keeps freed memory; ``--stream``, whose point is memory, does not."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}
    cmd = ["build", str(jsonl), "-o", str(tmp_path / "c.dvf"), "--no-progress", *(["--stream"] if stream else [])]
    r = subprocess.run([sys.executable, "-c", _FREED_PROBE, *cmd], env=clean, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    small, large = map(int, r.stdout.split()[-2:])
    assert large >= 290
    assert small >= 40 if stream else small <= 10


def test_streamed_columns_release_each_block_once_both_columns_passed_it():
    """``--stream`` reads ids and texts as two lazy columns of one block reader; a block must be
    dropped once both have passed it (itertools.tee kept 57 blocks: ~280,000 texts).

    The texts hold no reference cycles, so reference counting frees each one the moment the last
    holder drops it: no ``gc.collect()`` is needed (one per item took ~0.4 s each, 400 s in all, once
    the session had imported every framework)."""
    from diversify.corpus.filetexts import BlockColumns as _Columns

    alive = []

    class Text(str):  # a str the test can count
        def __new__(cls, v):
            alive.append(1)
            return super().__new__(cls, v)

        def __del__(self):
            alive.pop()

    def blocks():
        for b in range(100):
            yield [f"id{b}-{i}" for i in range(10)], [Text(f"t{b}-{i}") for i in range(10)], None

    cols = _Columns(blocks())
    texts, ids = cols.column(1), cols.column(0)
    most = 0
    for j in range(1000):
        t, i = next(texts), next(ids)
        assert (str(t), i) == (f"t{j // 10}-{j % 10}", f"id{j // 10}-{j % 10}")
        del t
        most = max(most, len(alive))
    assert most <= 20  # the current block, and the next one read by the column ahead
    assert next(texts, None) is None and next(ids, None) is None
    # one column read to the end first: the other still gets every item, in order
    cols = _Columns(blocks())
    ids_all = list(cols.column(0))
    assert len(ids_all) == 1000 and [str(t) for t in cols.column(1)][-1] == "t99-9"
