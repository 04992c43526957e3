"""Shared by the server's tests: a real ``diversify serve`` in a subprocess on a free loopback port,
artifacts made from arrays (no build, no kernels), and the skip-or-fail rule for the ``serve`` extra.

Without the extra the server's tests skip, except under ``DIVERSIFY_CI=1`` (``.ci/run`` installs
``.[test,integrations]``, which lists the extra's packages): there they fail.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


def need_serve() -> None:
    """Skip (fail under DIVERSIFY_CI=1) when the serve extra is not installed."""
    for module in ("starlette", "uvicorn", "httpx"):
        try:
            __import__(module)
        except ImportError:
            reason = f"the serve extra's `{module}` is not installed (pip install -e '.[serve]')"
            if os.environ.get("DIVERSIFY_CI") == "1":
                pytest.fail(f"DIVERSIFY_CI=1 and {reason}", pytrace=False)
            pytest.skip(reason)


def grouped_map(ids: list, groups: list, fingerprint: str = "serve-test"):
    """A ClusterMap whose clusters are the equal values of ``groups`` (first member represents)."""
    from diversify.artifact import ClusterMap

    first: dict = {}
    cids = np.empty(len(ids), dtype=np.int64)
    rep = np.zeros(len(ids), dtype=bool)
    for j, g in enumerate(groups):
        if g not in first:
            first[g] = j
            rep[j] = True
        cids[j] = first[g]
    n = len(ids)
    stages = np.where(rep, 0, 2).astype(np.uint8)  # every folded member joined by minhash
    return ClusterMap.from_arrays(ids, cids, rep, stages, np.zeros(n, dtype=np.uint32), config={},
                                  fingerprint=fingerprint, seed=0, hash_scheme="test", build_info={})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``python -m diversify serve SOURCE ...`` on a free loopback port, until :meth:`stop`."""

    def __init__(self, source: str, *args: str, env: Optional[dict] = None, wait: float = 60.0) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
        self.proc = subprocess.Popen([sys.executable, "-m", "diversify", "serve", source, "--port", str(self.port),
                                      *args], env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        self.started = time.perf_counter()
        self._wait(wait)

    def _wait(self, wait: float) -> None:
        import httpx

        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                out, err = self.proc.communicate()
                raise AssertionError(f"the server exited ({self.proc.returncode}): {err}")
            try:
                if httpx.get(self.url + "/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.05)
        self.stop()
        raise AssertionError("the server did not answer /healthz in time")

    def stop(self) -> tuple[int, str]:
        """SIGINT, as Ctrl-C; returns the exit status and stderr."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            _, err = self.proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        return self.proc.returncode, err
