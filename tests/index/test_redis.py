"""The live-index contract on Redis (a real redis-server, tests/index/servers_redis.py), plus what
only the Redis backend has: the writer lease and its fencing, the key layout's version, a server
killed mid-batch, masked passwords."""

from __future__ import annotations

import pytest

from index.contract import IndexContract
from index.servers_redis import redis_server  # noqa: F401  (the session fixture)


class TestRedis(IndexContract):
    @pytest.fixture
    def storage_url(self, redis_server) -> str:  # noqa: F811
        return redis_server.fresh_url()
