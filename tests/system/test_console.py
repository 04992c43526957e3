"""The console script's start: the environment it sets for the libraries before they load."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

# what diversify._console.run leaves in the environment, seen by a stand-in for the command line
_PROBE = ("import os, sys\n"
          "import diversify.cli\n"
          "diversify.cli.run = lambda: print(os.environ.get(os.environ.get('_PROBE_VAR', 'OPENBLAS_THREAD_TIMEOUT'), "
          "'unset'))\n"
          "sys.argv = ['diversify'] + sys.argv[1:]\n"
          "from diversify._console import run\n"
          "run()\n")


def _probe(args: list[str], env_extra: dict | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_THREAD_TIMEOUT", "NUMPY_MADVISE_HUGEPAGE")}
    env.update(env_extra or {})
    out = subprocess.run([sys.executable, "-c", _PROBE, *args], capture_output=True, text=True, env=env, check=True)
    return out.stdout.strip()


@pytest.mark.parametrize("args, expected", [
    (["build", "corpus.jsonl", "-o", "c.dvf"], "4"),
    (["build", "--vectors", "v.npy", "-o", "c.dvf"], "unset"),  # many products: the threads stay awake
    (["build", "--vectors=v.npy", "-o", "c.dvf"], "unset"),
    (["index", "add", "sqlite:///x.db", "corpus.jsonl"], "4"),
])
def test_console_quiets_openblas_threads_unless_vectors(args, expected):
    assert _probe(args) == expected


def test_console_keeps_the_users_setting():
    assert _probe(["build", "corpus.jsonl"], {"OPENBLAS_THREAD_TIMEOUT": "12"}) == "12"


def test_console_module_loads_no_numpy():
    # the environment must be set before numpy (and its OpenBLAS) loads
    code = "import sys, diversify._console; print('numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_python_m_diversify_runs_the_console_script():
    out = subprocess.run([sys.executable, "-m", "diversify", "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith("diversify ")


@pytest.mark.parametrize("args, expected", [
    (["build", "corpus.jsonl", "-o", "c.dvf"], "0"),
    (["add", "c.dvf", "more.jsonl"], "0"),
    (["build", "--vectors", "v.npy", "-o", "c.dvf"], "unset"),  # not measured there: numpy's default
    (["index", "add", "sqlite:///x.db", "corpus.jsonl"], "unset"),
    (["stats", "c.dvf"], "unset"),
])
def test_console_turns_numpy_huge_pages_off_for_text_builds(args, expected):
    assert _probe(args, {"_PROBE_VAR": "NUMPY_MADVISE_HUGEPAGE"}) == expected
    assert _probe(args, {"_PROBE_VAR": "NUMPY_MADVISE_HUGEPAGE", "NUMPY_MADVISE_HUGEPAGE": "1"}) == "1"


def test_numpy_reads_the_huge_page_setting_at_import():
    # the setting only works if numpy reads it when it loads (it has no effect set later)
    code = ("import numpy as np\n"
            "core = np._core if hasattr(np, '_core') else np.core  # numpy 2 / numpy 1\n"
            "print(core.multiarray._get_madvise_hugepage())")
    out = {v: subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             env={**os.environ, "NUMPY_MADVISE_HUGEPAGE": v}).stdout.strip() for v in ("0", "1")}
    assert out == {"0": "False", "1": "True"}
