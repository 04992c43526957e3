"""Throw-away local servers for the suites that need one: PostgreSQL 15, redis-server, Chroma.

Each starts on 127.0.0.1 and a free port, in a new temporary directory, and is stopped (and its
directory removed) by the suite that started it. The benchmarks keep their own launchers so that
nothing here imports the test suite; a missing binary raises :class:`ServerUnavailable`, which a
suite records as "skipped" with the reason.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote


class ServerUnavailable(RuntimeError):
    """The server cannot be started on this machine (binary or client missing)."""


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stop_process(proc: subprocess.Popen | None, sig: int = signal.SIGTERM) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=20)


# --------------------------------------------------------------------------- PostgreSQL

PG_BIN = Path(os.environ.get("DIVERSIFY_PG_BIN", "/usr/lib/postgresql/15/bin"))
PG_ROLE, PG_PASSWORD = "diversify", "bench-password"
_HBA = "local all all trust\nhost all all 127.0.0.1/32 scram-sha-256\n"
_CONF = ("\nlisten_addresses = '127.0.0.1'\nport = {port}\nunix_socket_directories = '{sock}'\n"
         "max_connections = 200\nlogging_collector = off\nlog_min_messages = warning\n")


def _run_as(owner: pwd.struct_passwd | None) -> list[str]:
    """PostgreSQL refuses to run as root: as root, run it as the ``postgres`` user."""
    return [] if owner is None else ["setpriv", f"--reuid={owner.pw_uid}", f"--regid={owner.pw_gid}",
                                     "--init-groups", "--"]


@dataclass
class PostgresServer:
    """A running PostgreSQL in ``root`` (data in ``root/data``, socket in ``root``)."""

    root: Path
    port: int
    owner: pwd.struct_passwd | None
    databases: list[str] = field(default_factory=list)

    def _pg_ctl(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*_run_as(self.owner), str(PG_BIN / "pg_ctl"), "-D", str(self.root / "data"), *args],
                              capture_output=True, text=True, timeout=120)

    def admin(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(f"host={self.root} port={self.port} user=postgres dbname=postgres",
                             autocommit=True, connect_timeout=10) as conn:
            conn.execute(sql)

    def new_database(self) -> str:
        """An empty database owned by the password role; its ``postgresql://`` URL over TCP."""
        name = f"bench{os.getpid()}_{len(self.databases)}"
        self.admin(f'CREATE DATABASE "{name}" OWNER "{PG_ROLE}" TEMPLATE template0')
        self.databases.append(name)
        return f"postgresql://{PG_ROLE}:{quote(PG_PASSWORD, safe='')}@127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        """Stop the server and delete its directory."""
        if (self.root / "data" / "postmaster.pid").exists():
            self._pg_ctl("-m", "fast", "-w", "-t", "60", "stop")
        shutil.rmtree(self.root, ignore_errors=True)


def _postgres_owner() -> pwd.struct_passwd | None:
    for tool in ("initdb", "pg_ctl", "postgres"):
        if not (PG_BIN / tool).exists():
            raise ServerUnavailable(f"{PG_BIN / tool} not found: install PostgreSQL 15 or set DIVERSIFY_PG_BIN")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        raise ServerUnavailable("the PostgreSQL client psycopg is not installed") from None
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam("postgres")
    except KeyError:
        raise ServerUnavailable("running as root and there is no `postgres` user to run PostgreSQL as") from None


def start_postgres(settings: dict[str, str] | None = None) -> PostgresServer:
    """initdb + start a PostgreSQL; ``settings`` are extra postgresql.conf lines. The caller stops it."""
    owner = _postgres_owner()
    root = Path(tempfile.mkdtemp(prefix="diversify-bench-pg-"))
    if owner is not None:
        os.chown(root, owner.pw_uid, owner.pw_gid)
    server = PostgresServer(root=root, port=free_port(), owner=owner)
    try:
        init = subprocess.run([*_run_as(owner), str(PG_BIN / "initdb"), "-D", str(root / "data"), "-U", "postgres",
                               "-A", "trust", "--no-sync", "-E", "UTF8", "--no-locale"],
                              capture_output=True, text=True, timeout=120)
        if init.returncode != 0:
            raise RuntimeError(f"initdb failed (exit {init.returncode}):\n{init.stdout}{init.stderr}")
        (root / "data" / "pg_hba.conf").write_text(_HBA)
        with open(root / "data" / "postgresql.conf", "a") as f:
            f.write(_CONF.format(port=server.port, sock=root))
            f.writelines(f"{k} = {v}\n" for k, v in (settings or {}).items())
        r = server._pg_ctl("-l", str(root / "log"), "-w", "-t", "60", "start")
        if r.returncode != 0:
            raise RuntimeError(f"pg_ctl start failed (exit {r.returncode}): {r.stdout}{r.stderr}")
        server.admin(f"CREATE ROLE \"{PG_ROLE}\" LOGIN CREATEDB PASSWORD '{PG_PASSWORD}'")
        return server
    except BaseException:
        server.stop()
        raise


# --------------------------------------------------------------------------- Redis

class RedisServer:
    """One ``redis-server`` on 127.0.0.1:``port`` with its append-only file in ``directory``."""

    def __init__(self, binary: str, directory: Path):
        self.binary, self.directory, self.port = binary, directory, free_port()
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 20.0) -> None:
        """Start (or restart on the same port) and wait until it answers PING."""
        log = self.directory / "redis.log"
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.directory),
             "--appendonly", "yes", "--appendfsync", "everysec", "--save", "", "--daemonize", "no",
             "--logfile", str(log)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.proc.poll() is None:
            if self._answers():
                return
            time.sleep(0.02)
        self.stop()
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        raise RuntimeError(f"redis-server did not start on 127.0.0.1:{self.port}; its log ends:\n{tail}")

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                return s.recv(64).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        _stop_process(self.proc)
        self.proc = None


# --------------------------------------------------------------------------- Chroma

@dataclass
class ChromaServer:
    host: str
    port: int
    process: subprocess.Popen

    def heartbeat(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://{self.host}:{self.port}/api/v2/heartbeat", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def stop(self) -> None:
        _stop_process(self.process)


def start_chroma(data_dir: Path, timeout: float = 90.0) -> ChromaServer:
    """``chroma run --path data_dir`` on 127.0.0.1 and a free port, once it answers its heartbeat."""
    beside = Path(sys.executable).with_name("chroma")
    cli = str(beside) if beside.exists() else shutil.which("chroma")
    if cli is None:
        raise ServerUnavailable("the `chroma` command (installed with chromadb) was not found")
    data_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    with open(data_dir / "server.log", "wb") as out:
        proc = subprocess.Popen([cli, "run", "--path", str(data_dir / "db"), "--host", "127.0.0.1", "--port",
                                 str(port)], stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    server = ChromaServer("127.0.0.1", port, proc)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if server.heartbeat():
            return server
        time.sleep(0.25)
    server.stop()
    tail = (data_dir / "server.log").read_text(errors="replace")[-2000:]
    raise ServerUnavailable(f"`chroma run` did not answer on 127.0.0.1:{port} within {timeout:.0f} s; "
                            f"its log ends with:\n{tail}")
