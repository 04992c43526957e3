"""A real Chroma server for the async tests: ``chroma run`` (the CLI chromadb ships) on loopback.

:func:`start` launches it on a free port with its data in a temporary directory and waits for
its heartbeat; :meth:`ChromaServer.stop` ends it (and only it). :meth:`ChromaServer.paused`
freezes the server process (SIGSTOP / SIGCONT) for a while, so a test can hold a store call in
flight for a known time: a client that blocks the event loop is then caught by a heartbeat.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

#: the server starts in ~6 s on an idle machine; a loaded one is given much longer
START_TIMEOUT_S = 90.0


class ServerUnavailable(RuntimeError):
    """The server could not be started here (no CLI, no loopback port)."""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cli() -> Optional[str]:
    beside = Path(sys.executable).with_name("chroma")
    return str(beside) if beside.exists() else shutil.which("chroma")


@dataclass
class ChromaServer:
    host: str
    port: int
    process: subprocess.Popen
    log: Path

    def alive(self) -> bool:
        return self.process.poll() is None

    def heartbeat(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://{self.host}:{self.port}/api/v2/heartbeat", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    @contextlib.contextmanager
    def paused(self, seconds: float) -> Iterator[None]:
        """Freeze the server for ``seconds`` from a timer thread (it resumes even when the
        caller's thread, or its event loop, is blocked), and make sure it runs again after."""
        os.kill(self.process.pid, signal.SIGSTOP)
        timer = threading.Timer(seconds, os.kill, (self.process.pid, signal.SIGCONT))
        timer.start()
        try:
            yield
        finally:
            timer.join()
            os.kill(self.process.pid, signal.SIGCONT)

    def stop(self) -> None:
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, signal.SIGCONT)
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=20)


def start(data_dir: Path) -> ChromaServer:
    """Start ``chroma run --path data_dir`` on 127.0.0.1 and a free port; raise
    :class:`ServerUnavailable` (with the server's log) when it does not answer in time."""
    cli = _cli()
    if cli is None:
        raise ServerUnavailable("the `chroma` command (installed with chromadb) was not found")
    data_dir.mkdir(parents=True, exist_ok=True)
    log = data_dir / "server.log"
    port = _free_port()
    with open(log, "wb") as out:
        proc = subprocess.Popen([cli, "run", "--path", str(data_dir / "db"), "--host", "127.0.0.1", "--port",
                                 str(port)], stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    server = ChromaServer("127.0.0.1", port, proc, log)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if not server.alive():
            break
        if server.heartbeat():
            return server
        time.sleep(0.25)
    server.stop()
    tail = log.read_text(errors="replace")[-2000:]
    raise ServerUnavailable(f"`chroma run` did not answer on 127.0.0.1:{port} within {START_TIMEOUT_S:.0f} s "
                            f"(exit code {proc.poll()}); its log ends with:\n{tail}")
