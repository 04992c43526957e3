"""`diversify serve SOURCE`: the filter as an HTTP service (docs/serve.md).

Imports nothing of the server until the command runs, and then only the online path and the
artifact reader (an artifact) or the live index (a URL): no kernel is compiled to answer a lookup.
"""

from __future__ import annotations

import os
import sys

from ..errors import DiversifyError
from .failures import Terminated
from .output import printable

__all__ = ["add_serve_parser", "cmd_serve"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
DEFAULT_POLL = 0.5
DEFAULT_CLIENT_TIMEOUT = 10.0


def add_serve_parser(sub) -> None:
    p = sub.add_parser("serve", help="serve an artifact or a live index over HTTP (JSON API, OpenAPI, metrics)",
                       description="Serve SOURCE over HTTP: POST /v1/diversify, /v1/clusters, GET "
                                   "/v1/clusters/{id}, the /v1/index endpoints for a live index, /healthz, "
                                   "/metrics and /openapi.json (docs/serve.md). Needs the serve extra: pip install "
                                   "'diversify-retrieval[serve]'.")
    p.add_argument("source", metavar="SOURCE",
                   help="an artifact (.dvf; reloaded when the file is replaced) or a live-index URL: sqlite:///path.db, "
                        "postgresql://user@host/db, redis://host:6379/0")
    p.add_argument("--host", default=DEFAULT_HOST,
                   help=f"address to bind (default {DEFAULT_HOST}; any other than loopback needs a token)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port to bind (default {DEFAULT_PORT}; 0: any free)")
    p.add_argument("--token-file", default=None, metavar="PATH",
                   help="file whose first line is the bearer token the write endpoints need (default: the "
                        "DIVERSIFY_SERVE_TOKEN variable, else none)")
    p.add_argument("--corpus", default=None, metavar="PATH",
                   help="the corpus file the artifact was built from, for the page's text search (default: none)")
    p.add_argument("--poll", type=float, default=DEFAULT_POLL, metavar="SECONDS",
                   help=f"how often to look whether the artifact file was replaced (default {DEFAULT_POLL:g}; 0: never)")
    p.add_argument("--client-timeout", type=float, default=DEFAULT_CLIENT_TIMEOUT, metavar="SECONDS",
                   help="a slow client's limit: a connection whose request headers take longer is closed, a body "
                        f"that takes longer is answered 408 (default {DEFAULT_CLIENT_TIMEOUT:g})")
    p.add_argument("--check", action="store_true",
                   help="load SOURCE, check the address and the token, print what would be served and exit "
                        "(default: off, serve until Ctrl-C)")
    p.set_defaults(func=cmd_serve)


def _check_args(a) -> None:
    if not 0 <= a.port <= 65535:
        raise DiversifyError(f"`--port` must be in [0, 65535]; got {a.port}. Use 0 for any free port.")
    if not a.poll >= 0:
        raise DiversifyError(f"`--poll` must be a number of seconds >= 0; got {a.poll}. Use 0 to never reload.")
    if a.corpus is not None and not os.path.isfile(a.corpus):
        raise DiversifyError(f"`--corpus` must be the corpus file the artifact was built from; {a.corpus!r} is not a "
                             "file. Check the path, or leave --corpus out (the page then searches by id only).")
    if not a.client_timeout > 0:
        raise DiversifyError(f"`--client-timeout` must be a number of seconds > 0; got {a.client_timeout}.")


def cmd_serve(a) -> int:
    from ..errors import require
    from ..serve.run import TOKEN_ENV, is_loopback, read_token

    _check_args(a)
    token = read_token(a.token_file)
    if not is_loopback(a.host) and token is None:
        raise DiversifyError(f"`--host` {a.host!r} is reachable from other machines: set a token first "
                             f"({TOKEN_ENV}=... or --token-file PATH), or bind 127.0.0.1 (the default).")
    require("starlette", extra="serve", purpose="diversify serve")
    require("uvicorn", extra="serve", purpose="diversify serve")
    from ..serve.app import create_app
    from ..serve.limits import Limits
    from ..serve.run import serve

    limits = Limits(header_timeout=a.client_timeout, body_timeout=a.client_timeout)
    app = create_app(a.source, corpus=a.corpus, token=token, limits=limits, poll_interval=a.poll)
    served = app.state.source.current()
    if served.cluster_map is not None:
        what = f"{served.cluster_map.n_docs:,} documents in {served.cluster_map.n_clusters:,} clusters from {printable(a.source)}"
    else:
        what = f"the live index {served.index.url}"  # the URL with its password masked
    writes = "write endpoints need the token" if token else "no token: write endpoints are open (loopback only)"
    print(f"diversify serve: {what} on http://{a.host}:{a.port} ({writes}; /openapi.json lists "
          "the routes)", file=sys.stderr, flush=True)
    if a.check:
        app.state.source.close()
        return 0
    try:
        serve(app, host=a.host, port=a.port, token=token, header_timeout=a.client_timeout)
    except (KeyboardInterrupt, Terminated):  # uvicorn stops on Ctrl-C / SIGTERM, then raises the signal again
        pass
    print("diversify serve: stopped", file=sys.stderr, flush=True)
    return 0
