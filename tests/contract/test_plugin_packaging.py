"""Integration packages: layout by each ecosystem's convention, runnable guides, import budget.

* every ``python`` block of ``docs/integrations/<framework>.md`` runs as written (in a temporary
  directory), so the guides cannot drift from the code;
* namespace packages shared with the framework (``llama_index``, ``haystack_integrations``...)
  carry no ``__init__.py`` (one would shadow the framework's own packages);
* ``import diversify`` and ``diversify.online`` import none of the frameworks or plugins.
"""

from __future__ import annotations

import importlib.util
import pathlib
import re
import subprocess
import sys

import pytest
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[2]
INTEGRATIONS = ROOT / "integrations"
SOURCES = {
    "langchain-diversify": INTEGRATIONS / "langchain-diversify",
    "llama-index-postprocessor-diversify": INTEGRATIONS / "llama-index-postprocessor-diversify",
    "llama-index-retrievers-diversify": INTEGRATIONS / "llama-index-retrievers-diversify",
    "diversify-haystack": INTEGRATIONS / "diversify-haystack" / "src",
}
for _src in SOURCES.values():
    if str(_src) not in sys.path:
        sys.path.insert(0, str(_src))

FRAMEWORK_MODULES = ("langchain_core", "langchain_classic", "llama_index", "haystack", "haystack_integrations",
                     "langchain_diversify")


def _python_blocks(markdown: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", markdown, flags=re.S | re.M)


GUIDES = {
    "langchain": ("langchain_core", "langchain_classic", "langchain_community", "rank_bm25"),
    "llamaindex": ("llama_index.core",),
    "haystack": ("haystack",),
    "milvus": ("pymilvus", "milvus_lite"),
}


@pytest.mark.parametrize("guide", sorted(GUIDES))
def test_guide_examples_run(guide, tmp_path, monkeypatch, capsys):
    for module in GUIDES[guide]:
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            pytest.skip(f"{module} is not installed; the {guide} guide needs it")
    text = (ROOT / "docs" / "integrations" / f"{guide}.md").read_text(encoding="utf-8")
    blocks = _python_blocks(text)
    assert blocks, f"{guide}.md should have a runnable python example"
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": f"guide_{guide}"}
    for j, block in enumerate(blocks):
        exec(compile(block, f"docs/integrations/{guide}.md[python block {j}]", "exec"), namespace)
    assert (tmp_path / "clusters.dvf").exists()
    assert "omitted" in capsys.readouterr().out or guide == "llamaindex"


def test_readme_section_links_every_guide():
    text = (ROOT / "docs" / "integrations" / "README-section.md").read_text(encoding="utf-8")
    for guide in GUIDES:
        assert f"docs/integrations/{guide}.md" in text, guide
    for name in SOURCES:
        assert f"pip install -e integrations/{name}" in text, name


@pytest.mark.parametrize("name,framework,packages", [
    ("langchain-diversify", "langchain-core>=1.0,<2", ["langchain_diversify"]),
    ("llama-index-postprocessor-diversify", "llama-index-core>=0.14,<0.15", ["llama_index/postprocessor/diversify"]),
    ("llama-index-retrievers-diversify", "llama-index-core>=0.14,<0.15", ["llama_index/retrievers/diversify"]),
    ("diversify-haystack", "haystack-ai>=3.0,<4",
     ["src/haystack_integrations/components/rankers/diversify",
      "src/haystack_integrations/components/retrievers/diversify"]),
])
def test_package_layout(name, framework, packages):
    folder = INTEGRATIONS / name
    meta = tomllib.loads((folder / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert meta["name"] == name
    assert "diversify-retrieval>=0.1" in meta["dependencies"] and framework in meta["dependencies"], meta["dependencies"]
    for pkg in packages:
        assert (folder / pkg / "__init__.py").is_file(), pkg
        # every parent between the distribution root and the package is a shared namespace
        parts = pathlib.PurePosixPath(pkg).parts
        start = 1 if parts[0] == "src" else 0
        for depth in range(start + 1, len(parts)):
            shared = folder.joinpath(*parts[:depth])
            if parts[start] in ("llama_index", "haystack_integrations"):
                assert not (shared / "__init__.py").exists(), f"{shared} must stay a namespace package"


def test_import_diversify_loads_no_framework():
    code = ("import sys, diversify, diversify.online\n"
            f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {FRAMEWORK_MODULES!r})\n"
            "print(bad)\n"
            "assert not bad, bad\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_one_namespace_per_llama_index_distribution():
    """LlamaIndex's convention: ``llama-index-<kind>-<name>`` ships ``llama_index.<kind>.<name>`` only."""
    found = 0
    for folder in sorted(INTEGRATIONS.glob("llama-index-*")):
        meta = tomllib.loads((folder / "pyproject.toml").read_text(encoding="utf-8"))
        kind, name = meta["project"]["name"].removeprefix("llama-index-").split("-", 1)
        include = meta["tool"]["setuptools"]["packages"]["find"]["include"]
        assert include == [f"llama_index.{kind}.{name.replace('-', '_')}*"], (folder.name, include)
        shipped = sorted(str(p.parent.relative_to(folder)) for p in folder.glob("llama_index/*/*/__init__.py"))
        assert shipped == [f"llama_index/{kind}/{name.replace('-', '_')}"], (folder.name, shipped)
        found += 1
    assert found == 2, found


def test_llama_index_plugins_are_imported_from_this_tree():
    pytest.importorskip("llama_index.core")
    import llama_index.postprocessor.diversify as pp
    import llama_index.retrievers.diversify as rr

    assert pathlib.Path(pp.__file__).is_relative_to(SOURCES["llama-index-postprocessor-diversify"]), pp.__file__
    assert pathlib.Path(rr.__file__).is_relative_to(SOURCES["llama-index-retrievers-diversify"]), rr.__file__
