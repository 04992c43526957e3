"""The answers of the JSON endpoints, as plain functions: a parsed body and the served snapshot in,
a JSON-ready dict out. Each checks its body field by field (:mod:`.limits`), so a bad request
becomes a :class:`~diversify.serve.limits.RequestError` naming the field before any work starts.

``/v1/diversify`` is :func:`diversify.select` over the request's hits and the cluster ids the
served artifact (or live index) gives them: the same answer as in-process.
"""

from __future__ import annotations

import re
from typing import Any, Optional

from ..errors import DuplicateIdError, InputError, LockTimeoutError, StorageError
from ..online import Hit, select
from .limits import (
    Limits,
    RequestError,
    check_keys,
    field_path,
    need_id,
    need_int,
    need_list,
    need_number,
    need_str,
)
from .served import Served

__all__ = ["diversify_answer", "clusters_answer", "cluster_answer", "index_add", "index_query", "index_delete",
           "needs_thread"]

_DIVERSIFY = frozenset({"hits", "k", "max_per_cluster", "unknown", "fold_threshold", "fold_text_threshold"})
_HIT = frozenset({"id", "score", "vector", "text"})
_DOC = frozenset({"id", "text", "vector"})
_CLUSTER_ID = re.compile(r"-?[0-9]{1,19}")


def _threshold(body: dict, name: str) -> Optional[float]:
    value = body.get(name)
    if value is None:
        return None
    x = need_number(value, name)
    if not 0.0 < x <= 1.0:
        raise RequestError(f"`{name}` must be in (0, 1]; got {x}. Omit it to fold only by the artifact's "
                           "clusters.", field=name, status=422)
    return x


def _vector(value: Any, path: str, limits: Limits) -> list:
    vec = need_list(value, path, most=limits.max_vector_dim, what="numbers", least=1)
    return [need_number(x, field_path(path, j)) for j, x in enumerate(vec)]


def _hits(body: dict, limits: Limits) -> list:
    raw = need_list(body["hits"], "hits", most=limits.max_hits, what="hits")
    hits = []
    most = limits.max_id_chars
    for i, h in enumerate(raw):
        if type(h) is dict and len(h) == 2:  # the common {"id", "score"}: checked inline
            hid, score = h.get("id"), h.get("score")
            if type(score) is float and score - score == 0.0 and (
                    (type(hid) is str and len(hid) <= most) or (type(hid) is int and -(2**63) <= hid < 2**63)):
                hits.append(Hit(hid, score))
                continue
        hits.append(_hit(h, field_path("hits", i), limits))
    return hits


def _hit(h: Any, path: str, limits: Limits) -> Hit:
    """One hit, every field checked (the error names the one at fault)."""
    check_keys(h, path, _HIT, frozenset({"id"}))
    score = h.get("score")
    score = None if score is None else need_number(score, field_path(path, "score"))
    vector = h.get("vector")
    vector = None if vector is None else _vector(vector, field_path(path, "vector"), limits)
    text = h.get("text")
    text = None if text is None else need_str(text, field_path(path, "text"), most=limits.max_text_chars)
    return Hit(need_id(h["id"], field_path(path, "id"), limits), score, vector=vector, text=text)


def needs_thread(body: Any) -> bool:
    """Does a ``/v1/diversify`` body ask for on-the-fly folding (work worth a worker thread)?"""
    return isinstance(body, dict) and (body.get("fold_threshold") is not None
                                       or body.get("fold_text_threshold") is not None)


def _cluster_ids(served: Served, ids: list) -> list:
    """The cluster id of each id (None when unknown), from the artifact or the live index."""
    if served.cluster_map is not None:
        return [None if c < 0 else c for c in served.cluster_map.lookup(ids).tolist()]
    return served.index.cluster_of(ids)


def diversify_answer(body: Any, served: Served, limits: Limits) -> dict:
    """``POST /v1/diversify``: at most ``max_per_cluster`` hits per cluster, up to ``k``."""
    check_keys(body, "", _DIVERSIFY, frozenset({"hits"}))
    hits = _hits(body, limits)
    k = need_int(body.get("k", 10), "k", least=1, most=limits.max_k)
    n = need_int(body.get("max_per_cluster", 1), "max_per_cluster", least=1, most=limits.max_k)
    unknown = body.get("unknown", "own")
    if unknown not in ("own", "drop"):
        raise RequestError(f"`unknown` must be \"own\" or \"drop\"; got {unknown!r}.", field="unknown", status=422)
    fold, fold_text = _threshold(body, "fold_threshold"), _threshold(body, "fold_text_threshold")
    cids = _cluster_ids(served, [h.id for h in hits])
    try:
        res = select(hits, cids, k=k, max_per_cluster=n, unknown=unknown, fold_threshold=fold,
                     fold_text_threshold=fold_text)
    except InputError as exc:  # e.g. vectors of two lengths
        raise RequestError(str(exc), field="hits", status=422) from None
    out = [{"id": kp.hit.id, "score": kp.hit.score, "cluster_id": kp.cluster_id, "omitted": len(kp.folded),
            "omitted_ids": [f.id for f in kp.folded]} for kp in res.hits]
    return {"hits": out, "short": res.short, "omitted": res.omitted, "dropped": res.dropped,
            "considered": res.considered, "generation": served.generation}


def clusters_answer(body: Any, served: Served, limits: Limits) -> dict:
    """``POST /v1/clusters``: ``{"ids": [...]}`` -> ``{"cluster_ids": [int or null, ...]}``."""
    check_keys(body, "", frozenset({"ids"}), frozenset({"ids"}))
    raw = need_list(body["ids"], "ids", most=limits.max_ids, what="ids")
    ids = [need_id(x, field_path("ids", i), limits) for i, x in enumerate(raw)]
    return {"cluster_ids": _cluster_ids(served, ids), "generation": served.generation}


def cluster_answer(cluster_id: str, query: dict, served: Served, limits: Limits) -> dict:
    """``GET /v1/clusters/{cluster_id}``: the representative and members, with each member's
    similarity to the representative and the stages that joined it (what ``diversify show`` prints)."""
    if not _CLUSTER_ID.fullmatch(cluster_id) or not -(2**63) <= int(cluster_id) < 2**63:
        raise RequestError(f"`cluster_id` must be an integer cluster id (as /v1/clusters gives them); got "
                           f"{cluster_id[:40]!r}.", field="cluster_id", status=422)
    limit = limits.max_members
    if "limit" in query:
        text = query["limit"]
        if not re.fullmatch(r"[0-9]{1,9}", text):
            raise RequestError(f"`limit` must be a number of members >= 0; got {text[:40]!r}.", field="limit",
                               status=422)
        limit = min(int(text), limits.max_members)
    cid = int(cluster_id)
    if served.cluster_map is not None:
        from ..artifact.views import cluster_view

        try:
            view = cluster_view(served.cluster_map, cluster_id=cid, limit=limit)
        except InputError as exc:
            raise RequestError(str(exc), field="cluster_id", status=404) from None
        view["generation"] = served.generation
        return view
    members = served.index.members(cid)
    if not members:
        raise RequestError(f"`cluster_id` {cid} is not a cluster of this index. Use an id /v1/clusters or "
                           "/v1/index/add gave.", field="cluster_id", status=404)
    shown = members[:limit]
    return {"cluster_id": cid, "size": len(members), "representative": members[0], "similarity_stored": False,
            "members": [{"id": m, "is_representative": j == 0, "similarity": 1.0 if j == 0 else None,
                         "stages": []} for j, m in enumerate(shown)],
            "more": len(members) - len(shown), "generation": served.generation}


def _documents(body: Any, limits: Limits, *, need_ids: bool) -> tuple[Optional[list], Optional[list], Optional[list]]:
    check_keys(body, "", frozenset({"documents"}), frozenset({"documents"}))
    raw = need_list(body["documents"], "documents", most=limits.max_docs, what="documents", least=1)
    texts: list = []
    ids: list = []
    vectors: list = []
    for i, d in enumerate(raw):
        path = field_path("documents", i)
        check_keys(d, path, _DOC, frozenset({"id"}) if need_ids else frozenset())
        if "text" in d:
            texts.append(need_str(d["text"], field_path(path, "text"), most=limits.max_text_chars))
        if "vector" in d:
            vectors.append(_vector(d["vector"], field_path(path, "vector"), limits))
        if "id" in d:
            ids.append(need_id(d["id"], field_path(path, "id"), limits))
    for name, got in (("text", texts), ("vector", vectors), ("id", ids)):
        if got and len(got) != len(raw):
            raise RequestError(f"every document must have a `{name}` when one has; {len(got)} of {len(raw)} do.",
                               field=f"documents[].{name}", status=422)
    if not texts and not vectors:
        raise RequestError("each document needs a `text` (or a `vector`, for an index of vectors).",
                           field="documents[0].text", status=422)
    return texts or None, ids or None, vectors or None


def _need_index(served: Served) -> None:
    if served.index is None:
        raise RequestError("this server serves an artifact: the /v1/index endpoints need a live index. Start "
                           "`diversify serve sqlite:///index.db` (or a postgresql:// or redis:// URL).", status=404)


def _index_call(served: Served, fn: str, *args: Any, **kwargs: Any) -> Any:
    try:
        return getattr(served.index, fn)(*args, **kwargs)
    except DuplicateIdError as exc:
        raise RequestError(str(exc), field="documents[].id", status=409) from None
    except (LockTimeoutError, StorageError) as exc:
        raise RequestError(f"the index storage did not answer: {exc}", status=503) from None
    except InputError as exc:
        raise RequestError(str(exc), status=422) from None


def index_add(body: Any, served: Served, limits: Limits) -> dict:
    """``POST /v1/index/add``: ``{"documents": [{"id", "text"}...]}`` -> one match per document."""
    _need_index(served)
    texts, ids, vectors = _documents(body, limits, need_ids=True)
    matches = _index_call(served, "add", texts, ids=ids, vectors=vectors)
    return {"matches": [m.as_dict() for m in matches]}


def index_query(body: Any, served: Served, limits: Limits) -> dict:
    """``POST /v1/index/query``: what ``add`` would do with each document; nothing is written."""
    _need_index(served)
    texts, ids, vectors = _documents(body, limits, need_ids=False)
    matches = _index_call(served, "query", texts, ids=ids, vectors=vectors)
    return {"matches": [m.as_dict() for m in matches]}


def index_delete(body: Any, served: Served, limits: Limits) -> dict:
    """``POST /v1/index/delete``: ``{"ids": [...]}`` -> deleted, missing, reassigned."""
    _need_index(served)
    check_keys(body, "", frozenset({"ids"}), frozenset({"ids"}))
    raw = need_list(body["ids"], "ids", most=limits.max_ids, what="ids", least=0)
    ids = [need_id(x, field_path("ids", i), limits) for i, x in enumerate(raw)]
    return dict(_index_call(served, "delete", ids))

