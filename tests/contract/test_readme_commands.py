"""The README's quickstart commands and CI's: CI runs the README's full test command, verbatim.

Kind: documentation contract. The quickstart shows two commands (install and demo; install the test
tools and run the fast subset) and the full command CI runs; `.ci/run` installs with the full
command's install half and runs its test half. A change to one without the other fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _bash_blocks(text: str) -> list[str]:
    return [b.strip() for b in re.findall(r"```bash\n(.*?)```", text, flags=re.S)]


def _quickstart() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    return _bash_blocks(section)


def test_quickstart_is_demo_then_fast_tests_then_the_full_command():
    blocks = _quickstart()
    assert len(blocks) == 3, blocks
    demo, fast, full = blocks
    assert demo == "pip install . && diversify demo"
    assert fast.startswith("pip install -e \".[test]\" && ") and fast.endswith('python -m pytest -m "not slow"'), fast
    assert full.endswith("&& python -m pytest"), full


def test_ci_runs_the_readmes_full_test_command_verbatim():
    full = _quickstart()[2]
    install, _, test = full.rpartition(" && ")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert install in ci, f"`.ci/run` must install with the README's full test command: {install}"
    assert test in ci, f"`.ci/run` must run the README's full test command: {test}"
    assert ci.index(install) < ci.index(test)
