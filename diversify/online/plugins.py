"""What the framework plugins (``integrations/``) share, so each of them stays a thin adapter.

:class:`LazyDiversifier`
    The plugin's :class:`~diversify.online.Diversifier`, built from its settings on first use
    (never in a constructor: no artifact I/O there), once, thread-safely.
:func:`check_cluster_source`
    The settings name a source of cluster ids (``cluster_map`` or ``cluster_field``).
:func:`annotation`
    The ``{"cluster_id", "omitted", "omitted_ids"}`` dict each returned copy carries in its
    metadata.
:func:`serializable_cluster_map`
    A plugin's ``cluster_map`` setting as it is written to a config (a path, or a dict).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from typing import Any, Optional

from ..errors import ConfigError
from .diversifier import Diversifier
from .types import Kept

__all__ = ["LazyDiversifier", "diversifier_from", "check_cluster_source", "annotation",
           "serializable_cluster_map"]


def check_cluster_source(cluster_map: Any, cluster_field: Optional[str], *, subject: str = "document") -> None:
    """Raise :class:`~diversify.errors.ConfigError` when neither ``cluster_map`` nor ``cluster_field``
    is set: then no ``subject`` (document, node...) has a cluster and nothing would be diversified."""
    if cluster_map is None and cluster_field is None:
        raise ConfigError(
            f"`cluster_map` and `cluster_field` are both None, so no {subject} has a cluster and nothing "
            "would be diversified; got cluster_map=None, cluster_field=None. Pass cluster_map='clusters.dvf' "
            f"(from `diversify build`) or cluster_field='cluster_id' if the {subject}s' metadata carry "
            "cluster ids.")


def diversifier_from(cluster_map: Any = None, *, cluster_field: Optional[str] = None, subject: str = "document",
                     **options: Any) -> Diversifier:
    """A :class:`Diversifier` from a plugin's settings, after :func:`check_cluster_source`.

    ``options`` are the Diversifier's keyword arguments (``k``, ``max_per_cluster``,
    ``fetch_k``, ``max_rounds``, ``fold_threshold``...); ``None`` means its default.
    """
    check_cluster_source(cluster_map, cluster_field, subject=subject)
    return Diversifier(cluster_map, cluster_field=cluster_field, **options)


class LazyDiversifier:
    """A :class:`Diversifier` built on first use, once, however many threads ask at the same time.

    A plugin holds one and calls :meth:`get` with its current settings wherever it needs the
    Diversifier: the first call builds it (and loads the artifact) with
    :func:`diversifier_from`; later calls return that same instance and do not look at their
    arguments again. Copies and pickles of a ``LazyDiversifier`` start unbuilt.

    Parameters
    ----------
    subject : str
        What the plugin diversifies ("document", "node"), for the error message.

    Example
    -------
    >>> lazy = LazyDiversifier("node")
    >>> lazy.built
    False
    >>> d = lazy.get({"a": 0, "b": 0}, max_per_cluster=1)
    >>> lazy.built and lazy.get({"a": 0, "b": 0}, max_per_cluster=1) is d
    True
    """

    __slots__ = ("subject", "_lock", "_value")

    def __init__(self, subject: str = "document") -> None:
        self.subject = subject
        self._lock = threading.Lock()
        self._value: Optional[Diversifier] = None

    @property
    def built(self) -> bool:
        """Has :meth:`get` built the Diversifier yet?"""
        return self._value is not None

    def get(self, cluster_map: Any = None, *, cluster_field: Optional[str] = None, **options: Any) -> Diversifier:
        """The Diversifier; built from these arguments (see :func:`diversifier_from`) on the first call."""
        d = self._value
        if d is None:
            with self._lock:
                d = self._value
                if d is None:
                    d = diversifier_from(cluster_map, cluster_field=cluster_field, subject=self.subject, **options)
                    self._value = d
        return d

    def __reduce__(self) -> tuple:
        return (LazyDiversifier, (self.subject,))

    def __repr__(self) -> str:
        return f"LazyDiversifier(subject={self.subject!r}, built={self.built})"


def annotation(kept: Kept, *, with_score: bool = False) -> dict[str, Any]:
    """What a plugin writes into a returned copy's metadata for one kept hit.

    ``{"cluster_id", "omitted", "omitted_ids"}`` (plus ``"score"``, the hit's score, with
    ``with_score=True``): its cluster, how many similar results were folded into it, and their ids.
    """
    info: dict[str, Any] = {
        "cluster_id": kept.cluster_id,
        "omitted": kept.omitted,
        "omitted_ids": [f.id for f in kept.folded],
    }
    if with_score:
        info["score"] = kept.hit.score
    return info


def serializable_cluster_map(cluster_map: Any, *, str_keys: bool = False) -> Any:
    """A plugin's ``cluster_map`` setting as it goes into a config: None, a path string, or a dict.

    A loaded ClusterMap is referred to by the file it was loaded from (``.path``); one built in
    memory has none and raises :class:`~diversify.errors.ConfigError`. ``str_keys`` turns a
    mapping's keys into strings (for JSON).
    """
    if cluster_map is None or isinstance(cluster_map, str):
        return cluster_map
    if isinstance(cluster_map, os.PathLike):
        return os.fspath(cluster_map)
    if isinstance(cluster_map, Mapping):
        return {str(k): v for k, v in cluster_map.items()} if str_keys else dict(cluster_map)
    path = getattr(cluster_map, "path", None)
    if path is None:
        raise ConfigError(
            "`cluster_map` is an in-memory ClusterMap without a file, so it cannot be serialized; got "
            f"{type(cluster_map).__name__} with path=None. Save it (cluster_map.save('clusters.dvf')) and pass "
            "the path.")
    return os.fspath(path) if isinstance(path, os.PathLike) else str(path)
