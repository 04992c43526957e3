"""`diversify index add | query | delete | export | stats`: the live index from the command line.

Every result is a JSON line on stdout (one per document for add and query). ``add`` reads its
input in batches of ``--batch-size`` documents, one transaction each: a failure (or Ctrl-C) stops
at a batch boundary, with every batch printed so far committed and nothing of the failed one.
"""

from __future__ import annotations

import itertools
import json
import time

from ..errors import DiversifyError
from .options import add_config_args, add_input_args, config_from_args, given_config_options, streams
from .output import json_text, say

__all__ = ["add_index_parser"]

_URL_HELP = "index URL: sqlite:///path.db, postgresql://user@host/db, redis://host:6379/0 (?index=NAME on servers)"


def add_index_parser(sub) -> None:
    p = sub.add_parser("index", help="a live near-duplicate index: add, query, delete, export, stats",
                       description="A persistent index that many processes add to, query and delete from "
                                   "(docs/index.md). Results are JSON lines on stdout.")
    isub = p.add_subparsers(dest="index_command", metavar="ACTION")

    q = isub.add_parser("add", help="add a corpus (creates the index with the clustering options below)",
                        description="Add documents in batches; one JSON line per document: id, cluster, joined, "
                                    "representative, similarity.")
    q.add_argument("url", help=_URL_HELP)
    add_input_args(q, chunks=False, stream=False)  # read in --batch-size batches, always streamed
    q.add_argument("--batch-size", type=int, default=5000, help="documents per transaction (default 5000)")
    q.add_argument("--lock-timeout", type=float, default=30.0, metavar="SECONDS",
                   help="wait this long for another writer's batch (default 30)")
    add_config_args(q)  # --clustering components is refused by the index (diversify.index.compat)
    q.set_defaults(func=cmd_index_add, command="index add")

    q = isub.add_parser("query", help="is each document a near-duplicate of an indexed one? (nothing is written)",
                        description="One JSON line per document: the representative it matches, its cluster and "
                                    "similarity (cluster null: no near-duplicate in the index).")
    q.add_argument("url", help=_URL_HELP)
    add_input_args(q, keys=False, chunks=False, stream=False)  # writes nothing: no representative rule
    q.add_argument("--text", action="append", default=None, help="a text to query (repeatable) instead of INPUT")
    q.add_argument("--batch-size", type=int, default=5000, help="documents per lookup (default 5000)")
    q.set_defaults(func=cmd_index_query, command="index query")

    q = isub.add_parser("delete", help="delete documents by id",
                        description="Delete the ids listed in FILE (one per line); members of a deleted "
                                    "representative are re-assigned.")
    q.add_argument("url", help=_URL_HELP)
    q.add_argument("--ids", dest="ids_file", required=True, help="file with one id per line ('-': stdin)")
    q.add_argument("--lock-timeout", type=float, default=30.0, metavar="SECONDS",
                   help="wait this long for another writer's batch (default 30)")
    q.set_defaults(func=cmd_index_delete, command="index delete")

    q = isub.add_parser("export", help="write the live documents as a ClusterMap artifact (.dvf)",
                        description="Write a normal artifact (atomically) for in-memory serving with hot reload.")
    q.add_argument("url", help=_URL_HELP)
    q.add_argument("-o", "--output", required=True, help="artifact path to write")
    q.set_defaults(func=cmd_index_export, command="index export")

    q = isub.add_parser("stats", help="documents, clusters, bytes per document, config",
                        description="One JSON object; --check also verifies every invariant (reads everything).")
    q.add_argument("url", help=_URL_HELP)
    q.add_argument("--check", action="store_true", help="verify the invariants (exit 1 when one fails)")
    q.set_defaults(func=cmd_index_stats, command="index stats")
    p.set_defaults(func=_need_action, command="index")


def _need_action(a) -> int:
    raise DiversifyError("give an ACTION: add, query, delete, export or stats (see `diversify index --help`)")


def _open(a, *, create: bool, config=None):
    import diversify

    return diversify.Index(a.url, config=config, create=create, lock_timeout=getattr(a, "lock_timeout", 30.0))


def _check_batch(a) -> None:
    if not 1 <= a.batch_size <= 1_000_000:
        raise DiversifyError(f"`--batch-size` must be between 1 and 1,000,000 documents; got {a.batch_size}.")


_ENCODE = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode  # json.dumps makes one per call


def _line(obj) -> None:
    say(json_text(_ENCODE(obj)))


def _lines(matches) -> None:
    """A batch's answers, one JSON line each, in one write (a write per line cost 40,000 system
    calls for 40,000 documents)."""
    if matches:
        say("\n".join([json_text(_ENCODE(m.as_dict())) for m in matches]))


class _Progress:
    """The documents a command has done, on stderr: a bar (unless --no-progress) and, with
    --verbose, one summary line at the end (stdout carries only the JSON lines)."""

    def __init__(self, a, verb: str, counted: str):
        from ..sketches.batch import progress_bar

        self.a, self.verb, self.counted = a, verb, counted
        self.bar = progress_bar(None, verb, not a.no_progress)
        self.docs = self.hits = 0
        self.t0 = time.perf_counter()

    def update(self, matches) -> None:
        self.docs += len(matches)
        self.hits += sum(1 for m in matches if m.joined)
        if self.bar is not None:
            self.bar.set_postfix_str(f"{self.counted} {self.hits:,}", refresh=False)
            self.bar.update(len(matches))

    def close(self) -> None:
        from .output import note_line

        if self.bar is not None:
            self.bar.close()
        if self.a.verbose:
            dt = time.perf_counter() - self.t0
            note_line(f"diversify {self.a.command}", f"{self.verb} {self.docs:,} documents ({self.counted} "
                      f"{self.hits:,}) in {dt:.2f}s ({self.docs / max(dt, 1e-9):,.0f} docs/s)")


def _batches(a):
    """(texts, ids, vectors, keys, sources, info) per batch of the input, read lazily."""
    a.stream = True  # batches are read one at a time; the whole corpus is never held
    texts, ids, keys, vectors, sources, info = streams(a)
    if texts is None:  # vectors only
        n = len(vectors)
        id_list = list(ids) if ids is not None else None
        for lo in range(0, n, a.batch_size):
            hi = min(n, lo + a.batch_size)
            yield None, (id_list[lo:hi] if id_list is not None else None), vectors[lo:hi], None, None, info
        return
    it_t, it_i = iter(texts), iter(ids)
    done = 0
    while True:
        bt = list(itertools.islice(it_t, a.batch_size))
        if not bt:
            return
        bi = list(itertools.islice(it_i, len(bt)))
        bv = vectors[done: done + len(bt)] if vectors is not None else None
        bk = keys[done: done + len(bt)] if keys is not None else None
        bs = sources[done: done + len(bt)] if sources is not None else None  # filled as the records are read
        done += len(bt)
        yield bt, bi, bv, bk, bs, info


def cmd_index_add(a) -> int:
    _check_batch(a)
    config = config_from_args(a) if given_config_options(a) else None
    with _open(a, create=True, config=config) as idx:
        progress = _Progress(a, "added", "joined")
        try:
            for texts, ids, vectors, keys, sources, info in _batches(a):
                if info.get("ids") == "numbers":
                    raise DiversifyError("`index add` needs document ids (an index outlives one input file, so "
                                         "record numbers would collide): the records have no 'id' field (fields: "
                                         f"{info.get('fields', [])}). Pass --id-field NAME.")
                matches = idx.add(texts, ids=ids, vectors=vectors, keys=keys, sources=sources)
                _lines(matches)
                progress.update(matches)
        finally:
            progress.close()
    return 0


def cmd_index_query(a) -> int:
    _check_batch(a)
    with _open(a, create=False) as idx:
        if a.text:
            if a.input is not None:
                raise DiversifyError("give either INPUT or --text, not both.")
            _lines(idx.query(a.text, ids=list(range(len(a.text)))))
            return 0
        progress = _Progress(a, "queried", "matched")
        try:
            for texts, ids, vectors, keys, sources, _info in _batches(a):
                matches = idx.query(texts, ids=ids, vectors=vectors, keys=keys, sources=sources)
                _lines(matches)
                progress.update(matches)
        finally:
            progress.close()
    return 0


def _read_ids(path: str) -> list[str]:
    import sys

    if path == "-":
        lines = sys.stdin.read().splitlines()
    else:
        try:
            with open(path, encoding="utf-8") as f:
                lines = f.read().splitlines()
        except UnicodeDecodeError as exc:
            raise DiversifyError(f"`--ids` file {path!r} is not UTF-8 text ({exc}); write one id per line.") from exc
    return [x for x in (line.strip() for line in lines) if x]


def cmd_index_delete(a) -> int:
    ids = _read_ids(a.ids_file)
    with _open(a, create=False) as idx:
        with idx.storage.read() as view:
            kind = view.state().id_kind
        if kind == "int":
            bad = next((x for x in ids if not _is_int(x)), None)
            if bad is not None:
                raise DiversifyError(f"`--ids`: the index has int ids; {bad!r} is not an int. Write one int per line.")
            res = idx.delete([int(x) for x in ids])
        else:
            res = idx.delete(ids)
    _line(res)
    return 0


def _is_int(x: str) -> bool:
    try:
        int(x)
        return True
    except ValueError:
        return False


def cmd_index_export(a) -> int:
    from ..files import check_output_path
    from .failures import writing

    check_output_path(a.output, param="-o", what="the artifact")
    with _open(a, create=False) as idx:
        with writing(a.output):
            cm = idx.export(a.output)
    _line({"path": a.output, "documents": cm.n_docs, "clusters": cm.n_clusters})
    return 0


def cmd_index_stats(a) -> int:
    with _open(a, create=False) as idx:
        st = idx.stats()
        if a.check:
            st["problems"] = idx.check()
    _line(st)
    return 1 if a.check and st["problems"] else 0
