"""The one way the harness measures the library at another commit: an export of that commit.

``export(ref)`` resolves a branch, tag or commit and extracts its ``diversify/`` and the framework
plugins in ``integrations/`` (``git archive``) into ``.cache/lib-<commit>/``, once per commit.
``python -m benchmarks run`` runs every suite with that folder first on ``sys.path`` (``--ref REF``,
default HEAD); a suite that compares two commits in one process (``write_rate --baseline REV``)
reads the earlier commit's files from the same export.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from .paths import CACHE, ROOT


def resolve(ref: str) -> str:
    """The full commit hash of ``ref``; SystemExit naming the fix when it is not a commit here."""
    got = None if ref.startswith("-") else subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], cwd=ROOT, capture_output=True, text=True)
    if got is None or got.returncode != 0:
        raise SystemExit(f"--ref {ref!r} is not a commit of this repository (a branch, tag or commit hash); "
                         "use e.g. --ref HEAD or --ref main")
    return got.stdout.strip()


def export(ref: str) -> tuple[str, Path]:
    """(commit, folder holding that commit's ``diversify/`` and ``integrations/``)."""
    commit = resolve(ref)
    snap = CACHE / f"lib-{commit[:12]}"
    if not (snap / "diversify" / "__init__.py").exists() or not (snap / "integrations").is_dir():
        snap.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "archive", commit, "diversify", "integrations"], cwd=ROOT,
                                 capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(snap)], input=archive.stdout, check=True)
    return commit, snap
