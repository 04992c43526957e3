"""How a store answers a refetch that must skip ids: push the exclusion down, or ask a larger k.

A refetch asks for ``k`` hits that are not among ``exclude_ids`` (the ids already seen, and
members of clusters that are already full). There are two ways to get them, and which is cheaper
depends on the store (see the measurements in ``docs/online.md``):

``"exclude"``
    Push the exclusion down as the store's own filter (AND-ed with the user's filter), at most
    ``max_exclude`` ids of it; for the ids beyond that bound, ask for that many more hits and drop
    them here. Cheap where the store evaluates an id filter fast (numpy, FAISS flat, Chroma,
    LanceDB, a Qdrant server).
``"grow"``
    Never push an exclusion down: ask for ``k + len(exclude_ids)`` hits under the user's filter
    alone and drop the excluded ones here. Cheaper where an id filter is slow (Qdrant's local
    mode evaluates ``HasIdCondition`` point by point) or cannot be expressed.
``"auto"``
    What the adapter's measurement chose (each adapter's ``auto_refill``).

Whatever the mode, an answer comes back short only when the store has no more matching
documents: a pushed-down call that returns fewer than asked (a filter that only looked at a
limited candidate set, an approximate index that stopped early) is checked by a call without the
exclusion, and a store whose filter rejects the exclusion (an unsupported field or operator) is
answered by growing k from then on, with one WARNING on logger ``"diversify"``. The user's filter
is never dropped: it is part of every call, the ``call`` the adapter passes in applies it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Generator, Hashable, Iterable, Sequence
from itertools import islice
from typing import Any, Optional

import numpy as np

from ..errors import ConfigError
from ..online.budget import MAX_EXCLUDE_PER_CALL
from ..online.types import Fetched, calls_of

__all__ = ["REFILL_MODES", "check_refill", "Exclusion", "Failed", "backed_by_local_qdrant",
           "exclusion_is_slow", "plugin_exclusion"]

log = logging.getLogger("diversify")

REFILL_MODES = ("auto", "exclude", "grow")

#: ``call(n, pushed_ids_or_None) -> hits`` (best first), the user's filter applied
Call = Callable[[int, Optional[list]], Sequence[Any]]


def check_refill(refill: Any, max_exclude: Any) -> tuple[str, int]:
    """Validate an adapter's ``refill`` and ``max_exclude`` settings; ``max_exclude=None`` takes the
    online layer's :data:`~diversify.online.budget.MAX_EXCLUDE_PER_CALL`."""
    if refill not in REFILL_MODES:
        raise ConfigError(f"`refill` must be one of {list(REFILL_MODES)}; got refill={refill!r}. Use 'exclude' to "
                          "push seen ids down as a filter, 'grow' to ask for a larger k instead, 'auto' for "
                          "the adapter's measured choice.")
    if max_exclude is None:
        return refill, MAX_EXCLUDE_PER_CALL
    if isinstance(max_exclude, bool) or not isinstance(max_exclude, (int, np.integer)) or max_exclude < 0:
        raise ConfigError(f"`max_exclude` must be an int >= 0 (ids pushed down per call); got "
                          f"max_exclude={max_exclude!r}. Use e.g. {MAX_EXCLUDE_PER_CALL}, or 0 to always grow k.")
    return refill, int(max_exclude)


#: one call of the search: ``(n, pushed_ids_or_None)``
ExclusionCall = tuple[int, Optional[list]]


_LINKS = ("_client", "client", "_document_store", "document_store", "_vector_store", "vector_store", "vectorstore",
          "_collection", "collection")


def backed_by_local_qdrant(obj: Any, depth: int = 4) -> bool:
    """Is ``obj`` (a client, an adapter, a framework's vector / document store or retriever)
    backed by Qdrant's local mode (``":memory:"`` or a path)? Its filters are evaluated point by
    point in Python, so an exclusion of a few hundred ids costs more than a larger k by an order
    of magnitude (docs/online.md): refetches there grow k."""
    return _backed_by(obj, depth, chroma=False)


def exclusion_is_slow(obj: Any, depth: int = 4) -> bool:
    """Is ``obj`` backed by a store where an id exclusion filter was measured slower than a
    larger k (docs/online.md): Qdrant's local mode, Chroma (a ``$nin`` on a few hundred ids)?"""
    return _backed_by(obj, depth, chroma=True)


def _backed_by(obj: Any, depth: int, *, chroma: bool) -> bool:
    seen: set = set()

    def walk(o: Any, d: int) -> bool:
        if o is None or d < 0 or id(o) in seen or isinstance(o, (str, bytes, int, float)):
            return False
        seen.add(id(o))
        t = type(o)
        if t.__module__.startswith("qdrant_client") and "local" in t.__name__.lower():
            return True
        if chroma and t.__module__.startswith("chromadb") and t.__name__ in ("Collection", "AsyncCollection"):
            return True
        if t.__name__ == "QdrantDocumentStore" and getattr(o, "_client", None) is None:
            # Haystack's store makes its client on first use; its settings say where it will live
            return getattr(o, "url", None) is None and getattr(o, "host", None) is None and (
                getattr(o, "location", None) == ":memory:" or getattr(o, "path", None) is not None)
        for name in _LINKS:
            try:
                nxt = getattr(o, name, None)
            except Exception:  # a property that needs a connection
                continue
            if walk(nxt, d - 1):
                return True
        return False

    return walk(obj, depth)


def plugin_exclusion(refill: Any, can_exclude: bool, store: Any, *, name: str, needs: str = "") -> Exclusion:
    """The refetch strategy of a framework plugin: ``refill`` ("auto", "exclude", "grow") given
    whether the plugin can express an exclusion at all (``can_exclude``) and the store behind it
    (``auto`` grows k on Qdrant's local mode and Chroma, else pushes down). Calls that raise with an
    exclusion fall back to a larger k (framework filter languages may not address the id)."""
    mode, cap = check_refill(refill, None)
    if mode == "auto":
        mode = "exclude" if can_exclude and not exclusion_is_slow(store) else "grow"
    elif mode == "exclude" and not can_exclude:
        raise ConfigError(f"`refill='exclude'` needs a way to express the exclusion in the store; got none. "
                          f"{needs or 'Configure one'}, or use refill='auto' / 'grow'.")
    return Exclusion(mode, cap, name=name, fallback_on_error=True)


def _first(raw: Any, n: int) -> list:
    """The first ``n`` hits of a store's answer: a store that returns more than it was asked for
    costs no more than the request (nothing past ``n`` is read)."""
    if isinstance(raw, (list, tuple)):
        return list(raw[:n])
    return list(islice(raw, n))


def _hit_id(hit: Any) -> Hashable:
    return hit.id


class Failed:
    """What a driver sends back when a call with a pushed-down exclusion raised."""

    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error


class Exclusion:
    """One store's refetch strategy; shared by all its queries (thread-safe: the only state is a
    flag that goes from "push down" to "grow" once, when the store rejects an exclusion).

    Parameters
    ----------
    mode : {"exclude", "grow"}
        Resolved mode (``"auto"`` is resolved by the adapter).
    max_exclude : int
        At most this many ids are pushed down per call.
    name : str
        The store, for the warning.
    exact : bool
        The store's pushed-down answer is complete: fewer than asked means no more exist (no
        confirming call). True only for exact stores whose filter runs before the top-k.
    fallback_on_error : bool
        A call with an exclusion that raises is retried without it (then growing k from then on).
        For framework stores whose filter languages may not address the id field; False where a
        failure can only be a real store failure.
    """

    __slots__ = ("mode", "max_exclude", "name", "exact", "fallback_on_error", "disabled_by")

    def __init__(self, mode: str, max_exclude: int, *, name: str, exact: bool = False,
                 fallback_on_error: bool = False) -> None:
        if mode not in ("exclude", "grow"):
            raise ConfigError(f"`mode` must be 'exclude' or 'grow' once resolved; got {mode!r}.")
        self.mode, self.max_exclude, self.name = mode, max_exclude, name
        self.exact, self.fallback_on_error = exact, fallback_on_error
        self.disabled_by: Optional[str] = None  # why pushing down was given up, if it was

    @property
    def pushes_down(self) -> bool:
        """Does a refetch push the exclusion down (else: a larger k)?"""
        return self.mode == "exclude" and self.max_exclude > 0 and self.disabled_by is None

    def steps(self, k: int, exclude_ids: Optional[Iterable[Any]],
              id_of: Callable[[Any], Hashable] = _hit_id) -> Generator[ExclusionCall, Any, list]:
        """The calls for one request, as a generator (driven by :meth:`search` / :meth:`asearch`):
        yields ``(n, pushed_ids_or_None)``, receives each call's hits (or :class:`Failed`), returns
        the top-``k`` hits not in ``exclude_ids``; fewer only when the store has no more."""
        excl = list(dict.fromkeys(exclude_ids)) if exclude_ids else []
        if not excl:
            raw = yield (k, None)
            return _first(raw, k)
        skip = set(excl)
        if self.pushes_down:
            pushed = excl[:self.max_exclude]
            ask = k + len(excl) - len(pushed)
            raw = yield (ask, pushed)
            if isinstance(raw, Failed):
                if not self.fallback_on_error:
                    raise raw.error
                self._give_up(f"{type(raw.error).__name__}: {raw.error}")
            else:
                out = [h for h in _first(raw, ask) if id_of(h) not in skip]
                if len(out) >= k or (self.exact and len(raw) < ask):
                    return out[:k]
                # short: the store may be out of documents, or its filter looked at a limited
                # candidate set (post-filtering, an approximate index); a larger k decides
        raw = yield (k + len(excl), None)
        return [h for h in _first(raw, k + len(excl)) if id_of(h) not in skip][:k]

    def search(self, call: Call, k: int, exclude_ids: Optional[Iterable[Any]],
               id_of: Callable[[Any], Hashable] = _hit_id) -> Fetched:
        """Top-``k`` hits not in ``exclude_ids``, via ``call(n, pushed_ids_or_None)``; a
        :class:`~diversify.online.Fetched` that counts every store call made (a rejected one too)."""
        gen = self.steps(k, exclude_ids, id_of)
        req = next(gen)
        calls = 0
        while True:
            try:
                raw: Any = call(*req)
                calls += calls_of(raw)
            except Exception as exc:
                if req[1] is None:
                    raise
                calls += 1
                raw = Failed(exc)
            try:
                req = gen.send(raw)
            except StopIteration as stop:
                return Fetched(stop.value, calls)

    async def asearch(self, call: Callable[[int, Optional[list]], Awaitable[Sequence[Any]]], k: int,
                      exclude_ids: Optional[Iterable[Any]], id_of: Callable[[Any], Hashable] = _hit_id) -> Fetched:
        """Async twin of :meth:`search` (``call`` is a coroutine function)."""
        gen = self.steps(k, exclude_ids, id_of)
        req = next(gen)
        calls = 0
        while True:
            try:
                raw: Any = await call(*req)
                calls += calls_of(raw)
            except Exception as exc:
                if req[1] is None:
                    raise
                calls += 1
                raw = Failed(exc)
            try:
                req = gen.send(raw)
            except StopIteration as stop:
                return Fetched(stop.value, calls)

    def _give_up(self, reason: str) -> None:
        if self.disabled_by is None:
            self.disabled_by = reason
            log.warning("diversify: %s rejected an exclusion filter (%s); refetches ask for a larger k "
                        "instead from now on.", self.name, reason)

    def __repr__(self) -> str:
        state = f", disabled_by={self.disabled_by!r}" if self.disabled_by else ""
        return f"Exclusion(mode={self.mode!r}, max_exclude={self.max_exclude}{state})"
