"""A real ``redis-server`` for the index tests: one per test session, on a free loopback port, in a
temporary directory, with the append-only file on, so that a test which SIGKILLs the server and
starts it again on the same directory sees exactly what the server had acknowledged.

``redis_server`` (session fixture) yields a :class:`RedisServer`. Tests take a fresh index name (so a
fresh key prefix) each (``server.fresh_url()``), so they share the server without seeing each other's keys.
When ``redis-server`` is not installed the tests are skipped with the reason, except under
``DIVERSIFY_CI=1`` (set by ``.ci/run``), where the absence fails them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

INSTALL_HINT = "install it with `apt-get install -y redis-server` (Debian/Ubuntu)"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the server binds it next)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def require_binary(name: str) -> str:
    """The path of ``name`` on PATH; skips the test when absent (fails under DIVERSIFY_CI=1)."""
    path = shutil.which(name)
    if path is None:
        reason = f"{name} not found on PATH; {INSTALL_HINT}"
        if os.environ.get("DIVERSIFY_CI") == "1":
            pytest.fail(f"DIVERSIFY_CI=1 but {reason}", pytrace=False)
        pytest.skip(reason)
    return path


class RedisServer:
    """One ``redis-server`` process on 127.0.0.1:``port`` with its data in ``directory``."""

    def __init__(self, binary: str, directory: Path):
        self.binary = binary
        self.directory = directory
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    # ------------------------------------------------------------------ life cycle
    def start(self, timeout: float = 20.0) -> None:
        """Start (or restart, on the same port and append-only file) and wait until it answers."""
        if self.proc is not None and self.proc.poll() is None:
            return
        last = ""
        for attempt in range(3):
            log = self.directory / "redis.log"
            self.proc = subprocess.Popen(
                [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.directory),
                 "--appendonly", "yes", "--appendfsync", "everysec", "--save", "", "--daemonize", "no",
                 "--logfile", str(log), "--databases", "16"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    break
                if self._answers():
                    return
                time.sleep(0.02)
            last = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            self._terminate(signal.SIGKILL)
            if "Address already in use" in last and attempt < 2:
                self.port = free_port()  # the port was taken between free_port() and the bind
                continue
            break
        raise RuntimeError(f"redis-server did not start on 127.0.0.1:{self.port}; its log ends:\n{last}")

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                return s.recv(64).startswith(b"+PONG")
        except OSError:
            return False

    def kill(self) -> None:
        """SIGKILL the server (no shutdown save); ``start()`` brings it back on the same AOF."""
        self._terminate(signal.SIGKILL)

    def stop(self) -> None:
        self._terminate(signal.SIGTERM)

    def _terminate(self, sig: int) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=15)
        self.proc = None

    # ------------------------------------------------------------------ addresses
    def url(self, db: int = 0, index: str | None = None, user: str | None = None,
            password: str | None = None, **params: object) -> str:
        auth = ""
        if password is not None:
            auth = f"{user or ''}:{password}@"
        query = {"index": index, **params} if index is not None else dict(params)
        tail = "?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else ""
        return f"redis://{auth}127.0.0.1:{self.port}/{db}{tail}"

    def fresh_url(self, db: int = 0, **params: object) -> str:
        """The URL of an index no other test uses (a new index name, so a new key prefix)."""
        return self.url(db=db, index=f"t{uuid.uuid4().hex[:12]}", **params)

    def client(self, db: int = 0):
        import redis

        return redis.Redis(host="127.0.0.1", port=self.port, db=db, socket_connect_timeout=5)

    def add_user(self, user: str, password: str) -> None:
        """An ACL user with every permission (the default user stays password-less)."""
        c = self.client()
        try:
            c.execute_command("ACL", "SETUSER", user, "on", f">{password}", "~*", "&*", "+@all")
        finally:
            c.close()


def _require_redis() -> str:
    binary = require_binary("redis-server")
    try:
        import redis  # noqa: F401
    except ImportError:
        reason = 'redis-py not installed: pip install "diversify-retrieval[redis]"'
        if os.environ.get("DIVERSIFY_CI") == "1":
            pytest.fail(f"DIVERSIFY_CI=1 but {reason}", pytrace=False)
        pytest.skip(reason)
    return binary


@contextlib.contextmanager
def running_server() -> Iterator[RedisServer]:
    directory = Path(tempfile.mkdtemp(prefix="diversify-redis-"))
    server = RedisServer(_require_redis(), directory)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """The server the tests share (each on its own index name)."""
    with running_server() as server:
        yield server


@pytest.fixture
def own_redis_server() -> Iterator[RedisServer]:
    """A server of the test's own, for tests that kill and restart it."""
    with running_server() as server:
        yield server
