"""The ASGI application of ``diversify serve`` (Starlette): :func:`create_app`.

Every JSON route goes through one wrapper (:class:`_Endpoint`): the bearer token for write
routes, the body read within the byte and time limits, the parse (:func:`.limits.parse_body`),
the answer (:mod:`.handlers`: in the event loop when it is a dict look-up and a select, in a
worker thread when it folds on the fly or talks to a live index), and one JSON error for every
failure: a :class:`~diversify.serve.limits.RequestError` with its status and field, anything
else a 500 whose body says nothing of the code (the server logs it).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import os
import time
from collections.abc import Callable
from typing import Any, Optional, Union

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from .handlers import (
    cluster_answer,
    clusters_answer,
    diversify_answer,
    index_add,
    index_delete,
    index_query,
    needs_thread,
)
from .limits import Limits, RequestError, parse_body
from .metrics import Metrics
from .openapi import openapi
from .page import page_routes
from .served import Served, ServedSource

__all__ = ["create_app"]

log = logging.getLogger("diversify")

#: bodies up to this size are parsed in the event loop; larger ones in a worker thread
_PARSE_IN_LOOP_BYTES = 64 * 1024


def json_response(value: Any, status: int = 200, headers: Optional[dict] = None) -> Response:
    body = json.dumps(value, ensure_ascii=True, separators=(",", ":"), allow_nan=False).encode()
    return Response(body, status_code=status, media_type="application/json", headers=headers)


def _error(exc: RequestError) -> Response:
    headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
    return json_response(exc.body(), exc.status, headers)


async def _read_body(request: Request, limits: Limits) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > limits.max_body_bytes):
        raise RequestError(f"the request body must be at most {limits.max_body_bytes:,} bytes; Content-Length "
                           f"says {declared[:30]!r}. Send fewer hits or ids per request.", status=413)
    chunks: list[bytes] = []
    size = 0

    async def read() -> None:
        nonlocal size
        async for chunk in request.stream():
            size += len(chunk)
            if size > limits.max_body_bytes:
                raise RequestError(f"the request body must be at most {limits.max_body_bytes:,} bytes; got more. "
                                   "Send fewer hits or ids per request.", status=413)
            chunks.append(chunk)

    try:
        await asyncio.wait_for(read(), timeout=limits.body_timeout)
    except asyncio.TimeoutError:
        raise RequestError(f"the request body must arrive within {limits.body_timeout:g} s; it did not. Send the "
                           "whole body at once.", status=408) from None
    return b"".join(chunks)


class _Endpoint:
    """One JSON route: auth, bounded body, answer, JSON errors, metrics."""

    def __init__(self, template: str, answer: Callable, ctx: _Context, *, write: bool = False,
                 body: bool = True, thread: Union[bool, Callable[[Any], bool]] = False) -> None:
        self.template, self.answer, self.ctx = template, answer, ctx
        self.write, self.body, self.thread = write, body, thread

    async def handle(self, request: Request) -> Response:
        start = time.perf_counter()
        try:
            response = await self._respond(request)
        except RequestError as exc:
            response = _error(exc)
        except ClientDisconnect:  # the client went away while sending its body: nobody reads an answer
            response = Response(status_code=400)
        except Exception:  # a bug: logged here, one line to the client
            log.exception("diversify serve: %s %s failed", request.method, self.template)
            response = json_response({"error": {"status": 500, "field": None, "message":
                                                "internal error: the server logged it"}}, 500)
        self.ctx.metrics.observe(self.template, request.method, response.status_code, time.perf_counter() - start)
        return response

    async def _respond(self, request: Request) -> Response:
        ctx = self.ctx
        if self.write:
            ctx.authorize(request)
        served = ctx.get_served()
        if self.body:
            raw = await _read_body(request, ctx.limits)
            if len(raw) > _PARSE_IN_LOOP_BYTES:  # a large body is parsed off the event loop
                value = await run_in_threadpool(parse_body, raw, ctx.limits)
            else:
                value = parse_body(raw, ctx.limits)
            args: tuple = (value, served, ctx.limits)
        else:
            value = None
            args = (request.path_params.get("cluster_id", ""), dict(request.query_params), served, ctx.limits)
        in_thread = self.thread(value) if callable(self.thread) else self.thread
        answer = await run_in_threadpool(self.answer, *args) if in_thread else self.answer(*args)
        if self.answer is diversify_answer:
            ctx.metrics.add_folded(answer["omitted"])
        return json_response(answer)


class _Context:
    """What every route shares: the served source, the limits, the token, the metrics."""

    def __init__(self, source: ServedSource, limits: Limits, token: Optional[str], metrics: Metrics) -> None:
        self.source, self.limits, self.metrics = source, limits, metrics
        self.get_served: Callable[[], Served] = source.current
        self._token = None if token is None else token.encode()

    def authorize(self, request: Request) -> None:
        if self._token is None:
            return
        given = request.headers.get("authorization", "")
        scheme, _, value = given.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip().encode(), self._token):
            raise RequestError("this endpoint writes: it needs the header `Authorization: Bearer TOKEN` with the "
                               "server's token (DIVERSIFY_SERVE_TOKEN or --token-file).", field="Authorization",
                               status=401)


def _plain_routes(ctx: _Context) -> list:
    version = _version()
    schema = json.dumps(openapi(ctx.limits, version), separators=(",", ":")).encode()

    async def healthz(request: Request) -> Response:
        served = ctx.get_served()
        return json_response({"status": "ok", "source": ctx.source.kind, "generation": served.generation,
                              "fingerprint": served.fingerprint, "version": version})

    async def metrics(request: Request) -> Response:
        text = ctx.metrics.render(ctx.get_served().generation)
        return Response(text, media_type="text/plain; version=0.0.4; charset=utf-8")

    async def schema_route(request: Request) -> Response:
        return Response(schema, media_type="application/json")

    return [Route("/healthz", healthz, methods=["GET"]), Route("/metrics", metrics, methods=["GET"]),
            Route("/openapi.json", schema_route, methods=["GET"])]


def _version() -> str:
    from .. import __version__

    return __version__


def _http_error(request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    what = {404: f"there is no route {request.url.path[:200]!r}; /openapi.json lists the routes",
            405: f"{request.method} is not allowed on {request.url.path[:200]!r}; /openapi.json lists the methods"}
    return json_response({"error": {"status": status, "field": None,
                                    "message": what.get(status, "the request failed")}}, status)


def create_app(source: Union[str, os.PathLike, ServedSource], *, corpus: Optional[str] = None,
               token: Optional[str] = None, limits: Optional[Limits] = None, poll_interval: float = 0.5) -> Starlette:
    """The ASGI app serving ``source``: an artifact path (hot-reloaded when the file is replaced) or a
    live-index URL. ``token``: write routes need ``Authorization: Bearer TOKEN`` (None: open).
    ``limits``: bounds of one request (default ``Limits()``). ``app.state.source`` is the :class:`ServedSource`,
    ``app.state.metrics`` the :class:`Metrics`."""
    limits = Limits() if limits is None else limits
    metrics = Metrics()
    if not isinstance(source, ServedSource):
        source = ServedSource(os.fspath(source), corpus_path=corpus, poll_interval=poll_interval,
                              on_reload=metrics.reloaded)
    ctx = _Context(source, limits, token, metrics)
    get_served = ctx.get_served
    live = source.kind == "index"

    def route(path: str, answer: Callable, method: str = "POST", **kw: Any) -> Route:
        return Route(path, _Endpoint(path, answer, ctx, **kw).handle, methods=[method])

    routes = [
        route("/v1/diversify", diversify_answer, thread=needs_thread),
        route("/v1/clusters", clusters_answer, thread=live),
        route("/v1/clusters/{cluster_id}", cluster_answer, "GET", body=False, thread=live),
        route("/v1/index/add", index_add, write=True, thread=True),
        route("/v1/index/query", index_query, thread=True),
        route("/v1/index/delete", index_delete, write=True, thread=True),
        *_plain_routes(ctx),
    ]
    routes += page_routes(get_served)  # the page at / (diversify/serve/page.py)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        source.start()
        try:
            yield
        finally:
            source.close()

    app = Starlette(routes=routes, lifespan=lifespan,
                    exception_handlers={404: _http_error, 405: _http_error, HTTPException: _http_error,
                                        Exception: _http_error})
    app.state.source, app.state.metrics, app.state.limits = source, metrics, limits
    return app
