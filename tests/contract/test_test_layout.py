"""The tests' own layout (CONTRIBUTING.md, "Tests"): every test module lives in a folder of its kind,
module names are unique across folders (they import by name), the bare ``python -m pytest`` reaches
every plugin's tests, and the file names that tests/conftest.py marks by (slow, hostile, oracle)
name files that exist, so that a rename cannot silently drop a test out of the fast loop's list.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import conftest
import tomllib

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
KIND_FOLDERS = set(conftest.FOLDER_KINDS)


def _testpaths() -> list[str]:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["tool"]["pytest"]["ini_options"]["testpaths"]


def _test_modules() -> list[Path]:
    return sorted(p for entry in _testpaths() for p in (ROOT / entry).rglob("test_*.py"))


def test_every_test_module_is_in_a_folder_of_its_kind():
    loose = sorted(p.name for p in TESTS.glob("test_*.py"))
    assert not loose, f"test modules directly in tests/: {loose}. Move each (git mv) into one of {sorted(KIND_FOLDERS)}"
    stray = sorted(str(p.relative_to(ROOT)) for p in TESTS.rglob("test_*.py")
                   if p.relative_to(TESTS).parts[0] not in KIND_FOLDERS)
    assert not stray, f"test modules outside the kind folders {sorted(KIND_FOLDERS)}: {stray}"


def test_test_module_names_are_unique_across_folders():
    twice = sorted(name for name, n in Counter(p.name for p in _test_modules()).items() if n > 1)
    assert not twice, f"test module names used in two folders (they import by name): {twice}. Rename one."


def test_the_bare_command_collects_every_plugins_tests():
    paths = set(_testpaths())
    assert "tests" in paths
    plugin_tests = {str(p.relative_to(ROOT)) for p in (ROOT / "integrations").glob("*/tests") if p.is_dir()}
    assert plugin_tests, "no plugin keeps its tests in integrations/*/tests"
    missing = sorted(plugin_tests - paths)
    assert not missing, f"plugin test folders not in pyproject's testpaths: {missing}"
    assert all((ROOT / entry).is_dir() for entry in paths), paths


def test_the_file_names_conftest_marks_by_exist():
    names = {p.name for p in _test_modules()}
    for table in ("SLOW_MODULES", "HOSTILE_MODULES", "ORACLE_MODULES"):
        gone = sorted(set(getattr(conftest, table)) - names)
        assert not gone, f"tests/conftest.py {table} names files that do not exist: {gone}. Follow the rename."


def test_the_test_names_conftest_marks_slow_exist():
    import ast

    sources = _test_modules() + sorted(TESTS.glob("*/*.py"))  # the shared contracts define tests too
    defined = {node.name for path in sources for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
               if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
    gone = sorted(set(conftest.SLOW_TESTS) - defined)
    assert not gone, f"tests/conftest.py SLOW_TESTS names tests that do not exist: {gone}"
