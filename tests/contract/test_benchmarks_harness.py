"""The benchmark harness stays one harness: every suite module is registered, every renderer lives
beside its suite, every script that runs on its own is one a suite starts, benchmarks/ imports
nothing from tests/, and its modules and functions stay within the size limits.

Static checks (AST and the registry, which imports only the standard library and numpy): no suite
runs here.
"""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"

pytestmark = pytest.mark.skipif(not BENCH.is_dir(), reason="benchmarks/ is not shipped with this checkout")


def _sources() -> list[Path]:
    return sorted(p for p in BENCH.rglob("*.py") if ".cache" not in p.parts)


def _registry():
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return importlib.import_module("benchmarks.suites")


def test_every_suite_module_is_registered_and_every_name_has_a_module():
    registry = _registry()
    modules = {p.stem for p in (BENCH / "suites").glob("*.py") if not p.stem.startswith("_")}
    assert modules == set(registry.NAMES), (
        f"suite modules not registered: {sorted(modules - set(registry.NAMES))}; "
        f"registered names without a module: {sorted(set(registry.NAMES) - modules)}")
    assert len(registry.NAMES) == len(set(registry.NAMES))
    for name in registry.NAMES:
        mod = registry.module(name)
        assert mod.SUITE.name == name
        assert callable(mod.add_arguments) and callable(mod.run), name
        assert mod.SUITE.results, f"{name} names no result files"


def test_every_renderer_lives_beside_its_suite():
    registry = _registry()
    for name in registry.NAMES:
        ref = registry.suite(name).render
        module, _, attr = ref.partition(":")
        assert module.startswith("benchmarks.suites."), f"{name}: renderer {ref} is not in benchmarks/suites/"
        assert callable(getattr(importlib.import_module(module), attr)), ref
        leaf = module.rsplit(".", 1)[1]
        assert leaf == name or leaf.startswith("_"), (
            f"{name}: renderer {ref} is neither in the suite's module nor in a suite helper (suites/_*.py)")


def test_every_suites_quick_settings_are_its_own_options():
    """``--quick`` sets option values by name: a misspelled key would be ignored silently."""
    import argparse

    registry = _registry()
    for name in registry.NAMES:
        mod = registry.module(name)
        p = argparse.ArgumentParser()
        mod.add_arguments(p)
        dests = {a.dest for a in p._actions}
        assert set(mod.SUITE.quick) <= dests, f"{name}: --quick sets {sorted(set(mod.SUITE.quick) - dests)}, not options"
        p.parse_args([])


def test_the_clique_suite_takes_its_clusterings_as_a_parameter():
    import argparse

    mod = _registry().module("clique")
    p = argparse.ArgumentParser()
    mod.add_arguments(p)
    assert p.parse_args([]).clusterings == ["clique", "star", "components"]
    assert p.parse_args(["--clusterings", "guaranteed,components"]).clusterings == ["star", "components"]
    assert p.parse_args(["--family-size", "10000", "100000"]).family_size == [10000, 100000]
    with pytest.raises(SystemExit):
        p.parse_args(["--clusterings", "cliques"])


def test_unknown_suite_is_refused_with_the_list():
    registry = _registry()
    with pytest.raises(KeyError, match="python -m benchmarks list"):
        registry.module("no_such_suite")


def _main_guarded(tree: ast.Module) -> bool:
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare):
            left = node.test.left
            if isinstance(left, ast.Name) and left.id == "__name__":
                return True
    return False


def test_no_free_standing_scripts():
    """A module that runs on its own is the entry point or a process the harness starts (its dotted
    name is written in another module, or twice in its own: the worker starts itself)."""
    texts = {p: p.read_text(encoding="utf-8") for p in _sources()}
    for path, src in texts.items():
        if path == BENCH / "__main__.py" or not _main_guarded(ast.parse(src)):
            continue
        dotted = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        started = [q for q, other in texts.items() if dotted in (other if q != path else other.replace(dotted, "", 1))]
        assert started, f"{dotted} runs on its own but no suite starts it: register it as a suite or remove it"


def _imported(tree: ast.Module) -> list[str]:
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


def test_benchmarks_import_nothing_from_tests():
    for path in _sources():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        bad = [m for m in _imported(tree) if m == "tests" or m.startswith(("tests.", "contract.", "conftest"))]
        assert not bad, f"{path.relative_to(ROOT)} imports {bad} from the test suite"
        strings = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
        paths = [s for s in strings if s == "tests" or s.startswith("tests/")]
        assert not paths, f"{path.relative_to(ROOT)} reaches into the test suite by path: {paths}"


def test_modules_and_functions_within_the_size_limits():
    for path in _sources():
        src = path.read_text(encoding="utf-8")
        assert src.count("\n") <= 500, f"{path.relative_to(ROOT)}: {src.count(chr(10))} lines"
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                assert length <= 80, f"{path.relative_to(ROOT)}:{node.lineno} {node.name}() is {length} lines"


def test_benchmarks_folder_names_do_not_shadow_the_top_level():
    top = {p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith(".")}
    inner = {p.name for p in BENCH.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert not (top & inner), f"benchmarks/ has packages named like top-level folders: {sorted(top & inner)}"
