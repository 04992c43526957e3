"""The live-index contract on PostgreSQL 15 (a real server started by the session, see servers.py),
plus what only this backend has: the URL and connection handling, a server that goes away in the
middle of a batch, the advisory writer lock across processes."""

from __future__ import annotations

import pytest

from index.contract import IndexContract
from index.servers import postgres_server  # noqa: F401  (the session fixture)


class TestPostgres(IndexContract):
    @pytest.fixture
    def storage_url(self, postgres_server) -> str:  # noqa: F811
        return postgres_server.new_database()
