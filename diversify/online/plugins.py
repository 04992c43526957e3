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
    A plugin's ``cluster_map`` setting as it is written to a config: a path, a dict with string
    keys, or a list of ``[id, cluster_id]`` pairs when some ids are not strings.
:func:`cluster_map_setting`
    The inverse: a setting read back from a config (pairs become a dict again).
:func:`check_settings`
    Construction-time validation of a plugin's diversification settings (``k``, ``fetch_k``,
    ``max_rounds``...), with the Diversifier's own messages, without loading the artifact.
:func:`check_arguments`, :func:`take_deprecated`
    Refuse unknown keyword arguments (naming the close matches), and accept an old argument name
    with a :class:`DeprecationWarning`.
:func:`fetched_once`
    The Result of a fixed list that one call of a retriever returned (``backend_calls == 1``).
"""

from __future__ import annotations

import difflib
import os
import threading
import warnings
from collections.abc import Iterable, Mapping
from typing import Any, Optional

import numpy as np

from ..errors import ConfigError
from .budget import MAX_EXCLUDE_MEMBERS
from .checks import check_options
from .diversifier import Diversifier
from .types import Kept, Result

__all__ = ["LazyDiversifier", "diversifier_from", "check_cluster_source", "annotation",
           "serializable_cluster_map", "cluster_map_setting", "check_settings", "check_arguments",
           "take_deprecated", "fetched_once"]


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


def _plain(value: Any) -> Any:
    """A numpy scalar as the Python int / float / str it holds (configs take only plain types)."""
    return value.item() if isinstance(value, np.generic) else value


def serializable_cluster_map(cluster_map: Any, *, str_keys: Optional[bool] = None) -> Any:
    """A plugin's ``cluster_map`` setting as it goes into a config (YAML, JSON).

    None and path strings stay as they are; a path-like becomes a string. A mapping whose ids are
    all strings becomes a plain dict; one with other ids (ints: a ``meta`` field, a store's
    integer ids) becomes a list of ``[id, cluster_id]`` pairs, because YAML and JSON configs take
    only string keys and turning ``1`` into ``"1"`` would stop it from matching the documents'
    id ``1`` after loading. :func:`cluster_map_setting` reads either form back. A loaded
    ClusterMap is referred to by the file it was loaded from (``.path``); one built in memory has
    none and raises :class:`~diversify.errors.ConfigError`.

    ``str_keys`` is deprecated and has no effect: non-string ids are always written as pairs.
    """
    if str_keys is not None:
        warnings.warn("serializable_cluster_map(str_keys=...) is deprecated and has no effect: a mapping "
                      "with non-string ids is written as [id, cluster_id] pairs, which keep the id types.",
                      DeprecationWarning, stacklevel=2)
    if cluster_map is None or isinstance(cluster_map, str):
        return cluster_map
    if isinstance(cluster_map, os.PathLike):
        return os.fspath(cluster_map)
    if isinstance(cluster_map, Mapping):
        items = [(_plain(k), _plain(v)) for k, v in cluster_map.items()]
        if all(isinstance(k, str) for k, _ in items):
            return dict(items)
        return [[k, v] for k, v in items]
    path = getattr(cluster_map, "path", None)
    if path is None:
        raise ConfigError(
            "`cluster_map` is an in-memory ClusterMap without a file, so it cannot be serialized; got "
            f"{type(cluster_map).__name__} with path=None. Save it (cluster_map.save('clusters.dvf')) and pass "
            "the path.")
    return os.fspath(path) if isinstance(path, os.PathLike) else str(path)


def cluster_map_setting(value: Any, *, name: str = "cluster_map") -> Any:
    """A ``cluster_map`` setting as given or read back from a config: a list of ``[id, cluster_id]``
    pairs (what :func:`serializable_cluster_map` writes for non-string ids) becomes a dict;
    anything else is returned unchanged. Raises :class:`~diversify.errors.ConfigError` for a list
    that is not made of pairs or repeats an id."""
    if not isinstance(value, (list, tuple)):
        return value
    out: dict = {}
    for j, pair in enumerate(value):
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise ConfigError(f"`{name}` given as a list must hold [id, cluster_id] pairs; item {j} is {pair!r}. "
                              "Pass a {id: cluster_id} dict, a list of pairs, or the path of an artifact.")
        key, cid = pair
        try:
            hash(key)
        except TypeError:
            raise ConfigError(f"`{name}` item {j} has the id {key!r}, which cannot be an id (ids are strings or "
                              "ints). Rebuild the mapping with string or int ids.") from None
        if key in out:
            raise ConfigError(f"`{name}` lists id {key!r} twice (items of the pair list must have distinct ids); "
                              "keep one [id, cluster_id] pair per id.")
        out[key] = cid
    return out


def check_settings(cluster_map: Any = None, *, cluster_field: Optional[str] = None, subject: str = "document",
                   k: Any = 10, max_per_cluster: Any = 1, fetch_k: Any = None, max_rounds: Any = 3,
                   fold_threshold: Any = None, fold_text_threshold: Any = None, max_fetch_k: Any = None,
                   max_exclude_members: Any = MAX_EXCLUDE_MEMBERS, unknown: Any = "own",
                   on_error: Any = "raise") -> None:
    """Validate a plugin's settings in its constructor, the way :class:`Diversifier` will.

    :func:`check_cluster_source`, then the Diversifier's own checks of ``k``, ``max_per_cluster``,
    ``fetch_k``, ``max_rounds``... (each :class:`~diversify.errors.ConfigError` names the
    parameter, the rule, the value and the fix). Nothing is loaded: the artifact is still read on
    first use.
    """
    check_cluster_source(cluster_map, cluster_field, subject=subject)
    check_options(k=k, max_per_cluster=max_per_cluster, fetch_k=fetch_k, max_fetch_k=max_fetch_k,
                  max_rounds=max_rounds, max_exclude_members=max_exclude_members, unknown=unknown,
                  fold_threshold=fold_threshold, fold_text_threshold=fold_text_threshold,
                  cluster_field=cluster_field, on_error=on_error)


def check_arguments(owner: str, given: Iterable[str], accepted: Iterable[str], *,
                    hints: Optional[Mapping[str, str]] = None) -> None:
    """Raise :class:`~diversify.errors.ConfigError` when ``given`` holds a name ``owner`` does not take.

    Frameworks' pydantic models ignore unknown keyword arguments by default, so a mistyped
    ``DiversifyCompressor(k=3)`` would silently keep its default; the plugins call this first.
    ``hints`` maps a known wrong name to the right one (``{"k": "top_n"}``); otherwise the close
    matches among ``accepted`` are suggested.
    """
    accepted = sorted(set(accepted))
    unknown = [name for name in given if name not in accepted]
    if not unknown:
        return
    name = unknown[0]
    right = (hints or {}).get(name)
    if right is None:
        close = difflib.get_close_matches(name, accepted, n=3, cutoff=0.6)
        right = " or ".join(f"`{c}`" for c in close) if close else None
    else:
        right = f"`{right}`"
    fix = f"Did you mean {right}?" if right else "Remove it."
    more = f" (and also {', '.join(repr(u) for u in unknown[1:])})" if len(unknown) > 1 else ""
    raise ConfigError(f"{owner} got an unknown argument {name!r}{more}; it takes {', '.join(accepted)}. {fix}")


def take_deprecated(data: dict, old: str, new: str, *, owner: str, stacklevel: int = 3) -> None:
    """Move ``data[old]`` to ``data[new]`` with a :class:`DeprecationWarning` (an argument renamed
    to the framework's own name). Raises :class:`~diversify.errors.ConfigError` if both are given."""
    if old not in data:
        return
    if new in data:
        raise ConfigError(f"{owner} got both `{old}` (deprecated) and `{new}`; got {old}={data[old]!r}, "
                          f"{new}={data[new]!r}. Pass only `{new}`.")
    warnings.warn(f"{owner}({old}=...) is deprecated; use {new}=... (the same meaning).",
                  DeprecationWarning, stacklevel=stacklevel)
    data[new] = data.pop(old)


def fetched_once(result: Result) -> Result:
    """``result`` (from :meth:`Diversifier.select_items`) as the answer of one retriever call:
    ``backend_calls`` 1, ``rounds`` 0. For a wrapped retriever that cannot be asked for more
    results, so the plugin calls it once and diversifies what it gave; ``exhausted`` then says,
    honestly, that the retriever had nothing more to give."""
    return Result(result.hits, result.groups, result.k, result.omitted, result.dropped, result.considered,
                  result.exhausted, result.short, 1, 0, result.cursor, result.generation)
