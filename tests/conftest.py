"""Shared fixtures. Keep this file small.

Owned by the builder-tests helper; other helpers: add a fixture at the end under a comment with
your name/area rather than changing an existing one (tests in test_text/minhash/simhash/lsh/build/
determinism/quality_data rely on the values below).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

TESTS_DIR = Path(__file__).resolve().parent
# `import reference` (tests/reference.py) from any test module, whatever the rootdir/import mode.
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))

#: the one seed every random test input derives from (change it to re-roll all random data)
BASE_SEED = 20261130

#: pinned artifact timestamp, so artifacts are comparable byte for byte
CREATED_AT = "2026-01-01T00:00:00Z"


@pytest.fixture
def seed() -> int:
    """The base seed (an int) for tests that need several independent streams."""
    return BASE_SEED


@pytest.fixture
def rng(seed) -> np.random.Generator:
    """A fresh, seeded numpy Generator per test (no global RNG)."""
    return np.random.default_rng(seed)


@pytest.fixture
def created_at() -> str:
    return CREATED_AT


@pytest.fixture
def one_numba_thread():
    """Run parallel kernels on one thread for the test (many tiny calls: the thread pool's wake-up
    dominates on a loaded 2-core machine). Restores the previous count."""
    import numba

    before = numba.get_num_threads()
    numba.set_num_threads(1)
    yield
    numba.set_num_threads(before)
