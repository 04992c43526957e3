"""Which backend serves a storage URL: the scheme registry and :func:`open_storage`.

The interface (:mod:`diversify.index.storage`) knows no backend; each backend module imports the
interface, and this module imports a backend only when a URL of its scheme is opened (so neither
``import diversify.index.storage`` nor ``import diversify.index`` loads a database client).
"""

from __future__ import annotations

from typing import Optional

from ..errors import ConfigError, MissingDependencyError, StorageError, require
from .storage import Storage, StorageOptions
from .urls import check_url, mask_url

__all__ = ["BACKENDS", "open_storage", "scheme_of"]

#: scheme -> (client module, extra) of each backend; the client is imported on use
BACKENDS = {
    "sqlite": (None, None),
    "postgresql": ("psycopg", "postgres"),
    "postgres": ("psycopg", "postgres"),
    "redis": ("redis", "redis"),
    "rediss": ("redis", "redis"),
    "unix": ("redis", "redis"),
}


def scheme_of(url: str) -> str:
    """The URL's scheme, lower case, checked against the known backends (ConfigError if unknown)."""
    if not isinstance(url, str) or "://" not in url:
        raise ConfigError(f"`url` must be a storage URL such as 'sqlite:///index.db', 'postgresql://host/db' or "
                          f"'redis://host:6379/0'; got {mask_url(url) if isinstance(url, str) else url!r}.")
    scheme = url.split("://", 1)[0].lower()
    if scheme not in BACKENDS:
        raise ConfigError(f"`url` scheme must be one of {sorted(set(BACKENDS))}; got {scheme!r} in {mask_url(url)}. "
                          "Use sqlite:///path.db for an embedded index.")
    return scheme


def open_storage(url: str, options: Optional[StorageOptions] = None) -> Storage:
    """Open the backend named by the URL's scheme (the client library is imported only now).

    Raises ConfigError for an unknown scheme or a URL that breaks a rule of
    :mod:`diversify.index.urls`, MissingDependencyError naming the extra to install
    (``pip install 'diversify-retrieval[postgres]'`` / ``[redis]``), StorageError when the server
    cannot be reached (within ``options.connect_timeout``).
    """
    scheme = scheme_of(url)
    check_url(url, scheme)  # before any driver sees it (NUL, fragments, bad ports...: see .urls)
    client, extra = BACKENDS[scheme]
    if client is not None:
        assert extra is not None
        require(client, extra=extra, purpose=f"a {scheme}:// index")
    opts = options if options is not None else StorageOptions()
    backend = _backend_class(scheme)
    storage = backend(url, opts)
    if not isinstance(storage, Storage):  # pragma: no cover - a backend bug
        raise StorageError(f"{type(storage).__name__} is not a Storage")
    return storage


def _backend_class(scheme: str) -> type:
    """The backend class of a scheme, imported now (static imports of our own modules only)."""
    try:
        if scheme == "sqlite":
            from .sqlite import SQLiteStorage

            return SQLiteStorage
        if scheme in ("postgresql", "postgres"):
            from .postgres import PostgresStorage  # type: ignore[import-not-found,unused-ignore]

            return PostgresStorage
        from .redis import RedisStorage  # type: ignore[import-not-found,unused-ignore]

        return RedisStorage
    except ModuleNotFoundError as exc:
        if not (exc.name or "").startswith("diversify.index."):
            raise
        raise MissingDependencyError(f"the {scheme}:// backend ({exc.name}) is not part of this installation of "
                                     "diversify; upgrade diversify-retrieval, or use sqlite:///path.db.") from exc
