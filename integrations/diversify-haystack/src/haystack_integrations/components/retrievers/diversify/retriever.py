"""`DiversifyRetriever`: wraps a Haystack retriever component; at most n per cluster, refilled."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Optional

from haystack import Document, component, default_from_dict, default_to_dict
from haystack.core.serialization import component_to_dict
from haystack.document_stores.types.filter_policy import FilterPolicy, apply_filter_policy
from haystack.utils.deserialization import deserialize_component_inplace
from haystack_integrations.components.rankers.diversify.ranker import annotated_copies

from diversify.errors import ConfigError, InputError, StoreError
from diversify.online import Diversifier, Hit, LazyDiversifier, Result, serializable_cluster_map
from diversify.online.plugins import check_settings, cluster_map_setting
from diversify.stores.exclusion import Exclusion, backed_by_local_qdrant, plugin_exclusion

__all__ = ["DiversifyRetriever", "awaits_the_store"]

#: The run inputs this component owns; every other input of the wrapped retriever is passed on.
OWN_INPUTS = ("query", "query_embedding", "filters", "top_k", "cursor")


def _input_sockets(retriever: Any) -> Optional[dict]:
    """The wrapped component's input sockets by name (None when it is not a Haystack component)."""
    sockets = getattr(retriever, "__haystack_input__", None)
    return None if sockets is None else dict(getattr(sockets, "_sockets_dict", {}))


def awaits_the_store(retriever: Any) -> bool:
    """Does the wrapped retriever's ``run_async`` search the same store as its ``run``? Not on
    Qdrant's local mode (qdrant-haystack's async client opens a second, empty in-memory store, or
    cannot open the path the sync client holds) nor on a Chroma store without ``host`` and
    ``port`` (chroma-haystack's async path needs a server). Those are run in a worker thread."""
    if not callable(getattr(retriever, "run_async", None)):
        return False
    if backed_by_local_qdrant(retriever):
        return False
    store = getattr(retriever, "document_store", None) or getattr(retriever, "_document_store", None)
    if type(store).__name__ == "ChromaDocumentStore" and (getattr(store, "_host", None) is None
                                                         or getattr(store, "_port", None) is None):
        return False
    return True


@component
class DiversifyRetriever:
    """Top ``top_k`` documents of a wrapped retriever with at most ``max_per_cluster`` per cluster.

    Wraps any retriever component whose ``run`` takes ``query`` or ``query_embedding``,
    ``filters`` and ``top_k`` (``InMemoryBM25Retriever``, ``InMemoryEmbeddingRetriever``, and the
    retrievers of most document stores). It asks for ``fetch_k`` candidates; when fewer than
    ``top_k`` distinct clusters come back it asks again, within ``max_rounds``: with
    ``exclude_seen`` the store is asked to leave out what was seen (a ``"not in"`` filter on
    ``id``, or on ``meta.<id_field>``), otherwise for a larger ``top_k``. The exclusion is AND-ed
    with every filter the wrapped retriever applies by itself (the run's ``filters`` combined with
    its init filters under its ``filter_policy``), so refetches never widen the caller's filter; a
    store that rejects the exclusion (chroma-haystack on ``id``) is answered by a larger
    ``top_k`` from then on. The second output, ``diversify``, reports ``backend_calls``, ``rounds``,
    ``exhausted``, ``omitted``, ``considered`` and a ``cursor`` for the next page.

    The wrapped retriever's other run inputs (``scale_score``, ``return_embedding``,
    ``query_sparse_embedding``...) are inputs of this component too, with the same types and
    defaults, and are passed on to every call.

    Cluster ids and returned copies: as :class:`DiversifyRanker`.
    """

    def __init__(
        self,
        retriever: Any,
        cluster_map: Any = None,
        cluster_field: Optional[str] = None,
        id_field: Optional[str] = None,
        top_k: int = 10,
        max_per_cluster: int = 1,
        fetch_k: Optional[int] = None,
        max_rounds: int = 3,
        exclude_seen: bool = True,
        meta_key: str = "diversify",
        fold_threshold: Optional[float] = None,
        refill: str = "auto",
    ) -> None:
        """
        :param retriever: the retriever component to wrap (serialized with this component).
        :param cluster_map: path of a diversify artifact or ``{id: cluster_id}`` mapping.
        :param cluster_field: meta field holding a cluster id (wins over ``cluster_map``).
        :param id_field: meta field holding the artifact's id; default ``Document.id``.
        :param top_k: documents to return.
        :param max_per_cluster: at most this many per cluster; higher -> more near-duplicates.
        :param fetch_k: candidates asked for in the first call; default from top_k.
        :param max_rounds: refetch rounds after the first call; higher -> fewer short answers.
        :param exclude_seen: refetch with a ``"not in"`` filter on seen ids (False: larger top_k).
        :param meta_key: meta key of the annotation on returned copies.
        :param refill: ``"exclude"`` (the ``"not in"`` filter), ``"grow"`` (a larger ``top_k``) or
            ``"auto"``: exclude when ``exclude_seen``, except on Qdrant's local mode and Chroma, where the
            filter costs more than a larger ``top_k``.
        :param fold_threshold: on-the-fly folding of documents the artifact does not know, by the
            cosine of their ``embedding`` (wrap a retriever with ``return_embedding=True``); higher ->
            only closer copies are folded; None disables it.
        """
        cluster_map = cluster_map_setting(cluster_map)
        check_settings(cluster_map, cluster_field=cluster_field, k=top_k, max_per_cluster=max_per_cluster,
                       fetch_k=fetch_k, max_rounds=max_rounds, fold_threshold=fold_threshold)
        if not callable(getattr(retriever, "run", None)):
            raise ConfigError(f"`retriever` must be a Haystack retriever component with run(...); "
                              f"got {type(retriever).__name__}.")
        sockets = _input_sockets(retriever)
        self._passthrough: tuple[str, ...] = ()
        if sockets is not None:
            name = type(retriever).__name__
            if "top_k" not in sockets:
                raise ConfigError(f"`retriever` ({name}) has no `top_k` run input, so it cannot be asked for "
                                  f"candidates; its inputs are {sorted(sockets)}. Wrap a retriever whose run takes top_k.")
            if exclude_seen and "filters" not in sockets:
                raise ConfigError(f"`exclude_seen=True` needs a `filters` run input, and {name} has none (its inputs "
                                  f"are {sorted(sockets)}). Pass exclude_seen=False to refill with a larger top_k.")
            self._passthrough = tuple(n for n in sockets if n not in OWN_INPUTS)
            for n in self._passthrough:
                socket = sockets[n]
                if socket.is_mandatory:
                    component.set_input_type(self, n, socket.type)
                else:
                    component.set_input_type(self, n, socket.type, default=socket.default_value)
        self.retriever = retriever
        self.cluster_map = cluster_map
        self.cluster_field = cluster_field
        self.id_field = id_field
        self.top_k = top_k
        self.max_per_cluster = max_per_cluster
        self.fetch_k = fetch_k
        self.max_rounds = max_rounds
        self.exclude_seen = exclude_seen
        self.meta_key = meta_key
        self.fold_threshold = fold_threshold
        self._lazy = LazyDiversifier()
        self.refill = refill
        plugin_exclusion(refill, exclude_seen, None, name="", needs="Set exclude_seen=True")  # validates now
        self._refill_strategy: Optional[Exclusion] = None

    @property
    def _refill(self) -> Exclusion:
        """The refetch strategy, made on first use (a Qdrant store makes its client late); it
        remembers a store that rejects the exclusion filter (chroma-haystack cannot filter on
        ``id``): then refetches ask for a larger ``top_k``."""
        ex = self._refill_strategy
        if ex is None:
            ex = plugin_exclusion(self.refill, self.exclude_seen, self.retriever, name=type(self.retriever).__name__)
            self._refill_strategy = ex
        return ex

    def warm_up(self) -> None:
        """Warm up the wrapped retriever and load the artifact."""
        if hasattr(self.retriever, "warm_up"):
            self.retriever.warm_up()
        self._lazy.get(self.cluster_map, cluster_field=self.cluster_field, k=self.top_k,
                       max_per_cluster=self.max_per_cluster, fetch_k=self.fetch_k, max_rounds=self.max_rounds,
                       fold_threshold=self.fold_threshold)

    @property
    def diversifier(self) -> Diversifier:
        """The :class:`diversify.Diversifier` behind this component (``stats()``, ``reload()``);
        the first access warms the component up."""
        if not self._lazy.built:
            self.warm_up()
        return self._lazy.get()

    def to_dict(self) -> dict[str, Any]:
        """Serialize, with the wrapped retriever nested (a cluster map with non-string ids as
        ``[id, cluster_id]`` pairs, which :meth:`from_dict` reads back with their types)."""
        return default_to_dict(
            self, retriever=component_to_dict(self.retriever, "retriever"),
            cluster_map=serializable_cluster_map(self.cluster_map), cluster_field=self.cluster_field,
            id_field=self.id_field, top_k=self.top_k, max_per_cluster=self.max_per_cluster, fetch_k=self.fetch_k,
            max_rounds=self.max_rounds, exclude_seen=self.exclude_seen, meta_key=self.meta_key,
            fold_threshold=self.fold_threshold, refill=self.refill)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DiversifyRetriever:
        """Deserialize (the nested retriever goes through Haystack's allowlist like any component)."""
        deserialize_component_inplace(data["init_parameters"], key="retriever")
        return default_from_dict(cls, data)

    # ------------------------------------------------------------------ search

    def _id(self, doc: Document, position: int):
        value = doc.id if self.id_field is None else (doc.meta or {}).get(self.id_field)
        if value is None:
            raise StoreError(f"document {position} from the wrapped retriever has no id (meta[{self.id_field!r}] is "
                             "None). Set id_field to a meta key every document carries, or leave it None.")
        return value

    def _user_filters(self, runtime: Optional[dict[str, Any]]) -> Optional[dict[str, Any]]:
        """The filters the wrapped retriever applies on its own: ``runtime`` combined with its
        init filters under its ``filter_policy``, as Haystack does (REPLACE, the default: the
        runtime filters if given, else the init ones)."""
        r = self.retriever
        init = getattr(r, "filters", None) or getattr(r, "_filters", None) or None
        policy = getattr(r, "filter_policy", None) or getattr(r, "_filter_policy", None)
        if isinstance(policy, str):
            policy = FilterPolicy.from_str(policy)
        if not isinstance(policy, FilterPolicy):
            return runtime or init
        return apply_filter_policy(policy, init, runtime or None)

    def _kwargs(self, inputs: dict, k: int, exclude_ids: Optional[Sequence[Any]]) -> dict:
        kwargs = {name: value for name, value in inputs.items() if value is not None}
        kwargs["top_k"] = k
        if exclude_ids:
            # the exclusion is AND-ed with every filter the retriever would apply by itself: under
            # REPLACE our runtime filters replace its init filters, so those must be in them too
            field = "id" if self.id_field is None else f"meta.{self.id_field}"
            exclude = {"field": field, "operator": "not in", "value": list(exclude_ids)}
            user = self._user_filters(inputs.get("filters"))
            kwargs["filters"] = exclude if not user else {"operator": "AND", "conditions": [user, exclude]}
        return kwargs

    def _hits(self, out: dict) -> list[Hit]:
        docs = out["documents"]
        fold = self.fold_threshold is not None
        return [Hit(self._id(d, j), d.score, d.meta, d.embedding if fold else None, d) for j, d in enumerate(docs)]

    def _report(self, result: Result) -> dict[str, Any]:
        docs = annotated_copies(result, self.meta_key)
        info = {"backend_calls": result.backend_calls, "rounds": result.rounds, "exhausted": result.exhausted,
                "short": result.short, "omitted": result.omitted, "considered": result.considered,
                "cursor": result.cursor}
        return {"documents": docs, "diversify": info}

    def _inputs(self, query: Any, query_embedding: Any, filters: Any, passed: dict) -> dict:
        unknown = sorted(set(passed) - set(self._passthrough))
        if unknown:
            raise InputError(f"DiversifyRetriever.run got {unknown[0]!r}, which neither it nor the wrapped "
                             f"{type(self.retriever).__name__} takes; the wrapped retriever's own inputs are "
                             f"{list(self._passthrough)}.")
        return {"query": query, "query_embedding": query_embedding, "filters": filters, **passed}

    @component.output_types(documents=list[Document], diversify=dict)
    def run(self, query: Optional[str] = None, query_embedding: Optional[list[float]] = None,
            filters: Optional[dict[str, Any]] = None, top_k: Optional[int] = None,
            cursor: Optional[str] = None, **kwargs: Any) -> dict[str, Any]:
        """
        Retrieve, diversify, refill.

        :param query: text query (for text retrievers such as BM25).
        :param query_embedding: query embedding (for embedding retrievers).
        :param filters: the caller's filters, passed on (AND-ed with the exclusion filter).
        :param top_k: documents to return (overrides the init value).
        :param cursor: ``diversify["cursor"]`` of the previous page, to get the next one.
        :param kwargs: the wrapped retriever's other run inputs (``scale_score``,
            ``return_embedding``...), passed on to every call.
        :returns: ``documents`` (annotated copies, rank order) and ``diversify`` (backend calls...).
        """
        inputs = self._inputs(query, query_embedding, filters, kwargs)

        def call(n: int, pushed: Optional[list]) -> list[Hit]:
            return self._hits(self.retriever.run(**self._kwargs(inputs, n, pushed)))

        def search(_query: Any, k: int, exclude_ids: Optional[Sequence[Any]] = None) -> list[Hit]:
            return self._refill.search(call, k, exclude_ids)

        diversified = self.diversifier.wrap(search, supports_exclude=self._refill.pushes_down)
        return self._report(diversified(None, k=top_k, cursor=cursor))

    @component.output_types(documents=list[Document], diversify=dict)
    async def run_async(self, query: Optional[str] = None, query_embedding: Optional[list[float]] = None,
                        filters: Optional[dict[str, Any]] = None, top_k: Optional[int] = None,
                        cursor: Optional[str] = None, **kwargs: Any) -> dict[str, Any]:
        """Async twin of :meth:`run`: awaits the wrapped retriever's ``run_async`` when it searches
        the same store as ``run`` (:func:`awaits_the_store`), else runs ``run`` in a worker thread."""
        inputs = self._inputs(query, query_embedding, filters, kwargs)
        native = awaits_the_store(self.retriever)

        async def call(n: int, pushed: Optional[list]) -> list[Hit]:
            kwargs = self._kwargs(inputs, n, pushed)
            if native:
                return self._hits(await self.retriever.run_async(**kwargs))
            return self._hits(await asyncio.to_thread(self.retriever.run, **kwargs))

        async def search(_query: Any, k: int, exclude_ids: Optional[Sequence[Any]] = None) -> list[Hit]:
            return await self._refill.asearch(call, k, exclude_ids)

        diversified = self.diversifier.awrap(search, supports_exclude=self._refill.pushes_down)
        return self._report(await diversified(None, k=top_k, cursor=cursor))
