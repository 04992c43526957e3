"""One home per concept, held by reading the source (kind: contract).

The text rule is a package whose modules import one another in one direction only, with the
CPython-string fast path in one module of it; every MinHash and every SimHash signature is made
by one module each. A new import circle, a private name taken across modules, or a second place
that calls a signature kernel fails here with the file and line to look at.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "diversify"
TEXT = PACKAGE / "text"
#: the text package's modules, each allowed to import only those before it
TEXT_ORDER = ["tables", "buffers", "normalization", "fold", "strview", "encode", "shingle", "sets"]


def _modules(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def _dotted(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """(line, absolute module, names) of every ``import`` and ``from ... import`` in ``path``,
    wherever it is (module level or inside a function)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = _dotted(path) if path.name == "__init__.py" else _dotted(path).rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, alias.name, []) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            module = (base + "." + node.module if node.module else base) if node.level else (node.module or "")
            out.append((node.lineno, module, [alias.name for alias in node.names]))
    return out


def test_the_text_package_lists_every_module_in_its_order():
    found = sorted(p.stem for p in TEXT.glob("*.py") if p.name != "__init__.py")
    assert found == sorted(TEXT_ORDER), "a module was added to or removed from diversify/text: place it in TEXT_ORDER"


@pytest.mark.parametrize("name", TEXT_ORDER)
def test_text_modules_import_only_the_modules_below_them(name):
    """No import circle inside the package: each module reads only those listed before it."""
    allowed = set(TEXT_ORDER[: TEXT_ORDER.index(name)])
    path = TEXT / f"{name}.py"
    wrong = []
    for line, module, names in _imports(path):
        if module == "diversify.text":
            targets = set(names)
        elif module.startswith("diversify.text."):
            targets = {module.split(".")[2]}
        else:
            continue
        if not targets <= allowed:
            wrong.append(f"{path.name}:{line} imports {sorted(targets - allowed)}")
    assert not wrong, f"allowed below {name}: {sorted(allowed)}; {wrong}"


def test_the_text_rule_does_not_import_the_layers_above_it():
    wrong = [f"{p.relative_to(PACKAGE)}:{line} imports {module}" for p in _modules(TEXT)
             for line, module, _ in _imports(p)
             if module.startswith("diversify.") and module.split(".")[1] not in
             {"text", "_kernels", "config", "errors", "hashing"}]
    assert not wrong, wrong


def test_no_module_takes_a_private_name_of_the_text_package():
    """What one module of the rule needs from another is public there (no ``_name`` across)."""
    wrong = []
    for path in _modules(PACKAGE):
        for line, module, names in _imports(path):
            if (module == "diversify.text" or module.startswith("diversify.text.")) and module != _dotted(path):
                wrong += [f"{path.relative_to(PACKAGE)}:{line} takes {n} from {module}" for n in names
                          if n.startswith("_")]
    assert not wrong, wrong


def test_the_cpython_string_fast_path_lives_in_one_module():
    """Only text/strview.py reads a str object's memory (ctypes); the rest of the rule is portable."""
    users = sorted(p.name for p in _modules(TEXT) if any(m == "ctypes" for _, m, _ in _imports(p)))
    assert users == ["strview.py"]
    assert not (PACKAGE / "strview.py").exists(), "the fast path moved into diversify/text/strview.py"


def test_every_text_module_and_function_stays_small():
    big = []
    for path in _modules(TEXT):
        lines = path.read_text().count("\n")
        if lines >= 500:
            big.append(f"{path.name}: {lines} lines")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                size = node.end_lineno - node.lineno + 1
                if size > 80:
                    big.append(f"{path.name}:{node.lineno} {node.name}: {size} lines")
    assert not big, big


#: kernel -> the one module of diversify (outside the kernels) that may call it
SIGNATURE_KERNELS = {
    "fill_minhash_oph": "sketches/minhash.py",
    "fill_minhash_classic": "sketches/minhash.py",
    "sketch_oph": "sketches/minhash.py",
    "sketch_oph_sets": "sketches/minhash.py",
    "fill_simhash": "sketches/simhash.py",
    "fill_simhash_signs": "sketches/simhash.py",
    "fill_unit_simhash": "sketches/simhash.py",
}


def _kernel_calls(path: Path) -> set[str]:
    """Names of :data:`SIGNATURE_KERNELS` that ``path`` calls, as ``km.name(...)`` or ``name(...)``."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
            if name in SIGNATURE_KERNELS:
                out.add(name)
    return out


def test_minhash_and_simhash_signatures_are_made_in_one_module_each():
    wrong = []
    for path in _modules(PACKAGE):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("_kernels/"):
            continue
        wrong += [f"{rel} calls {k} (its home is {SIGNATURE_KERNELS[k]})" for k in sorted(_kernel_calls(path))
                  if SIGNATURE_KERNELS[k] != rel]
    assert not wrong, wrong
    homes = {k: _kernel_calls(PACKAGE / home) for k, home in SIGNATURE_KERNELS.items()}
    assert all(k in calls for k, calls in homes.items()), homes  # the check above looks at real calls


def test_old_import_paths_of_the_text_rule_still_work():
    """Names other modules and users import from ``diversify.text`` resolve as before."""
    import diversify.text as text
    from diversify.sketches.minhash import sketch_oph_buffer, sketch_oph_sets_buffer
    from diversify.sketches.simhash import text_simhash, text_simhash_buffer

    for name in ("normalize", "nfkc", "encode_batch", "encode_batch_scripts", "Shingles", "shingle_hashes",
                 "shingle_buffer", "unspaced_docs", "sorted_unique_shingles", "sorted_unique_of_buffer",
                 "shingle_sets32", "exact_jaccard", "code_points"):
        assert callable(getattr(text, name)), name
    assert text.nfkc("\u2026") == "..."
    assert all(map(callable, (sketch_oph_buffer, sketch_oph_sets_buffer, text_simhash, text_simhash_buffer)))


def test_one_bloom_filter_serves_the_index_and_the_dask_engine():
    """The SQLite backend's band filter and the Dask engine's filter of shared keys are one class."""
    from diversify.engines.dask import bands
    from diversify.index import keyfilter as index_filter
    from diversify.linking.keyfilter import KeyFilter

    assert index_filter.KeyFilter is KeyFilter and bands.KeyFilter is KeyFilter
    assert not (PACKAGE / "engines" / "dask" / "bloom.py").exists()
    homes = sorted(p.relative_to(PACKAGE).as_posix() for p in _modules(PACKAGE)
                   if "class KeyFilter" in p.read_text() or "def bloom" in p.read_text())
    assert homes == ["linking/keyfilter.py"], homes


#: what tunes the process rather than compute a result; only diversify/_tuning.py may say it
TUNING_WORDS = ("mallopt", "malloc_trim", "gc.disable", "gc.freeze", "_set_madvise_hugepage", "OPENBLAS_",
                "NUMPY_MADVISE_HUGEPAGE")


def test_process_tuning_lives_in_one_module():
    wrong = [f"{p.relative_to(PACKAGE)} says {w}" for p in _modules(PACKAGE) if p.name != "_tuning.py"
             for w in TUNING_WORDS if w in p.read_text()]
    assert not wrong, wrong
    assert all(w in (PACKAGE / "_tuning.py").read_text() for w in TUNING_WORDS[:3] + TUNING_WORDS[4:])


def test_the_console_environment_is_set_for_each_command_line():
    """tune_environment, on a dict standing for the environment: OpenBLAS quieted unless vectors,
    numpy's huge pages off for text builds and adds only, a user's own value kept."""
    from diversify._tuning import BUILD_PAGES, QUIET_LIBRARIES, tune_environment

    cases = {("build", "c.jsonl"): {**QUIET_LIBRARIES, **BUILD_PAGES}, ("add", "a.dvf", "c.jsonl"):
             {**QUIET_LIBRARIES, **BUILD_PAGES}, ("index", "add", "u", "c.jsonl"): QUIET_LIBRARIES,
             ("stats", "a.dvf"): QUIET_LIBRARIES, ("build", "--vectors", "v.npy"): {},
             ("build", "--vectors=v.npy"): {}, (): QUIET_LIBRARIES}
    for args, want in cases.items():
        env: dict = {}
        tune_environment(list(args), env)
        assert env == want, args
    env = {"OPENBLAS_THREAD_TIMEOUT": "12"}
    tune_environment(["build", "c.jsonl"], env)
    assert env == {"OPENBLAS_THREAD_TIMEOUT": "12", **BUILD_PAGES}


def test_a_command_is_tuned_as_the_console_script_runs_it(monkeypatch):
    """build and add run without the cycle collector and keep freed memory; --stream keeps the
    allocator as it is; other commands keep the collector."""
    import gc

    from diversify import _tuning

    calls: list = []
    monkeypatch.setattr(_tuning, "keep_freed_memory", lambda: calls.append("keep") or True)
    was = gc.isenabled()
    try:
        for command, stream, want_keep, want_gc in (("build", False, True, False), ("add", True, False, False),
                                                     ("stats", False, True, True), ("index", True, False, True)):
            gc.enable()
            calls.clear()
            _tuning.tune_command(command, stream=stream)
            assert (calls == ["keep"]) == want_keep and gc.isenabled() == want_gc, command
    finally:
        gc.enable() if was else gc.disable()
