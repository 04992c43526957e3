"""Packaging: a distribution name of our own, one version, the files a user expects.

Kind: golden/consistency. ``diversify`` on the package index is an unrelated project, so the core
distribution is ``diversify-retrieval`` and every plugin must depend on that name (a dependency on
``diversify`` would pull the other project into a fresh environment). Checked offline from the
pyproject files and the installed metadata.
"""

from __future__ import annotations

import importlib.metadata
import pathlib
import re

import tomllib

import diversify

ROOT = pathlib.Path(__file__).resolve().parents[2]
PLUGINS = sorted((ROOT / "integrations").glob("*/pyproject.toml"))
DIST = "diversify-retrieval"


def _requirement_names(deps: list[str]) -> list[str]:
    return [re.split(r"[\s<>=!~;\[]", d, maxsplit=1)[0].lower() for d in deps]


def test_core_distribution_name_and_single_sourced_version():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert meta["name"] == DIST
    assert "version" not in meta and meta["dynamic"] == ["version"]
    assert importlib.metadata.version(DIST) == diversify.__version__


def test_every_plugin_depends_on_the_core_by_its_own_name():
    assert len(PLUGINS) == 4, PLUGINS  # langchain, llama-index postprocessor + retrievers, haystack
    for path in PLUGINS:
        names = _requirement_names(tomllib.loads(path.read_text())["project"]["dependencies"])
        assert DIST in names, (path, names)
        assert "diversify" not in names, f"{path} depends on the unrelated 'diversify' distribution"


def test_install_hints_name_the_distribution():
    hints = []
    for path in list((ROOT / "diversify").rglob("*.py")) + list((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]:
        hints += [(path.name, m) for m in re.findall(r"pip install [-\w ]*['\"]?diversify[\w\[\],.-]*", path.read_text())]
    assert hints, "no install hints found: the pattern is wrong"
    bad = [(name, h) for name, h in hints if not re.search(r"diversify-retrieval|diversify-haystack", h)]
    assert not bad, bad


def test_license_changelog_contributing_and_py_typed_are_shipped():
    assert "Apache License" in (ROOT / "LICENSE").read_text()
    assert (ROOT / "CHANGELOG.md").is_file() and (ROOT / "CONTRIBUTING.md").is_file()
    assert (pathlib.Path(diversify.__file__).parent / "py.typed").is_file()
