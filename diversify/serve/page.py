"""The page at ``/``: the largest clusters, the size histogram, search, a cluster's members side by side.

:func:`page_routes` returns the routes the server (:func:`diversify.serve.app.create_app`) adds:
``/`` (the page), ``/page/static/{name}`` (its script and style sheet, package data under
``diversify/serve/static/``, nothing from the internet) and the JSON endpoints the script calls,
under ``/page/api/``. Every view is one URL (``/#/cluster/12``, ``/#/search?q=doc-7``), so a view
can be linked, reloaded and checked in a headless browser.

The script puts every value from the server into the page as text (``textContent``), never as
markup, and the page is served with a Content-Security-Policy that allows its own script alone: a
document holding ``<script>`` shows those characters. Work per request is bounded (:data:`LIMITS`):
members shown, characters of each text, words compared (:mod:`.pagediff`), documents a text search
reads (:mod:`.corpus`), and the size of a pasted document.

``get_served()`` returns the snapshot being served: ``cluster_map`` (a ClusterMap or None),
``index`` (an Index or None), ``corpus_path`` (the corpus file or None) and ``generation``.
"""

from __future__ import annotations

import json
import re
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

import numpy as np
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from ..errors import DiversifyError, InputError, LockTimeoutError, StorageError
from ..stages import stage_names
from .corpus import SCAN_CHARS, SCAN_DOCS, open_corpus
from .pagediff import DIFF_WORDS, word_diff

__all__ = ["page_routes", "LIMITS", "CSP"]

#: the bounds of one request (also served to the script, which shows them)
LIMITS = {
    "top": 100,  # largest clusters listed at most
    "members": 50,  # members of a cluster shown at most (default 12)
    "text_chars": 20_000,  # characters of each text sent to the page
    "diff_words": DIFF_WORDS,  # words of each text compared
    "query_chars": 1_000,  # characters of a search
    "scan_docs": SCAN_DOCS,  # documents one text search reads
    "scan_chars": SCAN_CHARS,  # characters one text search reads
    "paste_bytes": 256 << 10,  # bytes of a pasted document (the request body)
    "near": 20,  # near-duplicates listed for a pasted document
    "index_scan": 50_000,  # live-index documents counted for its largest clusters
}
_DEFAULT_MEMBERS = 12
#: seconds a live index's summary (counts, largest clusters) is reused
_INDEX_SUMMARY_AGE = 5.0
_SNIPPET = 160

#: the page's own script and style sheet, nothing else; no inline script, no other origin
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
_HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
            "Cache-Control": "no-cache"}
_STATIC = {"app.js": "text/javascript; charset=utf-8", "page.css": "text/css; charset=utf-8",
           "index.html": "text/html; charset=utf-8"}
_STATIC_DIR = Path(__file__).resolve().parent / "static"  # package data (pyproject: serve/static/*)
_INT = re.compile(r"^[+-]?[0-9]{1,19}$")


class _JSON(JSONResponse):
    """JSON whose strings may hold lone surrogates (a corpus file can): written as ``\\udXXX`` escapes
    then, which JSON allows and a browser reads, instead of failing to encode them as UTF-8."""

    def render(self, content: Any) -> bytes:
        try:
            return super().render(content)
        except UnicodeEncodeError:
            return json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode("ascii")


class PageError(InputError):
    """A request the page's API refuses: ``field`` names the parameter, ``status`` the HTTP status."""

    def __init__(self, field: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.field, self.status = field, status


def _error(field: str, message: str, status: int = 400) -> JSONResponse:
    return _JSON({"error": {"status": status, "field": field, "message": message}}, status_code=status,
                        headers=_HEADERS)


def _static(name: str) -> bytes:
    return (_STATIC_DIR / name).read_bytes()


def _int_param(request: Request, name: str, default: int, lo: int, hi: int) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    if not _INT.match(raw) or not lo <= int(raw) <= hi:
        raise PageError(name, f"`{name}` must be an integer from {lo} to {hi}; got {raw[:40]!r}. "
                              f"Pass {name}={default} or leave it out.")
    return int(raw)


def _clip(text: Optional[str]) -> tuple[Optional[str], bool]:
    if text is None:
        return None, False
    cut = len(text) > LIMITS["text_chars"]
    return (text[: LIMITS["text_chars"]] if cut else text), cut


def _snippet(text: str, at: int) -> str:
    lo = max(0, at - _SNIPPET // 2)
    return ("…" if lo else "") + text[lo: lo + _SNIPPET] + ("…" if lo + _SNIPPET < len(text) else "")


def _id_out(x: Any) -> Any:
    return int(x) if isinstance(x, (int, np.integer)) else x


class _Page:
    """The handlers, over the snapshot ``get_served()`` returns at each request."""

    def __init__(self, get_served: Callable[[], Any]) -> None:
        self.get_served = get_served
        self._summaries: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._locks: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ plumbing

    def _index_lock(self, served: Any, index: Any) -> Any:
        """One Index object serves one thread at a time: the snapshot's ``index_lock`` when it has one."""
        lock = getattr(served, "index_lock", None)
        if lock is not None:
            return lock
        with self._lock:
            lock = self._locks.get(index)
            if lock is None:
                lock = self._locks[index] = threading.Lock()
            return lock

    @staticmethod
    def _corpus(served: Any) -> tuple[Any, Optional[str]]:
        """(the opened corpus or None, why it could not be opened or None)."""
        path = getattr(served, "corpus_path", None)
        if path is None:
            return None, None
        try:
            return open_corpus(path), None
        except (DiversifyError, OSError) as exc:
            return None, str(exc)

    async def _call(self, fn: Callable, *args: Any) -> Response:
        try:
            out = await run_in_threadpool(fn, self.get_served(), *args)
        except PageError as exc:
            return _error(exc.field, str(exc), exc.status)
        except (StorageError, LockTimeoutError) as exc:
            return _error("index", f"the index storage did not answer: {exc}", 503)
        except DiversifyError as exc:
            return _error("request", str(exc), 400)
        return _JSON(out, headers=_HEADERS)

    # ------------------------------------------------------------------ routes

    async def index(self, request: Request) -> Response:
        return Response(_static("index.html"), media_type=_STATIC["index.html"], headers=_HEADERS)

    async def static(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in _STATIC or name == "index.html":
            return _error("name", f"no static file {name[:60]!r}; the page has {sorted(set(_STATIC) - {'index.html'})}.",
                          404)
        return Response(_static(name), media_type=_STATIC[name], headers=_HEADERS)

    async def summary(self, request: Request) -> Response:
        try:
            top = _int_param(request, "top", 20, 1, LIMITS["top"])
        except PageError as exc:
            return _error(exc.field, str(exc))
        return await self._call(self._summary, top)

    async def cluster(self, request: Request) -> Response:
        raw = request.path_params["cluster_id"]
        if not _INT.match(raw):
            return _error("cluster_id", f"`cluster_id` must be an integer (a cluster id the page lists); got "
                                        f"{raw[:40]!r}.", 404)
        try:
            limit = _int_param(request, "limit", _DEFAULT_MEMBERS, 1, LIMITS["members"])
        except PageError as exc:
            return _error(exc.field, str(exc))
        return await self._call(self._cluster, int(raw), limit)

    async def search(self, request: Request) -> Response:
        q = request.query_params.get("q", "")
        try:
            if not q.strip() or len(q) > LIMITS["query_chars"]:
                raise PageError("q", f"`q` must be an id or text of 1 to {LIMITS['query_chars']:,} characters (not only "
                                     f"spaces); got {len(q):,} characters. Type an id or a few words to look for.")
            start = _int_param(request, "start", 0, 0, 1 << 62)
            texts = _int_param(request, "texts", 0, 0, 1)
        except PageError as exc:
            return _error(exc.field, str(exc))
        return await self._call(self._search, q, start, bool(texts))

    async def near(self, request: Request) -> Response:
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > LIMITS["paste_bytes"]:
                return _error("text", f"the pasted document must be at most {LIMITS['paste_bytes']:,} bytes; got "
                                      "more. Paste a shorter part of it.", 413)
        try:
            text = bytes(body).decode("utf-8")
        except UnicodeDecodeError:
            return _error("text", "the pasted document must be UTF-8 text; got bytes that are not. Paste text.")
        if not text.strip():
            return _error("text", "the pasted document is empty. Paste the text to look for.")
        return await self._call(self._near, text)

    # ------------------------------------------------------------------ the work (in a worker thread)

    def _summary(self, served: Any, top: int) -> dict:
        cm, index = served.cluster_map, served.index
        corpus, corpus_error = self._corpus(served)
        out: dict[str, Any] = {"generation": getattr(served, "generation", 0), "limits": LIMITS,
                               "source": "artifact" if cm is not None else "index" if index is not None else None,
                               "has_index": index is not None, "corpus": None}
        if corpus is not None:
            out["corpus"] = {"path": corpus.path, "documents": corpus.n_docs, "format": corpus.format}
        elif corpus_error is not None:
            out["corpus"] = {"path": str(served.corpus_path), "error": corpus_error}
        if cm is not None:
            out.update(self._artifact_summary(cm, top))
        elif index is not None:
            out.update(self._live_summary(served, index, top))
        if corpus is not None and out.get("largest"):
            texts = corpus.texts_of([c["representative"] for c in out["largest"]])
            for c, t in zip(out["largest"], texts):
                c["text"] = None if t is None else _snippet(t, 0)
        return out

    def _artifact_summary(self, cm: Any, top: int) -> dict:
        cached = self._summaries.get(cm)
        if cached is None or len(cached["largest"]) < top:
            cids, sizes = cm.cluster_sizes()
            order = np.lexsort((cids, -sizes))[:top].tolist() if cm.n_clusters else []
            largest = [{"cluster_id": int(cids[i]), "size": int(sizes[i]),
                        "representative": _id_out(cm.representative_of(int(cids[i]))),
                        "stages": stage_names(cm.cluster_stages(int(cids[i])))} for i in order]
            cached = {"documents": cm.n_docs, "clusters": cm.n_clusters, "folded": cm.n_docs - cm.n_clusters,
                      "id_kind": cm.id_kind, "histogram": histogram(sizes), "largest": largest, "partial": False,
                      "created_at": cm.created_at, "clustering": str(cm.config.get("clustering", "components"))}
            self._summaries[cm] = cached
        return {**cached, "largest": [dict(c) for c in cached["largest"][:top]]}

    def _live_summary(self, served: Any, index: Any, top: int) -> dict:
        """The index's summary, counted again at most every :data:`_INDEX_SUMMARY_AGE` seconds (a
        count reads up to ``LIMITS["index_scan"]`` rows: not one a page view)."""
        now = time.monotonic()
        cached = self._summaries.get(index)
        if cached is None or now - cached[0] > _INDEX_SUMMARY_AGE:
            with self._index_lock(served, index):
                cached = (now, _index_summary(index, LIMITS["top"]))
            self._summaries[index] = cached
        return {**cached[1], "largest": [dict(c) for c in cached[1]["largest"][:top]]}

    def _cluster(self, served: Any, cluster_id: int, limit: int) -> dict:
        cm, index = served.cluster_map, served.index
        if cm is not None:
            try:
                view = _cluster_view(cm, cluster_id, limit)
            except InputError as exc:
                raise PageError("cluster_id", str(exc), 404) from None
        elif index is not None:
            with self._index_lock(served, index):
                view = _index_cluster(index, cluster_id, limit)
        else:
            raise PageError("cluster_id", "nothing is being served (no artifact, no index).", 404)
        corpus, corpus_error = self._corpus(served)
        view["corpus_error"] = corpus_error
        if corpus is not None:
            _attach_texts(view["members"], corpus.texts_of([m["id"] for m in view["members"]]))
        return view

    def _search(self, served: Any, q: str, start: int, texts: bool) -> dict:
        """The document with id ``q`` and, unless that id was found (``texts`` asks anyway), the texts holding ``q``."""
        cm, index = served.cluster_map, served.index
        asked = [q.strip()] + ([int(q.strip())] if _INT.match(q.strip()) else [])
        found = None
        for x in asked if start == 0 else []:
            if cm is not None:
                c = cm.cluster_of(x) if _fits(x) else None
            elif index is not None:
                with self._index_lock(served, index):
                    c = index.cluster_of([x])[0] if _fits(x) else None
            else:
                c = None
            if c is not None:
                found = {"id": x, "cluster_id": int(c)}
                break
        out: dict[str, Any] = {"q": q, "id_match": found, "text": None, "texts_skipped": False}
        corpus, corpus_error = self._corpus(served)
        out["corpus_error"] = corpus_error
        if corpus is not None and found is not None and not texts:
            out["texts_skipped"] = True  # an id was asked for: the scan of the texts only on request
        elif corpus is not None:
            scan = corpus.scan(q, start=start)
            ids = corpus.ids_of_rows([r for r, _ in scan["hits"]])
            clusters = _clusters_of(served, ids, self._index_lock(served, index) if index is not None else None)
            hits = []
            for x, c, (row, text) in zip(ids, clusters, scan["hits"]):
                at = text.casefold().find(q.casefold())
                hits.append({"id": _id_out(x), "record": row, "cluster_id": c, "snippet": _snippet(text, max(at, 0))})
            out["text"] = {"hits": hits, "next": scan["next"], "scanned": scan["scanned"], "start": start,
                           "documents": corpus.n_docs}
        return out

    def _near(self, served: Any, text: str) -> dict:
        index = served.index
        if index is None:
            raise PageError("text", "pasting a document needs a live index (`diversify serve sqlite:///...`); this "
                                    "server serves an artifact. Search by id or text instead.", 404)
        with self._index_lock(served, index):
            match = index.query([text])[0]
        matched = list(match.matched)[: LIMITS["near"]]
        out = {"joined": bool(match.joined), "cluster_id": match.cluster,
               "near": [{"id": _id_out(i), "similarity": round(float(s), 6)} for i, s in matched],
               "more": max(0, len(match.matched) - len(matched))}
        corpus, corpus_error = self._corpus(served)
        out["corpus_error"] = corpus_error
        if corpus is not None and matched:
            _attach_texts(out["near"], corpus.texts_of([m["id"] for m in out["near"]]), base=text)
        return out


def _fits(x: Any) -> bool:
    """An id a lookup can take: a str, or an int in the int64 range."""
    return isinstance(x, str) or -(1 << 63) <= x < (1 << 63)


def _clusters_of(served: Any, ids: list, lock: Any) -> list[Optional[int]]:
    cm, index = served.cluster_map, served.index
    if not ids:
        return []
    if cm is not None:
        return [None if c < 0 else int(c) for c in cm.lookup(ids).tolist()]
    if index is not None:
        with lock:
            return index.cluster_of(ids)
    return [None] * len(ids)


def _attach_texts(members: list[dict], texts: list[Optional[str]], base: Optional[str] = None) -> None:
    """Each member's text (clipped) and its word diff against ``base``, or against the first member
    (the representative) when ``base`` is None."""
    if base is None:
        base = texts[0] if texts else None
    for m, t in zip(members, texts):
        m["text"], m["text_cut"] = _clip(t)
        if t is not None and base is not None and (m.get("is_representative") is not True):
            m["diff"] = word_diff(base, t)


def _cluster_view(cm: Any, cluster_id: int, limit: int) -> dict:
    from ..artifact.views import cluster_view

    view = cluster_view(cm, cluster_id=cluster_id, limit=limit)
    for m in view["members"]:
        m["id"] = _id_out(m["id"])
    view["representative"] = _id_out(view["representative"])
    view["source"] = "artifact"
    return view


def _index_cluster(index: Any, cluster_id: int, limit: int) -> dict:
    from ..ids import INT64_MAX, INT64_MIN
    from ..index.records import stored_id

    if not INT64_MIN <= cluster_id <= INT64_MAX:
        raise PageError("cluster_id", f"`cluster_id` {cluster_id} is not a cluster of this index.", 404)
    with index.storage.read() as view:
        kind = view.state().id_kind
        rows = view.docs_in_clusters([cluster_id], payload=False)
    if not rows:
        raise PageError("cluster_id", f"`cluster_id` {cluster_id} is not a cluster of this index (deleted, or never "
                                      "made). Use an id the page lists.", 404)
    rows.sort(key=lambda r: (not r.is_rep, r.seq))
    shown = rows[:limit]
    members = [{"id": _id_out(stored_id(r.id, kind, index.url)), "is_representative": bool(r.is_rep),
                "similarity": round(float(r.similarity), 6), "stages": stage_names(int(r.stages))} for r in shown]
    return {"cluster_id": cluster_id, "size": len(rows), "representative": members[0]["id"] if members[0]
            ["is_representative"] else None, "similarity_stored": True, "members": members,
            "more": len(rows) - len(shown), "source": "index"}


def _index_summary(index: Any, top: int) -> dict:
    """Counts from the index's stats; the largest clusters among its first ``LIMITS["index_scan"]`` documents."""
    from ..index.records import stored_id

    stats = index.stats()
    sizes: dict[int, int] = {}
    reps: dict[int, Any] = {}
    stages: dict[int, int] = {}
    seen = 0
    with index.storage.read() as view:
        kind = view.state().id_kind
        for r in view.rows(payload=False):
            if seen >= LIMITS["index_scan"]:
                break
            seen += 1
            sizes[r.cluster] = sizes.get(r.cluster, 0) + 1
            stages[r.cluster] = stages.get(r.cluster, 0) | int(r.stages)
            if r.is_rep:
                reps[r.cluster] = stored_id(r.id, kind, index.url)
    order = sorted(sizes, key=lambda c: (-sizes[c], c))[:top]
    largest = [{"cluster_id": int(c), "size": sizes[c], "representative": _id_out(reps.get(c)),
                "stages": stage_names(stages[c])} for c in order]
    return {"documents": stats["documents"], "clusters": stats["clusters"], "folded": stats["folded"],
            "histogram": histogram(np.array(list(sizes.values()), dtype=np.int64)), "largest": largest,
            "partial": seen < stats["documents"], "counted": seen, "clustering": stats["clustering"]}


def histogram(sizes: np.ndarray) -> list[dict]:
    """Clusters by size in powers of two: ``[{"lo", "hi", "clusters", "documents"}]`` for sizes
    1, 2, 3-4, 5-8, ... up to the largest (empty buckets included, so the bars line up)."""
    sizes = np.asarray(sizes, dtype=np.int64)
    if sizes.size == 0:
        return []
    out, lo, hi = [], 1, 1
    biggest = int(sizes.max())
    while lo <= biggest:
        inside = sizes[(sizes >= lo) & (sizes <= hi)]
        out.append({"lo": lo, "hi": hi, "clusters": int(inside.size), "documents": int(inside.sum())})
        lo, hi = hi + 1, hi * 2
    return out


def page_routes(get_served: Callable[[], Any]) -> list[BaseRoute]:
    """The page's routes: ``/``, ``/page/static/{name}`` and ``/page/api/...`` (see the module docstring)."""
    page = _Page(get_served)
    return [
        Route("/", page.index, methods=["GET"]),
        Route("/page/static/{name}", page.static, methods=["GET"]),
        Route("/page/api/summary", page.summary, methods=["GET"]),
        Route("/page/api/cluster/{cluster_id}", page.cluster, methods=["GET"]),
        Route("/page/api/search", page.search, methods=["GET"]),
        Route("/page/api/near", page.near, methods=["POST"]),
    ]
