"""The import contract of diversify: which parts may import which (CONTRIBUTING.md, "Layout").

:data:`LAYERS` lists the parts of the package from the bottom up. A module may import from its own
part and from parts in lower layers; parts that share a layer are independent (neither imports the
other), so that a sideways reach is a failure too. No module may import one that imports it back,
directly or through others. Imports inside functions count like those at the top of a module (a
lazy import is how a circle hides), and so do the ones under ``if TYPE_CHECKING:``; the few
exceptions are :data:`ALLOWED`, each with its reason, and only for imports inside a function.

The check reads the source (``ast``): nothing is imported, nothing is installed.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import NamedTuple

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "diversify"

#: the parts of diversify, bottom layer first. A part is a module or a package, named without the
#: leading ``diversify.``; a module belongs to the longest part its name starts with ("" is the
#: package's own ``__init__``, which loads everything else lazily by name, so sits at the bottom)
LAYERS: list[tuple[str, ...]] = [
    ("", "errors", "hashing", "stages", "_tuning", "_arrays"),  # constants, the error tree, process tuning
    ("config", "files", "ids"),  # every default and its coercion; atomic files; id rules
    ("_spill",),  # arrays spilled to disk
    ("_kernels",),  # numba: compute only (never the build, its config or its stages)
    ("text",),  # the text rule
    ("sketches",),  # MinHash/SimHash signatures
    ("staging", "linking.bands"),  # the stage layer the engines and the index share; LSH band math
    ("linking", "clusters"),  # candidate scan and verification; labels and the cut into clusters
    ("artifact", "evaluate"),  # the .dvf container; metrics
    ("corpus", "embedding"),  # readers and generated corpora; the optional embedding step
    ("engines", "index", "online"),  # offline builds; the live index; online folding
    ("stores", "demo", "serve", "client"),  # vector-store adapters; the built-in demo; the HTTP server and client
    ("cli",),  # the command line
    ("_console",),  # the console script: the environment, then the command line
    ("__main__",),  # python -m diversify
]

#: imports inside a function that run against :data:`LAYERS` or close a circle, with the reason.
#: Keep it short: an entry is a debt with a named way out, and one that no longer matches fails.
ALLOWED: dict[tuple[str, str], str] = {
}


class Edge(NamedTuple):
    importer: str  # module names without the leading "diversify."
    imported: str
    line: int
    lazy: bool  # inside a function

    def __str__(self) -> str:
        where = "inside a function" if self.lazy else "at module level"
        return f"{_full(self.importer)} -> {_full(self.imported)} (line {self.line}, {where})"


def _full(module: str) -> str:
    return "diversify" + (f".{module}" if module else "")


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _lazy_lines(tree: ast.AST) -> set[int]:
    """Line numbers of the imports inside a function body."""
    lines: set[int] = set()
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            lines.update(n.lineno for n in ast.walk(fn) if isinstance(n, (ast.Import, ast.ImportFrom)))
    return lines


def import_edges(root: Path, name: str = "diversify") -> list[Edge]:
    """Every import between modules of the package at ``root`` (named ``name``), top level or not."""
    paths = {_module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    edges = []
    for mod, path in paths.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        lazy = _lazy_lines(tree)
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = (name + "." + package).rstrip(".").split(".")
                    base = base[: len(base) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                # `from X import y`: the module X.y when there is one, else X itself
                targets = [f"{source}.{a.name}" if _strip(f"{source}.{a.name}", name) in paths else source
                           for a in node.names]
            for target in targets:
                imported = _strip(target, name)
                if imported is not None and imported in paths and imported != mod:
                    edges.append(Edge(mod, imported, node.lineno, node.lineno in lazy))
    return sorted(set(edges))


def _strip(target: str, name: str):
    if target == name:
        return ""
    return target[len(name) + 1:] if target.startswith(name + ".") else None


def part_of(module: str, layers=LAYERS):
    """``(layer index, part)`` of a module: the longest part its name starts with; None if none."""
    best = None
    for i, layer in enumerate(layers):
        for part in layer:
            if module == part or (part and module.startswith(part + ".")):
                if best is None or len(part) > len(best[1]):
                    best = (i, part)
    return best


def _allowed(edge: Edge, allowed) -> bool:
    return edge.lazy and (edge.importer, edge.imported) in allowed


def layer_violations(edges: list[Edge], layers=LAYERS, allowed=ALLOWED) -> list[str]:
    """The imports that run back up a layer or sideways to another part of the same layer."""
    out = []
    for e in edges:
        if _allowed(e, allowed):
            continue
        src, dst = part_of(e.importer, layers), part_of(e.imported, layers)
        if src is None or dst is None or src[1] == dst[1]:
            continue
        if dst[0] > src[0]:
            out.append(f"{e}: runs back up from layer {src[0]} ({_full(src[1])}) to layer {dst[0]} ({_full(dst[1])})")
        elif dst[0] == src[0]:
            out.append(f"{e}: reaches sideways between {_full(src[1])} and {_full(dst[1])}, parts of one layer")
    return sorted(out)


def circles(edges: list[Edge], allowed=ALLOWED) -> list[str]:
    """One line per import circle (strongly connected modules), naming the edges that close it."""
    graph: dict[str, dict[str, Edge]] = {}
    for e in edges:
        if not _allowed(e, allowed):
            graph.setdefault(e.importer, {}).setdefault(e.imported, e)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components, recursive (the graph is small)
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                loop = _shortest_loop(graph, component)
                found.append(f"circle through {len(component)} modules ({', '.join(sorted(component))}), e.g. "
                             + "; ".join(str(e) for e in loop))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def _shortest_loop(graph: dict[str, dict[str, Edge]], component: set[str]) -> list[Edge]:
    """The edges of a shortest circle through the first module (by name) of a component."""
    start = min(component)
    came: dict[str, Edge] = {}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w, e in sorted(graph.get(v, {}).items()):
            if w not in component or w in came:
                continue
            came[w] = e
            if w == start:
                loop = [e]
                while loop[-1].importer != start:
                    loop.append(came[loop[-1].importer])
                return loop[::-1]
            queue.append(w)
    raise AssertionError("a strongly connected component holds a circle")  # pragma: no cover


@pytest.fixture(scope="module")
def edges() -> list[Edge]:
    return import_edges(PACKAGE)


def test_every_module_belongs_to_a_part(edges):
    modules = {_module_name(p, PACKAGE) for p in PACKAGE.rglob("*.py")}
    lost = sorted(_full(m) for m in modules if part_of(m) is None)
    assert not lost, f"modules in no part of LAYERS (tests/contract/test_import_layers.py): {lost}. Add each to its layer."


def test_no_import_runs_back_up_or_sideways(edges):
    bad = layer_violations(edges)
    assert not bad, "imports against the layers (tests/contract/test_import_layers.py, LAYERS):\n" + "\n".join(bad)


def test_no_import_circle(edges):
    bad = circles(edges)
    assert not bad, "import circles (break them, or move the shared code a layer down):\n" + "\n".join(bad)


def test_every_allowed_import_is_still_there_and_inside_a_function(edges):
    seen = {(e.importer, e.imported): e for e in edges}
    stale = sorted(f"{a} -> {b}" for a, b in ALLOWED if (a, b) not in seen)
    assert not stale, f"ALLOWED lists imports that are gone; remove these entries: {stale}"
    eager = sorted(str(seen[k]) for k in ALLOWED if not seen[k].lazy)
    assert not eager, f"ALLOWED only excuses imports inside a function; these run at module level: {eager}"
    assert len(ALLOWED) <= 6, "ALLOWED must stay short: fix an import rather than excuse it"


def test_kernels_import_only_the_bottom_layer(edges):
    """The rule of CONTRIBUTING.md in its own words: kernels import errors, hash and stage constants."""
    up = sorted(str(e) for e in edges if e.importer.startswith("_kernels") and not e.imported.startswith("_kernels")
                and e.imported not in ("", "errors", "hashing", "stages"))
    assert not up, f"kernels import only errors, hashing and stages: {up}"


def test_the_index_and_the_engines_call_the_stage_layer_not_each_other(edges):
    across = sorted(str(e) for e in edges
                    if {e.importer.split(".")[0], e.imported.split(".")[0]} == {"index", "engines"})
    assert not across, f"the live index and the engines share diversify.staging, not each other's internals: {across}"


# ----------------------------------------------------------------------------- the checker itself


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for rel, text in {"__init__.py": "", **files}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_checker_names_a_lazy_import_that_runs_back_up(tmp_path):
    root = _package(tmp_path, {"low.py": "def f():\n    from . import high\n", "high.py": "from . import low\n"})
    edges = import_edges(root, "pkg")
    bad = layer_violations(edges, layers=[("", "low"), ("high",)], allowed={})
    assert bad == ["diversify.low -> diversify.high (line 2, inside a function): runs back up from layer 0 "
                   "(diversify.low) to layer 1 (diversify.high)"]
    assert len(circles(edges, allowed={})) == 1 and "diversify.high -> diversify.low (line 1" in circles(edges, {})[0]
    # allowed inside a function: neither a violation nor a circle
    excuse = {("low", "high"): "test"}
    assert layer_violations(edges, layers=[("", "low"), ("high",)], allowed=excuse) == []
    assert circles(edges, allowed=excuse) == []


def test_checker_never_excuses_a_module_level_import(tmp_path):
    root = _package(tmp_path, {"a/__init__.py": "", "a/x.py": "from ..b.y import f\n", "b/__init__.py": "",
                               "b/y.py": "from ..a import x\n\ndef f():\n    pass\n"})
    edges = import_edges(root, "pkg")
    assert {(e.importer, e.imported, e.lazy) for e in edges} == {("a.x", "b.y", False), ("b.y", "a.x", False)}
    excuse = {("a.x", "b.y"): "test", ("b.y", "a.x"): "test"}
    assert len(circles(edges, allowed=excuse)) == 1
    assert len(layer_violations(edges, layers=[("",), ("a", "b")], allowed=excuse)) == 2  # sideways, both ways


def test_checker_resolves_relative_and_absolute_imports_to_modules(tmp_path):
    root = _package(tmp_path, {"k/__init__.py": "from .. import c\n", "k/m.py": "import pkg.c\nfrom pkg import d\n",
                               "c.py": "", "d.py": "X = 1\n", "e.py": "from .d import X\nfrom . import k\n"})
    got = {(e.importer, e.imported) for e in import_edges(root, "pkg")}
    assert got == {("k", "c"), ("k.m", "c"), ("k.m", "d"), ("e", "d"), ("e", "k")}
    assert part_of("k.m", [("",), ("k", "k.m")]) == (1, "k.m") and part_of("k.z", [("",), ("k",)]) == (1, "k")
    assert part_of("zz", [("",)]) is None


def test_checker_names_the_edges_of_a_circle_and_nothing_outside_it(tmp_path):
    root = _package(tmp_path, {"a.py": "from . import b\n", "b.py": "from .c import f\n",
                               "c.py": "def f():\n    from . import a\n", "d.py": "from . import a\n"})
    assert circles(import_edges(root, "pkg"), allowed={}) == [
        "circle through 3 modules (a, b, c), e.g. diversify.a -> diversify.b (line 1, at module level); "
        "diversify.b -> diversify.c (line 1, at module level); diversify.c -> diversify.a (line 2, inside a function)"]
