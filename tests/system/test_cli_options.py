"""The command line's options: each command lists only the options it reads, every option states
its default in --help, and ``--metadata`` takes one KEY=VALUE per occurrence.

The option sets are checked by running every command as the console script does (``a.func(a)``
on the parsed arguments) with a namespace that records which attributes the command reads before
it writes them: an option a command lists but never reads is an option that means nothing there.
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

from diversify.cli import main
from diversify.cli.main import make_parser


class Recording(argparse.Namespace):
    """A namespace that remembers the attributes read (once ``live``) that the command had not set itself."""

    def __getattribute__(self, name):
        if not name.startswith("_") and object.__getattribute__(self, "__dict__").get("_live"):
            if name not in object.__getattribute__(self, "_written"):
                object.__getattribute__(self, "_read").add(name)
        return object.__getattribute__(self, name)

    def __setattr__(self, name, value):
        if not name.startswith("_") and self.__dict__.get("_live"):
            self._written.add(name)
        object.__setattr__(self, name, value)


def _subcommands(parser: argparse.ArgumentParser, prefix: str = ""):
    """{"build": parser, ..., "index add": parser, ...}: every command that runs."""
    out = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                full = f"{prefix}{name}"
                nested = _subcommands(sub, full + " ")
                out.update(nested or {full: sub})
    return out


def _options(parser: argparse.ArgumentParser) -> dict:
    """{dest: "--flag"} of a command's options (not --help)."""
    return {a.dest: a.option_strings[-1] for a in parser._actions if a.option_strings and a.dest != "help"}


def _run_recorded(argv: list[str]) -> set:
    ns = Recording()
    ns.__dict__.update(_live=False, _read=set(), _written=set())
    a, extra = make_parser().parse_known_args(argv, namespace=ns)
    assert not extra, extra
    a.__dict__["_live"] = True
    status = a.func(a)
    assert status == 0, argv
    return a._read


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("opts")
    base = " ".join(f"w{i}" for i in range(30))
    docs = [{"id": f"d{i}", "text": base + f" tail{i // 2} end{i // 2}", "n": i, "src": "a" if i % 2 else "b"}
            for i in range(12)]
    more = [{**r, "id": "e" + r["id"][1:]} for r in docs]  # for add: ids not in the artifact yet
    for stem, rows in (("c", docs), ("e", more)):
        (d / f"{stem}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (d / f"{stem}.csv").write_text("id,text,n,src\n" + "".join(f"{r['id']},{r['text']},{r['n']},{r['src']}\n"
                                                                   for r in rows))
    rng = np.random.default_rng(3)
    np.save(d / "v.npy", rng.standard_normal((12, 8)))
    (d / "ids.txt").write_text("".join(f"v{i}\n" for i in range(12)))
    (d / "ids2.txt").write_text("".join(f"u{i}\n" for i in range(12)))
    pairs = [{"id_a": f"d{i}", "id_b": f"d{i + 1}", "label": int(i % 2 == 0)} for i in range(11)]
    (d / "pairs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in pairs))
    tpairs = [{"text_a": base, "text_b": base + (" x" if i % 2 else " ".join(f"y{j}" for j in range(40))),
               "label": i % 2} for i in range(20)]
    (d / "tpairs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in tpairs))
    (d / "labels.jsonl").write_text("".join(json.dumps({"id": f"d{i}", "label": i // 2}) + "\n" for i in range(12)))
    (d / "del.txt").write_text("d0\n")
    (d / "token.txt").write_text("a-token-of-twenty-chars\n")  # serve --token-file
    (d / "spill").mkdir()
    return d


def _invocations(d) -> dict[str, list[list[str]]]:
    """Runs per command whose reads, together, should cover every option the command lists."""
    c, csv, v, art, url = str(d / "c.jsonl"), str(d / "c.csv"), str(d / "v.npy"), str(d / "a.dvf"), f"sqlite:///{d}/i.db"
    nb = "--no-progress"
    return {
        "build": [["build", c, "-o", art, nb, "--verbose", "--metadata", "k=v"],
                  ["build", csv, "-o", str(d / "b.dvf"), nb, "--stream", "--key-field", "n", "--source-field", "src",
                   "--source-threshold", "a=0.9", "--spill-dir", str(d / "spill"), "--chunk-size", "4"],
                  ["build", "--vectors", v, "--ids", str(d / "ids.txt"), "-o", str(d / "v.dvf"), nb]],
        "add": [["add", art, str(d / "e.jsonl"), "-o", str(d / "a2.dvf"), nb, "--verbose", "--skip-existing"],
                ["add", str(d / "b.dvf"), str(d / "e.csv"), "-o", str(d / "a3.dvf"), nb, "--stream", "--key-field", "n",
                 "--source-field", "src", "--chunk-size", "4", "--lock-timeout", "5"],
                ["add", str(d / "v.dvf"), "--vectors", v, "--ids", str(d / "ids2.txt"), "-o", str(d / "v2.dvf"), nb]],
        "stats": [["stats", art]],
        "show": [["show", art, "0", "--json", "--limit", "3"], ["show", art, "--id", "d0"]],
        "export": [["export", art, "-o", str(d / "x.csv")]],
        "eval": [["eval", art, "--pairs", str(d / "pairs.jsonl")],
                 ["eval", "--corpus", c, "--labels", str(d / "labels.jsonl"), "--json"]],
        "tune": [["tune", "--pairs", str(d / "tpairs.jsonl")],
                 ["tune", "--pairs", str(d / "pairs.jsonl"), "--corpus", c, "--vectors", v, "--json"]],
        "demo": [["demo", "--n", "200"]],
        "index add": [["index", "add", url, c, nb, "--verbose"],
                      ["index", "add", f"sqlite:///{d}/s.db", csv, nb, "--key-field", "n", "--source-field", "src",
                       "--source-threshold", "a=0.9", "--batch-size", "5", "--lock-timeout", "5"],
                      ["index", "add", f"sqlite:///{d}/v.db", "--vectors", v, "--ids", str(d / "ids.txt"), nb]],
        "index query": [["index", "query", f"sqlite:///{d}/s.db", c, nb, "--verbose", "--source-field", "src"],
                        ["index", "query", url, "--text", "a text"],
                        ["index", "query", f"sqlite:///{d}/v.db", "--vectors", v, "--ids", str(d / "ids.txt"), nb]],
        "index delete": [["index", "delete", url, "--ids", str(d / "del.txt")]],
        "index export": [["index", "export", url, "-o", str(d / "ix.dvf")]],
        "index stats": [["index", "stats", url, "--check"]],
        "serve": [["serve", art, "--check", "--host", "127.0.0.1", "--port", "0", "--corpus", c, "--poll", "0",
                   "--client-timeout", "5", "--token-file", str(d / "token.txt")]],
    }


#: options read only on a path this test does not run, and where that path is tested
NOT_RUN_HERE = {
    "build": {"scheduler": "read by --engine dask only (tests/integration/test_dask_engine.py)",
              **{dest: "read with --from-store only (tests/system/test_cli_from_store.py)"
                 for dest in ("collection", "store_kind", "vector_field", "batch_size", "write_back")}},
}


def test_every_command_is_in_the_table(files):
    assert set(_subcommands(make_parser())) == set(_invocations(files))


#: commands that run only with an optional extra: (module, extra); left out where the extra is not
#: installed (the fast subset), never in CI (DIVERSIFY_CI=1), which installs every extra
NEEDS_EXTRA = {"serve": ("starlette", "serve")}


def _without_extra(name: str) -> bool:
    import importlib.util
    import os

    need = NEEDS_EXTRA.get(name)
    return (need is not None and importlib.util.find_spec(need[0]) is None
            and os.environ.get("DIVERSIFY_CI") != "1")


def test_every_listed_option_is_read_by_its_command(files, capsys):
    commands = _subcommands(make_parser())
    unread = {}
    for name, runs in _invocations(files).items():
        if _without_extra(name):
            continue
        read: set = set()
        for argv in runs:
            read |= _run_recorded(argv)
        skip = set(NOT_RUN_HERE.get(name, {}))
        missing = sorted(flag for dest, flag in _options(commands[name]).items() if dest not in read | skip)
        if missing:
            unread[name] = missing
    capsys.readouterr()
    assert not unread, f"options listed but never read: {unread}"


def _help(capsys, *argv) -> str:
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--help"])
    assert exc.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("argv,absent", [
    (["index", "query"], ["--stream", "--chunk-size", "--key-field", "--threshold", "--clustering"]),
    (["index", "add"], ["--stream", "--chunk-size"]),
    (["eval"], ["--source-threshold", "--stream"]),
    (["tune"], ["--stream", "--threshold", "--bands"]),
])
def test_commands_do_not_list_options_they_ignore(capsys, argv, absent):
    text = _help(capsys, *argv)
    for flag in absent:
        assert f"{flag} " not in text and f"{flag}\n" not in text, (argv, flag)


def test_commands_still_list_what_they_use(capsys):
    assert "--stream" in _help(capsys, "build") and "--key-field" in _help(capsys, "index", "add")
    assert "--clustering" in _help(capsys, "index", "add")  # clique or star; components is refused
    assert "--vectors" in _help(capsys, "index", "query") and "--simhash-bits" in _help(capsys, "tune")


def _all_actions():
    for name, parser in _subcommands(make_parser()).items():
        for action in parser._actions:
            if action.option_strings and action.dest != "help":
                yield name, action


def test_every_option_states_its_default_in_help():
    missing, wrong = [], []
    for name, action in _all_actions():
        text = action.help or ""
        if "default" not in text.lower():
            missing.append(f"{name} {action.option_strings[-1]}")
            continue
        d = action.default
        if action.nargs != 0 and d not in (None, [], argparse.SUPPRESS):
            shown = {str(d), f"{d:g}" if isinstance(d, float) else str(d)}
            if not any(s in text for s in shown):
                wrong.append(f"{name} {action.option_strings[-1]}: default {d!r}, help {text!r}")
    assert not missing, f"options whose --help states no default: {missing}"
    assert not wrong, f"options whose --help states another default: {wrong}"


def test_rendered_help_shows_defaults(capsys):
    text = " ".join(_help(capsys, "tune").split())
    assert "--id-a ID_A column of the first id of a pair (default id_a)" in text
    assert "--json print JSON (default: off, a table)" in text
    text = " ".join(_help(capsys, "demo").split())
    assert "seed of the generated corpus (default 0)" in text
    text = " ".join(_help(capsys, "index", "delete").split())
    assert "(default 30)" in text


# --------------------------------------------------------------------------- --metadata


def test_metadata_does_not_swallow_the_input(files, tmp_path, capsys):
    from diversify import load

    out = tmp_path / "m.dvf"
    assert main(["build", "--metadata", "a=b", str(files / "c.jsonl"), "-o", str(out), "--no-progress"]) == 0
    assert load(str(out)).metadata == {"a": "b"}
    out2 = tmp_path / "m2.dvf"
    assert main(["build", "--metadata", "a=b", "--metadata", "c=d=e", str(files / "c.jsonl"), "-o", str(out2),
                 "--no-progress"]) == 0
    assert load(str(out2)).metadata == {"a": "b", "c": "d=e"}
    capsys.readouterr()


@pytest.mark.parametrize("value,why", [("model", "no ="), ("=x", "an empty KEY")])
def test_metadata_without_key_value_names_the_flag(files, tmp_path, capsys, value, why):
    out = tmp_path / "m.dvf"
    with pytest.raises(SystemExit) as exc:  # a usage error, as argparse reports its others
        main(["build", "--metadata", value, str(files / "c.jsonl"), "-o", str(out), "--no-progress"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "argument --metadata" in err and repr(value) in err and why in err and "KEY=VALUE" in err
    assert not out.exists()


def test_metadata_key_given_twice_is_refused(files, tmp_path, capsys):
    out = tmp_path / "m.dvf"
    assert main(["build", str(files / "c.jsonl"), "-o", str(out), "--no-progress", "--metadata", "a=1",
                 "--metadata", "a=2"]) == 2
    err = capsys.readouterr().err
    assert "`--metadata`" in err and "'a' twice" in err


def test_every_command_help_renders_with_its_options(capsys):
    for name, parser in _subcommands(make_parser()).items():
        text = _help(capsys, *name.split())
        for flag in _options(parser).values():
            assert flag in text, (name, flag)
