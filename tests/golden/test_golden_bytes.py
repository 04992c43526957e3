"""Golden bytes: every pinned case of tests/golden/make_golden.py rebuilds to the same sha256.

Kind: golden. The table was written before the package layout moved; a refactor must leave it
unchanged. A deliberate change of output bytes re-pins it with
``python tests/golden/make_golden.py --write`` and says why in the commit.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_golden  # noqa: E402


@pytest.mark.slow
def test_every_golden_case_rebuilds_to_the_pinned_bytes(tmp_path):
    pinned = json.loads(make_golden.TABLE.read_text())
    got = make_golden.cases(tmp_path)
    assert set(got) == set(pinned), f"cases differ: pinned {sorted(pinned)}, built {sorted(got)}"
    changed = {name: (pinned[name][:12], got[name][:12]) for name in pinned if pinned[name] != got[name]}
    assert not changed, f"output bytes changed for {changed} (pinned sha256 prefix, new prefix)"


def test_the_command_line_default_build_is_the_library_default_build():
    """`diversify build X -o a` and `diversify.build(texts)` write the same bytes (same created_at)."""
    pinned = json.loads(make_golden.TABLE.read_text())
    assert pinned["cli_default"] == pinned["text_default"]
