"""An optional library a test module needs: a skip where it is not installed (the fast subset
installs only the test tools), a failure in CI (``DIVERSIFY_CI=1``), where every extra is installed."""

from __future__ import annotations

import importlib
import importlib.util
import os

import pytest


def need_module(module: str, extra: str):
    """Import ``module``; skip (or, under ``DIVERSIFY_CI=1``, fail) naming the extra that installs it."""
    if importlib.util.find_spec(module) is None:
        reason = f"{module} is not installed (pip install 'diversify-retrieval[{extra}]')"
        if os.environ.get("DIVERSIFY_CI") == "1":
            pytest.fail(f"DIVERSIFY_CI=1 but {reason}", pytrace=False)
        pytest.skip(reason)
    return importlib.import_module(module)
