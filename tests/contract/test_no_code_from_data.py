"""Security review checks: no code execution from data, no shell, explicit safe loaders.

Scans the *code* of the ``diversify`` package with :mod:`tokenize` (strings and comments, e.g. a
docstring saying "no pickle", do not count), so a forbidden construct cannot slip in unnoticed.
"""

from __future__ import annotations

import io
import tokenize
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "diversify"
SOURCES = sorted(PKG.rglob("*.py"))

# modules that deserialize code or objects; never imported by the package
FORBIDDEN_MODULES = {"pickle", "cPickle", "_pickle", "dill", "cloudpickle", "joblib", "shelve", "marshal", "jsonpickle"}
# builtins that run code; only forbidden when called bare (``re.compile(`` is fine)
FORBIDDEN_CALLS = {"eval", "exec", "compile", "__import__", "execfile"}
# dynamic imports are allowed only from fixed tables in these files
IMPORTLIB_ALLOWED = {"__init__.py", "errors.py", "stores/__init__.py"}
# the one module that starts a process: the cold-cache compile helper runs this interpreter on
# its own module with a fixed argument list (no shell), the run's config as JSON, validated by
# BuildConfig in the child (docs/security.md)
SUBPROCESS_ALLOWED = {"engines/ahead.py"}


def code_tokens(path: Path):
    toks = [t for t in tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline)
            if t.type not in (tokenize.COMMENT, tokenize.STRING, tokenize.NL, tokenize.NEWLINE,
                              tokenize.INDENT, tokenize.DEDENT)]
    return toks


def findings(path: Path) -> list[str]:
    toks = code_tokens(path)
    rel = path.relative_to(PKG).as_posix()
    out = []
    for i, t in enumerate(toks):
        prev = toks[i - 1].string if i else ""
        nxt = toks[i + 1].string if i + 1 < len(toks) else ""
        nxt2 = toks[i + 2].string if i + 2 < len(toks) else ""
        where = f"{rel}:{t.start[0]}"
        if t.type != tokenize.NAME:
            continue
        if t.string in FORBIDDEN_MODULES:
            out.append(f"{where}: uses {t.string}")
        if t.string in FORBIDDEN_CALLS and nxt == "(" and prev != ".":
            out.append(f"{where}: calls {t.string}()")
        if t.string == "allow_pickle" and nxt == "=" and nxt2 != "False":
            out.append(f"{where}: allow_pickle={nxt2}")
        if t.string == "shell" and nxt == "=" and nxt2 == "True":
            out.append(f"{where}: shell=True")
        if t.string in ("system", "popen", "spawnl", "spawnv", "execv", "execvp") and prev == ".":
            out.append(f"{where}: os.{t.string}")
        if t.string == "subprocess" and rel not in SUBPROCESS_ALLOWED:
            out.append(f"{where}: subprocess")
        if t.string in ("importlib", "import_module") and rel not in IMPORTLIB_ALLOWED:
            out.append(f"{where}: dynamic import")
        if t.string == "load" and prev == "." and i >= 2 and toks[i - 2].string in ("np", "numpy"):
            # np.load(...) must say allow_pickle=False explicitly on the same call
            depth, j, args = 0, i + 1, []
            while j < len(toks):
                depth += toks[j].string == "("
                depth -= toks[j].string == ")"
                args.append(toks[j].string)
                if depth == 0:
                    break
                j += 1
            if "allow_pickle" not in args or args[args.index("allow_pickle") + 2] != "False":
                out.append(f"{where}: np.load without allow_pickle=False")
        if t.string == "load" and prev == "." and i >= 2 and toks[i - 2].string == "yaml":
            out.append(f"{where}: yaml.load")
    return out


def test_package_sources_found():
    assert len(SOURCES) > 20 and (PKG / "artifact" / "format.py") in SOURCES


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.relative_to(PKG).as_posix())
def test_no_code_execution_from_data(path):
    assert not findings(path), findings(path)


def test_the_scanner_catches_what_it_should(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import pickle\nimport marshal as m\nx = eval('1')\nexec('pass')\nimport numpy as np\n"
        "np.load('a.npy', allow_pickle=True)\nnp.load('b.npy')\nimport subprocess\nsubprocess.run('ls', shell=True)\n"
        "import os\nos.system('ls')\n'''pickle in a docstring is fine'''\nimport re\nre.compile('x')  # eval( in a comment\n"
    )
    global PKG
    old, PKG = PKG, tmp_path
    try:
        got = findings(bad)
    finally:
        PKG = old
    text = "\n".join(got)
    for needle in ("uses pickle", "uses marshal", "calls eval()", "calls exec()", "allow_pickle=True",
                   "np.load without", "shell=True", "subprocess", "os.system"):
        assert needle in text, (needle, got)
    assert not any(":12:" in g or ":14:" in g for g in got), got


def test_artifact_reader_refuses_msgpack_extension_types():
    """Ext types are where msgpack libraries plug in object construction; the header refuses all."""
    import msgpack

    from diversify.artifact.header import unpack_header
    from diversify.errors import ArtifactError

    values = [msgpack.ExtType(code, b"\0" * 4) for code in (0, 1, 42, 127)] + [msgpack.Timestamp(1, 0)]
    for value in values:  # the Timestamp is ext type -1
        with pytest.raises(ArtifactError, match=r"artifact 'x\.dvf': the msgpack header is malformed"):
            unpack_header(msgpack.packb({"x": value}), "x.dvf")


def test_written_files_are_replaced_atomically_not_truncated(tmp_path):
    """A reader holding the old file (mmap) keeps a consistent view: save writes a new inode."""
    import os

    import numpy as np

    from diversify.artifact.format import read_container, write_container

    p = tmp_path / "a.dvf"
    write_container(p, {"v": 1}, {"x": np.arange(1000)})
    ino = os.stat(p).st_ino
    _, arrays = read_container(p)  # memory-mapped
    write_container(p, {"v": 2}, {"x": np.arange(1000) * 2})
    assert os.stat(p).st_ino != ino, "save must rename a new file over the path, never rewrite it in place"
    assert int(arrays["x"][-1]) == 999, "the old mapping must still read the old data"
