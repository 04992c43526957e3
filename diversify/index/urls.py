"""The rules a storage URL follows before any backend or driver sees it (one home for URL parsing).

A URL is refused with a :class:`~diversify.errors.ConfigError` that names the rule, the URL (its
password masked) and the fix, instead of being passed on to a driver that would fail with a raw
exception or, worse, open something else than what was written:

* every URL: a ``str`` of valid Unicode (no lone surrogates); no control character (NUL, tab,
  CR, LF, DEL, C1: ``urllib`` silently drops tab/CR/LF and C strings end at NUL); no
  ``#fragment`` (no backend has one: ``sqlite:///a#b.db`` would open ``a``); a parseable host and
  a port that is a decimal number from 1 to 65535;
* ``sqlite://`` (:func:`sqlite_file`): an empty host (or ``localhost``); a path naming a file, not
  a directory, ``:memory:`` or nothing; ``%`` escapes of valid UTF-8 that decode to no control
  character (a literal ``%``, ``?`` or ``#`` in a file name is written ``%25``, ``%3F``, ``%23``);
  only the query parameters ``mmap_mb`` and ``index``;
* ``redis://`` / ``rediss://``: the path is empty or ``/<database number>`` (redis-py reads
  ``/abc`` as database 0 and ``/3/4`` as database 34);
* ``postgresql://``: each ``host:port`` of a multi-host URL follows the port rule.

The query parameters that are diversify's rather than a driver's are read here too
(:func:`index_name`, :func:`query_param`) and removed before the URL goes on
(:func:`without_params`); :func:`mask_url` and :func:`url_secrets` keep a password out of messages.
"""

from __future__ import annotations

import re
import urllib.parse
from typing import Optional

from ..errors import ConfigError

__all__ = ["check_url", "sqlite_file", "SQLITE_PARAMS", "mask_url", "url_secrets", "index_name", "query_param", "query_values",
           "without_params"]

#: C0 controls, DEL and C1 controls
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
_PORT = re.compile(r"[0-9]{1,5}")
_INDEX_NAME = re.compile(r"[A-Za-z0-9_]{1,48}")
#: the query parameters a sqlite URL takes
SQLITE_PARAMS = ("mmap_mb", "index")


def mask_url(url: str) -> str:
    """``url`` with the password (if any) replaced by ``***``, for messages and logs.

    Also masks ``password=`` query parameters (libpq's and redis-py's keyword form).
    """
    if not isinstance(url, str):
        return repr(url)
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:  # e.g. an unclosed IPv6 bracket: hide whatever stands before an '@'
        return re.sub(r"://[^/?#]*@", "://***@", url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        if ":" in userinfo:
            user = userinfo.split(":", 1)[0]
            netloc = f"{user}:***@{host}"
    query = parts.query
    if query:
        pairs = urllib.parse.parse_qsl(query, keep_blank_values=True)
        if any(k.lower() == "password" for k, _ in pairs):
            query = "&".join(f"{k}=***" if k.lower() == "password" else f"{k}={v}" for k, v in pairs)
    if netloc == parts.netloc and query == parts.query:
        return url  # nothing to hide (urlunsplit would also drop the empty host of sqlite:////abs)
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def url_secrets(url: str) -> list[str]:
    """The password of ``url`` in the forms a driver's message could show (for scrubbing), longest first."""
    out: list[str] = []
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return out
    userinfo = parts.netloc.rsplit("@", 1)[0] if "@" in parts.netloc else ""
    if ":" in userinfo:
        raw = userinfo.split(":", 1)[1]
        out += [raw, urllib.parse.unquote(raw)]
    for k, v in urllib.parse.parse_qsl(parts.query, keep_blank_values=True):
        if k.lower() == "password":
            out.append(v)
    return sorted({s for s in out if s}, key=len, reverse=True)


def query_values(url: str, name: str) -> list[str]:
    """Every value of the query parameter ``name`` of ``url``, in order (decoded)."""
    query = urllib.parse.urlsplit(url).query
    return [v for k, v in urllib.parse.parse_qsl(query, keep_blank_values=True) if k == name]


def query_param(url: str, name: str) -> Optional[str]:
    """The value of the query parameter ``name`` of ``url`` (the last one when repeated), or None."""
    values = query_values(url, name)
    return values[-1] if values else None


def without_params(url: str, names: tuple[str, ...]) -> str:
    """``url`` without the query parameters ``names`` (diversify's, not the driver's).

    The other parameters are kept as written (not decoded and encoded again: ``%20`` stays ``%20``,
    where a round trip through ``urlencode`` would write ``+``, which libpq does not read as a
    space), and so is everything before the ``?`` (``urlunsplit`` would write ``unix:///path`` as
    ``unix:/path`` and ``postgresql:///db`` as ``postgresql:/db``, which the drivers refuse).
    """
    head, sep, query = url.partition("?")
    if not sep:
        return url
    kept = [part for part in query.split("&")
            if part and urllib.parse.unquote_plus(part.split("=", 1)[0]) not in names]
    return head + ("?" + "&".join(kept) if kept else "")


def index_name(url: str) -> str:
    """The ``index=`` query parameter of ``url`` (default ``"default"``), checked."""
    name = query_param(url, "index")
    if name is None:
        return "default"
    if not _INDEX_NAME.fullmatch(name):
        raise ConfigError(f"the `index` parameter of the URL must be 1-48 letters, digits or '_'; got {name!r} in "
                          f"{mask_url(url)}.")
    return name


def _shown(url: str) -> str:
    return repr(mask_url(url))


def _refuse(url: str, rule: str, fix: str) -> ConfigError:
    return ConfigError(f"`url` {rule}; got {_shown(url)}. {fix}")


def check_url(url: str, scheme: str) -> urllib.parse.SplitResult:
    """Apply the rules every storage URL follows (module docstring); return its parts."""
    try:
        url.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _refuse(url, f"must be valid Unicode text ({exc.reason} at position {exc.start})",
                      "Remove the lone surrogate, or percent-encode the character's UTF-8 bytes.") from None
    bad = _CONTROL.search(url)
    if bad is not None:
        raise _refuse(url, f"must not contain control characters ({bad.group()!r} at position {bad.start()})",
                      "Remove it (a stray newline or NUL from a config file or an environment variable?), or "
                      "percent-encode it where the backend allows one.")
    try:
        parts = urllib.parse.urlsplit(url)
        hosts = parts.netloc.rsplit("@", 1)[-1]
    except ValueError as exc:
        raise _refuse(url, f"must be a URL urllib can parse ({exc})", "Check the brackets of an IPv6 host: "
                      "postgresql://[::1]:5432/db.") from None
    if "#" in url:
        raise _refuse(url, "must not have a #fragment (no backend has one: everything after '#' would be dropped)",
                      "Write a '#' that belongs to a file name, a database name or a password as %23.")
    if scheme in ("postgresql", "postgres"):
        for host in hosts.split(","):  # libpq takes host1:port1,host2:port2
            _check_port(url, host)
    elif scheme in ("redis", "rediss"):
        _check_port(url, hosts)
        db = parts.path[1:]
        if db and not (db.isascii() and db.isdecimal()):
            raise _refuse(url, f"must name the Redis database as /NUMBER after the host (the path is {parts.path!r})",
                          "Use e.g. redis://localhost:6379/0 (or no path for database 0).")
    return parts


def _check_port(url: str, host: str) -> None:
    if host.startswith("["):  # [IPv6]:port
        tail = host.rpartition("]")[2]
        port = tail[1:] if tail.startswith(":") else None
    else:
        port = host.rpartition(":")[2] if ":" in host else None
    if not port:
        return
    if not _PORT.fullmatch(port) or not 1 <= int(port) <= 65535:
        raise _refuse(url, f"must give the port as a number from 1 to 65535 (the port is {port!r})",
                      "Fix the port after the host, e.g. localhost:5432 or localhost:6379, or leave it out for "
                      "the default.")


def sqlite_file(url: str) -> str:
    """The file path of ``sqlite:///relative.db`` / ``sqlite:////absolute.db`` (ConfigError otherwise)."""
    parts = check_url(url, "sqlite")
    if parts.netloc not in ("", "localhost"):
        raise _refuse(url, f"of a sqlite index names a local file, with no host, user or port ({parts.netloc!r} "
                      "before the path)", "Use sqlite:///relative/path.db or "
                      "sqlite:////absolute/path.db.")
    pairs = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    if "?" in url and not pairs:
        raise _refuse(url, "of a sqlite index has an empty or malformed query after '?'",
                      "Remove the '?', or write a '?' that belongs to the file name as %3F.")
    for key, _ in pairs:
        if key not in SQLITE_PARAMS:
            raise _refuse(url, f"of a sqlite index takes only the parameters {list(SQLITE_PARAMS)}; the "
                          f"parameter {key!r} after '?' is none of them", "Write a '?' that belongs to the file name as %3F, or remove the parameter.")
    bad = _BAD_ESCAPE.search(parts.path)
    if bad is not None:
        raise _refuse(url, f"must write a '%' in the file name as %25 (a '%' not followed by two hex digits at "
                      f"position {bad.start()} of the path)", "Write % as %25 (sp%20ace.db names 'sp ace.db').")
    try:
        path = urllib.parse.unquote_to_bytes(parts.path).decode("utf-8")
    except UnicodeDecodeError:
        raise _refuse(url, "must percent-encode the file name as UTF-8; its %-escapes are not valid UTF-8",
                      "Encode the name's UTF-8 bytes (urllib.parse.quote(name)).") from None
    bad = _CONTROL.search(path)
    if bad is not None:
        raise _refuse(url, f"must name a file without control characters (the path decodes to {path!r})",
                      "Remove the %-escape of the control character (e.g. %00).")
    path = path[1:] if path.startswith("/") else path
    if not path or path == ":memory:" or path.endswith("/") or path.split("/")[-1] in (".", ".."):
        raise _refuse(url, "of a sqlite index must name a file (an in-memory database is not shared between "
                      "processes, and a directory is not a file)", "Use e.g. sqlite:///index.db.")
    return path
