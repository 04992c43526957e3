"""A store named by a path or URL (``diversify build --from-store``): which vendor, which client.

=========================================  ==========================================
``--from-store``                           store
=========================================  ==========================================
``http://host:port`` / ``https://...``     a Chroma server (``chromadb.HttpClient``)
a directory holding ``chroma.sqlite3``     a Chroma persistent directory
a directory holding ``meta.json`` and      a Qdrant local path (``QdrantClient(path=)``)
``collection/``
a directory holding ``*.lance`` tables     a LanceDB database (``lancedb.connect``)
an existing path whose name ends ``.db``   Milvus Lite (``MilvusClient(path)``)
=========================================  ==========================================

``kind=`` (``--store-kind``) overrides the guess: ``qdrant`` with a URL is a Qdrant server,
``milvus`` with a URL a Milvus server, ``lancedb`` any URI LanceDB connects to (``s3://...``).
The collection must exist; nothing is created (a Milvus collection is loaded).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple, Optional
from urllib.parse import urlsplit

from ..errors import ConfigError, DiversifyError, StoreError, require

__all__ = ["KINDS", "Opened", "open_store", "store_kind"]

KINDS = ("qdrant", "chroma", "lancedb", "milvus")
_URL = re.compile(r"^https?://", re.I)


class Opened(NamedTuple):
    """The adapter over the named collection, and how to let its client go (a Qdrant local path
    and Milvus Lite hold a lock on their directory while a client is open)."""

    store: Any
    close: Callable[[], None]


def store_kind(location: str, *, param: str = "location") -> str:
    """The kind of store ``location`` names (see the module's table)."""
    if _URL.match(location):
        return "chroma"
    path = Path(location)
    if path.name.endswith(".db") and path.exists():
        return "milvus"
    if path.is_dir():
        if (path / "chroma.sqlite3").is_file():
            return "chroma"
        if (path / "meta.json").is_file() and (path / "collection").is_dir():
            return "qdrant"
        if any(child.name.endswith(".lance") for child in path.iterdir()):
            return "lancedb"
    what = "a directory of no known store" if path.is_dir() else ("a file of no known store" if path.exists()
                                                                   else "no such path")
    raise ConfigError(f"`{param}` must name a vector store: a Chroma server URL (http://host:port), a Chroma "
                      "persistent directory (chroma.sqlite3), a Qdrant local path (meta.json, collection/), a "
                      f"LanceDB directory (*.lance) or a Milvus Lite .db path; got {location!r} ({what}). Check the "
                      "path, or say the kind (`kind`).")


def open_store(location: str, collection: str, *, kind: Optional[str] = None, id_field: Optional[str] = None,
               vector_field: Optional[str] = None, param: str = "location") -> Opened:
    """The adapter over ``collection`` of the store at ``location``; the collection must exist.

    ``id_field``: the payload / metadata field (LanceDB: column) holding the document ids
    (default: the adapter's own: Qdrant and Milvus the point id / primary key, Chroma
    ``doc_id`` else the Chroma id, LanceDB ``id``). ``vector_field``: the named vector (Qdrant
    ``using``, LanceDB ``vector_column``, Milvus ``anns_field``)."""
    if not isinstance(location, str) or not location:
        raise ConfigError(f"`{param}` must be a path or URL of a vector store; got {location!r}.")
    if not isinstance(collection, str) or not collection:
        raise ConfigError(f"`collection` must name the collection (table) to read; got {collection!r}. "
                          "E.g. --collection docs.")
    if kind is None:
        kind = store_kind(location, param=param)
    elif kind not in KINDS:
        raise ConfigError(f"`kind` must be one of {', '.join(KINDS)}; got {kind!r}.")
    try:
        return _OPENERS[kind](location, collection, id_field, vector_field)
    except (DiversifyError, ImportError):
        raise
    except Exception as exc:  # the vendor's own: a lock held by another process, a server that does not answer
        raise StoreError(f"`{param}`: could not open the {kind} store at {location!r}: {type(exc).__name__}: "
                         f"{str(exc)[:300]}. Check that it is a {kind} store, that no other process holds it "
                         "(a Qdrant local path and Milvus Lite allow one at a time) and that a server answers.") \
            from exc


def _unknown(kind: str, collection: str, location: str, names) -> StoreError:
    listed = ", ".join(repr(n) for n in sorted(names)[:20]) or "none"
    return StoreError(f"`collection`: the {kind} store at {location!r} has no collection {collection!r}; it has "
                      f"{listed}. Check the name (--collection).")


def _qdrant(location, collection, id_field, vector_field) -> Opened:
    qc = require("qdrant_client", extra="qdrant", purpose="a Qdrant store")
    from .qdrant import QdrantStore

    client = qc.QdrantClient(url=location) if _URL.match(location) else qc.QdrantClient(path=location)
    try:
        if not client.collection_exists(collection):
            raise _unknown("Qdrant", collection, location, [c.name for c in client.get_collections().collections])
    except BaseException:
        client.close()
        raise
    return Opened(QdrantStore(client, collection, id_field=id_field, using=vector_field), client.close)


def _chroma(location, collection, id_field, vector_field) -> Opened:
    chromadb = require("chromadb", extra="chroma", purpose="a Chroma store")
    from .chroma import ChromaStore

    if _URL.match(location):
        parts = urlsplit(location)
        client = chromadb.HttpClient(host=parts.hostname or "localhost",
                                     port=parts.port or (443 if parts.scheme == "https" else 8000),
                                     ssl=parts.scheme == "https")
    else:
        client = chromadb.PersistentClient(path=location)
    names = [getattr(c, "name", c) for c in client.list_collections()]
    if collection not in names:
        raise _unknown("Chroma", collection, location, names)
    col = client.get_collection(collection)
    return Opened(ChromaStore(col, id_field=id_field or "doc_id"), lambda: None)


def _lancedb(location, collection, id_field, vector_field) -> Opened:
    lancedb = require("lancedb", extra="lancedb", purpose="a LanceDB store")
    from .lancedb import LanceDBStore

    db = lancedb.connect(location)
    listed = db.list_tables()
    names = list(getattr(listed, "tables", listed))
    if collection not in names:
        raise _unknown("LanceDB", collection, location, names)
    return Opened(LanceDBStore(db.open_table(collection), id_column=id_field or "id",
                               vector_column=vector_field or "vector"), lambda: None)


def _milvus(location, collection, id_field, vector_field) -> Opened:
    pymilvus = require("pymilvus", extra="milvus", purpose="a Milvus store")
    from .milvus import MilvusStore

    client = pymilvus.MilvusClient(location)
    try:
        if not client.has_collection(collection):
            raise _unknown("Milvus", collection, location, client.list_collections())
        client.load_collection(collection)  # a reopened database keeps its collections released
    except BaseException:
        client.close()
        raise
    return Opened(MilvusStore(client, collection, id_field=id_field, anns_field=vector_field,
                              scores_are="similarity"), client.close)


_OPENERS = {"qdrant": _qdrant, "chroma": _chroma, "lancedb": _lancedb, "milvus": _milvus}
