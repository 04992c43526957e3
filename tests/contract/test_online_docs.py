"""Every ```python block of docs/online.md runs, top to bottom, in one namespace.

A block whose first line is ``# not run here`` is skipped; one that starts with
``# requires: <module>`` is skipped (with the reason) when that module is not installed.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "online.md"


def _blocks():
    return re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)


def test_online_guide_examples_run():
    blocks = _blocks()
    assert len(blocks) >= 12, len(blocks)
    ns: dict = {"__name__": "docs_online"}
    ran, skipped, checked = 0, [], 0
    for j, code in enumerate(blocks):
        first = code.splitlines()[0].strip()
        if first.startswith("# not run here"):
            continue
        m = re.match(r"# requires: (\w+)", first)
        if m and importlib.util.find_spec(m.group(1)) is None:
            skipped.append(m.group(1))
            continue
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            try:
                exec(compile(code, f"{DOC.name}[block {j}]", "exec"), ns)
            except Exception as exc:  # pragma: no cover - the message names the block
                pytest.fail(f"docs/online.md block {j} failed: {type(exc).__name__}: {exc}\n{code}")
        # a printed line followed by "# <expected>" comments must match what was printed
        expected = [c.split("  (")[0].strip()
                    for c in re.findall(r"^\s*print\(.*?\)\s*#\s*(.+)$", code, flags=re.M)]
        expected += [c.strip() for c in re.findall(r"^# (\[.*\]|\(.*\))$", code, flags=re.M)]
        printed = out.getvalue()
        for e in expected:
            assert e in printed, f"block {j}: expected {e!r} in output {printed!r}"
            checked += 1
        ran += 1
    assert ran >= 12 - len(skipped) and checked >= 5, (ran, skipped, checked)
