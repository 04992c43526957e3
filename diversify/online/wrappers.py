"""The sync and async wrappers :meth:`Diversifier.wrap` / :meth:`Diversifier.awrap` return.

Both drive the same refetch generator (:func:`diversify.online.refetch.refetch`): they only differ
in how they call the search (directly, or awaiting it). A failure of the search reaches the
caller as :class:`~diversify.errors.StoreError`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, Optional

from ..errors import InputTypeError, StoreError
from .refetch import SearchRequest
from .types import AsyncDiversifiedSearch, DiversifiedSearch, Result

__all__ = ["Capabilities", "declared", "resolve_search", "supports_exclude", "supports_exclude_clusters", "sync_wrapper", "async_wrapper",
           "as_store_error", "Start", "check_sync_search"]

#: Starts one query: ``start(k, max_per_cluster, groups, cursor, supports_exclude, exclude_clusters)
#: -> refetch generator``.
Start = Callable[[Optional[int], Optional[int], bool, Optional[str], bool, bool], Generator[SearchRequest, Any, Result]]


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a search declares it can do, read by :meth:`~diversify.Diversifier.wrap` and
    :meth:`~diversify.Diversifier.awrap` before anything is guessed from its signature.

    The store adapters (:mod:`diversify.stores`) declare a ``capabilities`` property; any search
    callable or object may declare one as an attribute. Precedence per capability, first that
    answers wins: ``wrap(search, supports_exclude=...)``; the single attribute
    (``supports_exclude`` / ``supports_exclude_clusters`` / ``is_async``) on the callable or its
    object, the narrower statement (a wrapper object may override the one thing it changes);
    the ``capabilities`` declaration; and only when neither is there, the signature (a third
    positional parameter, ``*args`` or ``exclude_ids`` means it takes ``exclude_ids``; cluster
    exclusion is never guessed). A coroutine function is async whatever it declares.

    Attributes
    ----------
    exclude : bool
        ``search(query, k, exclude_ids)`` leaves the given ids out.
    exclude_clusters : bool
        It also takes ``exclude_clusters=[values]`` and ``cluster_field="name"`` keywords and
        leaves out every hit whose payload field holds one of the values, composed (AND) with
        ``exclude_ids`` and with any filter of its own.
    is_async : bool
        Its answers are awaitables: :meth:`~diversify.Diversifier.wrap` refuses it, use ``awrap``.
    """

    exclude: bool = False
    exclude_clusters: bool = False
    is_async: bool = False


def _attribute(fn: Any, name: str) -> Any:
    """``fn.name``, else the attribute of the object ``fn`` is bound to, else None."""
    value = getattr(fn, name, None)
    if value is None:
        value = getattr(getattr(fn, "__self__", None), name, None)
    return value


def declared(fn: Any) -> Optional[Capabilities]:
    """The :class:`Capabilities` ``fn`` (or the adapter it is bound to) declares, or None."""
    caps = _attribute(fn, "capabilities")
    return caps if isinstance(caps, Capabilities) else None


def _declares(fn: Any, name: str, field: str) -> Optional[bool]:
    """What ``fn`` declares for one capability: its single attribute ``name`` if set, else the
    ``field`` of its :class:`Capabilities`, else None (nothing declared)."""
    flag = _attribute(fn, name)
    if flag is not None:
        return flag is True if name != "supports_exclude" else bool(flag)
    caps = declared(fn)
    return None if caps is None else getattr(caps, field)


def supports_exclude_clusters(fn: Any) -> bool:
    """Does ``fn`` declare cluster exclusion (a ``supports_exclude_clusters = True`` attribute, or
    :attr:`Capabilities.exclude_clusters`)? Never guessed from the signature."""
    return _declares(fn, "supports_exclude_clusters", "exclude_clusters") is True


def supports_exclude(fn: Any) -> bool:
    """Does ``fn`` take ``exclude_ids``? Its declaration says so (a ``supports_exclude``
    attribute, then :class:`Capabilities`); else its signature (a third positional parameter,
    ``*args`` or ``exclude_ids``)."""
    flag = _declares(fn, "supports_exclude", "exclude")
    if flag is not None:
        return flag
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    if any(p.name == "exclude_ids" for p in params):
        return True
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 3 or any(p.kind == p.VAR_POSITIONAL for p in params)


def _is_async(fn: Any) -> bool:
    owner = getattr(fn, "__self__", None)
    flag = getattr(owner, "is_async", None)
    if flag is None:
        caps = declared(fn)
        flag = caps is not None and caps.is_async
    return flag is True or inspect.iscoroutinefunction(fn)


def resolve_search(search: Any, exclude: Optional[bool] = None) -> tuple[Callable[..., Any], bool]:
    """A store adapter (has ``.search``) or a plain callable -> ``(callable, supports_exclude)``.

    ``exclude`` (True / False) overrides what :func:`supports_exclude` would detect.
    """
    if not callable(search) and callable(getattr(search, "search", None)):
        search = search.search
    elif callable(getattr(search, "search", None)) and (hasattr(search, "supports_exclude")
                                                         or isinstance(getattr(search, "capabilities", None),
                                                                       Capabilities)):
        search = search.search
    if not callable(search):
        raise InputTypeError(f"`search` must be callable as search(query, k[, exclude_ids]) or a store "
                             f"adapter; got {type(search).__name__}.")
    if exclude is not None and not isinstance(exclude, bool):
        raise InputTypeError(f"`supports_exclude` must be True, False or None (detect); got {exclude!r}.")
    return search, supports_exclude(search) if exclude is None else exclude


def check_sync_search(fn: Callable[..., Any]) -> None:
    """Refuse an async search (a coroutine function, or an async store adapter's ``search``) in
    :meth:`~diversify.Diversifier.wrap`: its answers would be coroutines, never awaited. Its
    object's ``is_async``, else its :class:`Capabilities`, decides; a coroutine function always is."""
    owner = getattr(fn, "__self__", None)
    if _is_async(fn):
        name = type(owner).__name__ if owner is not None else getattr(fn, "__name__", "search")
        raise InputTypeError(f"`search` must be a sync callable for Diversifier.wrap; got {name}, whose search is "
                             "a coroutine. Use `await Diversifier.awrap(search)(query)` for an async search or "
                             "an async store adapter.")


def as_store_error(exc: Exception) -> StoreError:
    """A failure of the wrapped search, as the StoreError the caller sees."""
    return StoreError(f"the wrapped search failed with {type(exc).__name__}: {exc}")


def _call(fn: Callable[..., Any], query: Any, req: Any, exclude: bool, cluster_field: Optional[str]) -> Any:
    ask, exclude_ids, exclude_clusters = req
    if not exclude:
        return fn(query, ask)
    if exclude_clusters is None:
        return fn(query, ask, exclude_ids)
    return fn(query, ask, exclude_ids, exclude_clusters=exclude_clusters, cluster_field=cluster_field)


def sync_wrapper(fn: Callable[..., Any], exclude: bool, start: Start,
                 cluster_field: Optional[str] = None) -> DiversifiedSearch:
    """``diversified(query, *, k=None, max_per_cluster=None, groups=False, cursor=None) -> Result``.

    ``cluster_field`` (set when ``fn`` supports cluster exclusion and the Diversifier reads that
    payload field) turns on exclusion by cluster id."""
    by_cluster = cluster_field is not None

    def diversified(query: Any, *, k: Optional[int] = None, max_per_cluster: Optional[int] = None,
                    groups: bool = False, cursor: Optional[str] = None) -> Result:
        gen = start(k, max_per_cluster, groups, cursor, exclude, by_cluster)
        req = next(gen)
        while True:
            try:
                raw = _call(fn, query, req, exclude, cluster_field)
            except StoreError:
                raise
            except Exception as exc:
                raise as_store_error(exc) from exc
            try:
                req = gen.send(raw)
            except StopIteration as stop:
                return stop.value

    setattr(diversified, "__wrapped__", fn)  # like functools.wraps, without copying name and doc
    diversified.__doc__ = f"Diversified {getattr(fn, '__name__', 'search')} (see Diversifier.wrap)."
    return diversified


def async_wrapper(fn: Callable[..., Any], exclude: bool, start: Start,
                  cluster_field: Optional[str] = None) -> AsyncDiversifiedSearch:
    """``await diversified(query, *, k=None, max_per_cluster=None, groups=False, cursor=None) -> Result``.

    ``fn`` may return an awaitable (an async search) or the hits themselves (a plain callable,
    which then runs in the event loop's thread).
    """
    by_cluster = cluster_field is not None

    async def diversified(query: Any, *, k: Optional[int] = None, max_per_cluster: Optional[int] = None,
                          groups: bool = False, cursor: Optional[str] = None) -> Result:
        gen = start(k, max_per_cluster, groups, cursor, exclude, by_cluster)
        req = next(gen)
        while True:
            try:
                raw = _call(fn, query, req, exclude, cluster_field)
                if inspect.isawaitable(raw):
                    raw = await raw
            except StoreError:
                raise
            except Exception as exc:
                raise as_store_error(exc) from exc
            try:
                req = gen.send(raw)
            except StopIteration as stop:
                return stop.value

    setattr(diversified, "__wrapped__", fn)
    return diversified
