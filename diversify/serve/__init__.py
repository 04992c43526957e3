"""``diversify serve``: the filter as an HTTP service (docs/serve.md).

Needs the ``serve`` extra (``pip install 'diversify-retrieval[serve]'``: Starlette on uvicorn).

Modules: :mod:`~diversify.serve.app` (:func:`create_app`, the routes), :mod:`~diversify.serve.served`
(the loaded artifact or live index, hot reload), :mod:`~diversify.serve.handlers` (the JSON
answers), :mod:`~diversify.serve.limits` (what one request may carry; the JSON reader),
:mod:`~diversify.serve.metrics` (Prometheus text), :mod:`~diversify.serve.openapi` (the schema),
:mod:`~diversify.serve.run` (uvicorn, the loopback rule, the token, slow clients); the page at ``/``:
:mod:`~diversify.serve.page` (its routes), :mod:`~diversify.serve.corpus` (texts of ``--corpus`` by offset),
:mod:`~diversify.serve.pagediff` (its word differences).
"""

from __future__ import annotations

from typing import Any

__all__ = ["create_app", "Limits"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from .app import create_app

        return create_app
    if name == "Limits":
        from .limits import Limits

        return Limits
    raise AttributeError(f"module 'diversify.serve' has no attribute {name!r}")
