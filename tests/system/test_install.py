"""The README's install order in a fresh virtual environment, run as a user runs it.

Kind: end to end, in subprocesses. A new venv sees this test run's packages through a plain path
line (no download: ``pip install --no-deps --no-build-isolation``) and none of its ``.pth`` files
(so not the editable install the suite itself may run from). In it, a copy of the repository is
installed, ``diversify demo`` runs with an empty home (numba's cache starts empty), then the same
copy is installed again in editable mode, as the README's test command does. The package must stay
importable and numba's cache must land in the per-user cache directory, never inside site-packages
(files there outlive ``pip uninstall`` and turn the folder into an empty namespace package that
hides the editable install). Then a left-over folder is planted on purpose: the console script must
name it and say how to remove it, in one line, instead of a raw ImportError.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import site
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TIMEOUT = 900  # the demo compiles every kernel into an empty cache: minutes on a loaded 2-core box

pytestmark = pytest.mark.skipif(sys.platform.startswith("win"), reason="the venv layout and console script of POSIX")


def _site_dirs() -> list[str]:
    dirs = [*site.getsitepackages(), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    return list(dict.fromkeys(d for d in dirs if os.path.isdir(d)))


def _regular_install_in(dirs: list[str]) -> bool:
    return any(os.path.exists(os.path.join(d, "diversify", "__init__.py")) for d in dirs)


def _run(args: list, env: dict, cwd: Path, timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def _ok(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-5000:]}"
    return proc


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A fresh venv over this run's packages, a copy of the repository, an empty home; nothing installed yet."""
    dirs = _site_dirs()
    if _regular_install_in(dirs):
        pytest.skip("diversify is installed as a regular package in this environment: it would hide the copy")
    if any(importlib.util.find_spec(name) is None for name in ("pip", "setuptools")):
        pytest.skip("pip and setuptools are needed in the test environment to install offline")
    root = tmp_path_factory.mktemp("fresh-install")
    src = root / "src"
    src.mkdir()
    shutil.copytree(REPO / "diversify", src / "diversify", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(REPO / name, src / name)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True, timeout=300)
    bin_dir = root / "venv" / "bin"
    python = bin_dir / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    Path(purelib, "test-run-packages.pth").write_text("".join(d + "\n" for d in dirs))
    home = root / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("NUMBA_", "XDG_", "PYTHON", "PIP_", "DIVERSIFY_", "VIRTUAL_ENV"))}
    env.update(HOME=str(home), PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", PIP_NO_INDEX="1",
               PIP_DISABLE_PIP_VERSION_CHECK="1")
    return dict(root=root, src=src, python=python, script=bin_dir / "diversify", site=Path(purelib), home=home,
                env=env)


def _pip_install(v: dict, *args: str) -> None:
    _ok(_run([v["python"], "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", *args], v["env"],
             v["root"]))


def _numba_files(under: Path) -> list[str]:
    return sorted(str(p) for p in under.rglob("*") if p.suffix in (".nbi", ".nbc"))


def _imported_from(v: dict) -> str:
    return _ok(_run([v["python"], "-c", "import diversify; print(diversify.__file__)"], v["env"], v["root"])).stdout.strip()


def test_readme_install_order_keeps_the_package_importable(venv):
    """`pip install .`, `diversify demo`, then `pip install -e .`: still importable, the cache in
    ~/.cache/diversify/numba, no numba file (nor folder of ours) left in site-packages."""
    v = venv
    _pip_install(v, str(v["src"]))
    installed = v["site"] / "diversify"
    assert _imported_from(v) == str(installed / "__init__.py")
    demo = _ok(_run([v["script"], "demo", "--n", "300"], v["env"], v["root"]))
    assert "built in" in demo.stdout, demo.stdout[-2000:]

    _pip_install(v, "-e", str(v["src"]))
    version = _ok(_run([v["script"], "--version"], v["env"], v["root"]))
    assert version.stdout.strip() and not version.stderr.strip(), (version.stdout, version.stderr)
    assert _imported_from(v) == str(v["src"] / "diversify" / "__init__.py")
    assert _numba_files(v["site"]) == [], "numba's cache was written inside site-packages"
    assert not installed.exists(), f"pip uninstall left {sorted(map(str, installed.rglob('*')))}"
    cache = v["home"] / ".cache" / "diversify" / "numba"
    assert _numba_files(cache), f"no numba cache under {cache}"
    again = _ok(_run([v["script"], "demo", "--n", "300"], v["env"], v["root"]))  # warm: loads what the first compiled
    assert "built in" in again.stdout and not again.stderr.strip(), again.stderr[-2000:]
    assert _numba_files(v["site"]) == [] and not any(v["src"].rglob("*.nbi")), "a numba cache inside an install"


def test_left_over_namespace_folder_is_named_with_the_fix(venv):
    """A `diversify/` folder without __init__.py in site-packages (what pip uninstall left behind
    before this fix) shadows the editable install: the console script and `python -m diversify`
    print one line naming the folder and the `rm -rf` that fixes it, exit 2; after it, all works."""
    v = venv
    _pip_install(v, "-e", str(v["src"]))
    left = v["site"] / "diversify"
    (left / "_kernels" / "__pycache__").mkdir(parents=True, exist_ok=True)
    (left / "_kernels" / "__pycache__" / "_common.fmix64-54.py311.nbi").write_bytes(b"left over")
    try:
        for cmd in ([v["script"], "--version"], [v["script"], "demo", "--n", "50"],
                    [v["python"], "-m", "diversify", "stats", "x.dvf"]):
            proc = _run(cmd, v["env"], v["root"], timeout=120)
            lines = proc.stderr.splitlines()
            assert proc.returncode == 2 and len(lines) == 1, (cmd, proc.returncode, proc.stderr[-3000:])
            assert "Traceback" not in proc.stderr and "unknown location" not in proc.stderr, proc.stderr
            for needle in ("left-over folder", f"rm -rf {left}", str(v["src"] / "diversify"), "reinstall"):
                assert needle in lines[0], (needle, lines[0])
    finally:
        shutil.rmtree(left)
    _ok(_run([v["script"], "--version"], v["env"], v["root"]))
