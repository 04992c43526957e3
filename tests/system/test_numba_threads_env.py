"""NUMBA_NUM_THREADS set to something numba cannot run with.

Kind: hostile environment, the CLI run as users run it (subprocesses). Numba reads the variable at
its import: ``0`` and negative counts passed there and failed at the first parallel kernel with a
bare ValueError ("internal error, please report it"); a value that is not a number got numba's
warning (a traceback inside) and its default; 99999 started that many threads and hung once the
system had no more to give. Each must end the command with one line naming the
variable, the rule, what was received and the fix, exit 2; a valid value still builds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from diversify._kernels import MIN_THREAD_CAP, NUM_THREADS_VAR, num_threads_error, thread_cap
from diversify.errors import ConfigError, DiversifyError

REPO = Path(__file__).resolve().parents[2]
BAD = ["0", "-1", "-8", "abc", "", " ", "1.5", "2 threads", "0x2", "99999", str(2**70)]


def _env(value: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != NUM_THREADS_VAR}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    if value is not None:
        env[NUM_THREADS_VAR] = value
    return env


def _corpus(path: Path) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for i in range(20):
            f.write(json.dumps({"id": f"d{i}", "text": f"document number {i} with a few words in it"}) + "\n")


@pytest.mark.parametrize("value", BAD)
def test_bad_value_is_named_by_the_library(value):
    err = num_threads_error({NUM_THREADS_VAR: value})
    assert isinstance(err, ConfigError) and isinstance(err, DiversifyError) and isinstance(err, ValueError)
    text = str(err)
    for needle in (NUM_THREADS_VAR, "whole number from 1 to", f"got {value!r:.40}", "Unset it"):
        assert needle in text, (needle, text)


@pytest.mark.parametrize("value", ["1", "2", " 3", "+4", "64"])
def test_good_or_absent_value_passes(value):
    assert num_threads_error({NUM_THREADS_VAR: value}) is None
    assert num_threads_error({}) is None


@pytest.mark.parametrize("value", ["0", "-1", "abc", "", "99999"])
@pytest.mark.parametrize("command", ["build", "demo"])
def test_cli_one_line_exit_2(tmp_path, command, value):
    src = tmp_path / "c.jsonl"
    _corpus(src)
    args = ["build", str(src), "-o", str(tmp_path / "a.dvf"), "--no-progress"] if command == "build" else \
        ["demo", "--n", "50"]
    proc = subprocess.run([sys.executable, "-m", "diversify", *args], env=_env(value), cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2 and len(lines) == 1, (proc.returncode, proc.stderr[-3000:])
    line = lines[0]
    assert line.startswith(f"diversify {command}: error: {NUM_THREADS_VAR}"), line
    for needle in ("whole number from 1 to", f"got {value!r}", "Unset it", f"{NUM_THREADS_VAR}="):
        assert needle in line, (needle, line)
    assert "internal error" not in line and "Traceback" not in proc.stderr
    assert not (tmp_path / "a.dvf").exists()


def test_cli_valid_value_still_builds(tmp_path):
    src = tmp_path / "c.jsonl"
    _corpus(src)
    proc = subprocess.run([sys.executable, "-m", "diversify", "build", str(src), "-o", str(tmp_path / "a.dvf"),
                           "--no-progress"], env=_env("1"), cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "a.dvf").exists()


def test_the_cap_is_inclusive_and_grows_with_the_machine():
    cap = thread_cap()
    assert cap >= MIN_THREAD_CAP
    assert num_threads_error({NUM_THREADS_VAR: str(cap)}) is None
    assert isinstance(num_threads_error({NUM_THREADS_VAR: str(cap + 1)}), ConfigError)
    assert thread_cap(1) == MIN_THREAD_CAP and thread_cap(1000) == 4000
