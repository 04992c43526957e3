"""`diversify build --from-store URL_OR_PATH --collection NAME [--write-back]`: build from the
documents a vector store holds (:func:`diversify.build_from`), then optionally write each
document's cluster id back into it."""

from __future__ import annotations

import argparse
import os
import re

from ..errors import DiversifyError
from ..files import check_output_path
from .failures import writing
from .options import config_from_args, parse_metadata
from .output import say

__all__ = ["add_store_args", "cmd_build_from_store"]

#: the Python names in messages, as the flags of this command spell them
_FLAGS = {"store": "--from-store", "location": "--from-store", "collection": "--collection",
          "text_field": "--text-field", "id_field": "--id-field", "id_column": "--id-field",
          "using": "--vector-field", "vector_column": "--vector-field", "anns_field": "--vector-field",
          "batch_size": "--batch-size", "kind": "--store-kind"}


def add_store_args(p: argparse.ArgumentParser) -> None:
    from ..stores.location import KINDS

    for action in p._actions:  # the INPUT options' --text-field also names the store's text field
        if "--text-field" in action.option_strings and action.help:
            action.help = f"{action.help[:-1]}; with --from-store: none, vectors only)"
    g = p.add_argument_group(
        "building from a vector store (instead of INPUT)",
        "--from-store reads ids, vectors and (with --text-field) texts out of a collection, page by page. "
        "URL_OR_PATH: http(s)://host:port is a Chroma server; a directory holding chroma.sqlite3 a Chroma "
        "persistent directory; one holding meta.json and collection/ a Qdrant local path; one holding *.lance "
        "tables a LanceDB database; an existing path ending .db Milvus Lite. --store-kind overrides the guess "
        "(qdrant or milvus with a URL: their servers). --id-field names the payload field holding the document "
        "ids (default: the point id / primary key; Chroma doc_id, else its id; LanceDB column id); --text-field "
        "the field holding the texts (Chroma's own documents: '#document'; default: none, vectors only).")
    g.add_argument("--from-store", default=None, metavar="URL_OR_PATH",
                   help="the vector store to build from (default: none, read INPUT)")
    g.add_argument("--collection", default=None, metavar="NAME",
                   help="with --from-store: the collection (LanceDB: table) to read; it must exist (default: none)")
    g.add_argument("--store-kind", choices=KINDS, default=None,
                   help="with --from-store: the kind of store, when the path or URL does not say (default: guessed)")
    g.add_argument("--vector-field", default=None, metavar="NAME",
                   help="with --from-store: the named vector to read (Qdrant using, LanceDB vector column, Milvus "
                        "vector field) (default: the only one; LanceDB vector)")
    g.add_argument("--batch-size", type=int, default=None, metavar="N",
                   help="with --from-store: documents per page read from the store (default 4096)")
    g.add_argument("--write-back", action="store_true",
                   help="with --from-store: after the build, write each document's cluster_id and "
                        "is_representative into the store (default: off)")


def _check(a) -> None:
    clash = [flag for flag, given in (("INPUT", a.input is not None), ("--vectors", a.vectors is not None),
                                      ("--ids", a.ids_file is not None), ("--engine dask", a.engine == "dask"),
                                      ("--stream", a.stream), ("--parent-field", a.parent_field is not None),
                                      ("--key-field", bool(a.key_field)), ("--source-field", a.source_field is not None),
                                      ("--format", a.format is not None)) if given]
    if clash:
        raise DiversifyError(f"`--from-store` reads the documents from the store; it does not combine with "
                             f"{', '.join(clash)}. Drop {' and '.join(clash)}, or drop --from-store.")
    if not a.collection:
        raise DiversifyError(f"`--collection` is needed with --from-store: the collection (table) of {a.from_store!r} "
                             "to read, e.g. --collection docs.")


def _flagged(exc: DiversifyError) -> DiversifyError:
    """``exc`` with the parameter names in its message as this command's flags."""
    text = re.sub(r"`(\w+)`", lambda m: f"`{_FLAGS.get(m.group(1), m.group(1))}`", str(exc))
    if text == str(exc):
        return exc
    try:
        new = type(exc)(text)
    except TypeError:  # an error class that takes more than its message
        return exc
    new.__cause__ = exc
    return new


def cmd_build_from_store(a) -> int:
    """``build --from-store``: read, build, save, and with ``--write-back`` write the clusters back."""
    from ..stores.building import build_from
    from ..stores.location import open_store
    from ..stores.scan import DEFAULT_SCAN_BATCH
    from .clock import Clock

    clock = Clock()
    _check(a)
    check_output_path(a.output, param="-o", what="the artifact", inputs=())
    cfg = config_from_args(a)
    try:
        opened = open_store(a.from_store, a.collection, kind=a.store_kind, id_field=a.id_field,
                            vector_field=a.vector_field, param="--from-store")
        try:
            with clock.phase("read+build"):
                res = build_from(opened.store, text_field=a.text_field, config=cfg,
                                 batch_size=DEFAULT_SCAN_BATCH if a.batch_size is None else a.batch_size,
                                 metadata=parse_metadata(a.metadata), progress=not a.no_progress,
                                 chunk_size=a.chunk_size)
            with writing(a.output), clock.phase("write"):
                res.save(a.output)
            written = None
            if a.write_back:
                with clock.phase("write-back"):
                    written = opened.store.write_clusters(res.cluster_map)
        finally:
            opened.close()
    except DiversifyError as exc:
        raise _flagged(exc) from exc.__cause__
    say(res.summary())
    say(f"wrote {a.output} ({os.path.getsize(a.output):,} bytes) from {a.collection!r} of {a.from_store} in "
        f"{clock.wall():.2f}s ({clock.cost_line(res.n_docs)})")
    if written is not None:
        say(f"wrote cluster_id and is_representative into {written:,} documents of {a.collection!r}")
    return 0
