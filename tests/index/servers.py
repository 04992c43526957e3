"""Real database servers for the index tests, started by the test session itself.

``python -m pytest`` behaves the same on a laptop and in CI: the session fixtures start the server
on a free loopback port with a temporary data directory and remove both at the end of the session,
also when a test fails or the session is interrupted (the fixture's ``finally`` plus an ``atexit``
hook), or killed (a detached watchdog stops the server once the session's process is gone). When a server binary is absent the tests that need it are skipped with the reason, except
under ``DIVERSIFY_CI=1`` (set by ``.ci/run``), where an absent binary fails the session: CI must not
pass by skipping.

PostgreSQL 15 (:func:`postgres_server`): ``initdb`` + ``pg_ctl`` from ``/usr/lib/postgresql/15/bin``
(override with ``DIVERSIFY_PG_BIN``). PostgreSQL refuses to run as root; when the tests run as root
the server runs as the ``postgres`` user (``setpriv``), in a data directory that user owns. The
server is tuned for tests, not for durability (``fsync=off``): it starts in about a second.
The superuser connects over the Unix socket in the temporary directory only; tests connect over TCP
as a password role, like an application would.
"""

from __future__ import annotations

import atexit
import importlib.util
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn
from urllib.parse import quote

import pytest

__all__ = ["in_ci", "ServerUnavailable", "skip_or_fail", "find_binary", "require_binary", "free_port", "PostgresServer", "start_postgres", "postgres_server",
           "PG_PASSWORD"]

#: the test role's password; tests check that no error message ever shows it
PG_PASSWORD = "pg-Secret-7f3a"
PG_ROLE = "diversify"


def in_ci() -> bool:
    """True under ``DIVERSIFY_CI=1``: an absent server binary then fails instead of skipping."""
    return os.environ.get("DIVERSIFY_CI") == "1"


class ServerUnavailable(RuntimeError):
    """A server binary, its user or its client library is absent; the message says which and the fix.
    The fixtures turn it into a skip (a fail under DIVERSIFY_CI=1); benchmarks report it."""


def skip_or_fail(reason: str) -> NoReturn:
    """pytest.skip with ``reason``, or pytest.fail under DIVERSIFY_CI=1 (CI must not pass by skipping)."""
    if in_ci():
        pytest.fail(f"DIVERSIFY_CI=1 and {reason}", pytrace=False)
    pytest.skip(reason)


def find_binary(name: str, *, dirs: Sequence[Path] = (), fix: str = "") -> str:
    """The path of executable ``name`` (in ``dirs``, else on PATH); ServerUnavailable if absent."""
    for d in dirs:
        cand = Path(d) / name
        if cand.is_file() and os.access(cand, os.X_OK):
            return str(cand)
    found = None if dirs else shutil.which(name)
    if found:
        return found
    where = ", ".join(str(d) for d in dirs) if dirs else "PATH"
    raise ServerUnavailable(f"{name} not found in {where}" + (f"; {fix}" if fix else ""))


def require_binary(name: str, *, dirs: Sequence[Path] = (), fix: str = "") -> str:
    """:func:`find_binary` inside a test: skip (outside CI) / fail (in CI) with the reason if absent."""
    try:
        return find_binary(name, dirs=dirs, fix=fix)
    except ServerUnavailable as exc:
        skip_or_fail(str(exc))


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the caller retries if another process takes it first)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run_as(user: pwd.struct_passwd | None) -> list[str]:
    if user is None:
        return []
    return ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--init-groups", "--"]


# --------------------------------------------------------------------------- PostgreSQL

PG_BIN = Path(os.environ.get("DIVERSIFY_PG_BIN", "/usr/lib/postgresql/15/bin"))
PG_FIX = ("install PostgreSQL 15 (Debian: apt-get install postgresql-15) or set DIVERSIFY_PG_BIN "
          "to the directory holding initdb and pg_ctl")

_HBA = """\
# superuser: Unix socket in the temporary directory only; everyone else: TCP loopback with a password
local all all trust
host all all 127.0.0.1/32 scram-sha-256
"""

_CONF = """
listen_addresses = '127.0.0.1'
port = {port}
unix_socket_directories = '{sock}'
# fsync off: the WAL reaches the OS page cache at each COMMIT, which survives a crash of the server
# (the tests crash the server, never the machine); synchronous_commit stays on for the same reason
fsync = off
full_page_writes = off
max_connections = 200
shared_buffers = 64MB
logging_collector = off
log_min_messages = warning
"""


#: a detached process that stops the server and removes its directory when the process that started it
#: is gone without cleaning up (SIGTERM / SIGKILL of the test session skip ``finally`` and ``atexit``)
_WATCHDOG = r"""
import os, shutil, subprocess, sys, time
parent, root, stop = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
while os.path.exists(root):
    try:
        os.kill(parent, 0)
    except ProcessLookupError:
        subprocess.run(stop, capture_output=True, timeout=120)
        shutil.rmtree(root, ignore_errors=True)
        break
    except PermissionError:
        pass
    time.sleep(0.5)
"""


@dataclass
class PostgresServer:
    """A running PostgreSQL in ``root`` (data in ``root/data``, socket in ``root``, log ``root/log``)."""

    root: Path
    port: int
    owner: pwd.struct_passwd | None  # the user the server runs as when the tests run as root
    password: str = PG_PASSWORD
    role: str = PG_ROLE
    _names: Iterator[int] = field(default_factory=itertools.count)
    _shared: str | None = None

    # ---- addresses
    def url(self, dbname: str = "postgres", *, user: str | None = None, password: str | None = None) -> str:
        """A ``postgresql://`` URL over TCP for the password role (or ``user``/``password``)."""
        user = self.role if user is None else user
        password = self.password if password is None else password
        return f"postgresql://{quote(user, safe='')}:{quote(password, safe='')}@127.0.0.1:{self.port}/{dbname}"

    def admin_conninfo(self, dbname: str = "postgres") -> str:
        return f"host={self.root} port={self.port} user=postgres dbname={dbname}"

    def admin(self, sql: str, params: tuple | None = None, *, dbname: str = "postgres") -> list[tuple]:
        """Run one statement as the superuser (autocommit) and return its rows (if any)."""
        import psycopg

        with psycopg.connect(self.admin_conninfo(dbname), autocommit=True, connect_timeout=10) as conn:
            cur = conn.execute(sql, params)
            return cur.fetchall() if cur.description else []

    def new_database(self) -> str:
        """Create an empty database owned by the test role; return its URL (one per test: no leaks)."""
        name = f"t{os.getpid()}_{next(self._names)}"
        self.admin(f'CREATE DATABASE "{name}" OWNER "{self.role}" TEMPLATE template0')
        return self.url(name)

    def new_index(self) -> str:
        """The URL of a new, empty index (``?index=`` name) in the session's shared database: cheaper
        than a database per test, and exercises several indexes side by side in one database."""
        if self._shared is None:
            self._shared = self.new_database()
        return f"{self._shared}?index=t{os.getpid()}_{next(self._names)}"

    # ---- life cycle
    def _pg_ctl(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        cmd = [*_run_as(self.owner), str(PG_BIN / "pg_ctl"), "-D", str(self.root / "data"), *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)

    def start(self) -> None:
        """Start (or restart) the server and wait until it accepts connections."""
        r = self._pg_ctl("-l", str(self.root / "log"), "-w", "-t", "60", "start")
        if r.returncode != 0:
            raise RuntimeError(f"pg_ctl start failed (exit {r.returncode}): {r.stdout}{r.stderr}\n"
                               f"server log:\n{self.log_tail()}")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server; ``mode='immediate'`` is a crash (no checkpoint, clients cut off)."""
        self._pg_ctl("-m", mode, "-w", "-t", "60", "stop")

    def is_running(self) -> bool:
        return self._pg_ctl("status").returncode == 0

    def log_tail(self, n: int = 30) -> str:
        try:
            return "\n".join((self.root / "log").read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no log)"

    def terminate_backends(self, application_name: str) -> int:
        """``pg_terminate_backend`` every connection with that application_name; how many were cut."""
        rows = self.admin("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
                          (application_name,))
        return sum(1 for (ok,) in rows if ok)


def start_postgres(settings: dict[str, str] | None = None) -> PostgresServer:
    """initdb + start a PostgreSQL in a new temporary directory; the caller stops it
    (:func:`stop_postgres`). ``settings`` override postgresql.conf lines (a benchmark turns fsync back
    on). Raises ServerUnavailable when the binaries or the client are absent."""
    for tool in ("initdb", "pg_ctl", "postgres"):
        find_binary(tool, dirs=[PG_BIN], fix=PG_FIX)
    if importlib.util.find_spec("psycopg") is None:
        raise ServerUnavailable("the PostgreSQL client psycopg is not installed "
                                "(pip install 'diversify-retrieval[postgres]')")
    owner = None
    if os.geteuid() == 0:
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            raise ServerUnavailable("running as root, PostgreSQL refuses root and there is no `postgres` user "
                                    "to run it as (create one, or run as an ordinary user)") from None
        find_binary("setpriv", fix="running as root, the server is started as the postgres user with setpriv "
                    "(util-linux)")
    # not under pytest's tmp_path: its base directory is private to root and the server user must reach it
    root = Path(tempfile.mkdtemp(prefix="diversify-pg-"))
    try:
        if owner is not None:
            os.chown(root, owner.pw_uid, owner.pw_gid)
        init = subprocess.run(
            [*_run_as(owner), str(PG_BIN / "initdb"), "-D", str(root / "data"), "-U", "postgres", "-A", "trust",
             "--no-sync", "--no-instructions", "-E", "UTF8", "--no-locale"],
            capture_output=True, text=True, timeout=120)
        if init.returncode != 0:
            raise RuntimeError(f"initdb failed (exit {init.returncode}):\n{init.stdout}{init.stderr}")
        (root / "data" / "pg_hba.conf").write_text(_HBA)
        last: Exception | None = None
        for _ in range(5):  # another process may take the free port between the probe and the bind
            port = free_port()
            with open(root / "data" / "postgresql.conf", "a") as f:
                f.write(_CONF.format(port=port, sock=root))
                f.writelines(f"{k} = {v}\n" for k, v in (settings or {}).items())
            server = PostgresServer(root=root, port=port, owner=owner)
            try:
                server.start()
                break
            except RuntimeError as exc:
                last = exc
        else:
            raise RuntimeError(f"PostgreSQL did not start on any of 5 free ports: {last}")
        server.admin(f"CREATE ROLE \"{PG_ROLE}\" LOGIN CREATEDB PASSWORD '{PG_PASSWORD}'")
        stop = [*_run_as(owner), str(PG_BIN / "pg_ctl"), "-D", str(root / "data"), "-m", "immediate", "-w", "stop"]
        subprocess.Popen([sys.executable, "-c", _WATCHDOG, str(os.getpid()), str(root), *stop],
                         start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)  # ends by itself once the directory is removed
        return server
    except BaseException:
        _remove(root, owner)
        raise


def _remove(root: Path, owner: pwd.struct_passwd | None) -> None:
    if (root / "data" / "postmaster.pid").exists():
        subprocess.run([*_run_as(owner), str(PG_BIN / "pg_ctl"), "-D", str(root / "data"), "-m", "immediate",
                        "-w", "-t", "30", "stop"], capture_output=True, timeout=60)
        for _ in range(100):  # pg_ctl -w returns once the pid file is gone; be sure before deleting
            if not (root / "data" / "postmaster.pid").exists():
                break
            time.sleep(0.05)
    shutil.rmtree(root, ignore_errors=True)


def stop_postgres(server: PostgresServer, creator: int | None = None) -> None:
    """Stop and delete the server (in the process that started it only: not in a forked child)."""
    if creator is None or creator == os.getpid():
        _remove(server.root, server.owner)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One PostgreSQL 15 for the session (started on first use, stopped and deleted at the end)."""
    try:
        server = start_postgres()
    except ServerUnavailable as exc:
        skip_or_fail(str(exc))
    atexit.register(stop_postgres, server, os.getpid())  # an interrupted session still cleans up
    try:
        yield server
    finally:
        atexit.unregister(stop_postgres)
        stop_postgres(server)


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """A URL to a fresh, empty database of the session's server (one per test)."""
    return postgres_server.new_database()
