"""Sizes the code keeps (CONTRIBUTING.md, "Rules"): no module of ``diversify/`` or ``integrations/``
over :data:`MAX_MODULE_LINES` lines and no function over :data:`MAX_FUNCTION_LINES`, unless
:data:`ALLOWED` names it with its reason; and no comment or docstring in ``diversify/`` that dates
itself (a lab log goes stale: figures live in ``benchmarks/RESULTS.md`` and ``docs/``).

The check reads the source (``ast`` and ``tokenize``): nothing is imported.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = (ROOT / "diversify", ROOT / "integrations")

MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80

#: the public entry points' numpydoc docstrings (every parameter, the returned result) are most of
#: their length: build's body is 60 lines under a 46-line docstring, add's 68 under 27
_PUBLIC_DOCSTRING = "a public entry point whose parameter docstring is a third or more of it; the body is under 80"

#: what may be longer, with the reason: ``path`` for a module, ``path::Qual.name`` for a function
#: (paths relative to the repository). An entry that is no longer over its limit fails too: drop it.
ALLOWED: dict[str, str] = {
    "diversify/engines/local.py::build": _PUBLIC_DOCSTRING,
    "diversify/engines/local.py::add": _PUBLIC_DOCSTRING,
    "diversify/_kernels/utf8.py::nfkc_fold_compact": "one fused pass over the bytes, specialized for speed "
                                                     "(its docstring says why)",
}

#: a dated note: 20XX-XX-XX not followed by "T" (an ISO timestamp in an example is not a date of work)
DATE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d(?!T)")


def _paths() -> list[Path]:
    out: list[Path] = []
    for top in SOURCES:
        out += [p for p in sorted(top.rglob("*.py")) if "__pycache__" not in p.parts and ".venv" not in p.parts]
    return out


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def functions(tree: ast.AST, prefix: str = ""):
    """(qualified name, lines) of every function and method under ``tree``, nested ones too."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = prefix + node.name
            assert node.end_lineno is not None
            yield name, node.end_lineno - node.lineno + 1
            yield from functions(node, name + ".")
        elif isinstance(node, ast.ClassDef):
            yield from functions(node, prefix + node.name + ".")
        else:
            yield from functions(node, prefix)


def oversized(paths: list[Path], root: Path = ROOT) -> dict[str, int]:
    """Every module over :data:`MAX_MODULE_LINES` and function over :data:`MAX_FUNCTION_LINES`: key -> lines."""
    out: dict[str, int] = {}
    for path in paths:
        text = path.read_text(encoding="utf-8")
        rel = path.relative_to(root).as_posix()
        lines = len(text.splitlines())
        if lines > MAX_MODULE_LINES:
            out[rel] = lines
        for name, n in functions(ast.parse(text, str(path))):
            if n > MAX_FUNCTION_LINES:
                out[f"{rel}::{name}"] = n
    return out


def dated_lines(text: str) -> list[tuple[int, str]]:
    """(line, text) of the comments and docstrings of a module's source that hold a date."""
    found: list[tuple[int, str]] = []
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT and DATE.search(tok.string):
            found.append((tok.start[0], tok.string))
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc and DATE.search(doc):
                first = node.body[0]
                found.append((first.lineno, DATE.search(doc).group(0)))  # type: ignore[union-attr]
    return sorted(found)


def test_no_module_or_function_over_its_limit_without_a_reason():
    found = oversized(_paths())
    unexplained = [f"{key}: {n} lines" for key, n in sorted(found.items()) if key not in ALLOWED]
    assert not unexplained, (
        f"over {MAX_MODULE_LINES} lines (module) or {MAX_FUNCTION_LINES} (function): split by concern, or add "
        "the name to ALLOWED with the reason (a kernel specialized for speed, and its docstring says why):\n"
        + "\n".join(unexplained)
    )


def test_every_allowance_is_still_needed_and_has_a_reason():
    found = oversized(_paths())
    stale = [key for key in ALLOWED if key not in found]
    assert not stale, f"no longer over the limit, drop from ALLOWED: {stale}"
    assert all(reason.strip() for reason in ALLOWED.values())


def test_no_comment_or_docstring_in_the_package_dates_itself():
    found = []
    for path in sorted((ROOT / "diversify").rglob("*.py")):
        found += [f"{_rel(path)}:{line}: {text}" for line, text in dated_lines(path.read_text(encoding="utf-8"))]
    assert not found, "dated notes in code (move the figure to docs/ or benchmarks/RESULTS.md):\n" + "\n".join(found)


# ---------------------------------------------------------------------------- the checks themselves


def test_the_size_check_counts_modules_methods_and_nested_functions(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))  # def line + 80 = 81 lines
    src = (f"class C:\n    def long(self):\n{body.replace('    ', '        ')}\n\n"
           f"def outer():\n    def inner():\n{body.replace('    ', '        ')}\n    return inner\n\n"
           f"def short():\n    return 1\n")
    (tmp_path / "m.py").write_text(src + "\n" * (MAX_MODULE_LINES - src.count("\n") + 1))
    found = oversized([tmp_path / "m.py"], root=tmp_path)
    assert found == {"m.py": MAX_MODULE_LINES + 1, "m.py::C.long": 81, "m.py::outer": 83, "m.py::outer.inner": 81}


def test_a_function_of_exactly_the_limit_passes(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES - 1))
    (tmp_path / "m.py").write_text(f"def f():\n{body}\n")
    assert oversized([tmp_path / "m.py"], root=tmp_path) == {}


@pytest.mark.parametrize("src, dated", [
    ("# measured on 2026-12-03: 4.1 s\nx = 1\n", True),
    ('def f():\n    """Faster since 2025-01-31."""\n', True),
    ('"""Module notes (2024-06-30)."""\n', True),
    ('x = "2026-12-03"  # a date in a string is data, not a note\n', False),
    ('def f():\n    """created_at such as 2024-01-31T12:00:00Z."""\n', False),
    ("# issue 39\nx = 1\n", False),
])
def test_dated_notes_are_found_in_comments_and_docstrings_only(src, dated):
    assert bool(dated_lines(src)) is dated
