"""Where cluster ids come from: the loaded artifact (hot-swappable), a payload field, and what
happens when the artifact fails.

Concurrency model: the loaded artifact lives in one immutable :class:`Snapshot`. A query reads
:attr:`ClusterSource.current` once and uses that snapshot to the end, so
:meth:`ClusterSource.reload` (which builds the new snapshot completely, then assigns one
attribute) can never produce a torn read: a query sees the old artifact or the new one, never a
mix.

Fail-open (``on_error``): loading the artifact (at construction or in ``reload``) and looking
cluster ids up in it at query time are the only artifact operations. With ``on_error="last_good"``
or ``"passthrough"`` a failure there is logged (logger ``"diversify"``, level WARNING), counted
and absorbed: the source keeps serving the last good artifact, or none (every hit its own
cluster). ``"raise"`` propagates the error. Store failures are not artifact failures.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from ..errors import InputTypeError
from ..ids import id_kind_of
from .cursor import EMPTY, CursorState
from .idmatch import diagnose, id_info, lookup_ids
from .stats import Counters, Tally, describe
from .types import ClusterLookup, DocId, Hit

__all__ = ["ClusterSource", "Snapshot", "MappingLookup", "load_cluster_map", "is_load_failure",
           "MEMBER_CACHE_CLUSTERS"]

#: Clusters whose member lists one loaded artifact keeps for store-side exclusion.
MEMBER_CACHE_CLUSTERS = 64
#: Ids whose cluster id one loaded artifact keeps (about 100 bytes each); the cache starts over when full.
LOOKUP_CACHE_IDS = 1 << 15

log = logging.getLogger("diversify")
_STR, _INT = {str}, {int}


class MappingLookup:
    """Adapts a plain ``{id: cluster_id}`` mapping (int cluster ids) to the ``lookup(ids)`` protocol."""

    def __init__(self, mapping: Mapping) -> None:
        self._m = dict(mapping)  # a private copy: the caller may keep mutating theirs
        bad = next((v for v in self._m.values()
                    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < -1), None)
        if bad is not None:
            raise InputTypeError(f"a `cluster_map` mapping must map ids to int cluster ids (>= 0, or -1 for "
                                 f"unknown); got {type(bad).__name__} {bad!r}. For other labels store them in "
                                 "the payload and use cluster_field=.")
        self.fingerprint = ""
        self.key_kind = id_kind_of(next(iter(self._m), None))  # for the unknown-ids warning only

    def lookup(self, ids: Sequence[DocId]) -> np.ndarray:
        get = self._m.get
        return np.fromiter((get(i, -1) for i in ids), dtype=np.int64, count=len(ids))


def load_cluster_map(cluster_map: Any) -> Optional[ClusterLookup]:
    """A path (loaded with :func:`diversify.load`), a mapping, a lookup object or None, as a lookup."""
    if cluster_map is None:
        return None
    if isinstance(cluster_map, (str, os.PathLike)):
        from ..artifact import load  # lazy: only when a path is given

        return load(cluster_map)
    if isinstance(cluster_map, Mapping):
        return MappingLookup(cluster_map)
    live = getattr(cluster_map, "live_lookup", None)
    if callable(live):  # a diversify.Index: cluster ids read live (docs/index.md, "Serving")
        return live()
    if not callable(getattr(cluster_map, "lookup", None)):
        raise InputTypeError(
            "`cluster_map` must be a ClusterMap, a path to an artifact file, a {id: cluster_id} mapping "
            f"or None; got {type(cluster_map).__name__}. Use diversify.load(path) or pass the path.")
    return cluster_map


def is_load_failure(exc: BaseException, cluster_map: Any) -> bool:
    """Is ``exc`` (raised by ``load_cluster_map(cluster_map)``) an artifact failure rather than a
    programming error?

    Loading a *path* can fail in any way a hostile or damaged file makes it fail (ArtifactError,
    OSError, MemoryError, or a reader bug): all of those count. For an object or a mapping only
    value/IO/memory errors count; a wrong type (InputTypeError) is the caller's mistake.
    """
    if isinstance(cluster_map, (str, os.PathLike)):
        return isinstance(exc, Exception)
    return isinstance(exc, (ValueError, OSError, MemoryError)) and not isinstance(exc, InputTypeError)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The artifact answering now: one immutable value, swapped whole by a reload."""

    cluster_map: Optional[ClusterLookup]
    generation: int
    fingerprint: str
    degraded: bool = False  # serving undiversified ("passthrough") after a failed load
    id_kind: Optional[str] = None    # "str" / "int" for a ClusterMap; None: ids are opaque hashables
    uuid_form: Optional[str] = None  # how the artifact writes UUID ids, when its ids are UUIDs
    #: member ids of recently excluded clusters of 32 members or more (at most MEMBER_CACHE_CLUSTERS,
    #: each no longer than the exclusion budget allows): a hot cluster is listed once per artifact,
    #: not once per query
    members: dict = field(default_factory=dict, compare=False, repr=False)
    #: cluster id of each recently looked-up id (at most LOOKUP_CACHE_IDS); only for a loaded
    #: :class:`~diversify.ClusterMap`, which never changes (a lookup object of the caller's may)
    looked: Optional[dict] = field(default=None, compare=False, repr=False)

    @classmethod
    def of(cls, cluster_map: Optional[ClusterLookup], generation: int, degraded: bool = False) -> Snapshot:
        kind, form = id_info(cluster_map)
        # no import: when the artifact module is not loaded, no ClusterMap exists
        artifact = sys.modules.get(__name__.rsplit(".", 2)[0] + ".artifact.clustermap")
        looked: Optional[dict] = {} if artifact is not None and isinstance(cluster_map, artifact.ClusterMap) else None
        return cls(cluster_map, generation, str(getattr(cluster_map, "fingerprint", "") or ""), degraded, kind, form,
                   looked=looked)

    @property
    def serving(self) -> str:
        """``"passthrough"`` after a failed load, ``"artifact"``, or ``"none"`` when none was configured."""
        return "passthrough" if self.degraded else "artifact" if self.cluster_map is not None else "none"


class ClusterSource:
    """Cluster ids for hits: ``cluster_field`` of the payload first, then the artifact, else None.

    Owns the artifact (loading, hot reload) and its fail-open policy; counts failures in
    ``counters``.
    """

    def __init__(self, cluster_map: Any, *, cluster_field: Optional[str], on_error: str,
                 counters: Counters) -> None:
        self.cluster_field = cluster_field
        self.on_error = on_error
        self.counters = counters
        self._lock = threading.Lock()  # serializes reloads and the once-per-generation warning
        self._warned_generation = -1   # query-time failures: one WARNING per generation, then DEBUG
        try:
            cm = load_cluster_map(cluster_map)
        except Exception as exc:
            if on_error == "raise" or not is_load_failure(exc, cluster_map):
                raise
            self._note_load_error(exc, "at startup", "serving undiversified until a reload succeeds")
            cm = None
        self.current = Snapshot.of(cm, 0, degraded=cm is None and cluster_map is not None)

    # ------------------------------------------------------------------ loading

    def reload(self, cluster_map: Any) -> int:
        """Swap in a new artifact; returns the generation now serving (see :meth:`Diversifier.reload`)."""
        try:
            cm = load_cluster_map(cluster_map)
        except Exception as exc:
            if not is_load_failure(exc, cluster_map):
                raise
            return self._reload_failed(exc)
        with self._lock:
            self.current = Snapshot.of(cm, self.current.generation + 1)
            self.counters.add("reloads")
            return self.current.generation

    def _reload_failed(self, exc: Exception) -> int:
        if self.on_error == "raise":
            self.counters.add("load_errors", exc)
            raise exc
        if self.on_error == "last_good":
            self._note_load_error(exc, "on reload", "keeping the last good artifact "
                                  f"(generation {self.current.generation})")
            return self.current.generation
        self._note_load_error(exc, "on reload", "serving undiversified until a reload succeeds")
        with self._lock:
            self.current = Snapshot.of(None, self.current.generation + 1, degraded=True)
            return self.current.generation

    def _note_load_error(self, exc: BaseException, when: str, action: str) -> None:
        self.counters.add("load_errors", exc)
        log.warning("diversify: the cluster map could not be loaded %s (%s); on_error=%r: %s.",
                    when, describe(exc), self.on_error, action)

    def note_lookup_error(self, exc: BaseException, snap: Snapshot) -> None:
        """Count and log a query-time lookup failure absorbed by a fail-open policy."""
        self.counters.add("lookup_errors", exc)
        with self._lock:
            first = self._warned_generation != snap.generation
            self._warned_generation = snap.generation
        (log.warning if first else log.debug)(
            "diversify: cluster lookup failed in artifact generation %d (%s); on_error=%r: this query is "
            "served undiversified. Reload a good artifact.", snap.generation, describe(exc), self.on_error)

    # ------------------------------------------------------------------ lookups

    def _lookup(self, ids: Sequence[Any], snap: Snapshot) -> Optional[list]:
        """Artifact cluster ids of ``ids`` (ints, -1 unknown); None after a failure absorbed by a
        fail-open policy (counted and logged).

        Ids looked up before in ``snap`` are answered from its cache (an artifact does not change
        under a snapshot), when every id is exactly a str or exactly an int: then dict equality
        is the artifact's own (``1``, ``True`` and ``1.0`` never share an entry with ``"1"``).
        """
        cache = snap.looked
        if cache is not None:
            types = set(map(type, ids))
            if types == _STR or types == _INT:
                got = list(map(cache.get, ids))
                if None not in got:
                    return got
                at = [j for j, c in enumerate(got) if c is None]
                need = [ids[j] for j in at]
                found = self._lookup_artifact(need, snap)
                if found is None:
                    return None
                if len(cache) + len(need) > LOOKUP_CACHE_IDS:
                    cache.clear()
                cache.update(zip(need, found))
                for j, c in zip(at, found):
                    got[j] = c
                return got
        return self._lookup_artifact(ids, snap)

    def _lookup_artifact(self, ids: Sequence[Any], snap: Snapshot) -> Optional[list]:
        cm = snap.cluster_map
        if self.on_error == "raise":
            return lookup_ids(cm, ids, snap.id_kind, snap.uuid_form).tolist()
        try:
            looked = lookup_ids(cm, ids, snap.id_kind, snap.uuid_form)
            if looked.shape != (len(ids),):
                raise ValueError(f"lookup returned shape {looked.shape} for {len(ids)} ids")
            return looked.tolist()
        except Exception as exc:  # fail open: a broken artifact must not fail the query
            self.note_lookup_error(exc, snap)
            return None

    def cluster_ids(self, hits: Sequence[Hit], snap: Snapshot, tally: Optional[Tally] = None,
                    unknown: Any = None) -> list:
        """Cluster id of each hit: the payload field if set and present, else the artifact, else
        ``unknown`` (None; the refetch loop passes -1, which :func:`select` reads the same way).

        ``tally`` (if given) counts the hits whose cluster was looked for and those found nowhere
        (hits of a lookup that failed are not counted: ``lookup_errors`` has them).
        """
        field = self.cluster_field
        cm = snap.cluster_map
        if field is None:  # the per-query common case: one lookup, no per-hit Python work
            if cm is None:
                return [unknown] * len(hits)
            out = self._lookup([h.id for h in hits], snap)
            if out is None:
                return [unknown] * len(hits)
            missing = out.count(-1)
            if tally is not None:
                tally.looked += len(out)
                if missing:
                    tally.unknown += missing
                    if tally.sample is None:
                        tally.sample = hits[out.index(-1)].id
            if missing and unknown != -1:
                out = [unknown if c == -1 else c for c in out]
            return out
        out = [unknown] * len(hits)
        need: list[int] = []
        for j, h in enumerate(hits):
            p = h.payload
            v = p.get(field) if p is not None else None
            if v is None or v == -1:
                need.append(j)
            else:
                out[j] = v
        if cm is None or not need:
            if tally is not None:
                self._tally(tally, hits, need, len(hits))
            return out
        found = self._lookup([hits[j].id for j in need], snap)
        if found is None:
            if tally is not None:
                tally.looked += len(hits) - len(need)
            return out
        still = []
        for j, c in zip(need, found):
            if c != -1:
                out[j] = c
            else:
                still.append(j)
        if tally is not None:
            self._tally(tally, hits, still, len(hits))
        return out

    @staticmethod
    def _tally(tally: Tally, hits: Sequence[Hit], unknown: Sequence[int], looked: int) -> None:
        tally.looked += looked
        if len(unknown):
            tally.unknown += len(unknown)
            if tally.sample is None:
                tally.sample = hits[unknown[0]].id

    def warn_unknown(self, snap: Snapshot, looked: int, unknown: int, sample: Any) -> None:
        """The once-per-generation WARNING that most hits are unknown, with the likely cause."""
        kind = snap.id_kind or getattr(snap.cluster_map, "key_kind", None)
        cause = diagnose(sample, kind, snap.uuid_form, self.cluster_field, snap.cluster_map is not None)
        log.warning("diversify: %d of the %d hits looked up in artifact generation %d are unknown to it, so "
                    "nothing is folded for them. Likely cause: %s. See docs/online.md, 'Ids that match'.",
                    unknown, looked, snap.generation, cause)

    def shown_before(self, snap: Snapshot, cur: CursorState) -> tuple[frozenset, frozenset, frozenset]:
        """``(ids, clusters, carried)`` for what earlier pages showed: the cursor's anchor ids, the
        clusters to leave out, and the cluster ids the next cursor carries on as values.

        Clusters are re-derived from the anchors with the artifact answering now (a cursor may
        outlive a reload, and two artifacts can number clusters differently), plus the payload
        cluster ids the cursor carries. A version-1 cursor's cluster ids are used only when they
        came from payloads or there is no artifact.
        """
        if cur is EMPTY:
            return cur.ids, cur.clusters, cur.clusters
        cm = snap.cluster_map
        carried = cur.clusters if (not cur.legacy or cm is None or self.cluster_field is not None) else frozenset()
        if cm is None or not cur.anchors:
            return cur.ids, carried, carried
        looked = self._lookup(cur.anchors, snap)
        if looked is None:
            return cur.ids, cur.clusters, carried
        return cur.ids, frozenset(c for c in looked if c != -1) | carried, carried

    def record(self, res: Any, fetched: int, snap: Snapshot, tally: Optional[Tally]) -> None:
        """Count one answered query; warn (once per generation) when most hits were unknown."""
        warn = self.counters.record(res, fetched, snap.degraded, tally, snap.generation)
        if warn is not None and tally is not None:
            self.warn_unknown(snap, warn[0], warn[1], tally.sample)
