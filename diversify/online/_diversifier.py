"""`Diversifier`: wrap any search callable; over-fetch, select, refetch when short.

Concurrency model: the loaded artifact lives in one immutable ``_State`` object. A query reads
``self._state`` once and uses that snapshot to the end, so :meth:`Diversifier.reload` (which
builds the new state completely, then assigns the attribute) can never produce a torn read: a
query sees the old artifact or the new one, never a mix. The only shared mutable data are the
stats counters, guarded by a lock.

Fail-open (``on_error``): loading the artifact (at construction or in :meth:`Diversifier.reload`)
and looking cluster ids up in it at query time are the only artifact operations. With
``on_error="last_good"`` or ``"passthrough"`` a failure there is logged (logger ``"diversify"``,
level WARNING), counted in :meth:`Diversifier.stats` and absorbed: the wrapper keeps serving with
the last good artifact, or undiversified (every hit its own cluster). ``"raise"`` (the default)
propagates the error. Store failures are not artifact failures and always raise ``StoreError``.
"""

from __future__ import annotations

import inspect
import logging
import math
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Optional

import numpy as np

from ..errors import ConfigError, InputError, InputTypeError, StoreError
from ._cursor import EMPTY, decode_cursor, encode_cursor
from ._select import check_params, check_text_threshold, select
from ._types import Hit, Result

__all__ = ["Diversifier", "as_hit", "ON_ERROR"]

log = logging.getLogger("diversify")

#: Policies for an artifact that cannot be loaded or read (see :class:`Diversifier`).
ON_ERROR = ("raise", "last_good", "passthrough")



def _load_failed(exc: BaseException, cluster_map) -> bool:
    """Is ``exc`` (raised by ``_load(cluster_map)``) an artifact failure rather than a programming error?

    Loading a *path* can fail in any way a hostile or damaged file makes it fail (ArtifactError,
    OSError, MemoryError, or a reader bug): all of those count. For an object or a mapping only
    value/IO/memory errors count; a wrong type (InputTypeError) is the caller's mistake.
    """
    if isinstance(cluster_map, (str, os.PathLike)):
        return isinstance(exc, Exception)
    return isinstance(exc, (ValueError, OSError, MemoryError)) and not isinstance(exc, InputTypeError)


class _State:
    __slots__ = ("cluster_map", "generation", "fingerprint")

    def __init__(self, cluster_map, generation: int, fingerprint: str):
        self.cluster_map = cluster_map
        self.generation = generation
        self.fingerprint = fingerprint


class _MappingLookup:
    """Adapts a plain ``{id: cluster_id}`` mapping (int cluster ids) to the ``lookup(ids)`` protocol."""

    def __init__(self, mapping: Mapping):
        self._m = dict(mapping)  # a private copy: the caller may keep mutating theirs
        bad = next((v for v in self._m.values()
                    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < -1), None)
        if bad is not None:
            raise InputTypeError(f"a `cluster_map` mapping must map ids to int cluster ids (>= 0, or -1 for "
                                 f"unknown); got {type(bad).__name__} {bad!r}. For other labels store them in "
                                 "the payload and use cluster_field=.")
        self.fingerprint = ""

    def lookup(self, ids):
        get = self._m.get
        return np.fromiter((get(i, -1) for i in ids), dtype=np.int64, count=len(ids))


def _load(cluster_map):
    if cluster_map is None:
        return None
    if isinstance(cluster_map, (str, os.PathLike)):
        from ..artifact import load  # lazy: only when a path is given

        return load(cluster_map)
    if isinstance(cluster_map, Mapping):
        return _MappingLookup(cluster_map)
    if not callable(getattr(cluster_map, "lookup", None)):
        raise InputTypeError(
            "`cluster_map` must be a ClusterMap, a path to an artifact file, a {id: cluster_id} mapping "
            f"or None; got {type(cluster_map).__name__}. Use diversify.load(path) or pass the path.")
    return cluster_map


def _describe(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= 500 else text[:497] + "..."


def _payload_of(obj) -> Optional[Mapping]:
    p = getattr(obj, "payload", None)
    if p is None:
        p = getattr(obj, "metadata", None)
    return p if isinstance(p, Mapping) else None


def _text_of(item) -> Optional[str]:
    if isinstance(item, Mapping):
        t = item.get("text", item.get("content"))
    else:
        t = None
        for attr in ("text", "page_content", "content"):
            t = getattr(item, attr, None)
            if isinstance(t, str):
                break
    return t if isinstance(t, str) else None


def as_hit(raw: Any) -> Hit:
    """Normalize one result of a search callable to a :class:`Hit` (the original kept as ``item``).

    Accepts a :class:`Hit`, an ``(id, score)`` / ``(id, score, payload)`` tuple, an
    ``(object, score)`` tuple (e.g. LangChain's ``(Document, score)``; ``item`` is the object),
    a mapping with ``id`` (and ``score``, ``payload`` or ``metadata``, ``vector``) keys, or an
    object with ``.id`` (and ``.score``, ``.payload`` or ``.metadata``) attributes.
    """
    if isinstance(raw, Hit):
        return raw
    if isinstance(raw, tuple) and 1 <= len(raw) <= 3:
        first = raw[0]
        score = raw[1] if len(raw) > 1 else None
        if isinstance(first, (str, int, np.integer)) and not isinstance(first, bool):
            payload = raw[2] if len(raw) == 3 else None
            return Hit(first, score, payload if isinstance(payload, Mapping) else None, None, raw)
        # (object, score), e.g. LangChain's (Document, score): the id comes from the object
        inner = as_hit(first)
        return Hit(inner.id, score, inner.payload, inner.vector, first)
    if isinstance(raw, Mapping):
        if "id" not in raw:
            raise StoreError(f"a search result mapping must have an 'id' key; got keys {sorted(map(str, raw))[:8]}. "
                             "Return Hit objects, (id, score) tuples or mappings with 'id' and 'score'.")
        payload = raw.get("payload", raw.get("metadata"))
        vec = raw.get("vector")
        return Hit(raw["id"], raw.get("score"), payload if isinstance(payload, Mapping) else None,
                   vec if isinstance(vec, (list, np.ndarray)) else None, raw)
    hid = getattr(raw, "id", None)
    if hid is None:
        raise StoreError(f"cannot read an id from a search result of type {type(raw).__name__}. "
                         "Return Hit objects, (id, score) tuples, mappings with 'id', or objects with .id.")
    vec = getattr(raw, "vector", None)
    return Hit(hid, getattr(raw, "score", None), _payload_of(raw),
               vec if isinstance(vec, (list, np.ndarray)) else None, raw)


def _supports_exclude(fn) -> bool:
    flag = getattr(fn, "supports_exclude", None)
    if flag is None:
        flag = getattr(getattr(fn, "__self__", None), "supports_exclude", None)
    if flag is not None:
        return bool(flag)
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    if any(p.name == "exclude_ids" for p in params):
        return True
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 3 or any(p.kind == p.VAR_POSITIONAL for p in params)


def _resolve_search(search):
    """A store adapter (has ``.search``) or a plain callable -> (callable, supports_exclude)."""
    if not callable(search) and callable(getattr(search, "search", None)):
        search = search.search
    elif callable(getattr(search, "search", None)) and hasattr(search, "supports_exclude"):
        search = search.search
    if not callable(search):
        raise InputTypeError(f"`search` must be callable as search(query, k[, exclude_ids]) or a store "
                             f"adapter; got {type(search).__name__}.")
    return search, _supports_exclude(search)


_STAT_KEYS = ("queries", "backend_calls", "refetch_rounds", "short", "exhausted", "returned",
              "omitted", "dropped", "fetched", "reloads", "load_errors", "lookup_errors", "degraded_queries")


class Diversifier:
    """Keep at most ``max_per_cluster`` results per cluster in any search's top-k.

    Parameters
    ----------
    cluster_map : ClusterMap, str, os.PathLike, Mapping or None
        The artifact (or its path, loaded with :func:`diversify.load`; or a plain
        ``{id: cluster_id}`` mapping). ``None`` when the store carries cluster ids in its
        payload (``cluster_field``) or only on-the-fly folding is wanted.
    cluster_field : str, optional
        Payload / metadata field that holds each hit's cluster id (see
        ``write_clusters`` of the store adapters). Takes precedence over ``cluster_map`` for
        hits that carry it.
    k : int
        Default number of results per query.
    max_per_cluster : int
        At most this many results per cluster; higher -> more near-duplicates allowed.
    fetch_k : int, optional
        Candidates asked for in the first call; higher -> fewer refetches, slower calls.
        Default ``k + ceil(k / max_per_cluster) + 5`` (25 for k=10, n=1).
    max_rounds : int
        Refetch rounds allowed after the first call (0 disables refetching); higher -> fewer
        short results, more backend calls in the worst case.
    unknown : {"own", "drop"}
        Policy for ids the artifact does not know (see :func:`select`).
    fold_threshold : float, optional
        On-the-fly folding of unknown hits that carry a vector (see :func:`select`).
    fold_text_threshold : float, optional
        On-the-fly folding of unknown hits that carry text, by word-shingle Jaccard (see
        :func:`select`).
    max_fetch_k : int
        Cap on the candidates asked for in one call (stores without exclusion filters are
        asked for ever larger k). Default ``fetch_k * 2 ** max_rounds`` capped at 10_000.
    max_exclude_members : int
        On a refetch from a store with exclusion filters, also exclude up to this many not yet
        seen members of clusters that are already full (per the artifact's ``members``), and of
        clusters shown on earlier pages; higher -> more productive refetches, longer filters.
        0 excludes only the ids seen. Members excluded this way never show up in ``folded``.
    on_error : {"raise", "last_good", "passthrough"}
        What to do when the artifact cannot be loaded (at construction or in :meth:`reload`) or
        its lookup fails while answering a query. ``"raise"`` (default): raise the error
        (``ArtifactError`` for a bad file). ``"last_good"``: keep serving with the last artifact
        that loaded (undiversified if none ever did) and never raise. ``"passthrough"``: serve
        undiversified (every hit its own cluster; ``cluster_field`` still applies) until a
        reload succeeds, and never raise. Either fail-open policy logs a WARNING on logger
        ``"diversify"`` and counts the failure in :meth:`stats` (``load_errors``,
        ``lookup_errors``, ``degraded_queries``, ``serving``, ``last_error``). A wrong *type*
        of ``cluster_map`` is a programming error and raises under every policy.

    Notes
    -----
    Thread-safe: one instance serves concurrent queries; :meth:`reload` swaps the artifact
    atomically under live traffic. Nothing here imports numba or a vendor SDK.
    """

    def __init__(self, cluster_map=None, *, cluster_field: Optional[str] = None, k: int = 10,
                 max_per_cluster: int = 1, fetch_k: Optional[int] = None, max_rounds: int = 3,
                 unknown: str = "own", fold_threshold: Optional[float] = None,
                 fold_text_threshold: Optional[float] = None, max_fetch_k: Optional[int] = None,
                 max_exclude_members: int = 1000, on_error: str = "raise"):
        if on_error not in ON_ERROR:
            raise ConfigError(f"`on_error` must be one of {list(ON_ERROR)}; got on_error={on_error!r}. Use "
                              "'last_good' to keep serving when an artifact cannot be loaded, 'raise' to fail fast.")
        k, n, fold_threshold = check_params(k, max_per_cluster, unknown, fold_threshold)
        fold_text_threshold = check_text_threshold(fold_text_threshold)
        if cluster_field is not None and (not isinstance(cluster_field, str) or not cluster_field):
            raise ConfigError(f"`cluster_field` must be a non-empty string naming a payload field; "
                              f"got cluster_field={cluster_field!r}. Use e.g. cluster_field='cluster_id'.")
        if isinstance(max_rounds, bool) or not isinstance(max_rounds, int) or not 0 <= max_rounds <= 32:
            raise ConfigError(f"`max_rounds` must be an int in [0, 32]; got max_rounds={max_rounds!r}. "
                              "Use 0 to never refetch, 3 (default) for a bounded number of extra calls.")
        if fetch_k is None:
            fetch_k = k + math.ceil(k / n) + 5
        elif isinstance(fetch_k, bool) or not isinstance(fetch_k, int) or fetch_k < k:
            raise ConfigError(f"`fetch_k` must be an int >= k ({k}); got fetch_k={fetch_k!r}. "
                              f"Use e.g. fetch_k={2 * k}, or leave it unset for the default.")
        if isinstance(max_exclude_members, bool) or not isinstance(max_exclude_members, int) \
                or max_exclude_members < 0:
            raise ConfigError(f"`max_exclude_members` must be an int >= 0; got {max_exclude_members!r}. "
                              "Use 0 to exclude only seen ids on refetch.")
        if max_fetch_k is None:
            max_fetch_k = max(fetch_k, min(fetch_k * 2 ** max_rounds, 10_000))
        elif isinstance(max_fetch_k, bool) or not isinstance(max_fetch_k, int) or max_fetch_k < fetch_k:
            raise ConfigError(f"`max_fetch_k` must be an int >= fetch_k ({fetch_k}); got {max_fetch_k!r}.")
        self.k = k
        self.max_per_cluster = n
        self.fetch_k = fetch_k
        self.max_fetch_k = max_fetch_k
        self.max_rounds = max_rounds
        self.max_exclude_members = max_exclude_members
        self.unknown = unknown
        self.fold_threshold = fold_threshold
        self.fold_text_threshold = fold_text_threshold
        self.cluster_field = cluster_field
        self.on_error = on_error
        self._lock = threading.Lock()
        self._stats = dict.fromkeys(_STAT_KEYS, 0)
        self._last_error: Optional[str] = None
        self._warned_generation = -1  # query-time failures: one WARNING per generation, then DEBUG
        if on_error == "raise":
            cm = _load(cluster_map)
        else:
            try:
                cm = _load(cluster_map)
            except Exception as exc:
                if not _load_failed(exc, cluster_map):
                    raise
                self._note_load_error(exc, "at startup", "serving undiversified until a reload succeeds")
                cm = None
        self._state = _State(cm, 0, str(getattr(cm, "fingerprint", "") or ""))
        # "passthrough" after a failure: a state with no artifact; "degraded" marks it for stats
        self._degraded = cm is None and cluster_map is not None

    # ------------------------------------------------------------------ artifact

    @property
    def cluster_map(self):
        """The artifact currently answering (a snapshot; may be replaced by :meth:`reload`)."""
        return self._state.cluster_map

    @property
    def generation(self) -> int:
        """Increments on every :meth:`reload`; reported as ``Result.generation``."""
        return self._state.generation

    def reload(self, cluster_map) -> int:
        """Swap in a new artifact (object or path) under live traffic; returns the generation now serving.

        The file is read and validated completely before the swap. If loading fails:
        ``on_error="raise"`` raises and the old artifact stays in place; ``"last_good"`` logs a
        warning, counts it and keeps the old artifact (the returned generation is unchanged);
        ``"passthrough"`` logs, counts and swaps in "no artifact" (a new generation, undiversified)
        until a later reload succeeds.
        """
        try:
            cm = _load(cluster_map)
        except Exception as exc:
            if not _load_failed(exc, cluster_map):
                raise
            if self.on_error == "raise":
                with self._lock:
                    self._stats["load_errors"] += 1
                    self._last_error = _describe(exc)
                raise
            if self.on_error == "last_good":
                self._note_load_error(exc, "on reload", "keeping the last good artifact "
                                      f"(generation {self._state.generation})")
                return self._state.generation
            self._note_load_error(exc, "on reload", "serving undiversified until a reload succeeds")
            with self._lock:
                self._state = _State(None, self._state.generation + 1, "")
                self._degraded = True
                return self._state.generation
        with self._lock:
            self._state = _State(cm, self._state.generation + 1, str(getattr(cm, "fingerprint", "") or ""))
            self._degraded = False
            self._stats["reloads"] += 1
            return self._state.generation

    def _note_load_error(self, exc: BaseException, when: str, action: str) -> None:
        msg = _describe(exc)
        with self._lock:
            self._stats["load_errors"] += 1
            self._last_error = msg
        log.warning("diversify: the cluster map could not be loaded %s (%s); on_error=%r: %s.",
                    when, msg, self.on_error, action)

    def _note_lookup_error(self, exc: BaseException, state: _State) -> None:
        msg = _describe(exc)
        with self._lock:
            self._stats["lookup_errors"] += 1
            self._last_error = msg
            first = self._warned_generation != state.generation
            self._warned_generation = state.generation
        (log.warning if first else log.debug)(
            "diversify: cluster lookup failed in artifact generation %d (%s); on_error=%r: this query is "
            "served undiversified. Reload a good artifact.", state.generation, msg, self.on_error)

    def expand(self, kept) -> list:
        """All member ids of a kept hit's cluster (or of a cluster id), from the artifact.

        For a UI's "show the N similar results": ``kept.folded`` lists the ones this query
        fetched; ``expand`` lists every member the artifact knows (the hit itself included).
        An unknown hit (``cluster_id is None``) expands to itself and what was folded into it.
        """
        cluster_id = getattr(kept, "cluster_id", kept)
        if cluster_id is None:
            if hasattr(kept, "hit"):
                return [kept.hit.id] + [f.id for f in kept.folded]
            return []
        members = getattr(self._state.cluster_map, "members", None)
        if members is None:
            raise ConfigError("`expand` needs an artifact with cluster members (a ClusterMap); this "
                              "Diversifier has none. Pass cluster_map=path or a ClusterMap.")
        return list(members(cluster_id))

    def stats(self) -> dict:
        """A snapshot of the counters (queries, backend_calls, refetch_rounds, short, ...).

        Fail-open counters: ``load_errors`` (failed loads at startup or reload),
        ``lookup_errors`` (query-time lookup failures absorbed; those hits count as unknown),
        ``degraded_queries`` (queries answered in passthrough after a failed load), ``serving`` (``"artifact"``, ``"none"`` when no
        artifact was configured, or ``"passthrough"`` after a failure) and ``last_error``.
        """
        with self._lock:
            out = dict(self._stats)
            out["last_error"] = self._last_error
            degraded = self._degraded
        state = self._state
        out["generation"] = state.generation
        out["serving"] = ("passthrough" if degraded else "artifact" if state.cluster_map is not None else "none")
        return out

    def _record(self, res: Result, fetched: int) -> None:
        with self._lock:
            s = self._stats
            s["queries"] += 1
            s["degraded_queries"] += self._degraded
            s["backend_calls"] += res.backend_calls
            s["refetch_rounds"] += res.rounds
            s["short"] += res.short
            s["exhausted"] += res.exhausted
            s["returned"] += len(res.hits)
            s["omitted"] += res.omitted
            s["dropped"] += res.dropped
            s["fetched"] += fetched

    # ------------------------------------------------------------------ cluster ids

    def cluster_ids(self, hits: Sequence[Hit]) -> list:
        """Cluster id of each hit: the payload field if set and present, else the artifact, else None."""
        return self._cluster_ids(hits, self._state)

    def _cluster_ids(self, hits: Sequence[Hit], state: _State) -> list:
        out: list = [None] * len(hits)
        missing = range(len(hits))
        field = self.cluster_field
        if field is not None:
            missing = []
            for j, h in enumerate(hits):
                p = h.payload
                v = p.get(field) if p is not None else None
                if v is None or v == -1:
                    missing.append(j)
                else:
                    out[j] = v
        cm = state.cluster_map
        if cm is not None and len(missing):
            if self.on_error == "raise":
                looked = cm.lookup([hits[j].id for j in missing])
            else:
                try:
                    looked = np.asarray(cm.lookup([hits[j].id for j in missing]))
                    if looked.shape != (len(missing),):
                        raise ValueError(f"lookup returned shape {looked.shape} for {len(missing)} ids")
                except Exception as exc:  # fail open: a broken artifact must not fail the query
                    self._note_lookup_error(exc, state)
                    return out
            for j, c in zip(missing, looked.tolist()):
                if c != -1:
                    out[j] = c
        return out

    # ------------------------------------------------------------------ per-query engine

    def _params(self, k, max_per_cluster):
        k = self.k if k is None else k
        n = self.max_per_cluster if max_per_cluster is None else max_per_cluster
        k, n, _ = check_params(k, n, self.unknown, None)
        return k, n

    def _excluded_clusters(self, state: _State, cur) -> frozenset:
        """Clusters shown on earlier pages.

        Re-derived from the cursor's ids with the artifact answering now (a cursor may outlive a
        reload, and two artifacts can number clusters differently); cluster ids the cursor
        recorded are used as such only when they came from payloads or there is no artifact.
        """
        if cur is EMPTY:
            return frozenset()
        cm = state.cluster_map
        if cm is None:
            return cur.clusters
        try:
            derived = {c for c in np.asarray(cm.lookup(list(cur.order))).tolist() if c != -1}
        except Exception as exc:
            if self.on_error == "raise":
                raise
            self._note_lookup_error(exc, state)
            return cur.clusters
        if self.cluster_field is not None:
            derived |= cur.clusters
        return frozenset(derived)

    def _engine(self, query, k, n, groups, cursor, supports_exclude):
        """Generator: yields ``(ask_k, exclude_ids)`` requests, receives raw results; returns Result."""
        state = self._state  # one snapshot for the whole query: no torn read across a reload
        cur = decode_cursor(cursor)
        excluded = self._excluded_clusters(state, cur)
        seen = set(cur.ids)
        seen_order = list(cur.order)
        pool: list = []
        pool_cids: list = []
        calls = rounds = 0
        ask = self.fetch_k if supports_exclude else min(self.fetch_k + len(seen_order), self.max_fetch_k)
        fetched = 0
        # Unseen members of clusters that are already full (or shown on earlier pages) can only be
        # folded: exclude them in the store too, so refetches bring new clusters (bounded).
        members_of = None
        if supports_exclude and self.max_exclude_members and state.cluster_map is not None:
            members_of = getattr(state.cluster_map, "members", None)
        member_excl: list = []
        member_done: set = set()

        def exclude_members(clusters):
            budget = self.max_exclude_members - len(member_excl)
            for c in clusters:
                if budget <= 0:
                    return
                if c in member_done or isinstance(c, bool) or not isinstance(c, (int, np.integer)):
                    continue
                member_done.add(c)
                try:
                    members = members_of(c)
                except (LookupError, ValueError, TypeError):  # a payload cluster id the map lacks
                    continue
                except Exception as exc:
                    if self.on_error == "raise":
                        raise
                    self._note_lookup_error(exc, state)
                    continue
                for m in members:
                    if m not in seen:
                        member_excl.append(m)
                        budget -= 1
                        if budget <= 0:
                            return

        if members_of is not None and excluded:
            exclude_members(sorted(c for c in excluded if isinstance(c, int)))
        while True:
            raw = yield (ask, (seen_order + member_excl) if supports_exclude else None)
            calls += 1
            if raw is None:
                raw = ()
            try:
                got = len(raw)
            except TypeError:
                raise StoreError(f"the search callable must return a sequence of hits; got "
                                 f"{type(raw).__name__}. Return a list.") from None
            fetched += got
            new = []
            want_text = self.fold_text_threshold is not None
            for r in raw:
                h = as_hit(r)
                if h.id in seen:
                    continue
                if want_text and h.text is None:
                    t = _text_of(h.item) if h.item is not None else None
                    if t is None and h.payload is not None:
                        t = _text_of(h.payload)
                    if t is not None:
                        h = Hit(h.id, h.score, h.payload, h.vector, h.item, t)
                seen.add(h.id)
                seen_order.append(h.id)
                new.append(h)
            if new:
                pool.extend(new)
                pool_cids.extend(self._cluster_ids(new, state))
            res = select(pool, pool_cids, k=k, max_per_cluster=n, unknown=self.unknown,
                         fold_threshold=self.fold_threshold,
                         fold_text_threshold=self.fold_text_threshold, groups=groups, exclude_clusters=excluded)
            store_done = got < ask
            if not res.short or store_done or rounds >= self.max_rounds:
                break
            if not supports_exclude and ask >= self.max_fetch_k:
                break
            rounds += 1
            ask = min(ask * 2, self.max_fetch_k)
            if members_of is not None:
                counts: dict = {}
                for kp in res.hits:
                    if kp.cluster_id is not None:
                        counts[kp.cluster_id] = counts.get(kp.cluster_id, 0) + 1
                exclude_members([c for c, m in counts.items() if m >= n])
        # The cursor remembers what this page showed (kept + folded) on top of earlier pages.
        shown = list(cur.order)
        clusters = set(cur.clusters)
        for kp in res.hits:
            shown.append(kp.hit.id)
            shown.extend(f.id for f in kp.folded)
            if kp.cluster_id is not None:
                clusters.add(kp.cluster_id)
        token = encode_cursor(shown, clusters, state.fingerprint)
        out = Result(hits=res.hits, groups=res.groups, k=k, omitted=res.omitted, dropped=res.dropped,
                     considered=res.considered, exhausted=res.short and store_done, short=res.short,
                     backend_calls=calls, rounds=rounds, cursor=token, generation=state.generation)
        self._record(out, fetched)
        return out

    # ------------------------------------------------------------------ public entry points

    def wrap(self, search) -> Callable[..., Result]:
        """Wrap a search callable (or a :mod:`diversify.stores` adapter) into a diversified one.

        Parameters
        ----------
        search : callable or store adapter
            ``search(query, k)`` or ``search(query, k, exclude_ids)`` returning ranked hits (see
            :class:`~diversify.online.SearchFn`). Exclusion support is read from a
            ``supports_exclude`` attribute, else from the signature (a third parameter or one
            named ``exclude_ids``). Without it, refetching asks for a larger k and skips what
            was already seen.

        Returns
        -------
        callable
            ``diversified(query, *, k=None, max_per_cluster=None, groups=False, cursor=None)
            -> Result``. ``Result.exhausted`` says the store ran out; ``Result.cursor`` gives
            the next page without repeating this page's clusters.
        """
        fn, supports_exclude = _resolve_search(search)

        def diversified(query, *, k=None, max_per_cluster=None, groups=False, cursor=None) -> Result:
            kk, nn = self._params(k, max_per_cluster)
            gen = self._engine(query, kk, nn, groups, cursor, supports_exclude)
            req = next(gen)
            while True:
                ask, exclude = req
                try:
                    raw = fn(query, ask, exclude) if supports_exclude else fn(query, ask)
                except StoreError:
                    raise
                except Exception as exc:
                    raise _as_store_error(exc) from exc
                try:
                    req = gen.send(raw)
                except StopIteration as stop:
                    return stop.value

        diversified.__wrapped__ = fn
        diversified.__doc__ = f"Diversified {getattr(fn, '__name__', 'search')} (see Diversifier.wrap)."
        return diversified

    def awrap(self, search) -> Callable[..., Any]:
        """Async twin of :meth:`wrap`: ``await diversified(query, ...) -> Result``.

        ``search`` is an async callable (or an adapter whose ``.search`` is a coroutine
        function). A plain callable (e.g. a :mod:`diversify.stores` adapter) is accepted too; it
        then runs in the event loop's thread, so keep it to fast, local stores.
        """
        fn, supports_exclude = _resolve_search(search)

        async def diversified(query, *, k=None, max_per_cluster=None, groups=False, cursor=None) -> Result:
            kk, nn = self._params(k, max_per_cluster)
            gen = self._engine(query, kk, nn, groups, cursor, supports_exclude)
            req = next(gen)
            while True:
                ask, exclude = req
                try:
                    raw = fn(query, ask, exclude) if supports_exclude else fn(query, ask)
                    if inspect.isawaitable(raw):
                        raw = await raw
                except StoreError:
                    raise
                except Exception as exc:
                    raise _as_store_error(exc) from exc
                try:
                    req = gen.send(raw)
                except StopIteration as stop:
                    return stop.value

        diversified.__wrapped__ = fn
        return diversified

    def select_items(self, items: Sequence[Any], *, ids=None, scores=None, payloads=None, vectors=None,
                     texts=None, cluster_ids=None, k: Optional[int] = None, max_per_cluster: Optional[int] = None,
                     groups: bool = False, cursor: Optional[str] = None) -> Result:
        """Diversify a fixed, already ranked list (no refetch): the entry point of the
        LangChain compressor, LlamaIndex postprocessor and Haystack ranker.

        Parameters
        ----------
        items : sequence
            The caller's objects, best first; returned untouched as ``Kept.item``.
        ids : sequence or callable, optional
            One id per item, or ``ids(item) -> id``. Default: ``item.id`` / ``item["id"]``.
        scores : sequence, optional
            One score per item (used for deterministic tie-breaking). Default: ``item.score``
            when present.
        payloads : sequence of Mapping, optional
            Where ``cluster_field`` is read. Default: ``item.payload`` / ``item.metadata``.
        vectors : sequence, optional
            For on-the-fly folding (``fold_threshold``). Default: ``item.vector`` /
            ``item["vector"]`` when present.
        texts : sequence of str, optional
            For on-the-fly folding by text (``fold_text_threshold``). Default: the item's
            ``text`` / ``page_content`` / ``content`` attribute or ``"text"`` / ``"content"`` key.
        cluster_ids : sequence, optional
            Explicit cluster ids (skip the artifact and the payload field).
        k, max_per_cluster : int, optional
            Override the instance defaults. ``k`` defaults to the instance's ``k`` but never
            more than ``len(items)``.
        groups : bool
            Grouped output (see :func:`select`).
        cursor : str, optional
            Leave out what an earlier page (``Result.cursor``) showed.

        Returns
        -------
        Result
            ``backend_calls == 0``; ``exhausted`` is True when fewer than k survive.
        """
        if isinstance(items, (str, bytes)) or not hasattr(items, "__len__"):
            raise InputTypeError(f"`items` must be a sequence; got {type(items).__name__}. Pass a list.")
        size = len(items)
        for name, seq in (("scores", scores), ("payloads", payloads), ("vectors", vectors),
                          ("texts", texts), ("cluster_ids", cluster_ids)):
            if seq is not None and len(seq) != size:
                raise InputError(f"`{name}` must have one entry per item ({size}); got {len(seq)}.")
        if ids is not None and not callable(ids) and len(ids) != size:
            raise InputError(f"`ids` must have one entry per item ({size}); got {len(ids)}.")
        hits = []
        for j, item in enumerate(items):
            if ids is None:
                hid = item.get("id") if isinstance(item, Mapping) else getattr(item, "id", None)
            else:
                hid = ids(item) if callable(ids) else ids[j]
            if hid is None:
                raise InputError(f"item {j} has no id; got {type(item).__name__} without .id. "
                                 "Pass ids=[...] or ids=lambda item: ..., e.g. from its metadata.")
            if scores is not None:
                s = scores[j]
            else:
                s = item.get("score") if isinstance(item, Mapping) else getattr(item, "score", None)
            if payloads is not None:
                p = payloads[j]
            elif isinstance(item, Mapping):
                p = item.get("payload", item.get("metadata"))
            else:
                p = _payload_of(item)
            if vectors is not None:
                v = vectors[j]
            elif self.fold_threshold is not None:
                v = item.get("vector") if isinstance(item, Mapping) else getattr(item, "vector", None)
            else:
                v = None
            t = None
            if texts is not None:
                t = texts[j]
            elif self.fold_text_threshold is not None:
                t = _text_of(item)
            hits.append(Hit(hid, s, p if isinstance(p, Mapping) else None, v, item, t))
        state = self._state
        kk, nn = self._params(min(self.k, max(size, 1)) if k is None else k, max_per_cluster)
        cids = list(cluster_ids) if cluster_ids is not None else self._cluster_ids(hits, state)
        cur = decode_cursor(cursor)
        if cur.ids:
            keep = [j for j, h in enumerate(hits) if h.id not in cur.ids]
            hits = [hits[j] for j in keep]
            cids = [cids[j] for j in keep]
        res = select(hits, cids, k=kk, max_per_cluster=nn, unknown=self.unknown,
                     fold_threshold=self.fold_threshold,
                         fold_text_threshold=self.fold_text_threshold, groups=groups,
                     exclude_clusters=self._excluded_clusters(state, cur))
        shown = list(cur.order)
        clusters = set(cur.clusters)
        for kp in res.hits:
            shown.append(kp.hit.id)
            shown.extend(f.id for f in kp.folded)
            if kp.cluster_id is not None:
                clusters.add(kp.cluster_id)
        out = Result(hits=res.hits, groups=res.groups, k=kk, omitted=res.omitted, dropped=res.dropped,
                     considered=res.considered, exhausted=res.short, short=res.short, backend_calls=0,
                     rounds=0, cursor=encode_cursor(shown, clusters, state.fingerprint),
                     generation=state.generation)
        self._record(out, size)
        return out


def _as_store_error(exc: Exception) -> StoreError:
    """A failure of the wrapped search, as the StoreError the caller sees."""
    return StoreError(f"the wrapped search failed with {type(exc).__name__}: {exc}")
