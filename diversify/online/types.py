"""Value types of the online path: what goes in (:class:`Hit`) and what comes out.

All of them are immutable. None of them copies or touches the caller's objects: a
:class:`Hit` only *refers* to the caller's payload and original object (``item``).
The protocols at the end describe the callables the online path accepts and returns.
"""

from __future__ import annotations

from collections.abc import Awaitable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional, Protocol, Union, overload, runtime_checkable

import numpy as np

__all__ = [
    "Hit",
    "Kept",
    "Group",
    "Result",
    "ClusterLookup",
    "SearchFn",
    "AsyncSearchFn",
    "DiversifiedSearch",
    "AsyncDiversifiedSearch",
    "DocId",
    "Vector",
    "Fetched",
    "calls_of",
]

class Fetched(list):
    """Hits that took ``calls`` store calls to fetch: what a search returns when one of its calls
    asked the store more than once (a short pushed-down answer confirmed with a larger k, a
    post-filtering store asked again over more candidates, an approximate index widened).
    ``Result.backend_calls`` adds ``calls``; any other sequence counts as one call."""

    __slots__ = ("calls",)

    def __init__(self, hits: Any = (), calls: int = 1) -> None:
        super().__init__(hits)
        self.calls = calls


def calls_of(raw: Any) -> int:
    """Store calls behind one search answer: ``raw.calls`` for :class:`Fetched`, else 1."""
    return raw.calls if type(raw) is Fetched else 1


#: A document id as stores know it (numpy integers from a store's label array count as ints).
DocId = Union[str, int, np.integer]
#: A hit's embedding: shape ``(d,)``, any float dtype (a list is accepted too).
Vector = Union[np.ndarray, Sequence[float]]


@dataclass(frozen=True, slots=True)
class Hit:
    """One ranked search result, as the online path sees it.

    Parameters
    ----------
    id : str or int
        The document id; the key into the :class:`~diversify.ClusterMap`.
    score : float, optional
        The store's score (similarity or distance: only equality is used, to break ties by id).
    payload : Mapping, optional
        The store's payload / metadata; read (``cluster_field``), never written.
    vector : numpy.ndarray or sequence of float, optional
        Shape ``(d,)``; lets the on-the-fly mode fold hits that are not in the artifact.
    item : Any, optional
        The caller's original object (a LangChain ``Document``, a Qdrant ``ScoredPoint``...),
        returned untouched.
    text : str, optional
        Lets the on-the-fly mode fold hits by word-shingle Jaccard (``fold_text_threshold``).
    """

    id: DocId
    score: Optional[float] = None
    payload: Optional[Mapping[str, Any]] = field(default=None, compare=False)
    vector: Optional[Vector] = field(default=None, compare=False, repr=False)
    item: Any = field(default=None, compare=False, repr=False)
    text: Optional[str] = field(default=None, compare=False, repr=False)


class Kept(tuple):
    """A hit that survived selection, with what it stands for (an immutable 4-tuple).

    ``Kept(hit, cluster_id, rank, folded)``; indexing and unpacking go over those four fields.

    Attributes
    ----------
    hit : Hit
        The original hit (the very object that was passed in).
    cluster_id : hashable or None
        Its cluster (from the artifact, the payload field, or the kept hit it was folded
        into on the fly); ``None`` when it is unknown and forms its own cluster.
    rank : int
        Its 0-based position in the ranked input (after deterministic tie-breaking).
    folded : tuple of Hit
        Lower-ranked hits of the same cluster that are not shown (set on the cluster's best
        kept hit; ``len(folded)`` is "N similar results omitted"; expand on demand).
    """

    __slots__ = ()

    def __new__(cls, hit: Any, cluster_id: Optional[Hashable], rank: int, folded: tuple = ()) -> Kept:
        return tuple.__new__(cls, (hit, cluster_id, rank, folded))

    def __getnewargs__(self) -> tuple:
        return tuple(tuple.__iter__(self))

    @property
    def hit(self) -> Any:
        """The original hit."""
        return self[0]

    @property
    def cluster_id(self) -> Optional[Hashable]:
        """Cluster id, None for an unknown singleton."""
        return self[1]

    @property
    def rank(self) -> int:
        """0-based rank in the (tie-broken) input."""
        return self[2]

    @property
    def folded(self) -> tuple:
        """Similar lower-ranked hits left out because of this one (``tuple[Hit, ...]``)."""
        return self[3]

    @property
    def id(self) -> DocId:
        return self[0].id

    @property
    def score(self) -> Optional[float]:
        return getattr(self[0], "score", None)

    @property
    def item(self) -> Any:
        """The caller's original object if the hit carries one, else the hit itself."""
        item = getattr(self[0], "item", None)
        return self[0] if item is None else item

    @property
    def omitted(self) -> int:
        """Number of similar results folded into this one."""
        return len(self[3])

    def __repr__(self) -> str:
        return (f"Kept(id={self.id!r}, score={self.score!r}, cluster_id={self[1]!r}, "
                f"rank={self[2]}, omitted={len(self[3])})")


@dataclass(frozen=True, slots=True)
class Group:
    """One cluster in grouped output: up to ``max_per_cluster`` members in rank order.

    ``folded`` holds the further members that were seen but left out; ``omitted`` counts them.
    """

    cluster_id: Optional[Hashable]
    hits: tuple[Kept, ...]
    folded: tuple[Hit, ...] = ()

    @property
    def omitted(self) -> int:
        return len(self.folded)


def _value(x: Any) -> Any:
    return x


class Deferred:
    """A field computed the first time it is read (the next-page cursor: most queries never
    read it). Compares, hashes and pickles as its value; computing it twice (two threads at
    once) gives the same value."""

    __slots__ = ("_fn", "_value")

    def __init__(self, fn: Any) -> None:
        self._fn = fn
        self._value: Any = None

    def get(self) -> Any:
        fn = self._fn
        if fn is not None:
            self._value = fn()
            self._fn = None
        return self._value

    def __eq__(self, other: object) -> bool:
        return self.get() == (other.get() if isinstance(other, Deferred) else other)

    def __hash__(self) -> int:
        return hash(self.get())

    def __reduce__(self) -> tuple:
        return (_value, (self.get(),))


_RESULT_FIELDS = ("hits", "groups", "k", "omitted", "dropped", "considered", "exhausted", "short",
                  "backend_calls", "rounds", "cursor", "generation")


class Result(Sequence[Kept]):
    """What :func:`select` and a wrapped search return: the kept hits, and the accounting.

    A ``Result`` is an immutable sequence of :class:`Kept` hits in rank order: ``len(result)``,
    ``result[0]``, ``result[1:3]`` (a tuple), ``for kept in result``, ``kept in result``,
    ``reversed``, ``index`` and ``count`` all go over ``hits``, and an empty result is falsy.
    ``result == other`` is True when ``other`` is a ``Result`` with every field equal (compare
    ``list(result)`` or ``result.ids`` with a list); results are hashable.

    Attributes
    ----------
    hits : tuple of Kept
        The diversified top-k, in rank order (for grouped output: every group's members,
        group after group).
    groups : tuple of Group or None
        Set when grouped output was asked for: up to k groups of up to n members.
    k : int
        How many were asked for (hits, or groups).
    omitted : int
        Hits left out because their cluster was full (sum of ``Kept.omitted``).
    dropped : int
        Unknown hits left out by ``unknown="drop"`` or hits of clusters the cursor excluded
        (a search without exclusion filters returns earlier pages' hits again: those below the
        cursor's offset count here; the ones above it are not looked at).
    considered : int
        Distinct hits looked at.
    exhausted : bool
        True when the store has nothing more for this query: its last answer was shorter than
        asked and every hit was used (shown, folded or dropped), so a next page would be empty.
        False when the store may have more (its last answer was full) or this page left some.
    short : bool
        True when fewer than ``k`` came back for any reason (store exhausted or round budget).
    backend_calls : int
        Calls made to the wrapped search (0 for :func:`select`).
    rounds : int
        Refetch rounds after the first call.
    cursor : str or None
        Opaque, stateless token for the next page (pass it back as ``cursor=``); it grows by one
        id per cluster shown, not with what was fetched (see docs/online.md, "Pages"). Encoded
        the first time it is read.
    generation : int
        Which loaded artifact answered (increments on every ``reload``).
    """

    __slots__ = ("_f",)
    _f: tuple

    def __init__(self, hits: tuple[Kept, ...], groups: Optional[tuple[Group, ...]] = None, k: int = 0,
                 omitted: int = 0, dropped: int = 0, considered: int = 0, exhausted: bool = False,
                 short: bool = False, backend_calls: int = 0, rounds: int = 0,
                 cursor: Union[str, None, Deferred] = None, generation: int = 0) -> None:
        _set_fields(self, (tuple(hits), groups, k, omitted, dropped, considered, exhausted, short,
                           backend_calls, rounds, cursor, generation))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"Result is immutable; cannot set {name!r}")

    def __reduce__(self) -> tuple:
        return (Result, self._f)

    # ------------------------------------------------------------------ fields

    @property
    def hits(self) -> tuple[Kept, ...]:
        return self._f[0]

    @property
    def groups(self) -> Optional[tuple[Group, ...]]:
        return self._f[1]

    @property
    def k(self) -> int:
        return self._f[2]

    @property
    def omitted(self) -> int:
        return self._f[3]

    @property
    def dropped(self) -> int:
        return self._f[4]

    @property
    def considered(self) -> int:
        return self._f[5]

    @property
    def exhausted(self) -> bool:
        return self._f[6]

    @property
    def short(self) -> bool:
        return self._f[7]

    @property
    def backend_calls(self) -> int:
        return self._f[8]

    @property
    def rounds(self) -> int:
        return self._f[9]

    @property
    def cursor(self) -> Optional[str]:
        v = self._f[10]
        return v.get() if type(v) is Deferred else v

    @property
    def generation(self) -> int:
        return self._f[11]

    @property
    def ids(self) -> list[DocId]:
        """The kept hits' ids, in rank order."""
        return [kept[0].id for kept in self._f[0]]

    @property
    def items(self) -> list[Any]:
        """The caller's original objects, in rank order."""
        return [kept.item for kept in self._f[0]]

    # ------------------------------------------------------------------ the sequence of hits

    def __len__(self) -> int:
        return len(self._f[0])

    @overload
    def __getitem__(self, index: int) -> Kept: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Kept, ...]: ...

    def __getitem__(self, index: Union[int, slice]) -> Union[Kept, tuple[Kept, ...]]:
        return self._f[0][index]

    def __iter__(self) -> Iterator[Kept]:
        return iter(self._f[0])

    def __contains__(self, value: object) -> bool:
        return value in self._f[0]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Result):
            return self._f == other._f
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._f)

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={value!r}" for name, value in zip(_RESULT_FIELDS, self._f)
                           if name not in ("hits", "groups", "cursor"))
        return f"Result(ids={self.ids!r}, {fields})"

    def _asdict(self) -> dict[str, Any]:
        """Every field by name (as ``namedtuple._asdict``)."""
        out = dict(zip(_RESULT_FIELDS, self._f))
        out["cursor"] = self.cursor
        return out


# The slot's own setter: immutability (``__setattr__`` raises) without paying for
# ``object.__setattr__`` on every query.
_set_fields = Result.__dict__["_f"].__set__


@runtime_checkable
class ClusterLookup(Protocol):
    """Anything that maps document ids to cluster ids (a :class:`~diversify.ClusterMap`).

    ``lookup(ids)`` returns an int64 array of the same length, ``-1`` for unknown ids.
    """

    def lookup(self, ids: Sequence[DocId]) -> np.ndarray: ...


class SearchFn(Protocol):
    """The search callable :meth:`Diversifier.wrap` accepts.

    ``search(query, k)`` or ``search(query, k, exclude_ids)`` returning a ranked sequence of
    :class:`Hit`, ``(id, score)`` / ``(id, score, payload)`` tuples, mappings with ``id`` /
    ``score`` / ``payload`` (or ``metadata``) keys, or objects with ``.id`` / ``.score`` /
    ``.payload`` attributes (Qdrant ``ScoredPoint``). A store adapter from
    :mod:`diversify.stores` can be passed directly.
    """

    def __call__(self, query: Any, k: int, exclude_ids: Sequence[DocId] = ..., /) -> Sequence[Any]: ...


class AsyncSearchFn(Protocol):
    """Async twin of :class:`SearchFn`."""

    async def __call__(self, query: Any, k: int, exclude_ids: Sequence[DocId] = ..., /) -> Sequence[Any]: ...


class DiversifiedSearch(Protocol):
    """What :meth:`Diversifier.wrap` returns: ``diversified(query, ...) -> Result``."""

    def __call__(self, query: Any, *, k: Optional[int] = None, max_per_cluster: Optional[int] = None,
                 groups: bool = False, cursor: Optional[str] = None) -> Result: ...


class AsyncDiversifiedSearch(Protocol):
    """What :meth:`Diversifier.awrap` returns: ``await diversified(query, ...) -> Result``."""

    def __call__(self, query: Any, *, k: Optional[int] = None, max_per_cluster: Optional[int] = None,
                 groups: bool = False, cursor: Optional[str] = None) -> Awaitable[Result]: ...
