"""What a server answers from: one immutable :class:`Served` snapshot, swapped whole on reload.

``SOURCE`` is an artifact path or a live-index URL (``sqlite:///...``, ``postgresql://...``,
``redis://...``). For an artifact, a watcher thread polls the file's identity (device, inode, size,
modification time); when the file was replaced it loads the new artifact completely, then assigns
one attribute. A request reads :meth:`ServedSource.current` once and answers from that snapshot to
its end, so it sees the old artifact or the new one, never a mix. A replaced file that fails to
load is counted and logged; the last good artifact keeps serving.

A live index is opened once per thread (:class:`ThreadIndex`): an :class:`~diversify.Index` is
used by one thread at a time, and the server answers index requests from a pool of threads.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Optional

from ..errors import ArtifactError

__all__ = ["Served", "ServedSource", "ThreadIndex", "is_index_url"]

log = logging.getLogger("diversify")

_INDEX_SCHEMES = ("sqlite://", "postgresql://", "postgres://", "redis://", "rediss://")


def is_index_url(source: str) -> bool:
    """Is ``source`` a live-index URL (else it names an artifact file)?"""
    return source.lower().startswith(_INDEX_SCHEMES)


@dataclass(frozen=True)
class Served:
    """The loaded source a request answers from (what ``get_served()`` returns)."""

    #: the loaded artifact (a ClusterMap), None for a live index
    cluster_map: Any
    #: the live index (a :class:`ThreadIndex`, which has the methods of an Index), None for an artifact
    index: Any
    #: the ``--corpus`` path, or None
    corpus_path: Optional[str]
    #: bumps on every reload (1 for the first load)
    generation: int
    #: the artifact's config fingerprint (the index's, for a live index)
    fingerprint: str = ""


class ThreadIndex:
    """An :class:`~diversify.Index` per thread, opened on a thread's first use; attribute access
    goes to the calling thread's one (``add``, ``query``, ``delete``, ``members``, ``stats``...)."""

    def __init__(self, url: str) -> None:
        from ..index import Index

        self._url = url
        self._local = threading.local()
        self._lock = threading.Lock()
        self._all: list = []
        first = Index(url, create=False)  # fails at start when there is no index there
        self._local.index = first
        self._all.append(first)
        self.config, self.meta, self.url = first.config, first.meta, first.url

    def _mine(self) -> Any:
        idx = getattr(self._local, "index", None)
        if idx is None:
            from ..index import Index

            idx = self._local.index = Index(self._url, create=False)
            with self._lock:
                self._all.append(idx)
        return idx

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._mine(), name)

    def close(self) -> None:
        with self._lock:
            opened, self._all = self._all, []
        for idx in opened:
            idx.close()


def _identity(path: str) -> Optional[tuple]:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


class ServedSource:
    """The source of one server: :meth:`current` is the snapshot to answer from.

    ``on_reload(ok)`` is called after each reload attempt (the metrics count them).
    """

    def __init__(self, source: str, *, corpus_path: Optional[str] = None, poll_interval: float = 0.5,
                 on_reload: Optional[Callable[[bool], None]] = None) -> None:
        self.source = source
        self._corpus = corpus_path
        self._poll = poll_interval
        self._on_reload = on_reload
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        if is_index_url(source):
            index = ThreadIndex(source)
            self.kind = "index"
            self._current = Served(None, index, corpus_path, 1, index.meta.fingerprint)
            self._seen: Optional[tuple] = None
        else:
            self.kind = "artifact"
            self._seen = _identity(source)
            cm = self._load()
            self._current = Served(cm, None, corpus_path, 1, cm.fingerprint)

    def _load(self) -> Any:
        from ..artifact import load

        return load(self.source)

    def current(self) -> Served:
        """The snapshot to answer from (read it once per request)."""
        return self._current

    def check(self) -> bool:
        """Reload when the file was replaced since the last look; True when a new artifact now serves."""
        if self.kind != "artifact":
            return False
        seen = _identity(self.source)
        if seen is None or seen == self._seen:
            return False
        self._seen = seen
        try:
            cm = self._load()
        except (ArtifactError, OSError, ValueError, MemoryError) as exc:
            log.warning("diversify serve: the replaced artifact %s did not load (%s); the last good one keeps "
                        "serving", self.source, exc)
            if self._on_reload is not None:
                self._on_reload(False)
            return False
        old = self._current
        self._current = Served(cm, None, self._corpus, old.generation + 1, cm.fingerprint)
        if self._on_reload is not None:
            self._on_reload(True)
        return True

    def start(self) -> None:
        """Start watching the artifact file (nothing to watch for a live index)."""
        if self.kind != "artifact" or self._thread is not None or self._poll <= 0:
            return
        self._thread = threading.Thread(target=self._watch, name="diversify-serve-reload", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.wait(self._poll):
            try:
                self.check()
            except Exception:  # never let the watcher die: the next poll tries again
                log.exception("diversify serve: checking %s for a new artifact failed", self.source)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if self._current.index is not None:
            self._current.index.close()
