"""`Diversifier`: wrap any search callable; over-fetch, select, refetch when short.

The class is the public face; the work lives next to it: :mod:`~diversify.online.source` (the
artifact, hot reload, fail-open), :mod:`~diversify.online.refetch` (the refetch loop),
:mod:`~diversify.online.wrappers` (sync and async), :mod:`~diversify.online.cursor` (pages),
:mod:`~diversify.online.hits` (normalizing what searches and callers pass in).
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any, Optional

from ..errors import ConfigError, InputError
from .budget import MAX_EXCLUDE_MEMBERS
from .checks import Options, check_options, check_params
from .cursor import decode_cursor
from .hits import IdSource, hits_from_items
from .refetch import SearchRequest, page_end, refetch
from .selection import select
from .source import ClusterSource
from .stats import Counters, Tally
from .types import AsyncDiversifiedSearch, ClusterLookup, DiversifiedSearch, DocId, Hit, Result
from .wrappers import async_wrapper, check_sync_search, resolve_search, supports_exclude_clusters, sync_wrapper

__all__ = ["Diversifier"]


class Diversifier:
    """Keep at most ``max_per_cluster`` results per cluster in any search's top-k.

    Parameters
    ----------
    cluster_map : ClusterMap, str, os.PathLike, Mapping or None
        The artifact (or its path, loaded with :func:`diversify.load`; or a plain
        ``{id: cluster_id}`` mapping). ``None`` when the store carries cluster ids in its
        payload (``cluster_field``) or only on-the-fly folding is wanted. A path is read into
        memory (no memory map): truncating, overwriting or replacing the file afterwards
        cannot change the answers or crash the process; pass ``diversify.load(path,
        mmap=True)`` to share pages between processes, and then replace the file only by
        rename (``docs/security.md``, "Live files").
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
        Only clusters whose unseen members fit are listed (their sizes are read without listing
        them), the biggest first; a bigger cluster is left to the next round's larger k, or
        excluded by its id when the store supports it (``supports_exclude_clusters`` and
        ``cluster_field``). 0 excludes only the ids seen. Members excluded this way never show
        up in ``folded``.
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
    atomically under live traffic. Nothing here imports numba or a vendor SDK. The settings are
    read-only attributes (``d.k``, ``d.fetch_k``...; all of them in ``d.options``).
    """

    def __init__(self, cluster_map: Any = None, *, cluster_field: Optional[str] = None, k: int = 10,
                 max_per_cluster: int = 1, fetch_k: Optional[int] = None, max_rounds: int = 3,
                 unknown: str = "own", fold_threshold: Optional[float] = None,
                 fold_text_threshold: Optional[float] = None, max_fetch_k: Optional[int] = None,
                 max_exclude_members: int = MAX_EXCLUDE_MEMBERS, on_error: str = "raise") -> None:
        self.options: Options = check_options(
            k=k, max_per_cluster=max_per_cluster, fetch_k=fetch_k, max_fetch_k=max_fetch_k,
            max_rounds=max_rounds, max_exclude_members=max_exclude_members, unknown=unknown,
            fold_threshold=fold_threshold, fold_text_threshold=fold_text_threshold,
            cluster_field=cluster_field, on_error=on_error)
        self._counters = Counters()
        self._source = ClusterSource(cluster_map, cluster_field=cluster_field, on_error=on_error,
                                     counters=self._counters)

    # ------------------------------------------------------------------ settings (read-only)

    @property
    def k(self) -> int:
        return self.options.k

    @property
    def max_per_cluster(self) -> int:
        return self.options.max_per_cluster

    @property
    def fetch_k(self) -> int:
        return self.options.fetch_k

    @property
    def max_fetch_k(self) -> int:
        return self.options.max_fetch_k

    @property
    def max_rounds(self) -> int:
        return self.options.max_rounds

    @property
    def max_exclude_members(self) -> int:
        return self.options.max_exclude_members

    @property
    def unknown(self) -> str:
        return self.options.unknown

    @property
    def fold_threshold(self) -> Optional[float]:
        return self.options.fold_threshold

    @property
    def fold_text_threshold(self) -> Optional[float]:
        return self.options.fold_text_threshold

    @property
    def cluster_field(self) -> Optional[str]:
        return self.options.cluster_field

    @property
    def on_error(self) -> str:
        return self.options.on_error

    # ------------------------------------------------------------------ artifact

    @property
    def cluster_map(self) -> Optional[ClusterLookup]:
        """The artifact currently answering (a snapshot; may be replaced by :meth:`reload`)."""
        return self._source.current.cluster_map

    @property
    def generation(self) -> int:
        """Increments on every :meth:`reload`; reported as ``Result.generation``."""
        return self._source.current.generation

    def reload(self, cluster_map: Any) -> int:
        """Swap in a new artifact (object or path) under live traffic; returns the generation now serving.

        The file is read and validated completely before the swap. If loading fails:
        ``on_error="raise"`` raises and the old artifact stays in place; ``"last_good"`` logs a
        warning, counts it and keeps the old artifact (the returned generation is unchanged);
        ``"passthrough"`` logs, counts and swaps in "no artifact" (a new generation, undiversified)
        until a later reload succeeds.
        """
        return self._source.reload(cluster_map)

    def expand(self, kept: Any) -> list[DocId]:
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
        members = getattr(self._source.current.cluster_map, "members", None)
        if members is None:
            raise ConfigError("`expand` needs an artifact with cluster members (a ClusterMap); this "
                              "Diversifier has none. Pass cluster_map=path or a ClusterMap.")
        return list(members(cluster_id))

    def stats(self) -> dict[str, Any]:
        """A snapshot of the counters (queries, backend_calls, refetch_rounds, short, ...).

        Id matching: ``looked_up`` (hits whose cluster was looked for in the artifact or the
        payload field) and ``unknown`` (those found in neither). When most of at least 100 hits
        looked up in one artifact generation are unknown, one WARNING on logger ``"diversify"``
        names the likely cause (docs/online.md, "Ids that match").

        Fail-open counters: ``load_errors`` (failed loads at startup or reload),
        ``lookup_errors`` (query-time lookup failures absorbed; those hits count as unknown),
        ``degraded_queries`` (queries answered in passthrough after a failed load), ``serving``
        (``"artifact"``, ``"none"`` when no artifact was configured, or ``"passthrough"`` after a
        failure) and ``last_error``.
        """
        out = self._counters.snapshot()
        snap = self._source.current
        out["generation"] = snap.generation
        out["serving"] = snap.serving
        return out

    def cluster_ids(self, hits: Sequence[Hit]) -> list:
        """Cluster id of each hit: the payload field if set and present, else the artifact, else None."""
        return self._source.cluster_ids(hits, self._source.current)

    # ------------------------------------------------------------------ queries

    def _params(self, k: Optional[int], max_per_cluster: Optional[int]) -> tuple[int, int]:
        if k is None and max_per_cluster is None:  # the defaults, checked at construction
            return self.options.k, self.options.max_per_cluster
        k = self.options.k if k is None else k
        n = self.options.max_per_cluster if max_per_cluster is None else max_per_cluster
        k, n, _ = check_params(k, n, self.options.unknown, None)
        return k, n

    def _start(self, k: Optional[int], max_per_cluster: Optional[int], groups: bool, cursor: Optional[str],
               supports_exclude: bool, exclude_clusters: bool = False) -> Generator[SearchRequest, Any, Result]:
        kk, nn = self._params(k, max_per_cluster)
        return refetch(self.options, self._source, k=kk, n=nn, groups=groups, cursor=cursor,
                      supports_exclude=supports_exclude, exclude_clusters=exclude_clusters)

    def _cluster_exclusion(self, fn: Any, exclude: bool) -> Optional[str]:
        """The payload field to exclude clusters by, when ``fn`` supports it and cluster ids come from it."""
        field = self.options.cluster_field
        return field if exclude and field is not None and supports_exclude_clusters(fn) else None

    def wrap(self, search: Any, *, supports_exclude: Optional[bool] = None) -> DiversifiedSearch:
        """Wrap a search callable (or a :mod:`diversify.stores` adapter) into a diversified one.

        Parameters
        ----------
        search : callable or store adapter
            ``search(query, k)`` or ``search(query, k, exclude_ids)`` returning ranked hits (see
            :class:`~diversify.online.SearchFn`). Without exclusion support, refetching asks for
            a larger k and skips what was already seen.
        supports_exclude : bool, optional
            Whether ``search`` takes ``exclude_ids`` and filters them in the store. Default: read
            from its :class:`~diversify.online.Capabilities` declaration (every store adapter
            has one), else a ``supports_exclude`` attribute, else the signature (a third
            parameter or one named ``exclude_ids``).

        Returns
        -------
        DiversifiedSearch
            ``diversified(query, *, k=None, max_per_cluster=None, groups=False, cursor=None)
            -> Result``. ``Result.exhausted`` says the store has nothing more (a next page would
            be empty); ``Result.cursor`` gives the next page without repeating this page's
            clusters. A store that also takes ``exclude_clusters=`` / ``cluster_field=``
            keywords and says so (``supports_exclude_clusters = True``) is asked to exclude
            full clusters by their payload value when ``cluster_field`` is set.
        """
        fn, exclude = resolve_search(search, supports_exclude)
        check_sync_search(fn)
        return sync_wrapper(fn, exclude, self._start, self._cluster_exclusion(fn, exclude))

    def awrap(self, search: Any, *, supports_exclude: Optional[bool] = None) -> AsyncDiversifiedSearch:
        """Async twin of :meth:`wrap`: ``await diversified(query, ...) -> Result``.

        ``search`` is an async callable, or an async store adapter (``AsyncQdrantStore``,
        ``AsyncChromaStore``, ``AsyncLanceDBStore``: every store call awaited). A plain callable
        (e.g. a sync :mod:`diversify.stores` adapter) is accepted too; it then runs in the event
        loop's thread and blocks it for each store call, so keep it to fast, local stores.
        Cancelling the awaited query (``asyncio.timeout``) cancels the store call in flight.
        """
        fn, exclude = resolve_search(search, supports_exclude)
        return async_wrapper(fn, exclude, self._start, self._cluster_exclusion(fn, exclude))

    def select_items(self, items: Sequence[Any], *, ids: Optional[IdSource] = None,
                     scores: Optional[Sequence[Any]] = None, payloads: Optional[Sequence[Any]] = None,
                     vectors: Optional[Sequence[Any]] = None, texts: Optional[Sequence[Optional[str]]] = None,
                     cluster_ids: Optional[Sequence[Any]] = None, k: Optional[int] = None,
                     max_per_cluster: Optional[int] = None, groups: bool = False,
                     cursor: Optional[str] = None, backend_calls: int = 0) -> Result:
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
        backend_calls : int
            The store or retriever calls that produced ``items`` (a plugin that called a wrapped
            retriever once passes 1), reported in ``Result.backend_calls`` and :meth:`stats`.

        Returns
        -------
        Result
            ``backend_calls`` as given, ``rounds == 0``; ``exhausted`` is True when this page
            used every item (a next page over the same items would be empty).
        """
        if isinstance(backend_calls, bool) or not isinstance(backend_calls, int) or backend_calls < 0:
            raise ConfigError(f"`backend_calls` must be an int >= 0 (the calls that fetched `items`); got "
                              f"{backend_calls!r}. Pass 1 for the answer of one retriever call.")
        opts = self.options
        hits = hits_from_items(items, ids=ids, scores=scores, payloads=payloads, vectors=vectors, texts=texts,
                               want_vectors=opts.fold_threshold is not None,
                               want_texts=opts.fold_text_threshold is not None)
        if cluster_ids is not None and len(cluster_ids) != len(hits):
            raise InputError(f"`cluster_ids` must have one entry per item ({len(hits)}); got {len(cluster_ids)}.")
        snap = self._source.current
        kk, nn = self._params(min(opts.k, max(len(hits), 1)) if k is None else k, max_per_cluster)
        cur = decode_cursor(cursor, kk)
        shown_ids, excluded, carried = self._source.shown_before(snap, cur)
        tally = Tally()
        cids = list(cluster_ids) if cluster_ids is not None else self._source.cluster_ids(hits, snap, tally)
        if shown_ids:
            keep = [j for j, h in enumerate(hits) if h.id not in shown_ids]
            hits = [hits[j] for j in keep]
            cids = [cids[j] for j in keep]
        res = select(hits, cids, k=kk, max_per_cluster=nn, unknown=opts.unknown,
                     fold_threshold=opts.fold_threshold, fold_text_threshold=opts.fold_text_threshold,
                     groups=groups, exclude_clusters=excluded)
        exhausted, token = page_end(opts, cur, carried, hits, cids, res, excluded, True, None, len(hits))
        out = Result(res.hits, res.groups, kk, res.omitted, res.dropped, res.considered, exhausted, res.short,
                     backend_calls, 0, token, snap.generation)
        self._source.record(out, len(items), snap, tally)
        return out
