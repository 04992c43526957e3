"""The live-index contract on the embedded SQLite backend, plus what only SQLite has (file URLs)."""

from __future__ import annotations

import pytest

from index.contract import IndexContract


class TestSQLite(IndexContract):
    @pytest.fixture
    def storage_url(self, tmp_path) -> str:
        return f"sqlite:///{tmp_path}/index.db"
