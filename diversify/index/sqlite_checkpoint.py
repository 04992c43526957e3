"""Checkpoints of the SQLite backend's write-ahead logs, off the writer's path.

After each commit the writer asks :data:`CHECKPOINTER` (one daemon thread per process) for a PASSIVE
checkpoint of its file, which then overlaps the next batch's work instead of lengthening the commit;
see :mod:`diversify.index.sqlite`.
"""

from __future__ import annotations

import os
import queue
import sqlite3
import threading
import urllib.parse
from typing import Optional

__all__ = ["CHECKPOINTER"]


class _Checkpointer:
    """One daemon thread per process: PASSIVE checkpoints of the files whose commits asked for one.

    Each checkpoint opens its own short-lived connection, read-write but never creating the file (a
    connection kept per file would outlive the indexes); a file asked for twice before its turn is
    checkpointed once. Errors are ignored: the writer's automatic checkpoint is the backstop.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[str, list[threading.Event]] = {}  # path -> events to set once it is done
        self._wake: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: Optional[threading.Thread] = None
        self._pid = 0
        self.done = 0  # checkpoints run in this process

    def request(self, path: str, done: Optional[threading.Event] = None) -> None:
        with self._lock:
            if self._thread is None or self._pid != os.getpid():  # first use, or a forked child
                self._pending = {}
                self._wake = queue.SimpleQueue()
                self._pid = os.getpid()
                self._thread = threading.Thread(target=self._run, name="diversify-sqlite-checkpoint", daemon=True)
                self._thread.start()
            waiters = self._pending.get(path)
            if waiters is None:
                self._pending[path] = [done] if done is not None else []
                self._wake.put(None)
            elif done is not None:
                waiters.append(done)

    def checkpoint_now(self, path: str, timeout: float = 60.0) -> bool:
        """Ask for a checkpoint of ``path`` and wait for it; False if it did not finish in ``timeout``."""
        done = threading.Event()
        self.request(path, done)
        return done.wait(timeout)

    def _run(self) -> None:
        while True:
            self._wake.get()
            with self._lock:
                if not self._pending:
                    continue
                path = next(iter(self._pending))
                waiters = self._pending.pop(path)
            try:
                uri = "file:" + urllib.parse.quote(path) + "?mode=rw"
                con = sqlite3.connect(uri, uri=True, timeout=0, isolation_level=None, check_same_thread=False)
                try:
                    con.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                    self.done += 1
                finally:
                    con.close()
            except Exception:  # noqa: BLE001 - the writer's automatic checkpoint is the backstop
                pass
            for event in waiters:
                event.set()


#: the checkpointer of this process
CHECKPOINTER = _Checkpointer()
