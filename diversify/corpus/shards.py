"""An input made of shards: a glob (``'dir/*.jsonl'``) or a directory of JSONL or Parquet files.

One expansion for the local readers (:func:`diversify.corpus.readers.read_blocks`) and the Dask
engine (:mod:`diversify.engines.dask.inputs`), so both read the same files in the same order:

* a path with ``*``, ``?`` or ``[`` that is not itself a file is a glob (``**`` spans
  directories); the regular files it matches, sorted by path;
* a directory holding ``.jsonl`` / ``.ndjson`` / ``.json`` or ``.parquet`` / ``.pq`` files is a
  directory of shards: every file under it, sorted by path, except names starting with ``.`` or
  ``_`` (``.crc``, ``_SUCCESS``, ``_metadata``; in any folder of the path). A directory with no
  such file is a directory of documents (each file one document, ``--format dir``), as before.

All shards have one format (a directory that mixes formats, or shards beside other files, is
refused with the fix); ``fmt`` given also reads files without a suffix (``part-00000``) in that
format. The records keep their
order: shard by shard, each in file order, as if the files were concatenated.
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..errors import InputError

__all__ = ["Shards", "SHARD_FORMATS", "COMPRESSED", "expand_shards", "is_glob", "shard_format"]

SHARD_FORMATS = ("jsonl", "parquet")
COMPRESSED = (".gz", ".bz2", ".zst", ".xz")
_SUFFIXES = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".parquet": "parquet", ".pq": "parquet"}
_NAMES = {"jsonl": "JSONL", "parquet": "Parquet"}


@dataclass(frozen=True)
class Shards:
    """The files of a glob or directory input, sorted, and their one format."""

    source: str  # what was given (the glob or the directory)
    paths: tuple[str, ...]
    fmt: str  # "jsonl" or "parquet"

    @property
    def compressed(self) -> list[str]:
        return [p for p in self.paths if p.lower().endswith(COMPRESSED)]


def is_glob(path: str) -> bool:
    """A path with a glob character that does not name an existing file or directory."""
    return any(c in path for c in "*?[") and not os.path.exists(path)


def shard_format(path: str) -> Optional[str]:
    """``"jsonl"`` or ``"parquet"`` from a file's name (a compression suffix looked through), else None."""
    name = path.lower()
    for suf in COMPRESSED:
        if name.endswith(suf):
            name = name[: -len(suf)]
    return _SUFFIXES.get(os.path.splitext(name)[1])


def expand_shards(path, *, fmt: Optional[str] = None, param: str = "input") -> Optional[Shards]:
    """The shards of ``path`` (a glob, or a directory of JSONL or Parquet files), or None for any
    other input (one file, stdin, a directory of documents). Raises :class:`InputError` for a glob
    that matches nothing and for files of several formats."""
    path = os.fspath(path)
    if path == "-" or fmt == "dir":
        return None
    if is_glob(path):
        files = sorted(p for p in glob.glob(path, recursive=True) if os.path.isfile(p))
        if not files:
            raise InputError(f"`{param}`: no file matches the glob {path!r}. Check the pattern (quote it, "
                             f"'dir/*.jsonl', so that the shell hands it over as it is).")
        return Shards(path, tuple(files), _one_format(files, fmt, path, param, "glob"))
    if not os.path.isdir(path):
        return None
    files = _visible_files(path)
    if fmt is None and not any(shard_format(p) for p in files):
        return None  # a directory of documents
    if fmt is not None and fmt not in SHARD_FORMATS:
        raise InputError(f"`--format` {fmt} does not read a directory ({path!r}); a directory holds JSONL or Parquet "
                         "shards (--format jsonl|parquet) or one document per file (--format dir).")
    if not files:
        raise InputError(f"`{param}` directory {path!r} holds no file to read as {_NAMES[fmt or 'jsonl']}. "
                         "Check the path.")
    return Shards(path, tuple(files), _one_format(files, fmt, path, param, "directory"))


def _visible_files(path: str) -> list[str]:
    """The regular files under ``path``, sorted, without those whose name, or a folder's on the
    way, starts with ``.`` or ``_``."""
    root = Path(path)
    out = []
    for p in root.rglob("*"):
        rel = p.relative_to(root).parts
        if any(part.startswith((".", "_")) for part in rel) or not p.is_file():
            continue
        out.append(str(p))
    return sorted(out)


def _one_format(files: list, fmt: Optional[str], source: str, param: str, what: str) -> str:
    if fmt is not None:
        if fmt not in SHARD_FORMATS:
            raise InputError(f"`--format` must be jsonl or parquet for a {what} of shards ({source!r}); got {fmt!r}.")
        # a name without a suffix (Hadoop's part-00000) is read as --format says; another suffix is not a shard
        other = next((p for p in files if shard_format(p) != fmt and Path(p).suffix), None)
        if other is not None:
            raise InputError(f"`--format` {fmt} reads {what}s of {_NAMES[fmt]} shards; {source!r} holds {other!r}, "
                             f"which is not one. A directory of text files is read with --format dir (each file one "
                             "document); a glob can pick the shards.")
        return fmt
    kinds: dict[Optional[str], str] = {}
    for p in files:
        kinds.setdefault(shard_format(p), p)
    if None in kinds:
        other = kinds[None]
        found = [k for k in kinds if k is not None]
        if what == "directory":
            shard = kinds[found[0]]
            raise InputError(f"`{param}` directory {source!r} holds {_NAMES[str(found[0])]} shards and other files "
                             f"({other!r}); a directory of shards holds one format only. Read the shards with a glob ("
                             f"'{os.path.join(source, '*' + Path(shard).suffix)}'), or each file as one "
                             "document with --format dir.")
        raise InputError(f"`{param}` glob {source!r} matches {other!r}, which is neither JSONL (.jsonl, .ndjson, "
                         ".json) nor Parquet (.parquet, .pq). Narrow the glob, or pass --format jsonl|parquet.")
    if len(kinds) > 1:
        a, b = (kinds[k] for k in SHARD_FORMATS)
        raise InputError(f"`{param}` {what} {source!r} mixes JSONL and Parquet files ({a!r}, {b!r}); one build reads "
                         "one format. Convert them to one format, or pass a glob that matches one.")
    (only,) = kinds
    assert only is not None
    return only

