"""Value types of the online path: what goes in (:class:`Hit`) and what comes out.

All of them are immutable. None of them copies or touches the caller's objects: a
:class:`Hit` only *refers* to the caller's payload and original object (``item``).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, Optional, Protocol, Union, runtime_checkable

import numpy as np

__all__ = [
    "Hit",
    "Kept",
    "Group",
    "Result",
    "ClusterLookup",
    "SearchFn",
    "AsyncSearchFn",
    "DocId",
]

#: A document id as stores know it.
DocId = Union[str, int]


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
    vector : numpy.ndarray, optional
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
    vector: Optional[np.ndarray] = field(default=None, compare=False, repr=False)
    item: Any = field(default=None, compare=False, repr=False)
    text: Optional[str] = field(default=None, compare=False, repr=False)


class Kept(tuple):
    """A hit that survived selection, with what it stands for (an immutable 4-tuple).

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

    def __new__(cls, hit: Any, cluster_id: Optional[Hashable], rank: int, folded: tuple = ()):
        return tuple.__new__(cls, (hit, cluster_id, rank, folded))

    def __getnewargs__(self):
        return tuple(tuple.__iter__(self))

    hit = property(itemgetter(0), doc="The original hit.")
    cluster_id = property(itemgetter(1), doc="Cluster id, None for an unknown singleton.")
    rank = property(itemgetter(2), doc="0-based rank in the (tie-broken) input.")
    folded = property(itemgetter(3), doc="Similar lower-ranked hits left out because of this one.")

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

    def __repr__(self):
        return (f"Kept(id={self.id!r}, score={self.score!r}, cluster_id={self[1]!r}, "
                f"rank={self[2]}, omitted={len(self[3])})")


@dataclass(frozen=True, slots=True)
class Group:
    """One cluster in grouped output: up to ``max_per_cluster`` members in rank order.

    ``folded`` holds the further members that were seen but left out; ``omitted`` counts them.
    """

    cluster_id: Optional[Hashable]
    hits: tuple  # tuple[Kept, ...]
    folded: tuple = ()  # tuple[Hit, ...]

    @property
    def omitted(self) -> int:
        return len(self.folded)


_RESULT_FIELDS = ("hits", "groups", "k", "omitted", "dropped", "considered", "exhausted", "short",
                  "backend_calls", "rounds", "cursor", "generation")


class Result(tuple):
    """What :func:`select` and a wrapped search return (immutable).

    ``len(result)`` and ``iter(result)`` go over ``hits``.

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
        Unknown hits left out by ``unknown="drop"`` or hits of clusters the cursor excluded.
    considered : int
        Distinct hits looked at.
    exhausted : bool
        True when fewer than ``k`` came back because the store had nothing more to give.
    short : bool
        True when fewer than ``k`` came back for any reason (store exhausted or round budget).
    backend_calls : int
        Calls made to the wrapped search (0 for :func:`select`).
    rounds : int
        Refetch rounds after the first call.
    cursor : str or None
        Opaque, stateless token for the next page (pass it back as ``cursor=``).
    generation : int
        Which loaded artifact answered (increments on every ``reload``).
    """

    __slots__ = ()

    def __new__(cls, hits: tuple, groups: Optional[tuple] = None, k: int = 0, omitted: int = 0,
                dropped: int = 0, considered: int = 0, exhausted: bool = False, short: bool = False,
                backend_calls: int = 0, rounds: int = 0, cursor: Optional[str] = None,
                generation: int = 0):
        return tuple.__new__(cls, (hits, groups, k, omitted, dropped, considered, exhausted, short,
                                   backend_calls, rounds, cursor, generation))

    def __getnewargs__(self):
        return tuple(tuple.__iter__(self))

    hits = property(itemgetter(0))
    groups = property(itemgetter(1))
    k = property(itemgetter(2))
    omitted = property(itemgetter(3))
    dropped = property(itemgetter(4))
    considered = property(itemgetter(5))
    exhausted = property(itemgetter(6))
    short = property(itemgetter(7))
    backend_calls = property(itemgetter(8))
    rounds = property(itemgetter(9))
    cursor = property(itemgetter(10))
    generation = property(itemgetter(11))

    def __len__(self) -> int:
        return len(self[0])

    def __iter__(self):
        return iter(self[0])

    def __repr__(self):
        fields = ", ".join(f"{name}={tuple.__getitem__(self, j)!r}" for j, name in enumerate(_RESULT_FIELDS)
                           if name not in ("hits", "groups", "cursor"))
        return f"Result(ids={self.ids!r}, {fields})"

    def _asdict(self) -> dict:
        return dict(zip(_RESULT_FIELDS, tuple.__iter__(self)))

    @property
    def ids(self) -> list:
        return [kept[0].id for kept in self[0]]

    @property
    def items(self) -> list:
        """The caller's original objects, in rank order."""
        return [kept.item for kept in self[0]]


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
