"""Running the app on uvicorn: the loopback rule, the token, and a deadline for slow clients.

uvicorn closes an idle keep-alive connection, but waits without end for the headers of a request
that trickles in a byte at a time. :func:`protocol_class` adds a deadline: a connection whose
next request's headers are not complete ``header_timeout`` seconds after it opened (or after the
previous answer) is closed. A slow body is bounded by the app (``Limits.body_timeout``: 408).
"""

from __future__ import annotations

import ipaddress
import os
from typing import Any, Optional

from ..errors import ConfigError

__all__ = ["is_loopback", "read_token", "protocol_class", "serve", "TOKEN_ENV", "MIN_TOKEN_CHARS"]

#: the environment variable holding the bearer token
TOKEN_ENV = "DIVERSIFY_SERVE_TOKEN"
#: the shortest token accepted
MIN_TOKEN_CHARS = 16


def is_loopback(host: str) -> bool:
    """Is ``host`` an address only this machine reaches (127.0.0.0/8, ::1, ``localhost``)?"""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def read_token(token_file: Optional[str]) -> Optional[str]:
    """The token from ``--token-file`` (its first line) or else the ``DIVERSIFY_SERVE_TOKEN`` variable."""
    if token_file is not None:
        try:
            with open(token_file, encoding="utf-8") as f:
                token = f.readline().strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"`--token-file` must be a readable UTF-8 file holding the token; {token_file!r} "
                              f"is not ({exc}).") from None
        where = f"--token-file {token_file!r}"
    else:
        token = os.environ.get(TOKEN_ENV, "").strip()
        if not token:
            return None
        where = TOKEN_ENV
    if len(token) < MIN_TOKEN_CHARS or any(c.isspace() or not c.isprintable() for c in token):
        raise ConfigError(f"the token ({where}) must be at least {MIN_TOKEN_CHARS} printable characters without "
                          f"spaces; got {len(token)} characters. Make one with `python -c \"import secrets; "
                          "print(secrets.token_urlsafe(32))\"`.")
    return token


def protocol_class(header_timeout: float) -> type:
    """uvicorn's HTTP protocol (httptools when installed, else h11) with the header deadline."""
    base: Any
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

        base = HttpToolsProtocol
    except ImportError:
        from uvicorn.protocols.http.h11_impl import H11Protocol

        base = H11Protocol

    class Deadline(base):
        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm(None)

        def on_response_complete(self) -> None:
            done = self.cycle
            super().on_response_complete()
            self._arm(done)

        def _arm(self, done: Any) -> None:
            self.loop.call_later(header_timeout, self._expire, done)

        def _expire(self, done: Any) -> None:
            if self.cycle is done and not self.transport.is_closing():  # no new request's headers since
                self.transport.close()

    return Deadline


def serve(app: Any, *, host: str, port: int, token: Optional[str], header_timeout: float,
          log_level: str = "warning") -> None:
    """Run ``app`` until interrupted. A non-loopback ``host`` needs a token (ConfigError otherwise)."""
    if not is_loopback(host) and token is None:
        raise ConfigError(f"`--host` {host!r} is reachable from other machines: set a token first "
                          f"({TOKEN_ENV}=... or --token-file PATH), or bind 127.0.0.1.")
    import uvicorn

    config = uvicorn.Config(app, host=host, port=port, http=protocol_class(header_timeout), lifespan="on",
                            timeout_keep_alive=5, log_level=log_level, access_log=False, server_header=False,
                            limit_concurrency=1024, h11_max_incomplete_event_size=64 * 1024)
    uvicorn.Server(config).run()
