"""``diversify.client.Client``: the Python client of ``diversify serve`` (docs/serve.md).

One method per endpoint, with the server's names and answers (plain dicts and lists, as the JSON
says). httpx is imported when a client is made (``pip install 'diversify-retrieval[serve]'``).

>>> from diversify.client import Client
>>> with Client("http://127.0.0.1:8000") as c:                                    # doctest: +SKIP
...     c.diversify([{"id": "a", "score": 0.9}, {"id": "b", "score": 0.8}], k=10)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Optional

from .errors import DiversifyError, InputError, require

__all__ = ["Client", "RequestRejected", "ServiceError"]


class RequestRejected(InputError):
    """The server answered 4xx: ``status``, and ``field``, the request field it names (or None)."""

    def __init__(self, message: str, *, status: int, field: Optional[str]) -> None:
        super().__init__(message)
        self.status, self.field = status, field


class ServiceError(DiversifyError, RuntimeError):
    """The server could not be reached, or answered 5xx."""


def _hit(h: Any) -> dict:
    """A hit as the server takes it: a mapping as given, or an object with ``.id`` / ``.score``
    (``.vector`` and ``.text`` when set, as :class:`diversify.Hit` has them)."""
    if isinstance(h, Mapping):
        return dict(h)
    out = {"id": h.id, "score": getattr(h, "score", None)}
    vector = getattr(h, "vector", None)
    if vector is not None:
        out["vector"] = [float(x) for x in vector]
    text = getattr(h, "text", None)
    if text is not None:
        out["text"] = text
    return out


class Client:
    """A client of one server.

    Parameters
    ----------
    base_url : str
        The server's address, e.g. ``"http://127.0.0.1:8000"``.
    token : str, optional
        The bearer token the write endpoints need when the server has one.
    timeout : float
        Seconds to wait for each answer.
    """

    def __init__(self, base_url: str, *, token: Optional[str] = None, timeout: float = 10.0) -> None:
        httpx = require("httpx", extra="serve", purpose="diversify.client.Client")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._httpx = httpx
        self._http = httpx.Client(base_url=base_url.rstrip("/"), headers=headers, timeout=timeout)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _call(self, method: str, path: str, body: Any = None, params: Optional[dict] = None) -> Any:
        try:
            r = self._http.request(method, path, json=body, params=params)
        except self._httpx.HTTPError as exc:
            raise ServiceError(f"the server at {self._http.base_url} did not answer {method} {path}: {exc}. Is "
                               "`diversify serve` running there?") from exc
        if r.status_code < 400:
            return r.json() if r.headers.get("content-type", "").startswith("application/json") else r.text
        try:
            err = r.json()["error"]
            message, field = str(err["message"]), err.get("field")
        except (ValueError, KeyError, TypeError):
            message, field = r.text[:300], None
        if r.status_code < 500:
            raise RequestRejected(f"{method} {path} was refused ({r.status_code}): {message}", status=r.status_code,
                                  field=field)
        raise ServiceError(f"{method} {path} failed on the server ({r.status_code}): {message}")

    def diversify(self, hits: Iterable[Any], *, k: int = 10, max_per_cluster: int = 1, unknown: str = "own",
                  fold_threshold: Optional[float] = None, fold_text_threshold: Optional[float] = None) -> dict:
        """``POST /v1/diversify``: ``{"hits": [{"id", "score", "cluster_id", "omitted", "omitted_ids"}],
        "short", "omitted", ...}``, the answer of :func:`diversify.select` on the server's artifact."""
        body: dict = {"hits": [_hit(h) for h in hits], "k": k, "max_per_cluster": max_per_cluster,
                      "unknown": unknown}
        if fold_threshold is not None:
            body["fold_threshold"] = fold_threshold
        if fold_text_threshold is not None:
            body["fold_text_threshold"] = fold_text_threshold
        return self._call("POST", "/v1/diversify", body)

    def clusters(self, ids: Iterable[Any]) -> list:
        """``POST /v1/clusters``: the cluster id of each id (None: unknown)."""
        return self._call("POST", "/v1/clusters", {"ids": list(ids)})["cluster_ids"]

    def cluster(self, cluster_id: int, *, limit: Optional[int] = None) -> dict:
        """``GET /v1/clusters/{cluster_id}``: representative, members, similarity, stages."""
        params = None if limit is None else {"limit": limit}
        return self._call("GET", f"/v1/clusters/{int(cluster_id)}", params=params)

    def index_add(self, documents: Iterable[Mapping]) -> list:
        """``POST /v1/index/add``: ``[{"id", "text"}, ...]`` -> one match per document."""
        return self._call("POST", "/v1/index/add", {"documents": [dict(d) for d in documents]})["matches"]

    def index_query(self, documents: Iterable[Any]) -> list:
        """``POST /v1/index/query``: documents (``{"text": ...}`` or plain strings) -> one match each."""
        docs = [{"text": d} if isinstance(d, str) else dict(d) for d in documents]
        return self._call("POST", "/v1/index/query", {"documents": docs})["matches"]

    def index_delete(self, ids: Iterable[Any]) -> dict:
        """``POST /v1/index/delete``: ``{"deleted", "missing", "reassigned"}``."""
        return self._call("POST", "/v1/index/delete", {"ids": list(ids)})

    def health(self) -> dict:
        """``GET /healthz``."""
        return self._call("GET", "/healthz")

    def metrics(self) -> str:
        """``GET /metrics``: the Prometheus text."""
        return self._call("GET", "/metrics")
