"""The parser and the entry point of the `diversify` command."""

from __future__ import annotations

import argparse
import io
import os
import signal
import sys
import threading
import warnings
from collections.abc import Sequence
from typing import NoReturn, Optional

from .._tuning import tune_command
from ..files import DEFAULT_LOCK_TIMEOUT
from .commands import cmd_add, cmd_build, cmd_demo, cmd_export, cmd_show, cmd_stats
from .embedding import add_embed_args
from .failures import Terminated, failure, writing
from .fromstore import add_store_args
from .index import add_index_parser
from .options import add_config_args, add_input_args, metadata_item, model_default, show_defaults
from .output import STDOUT, error_line, warn_line
from .quality import cmd_eval, cmd_tune
from .serve import add_serve_parser

__all__ = ["main", "make_parser"]


class _Parser(argparse.ArgumentParser):
    """argparse with one-line usage errors (``diversify CMD: error: ...``, exit 2) instead of the usage block."""

    def error(self, message: str) -> NoReturn:
        error_line(self.prog, f"{message} (see `{self.prog} --help`)")
        raise SystemExit(2)


def make_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="diversify", description="Keep near-duplicate documents out of retrieval results.")
    from .. import __version__

    parser.add_argument("--version", action="version", version=f"diversify {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    _build_parsers(sub)
    _inspect_parsers(sub)
    _quality_parsers(sub)
    add_index_parser(sub)
    add_serve_parser(sub)
    show_defaults(parser)  # every option states its default in --help
    return parser


def _build_parsers(sub) -> None:
    """The commands that write an artifact: build and add."""
    p = sub.add_parser("build", help="cluster a corpus and write the artifact", description="Cluster a corpus and write a ClusterMap artifact.")
    add_input_args(p)
    p.add_argument("-o", "--output", required=True, help="artifact path to write (atomically)")
    p.add_argument("--metadata", action="append", type=metadata_item, default=None, metavar="KEY=VALUE",
                   help="one KEY=VALUE stored in the artifact; repeat the flag for more, e.g. --metadata "
                        "embedding_model=all-MiniLM-L6-v2 --metadata source=wiki (default: none)")
    p.add_argument("--engine", choices=["local", "dask"], default="local", help="run on this machine or on Dask (default local)")
    p.add_argument("--scheduler", default=None, help="Dask scheduler address for --engine dask (default: a local cluster)")
    p.add_argument("--shards", action="store_true",
                   help="with --engine dask: -o names a new or empty directory; the workers write the result there as "
                        "Parquet shards and the client a manifest (stats, export, show and diversify.load read it)")
    p.add_argument("--spill-dir", default=None, metavar="DIR",
                   help="with --stream: where the signatures and band keys are kept while the build runs (unnamed "
                        "temporary files, ~670 bytes a document; default: the output's directory)")
    p.add_argument("--parent-field", default=None, metavar="FIELD",
                   help="record field naming the page each chunk was cut from: the pages are clustered too, and a "
                        "chunk is also folded under a chunk of a near-duplicate page that holds --containment of "
                        "its shingles (docs/recipes/chunked-rag.md) (default: none)")
    p.add_argument("--containment", type=float, default=None, metavar="C",
                   help="with --parent-field: share of a chunk's shingles the chunk it folds under must hold "
                        "(default 0.8)")
    add_embed_args(p)
    add_config_args(p)
    add_store_args(p)
    p.set_defaults(func=cmd_build)

    p = sub.add_parser("add", help="add documents to an artifact without a rebuild", description="Add documents incrementally; existing cluster ids are kept.")
    p.add_argument("artifact", help="existing artifact (built with incremental state)")
    add_input_args(p)
    p.add_argument("-o", "--output", default=None, help="write here instead of replacing the artifact (atomically)")
    p.add_argument("--lock-timeout", type=float, default=DEFAULT_LOCK_TIMEOUT, metavar="SECONDS",
                   help="wait this long for another writer of the output (another add) to finish (default "
                        f"{DEFAULT_LOCK_TIMEOUT:g}; 0: fail at once)")
    p.add_argument("--skip-existing", action="store_true",
                   help="leave out records whose id the artifact already has (default: off, such a record is an "
                        "error naming its line)")
    p.set_defaults(func=cmd_add)


def _inspect_parsers(sub) -> None:
    """The commands that read an artifact: stats, show and export."""
    p = sub.add_parser("stats", help="summarize an artifact", description="Documents, clusters, size histogram, largest clusters, params.")
    p.add_argument("artifact")
    p.add_argument("--top", type=int, default=10, help="largest clusters to list (default 10)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_stats)

    p = sub.add_parser("show", help="one cluster: its representative and members with their similarity and stages",
                       description="Print one cluster (CLUSTER_ID, or the cluster of the document --id ID): its "
                                   "representative, and each member with its similarity to the representative as the "
                                   "build verified it and the stages that joined it.")
    p.add_argument("artifact")
    p.add_argument("cluster_id", nargs="?", default=None, metavar="CLUSTER_ID",
                   help="a cluster id (as `stats` and `export` print them)")
    p.add_argument("--id", default=None, metavar="ID", help="show the cluster of this document id instead (default: "
                                                            "none, give CLUSTER_ID)")
    p.add_argument("--limit", type=int, default=20, help="members to list (default 20; the rest are counted)")
    p.add_argument("--json", action="store_true", help="print JSON (default: off)")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("export", help="write id, cluster_id, is_representative, representative_id, similarity, "
                                      "stages per document",
                       description="Export one record per document (CSV, JSONL or Parquet) for a vector store's "
                                   "metadata.",
                       epilog="CSV cells that a spreadsheet would run as a formula (a string id starting with =, +, "
                              "-, @, a tab or a carriage return) are written with a leading single quote ('=1+2); "
                              "int ids stay plain numbers (-5). JSONL and Parquet hold the ids unchanged.")
    p.add_argument("artifact")
    p.add_argument("-o", "--output", required=True, help="output .csv, .jsonl or .parquet")
    p.add_argument("--format", choices=["csv", "jsonl", "parquet"], default=None,
                   help="output format (default: from the extension of --output)")
    p.set_defaults(func=cmd_export)


def _quality_parsers(sub) -> None:
    """The commands that measure quality and the demo: eval, tune and demo."""
    p = sub.add_parser("eval", help="precision/recall/F1/ARI of a build against labels", description="Compare a build (or a build of --corpus) with labeled pairs or gold cluster labels.")
    p.add_argument("artifact", nargs="?", help="artifact to evaluate (or give --corpus to build one in memory)")
    p.add_argument("--corpus", default=None, help="JSONL/CSV/Parquet corpus to build with the clustering options below")
    p.add_argument("--pairs", default=None, help="CSV/TSV/JSONL of labeled pairs (columns --id-a, --id-b, --label)")
    p.add_argument("--labels", default=None, help="CSV/TSV/JSONL of gold cluster labels (columns --id-field, --label)")
    p.add_argument("--id-a", default="id_a", help="column of the first id of a pair")
    p.add_argument("--id-b", default="id_b", help="column of the second id of a pair")
    p.add_argument("--label", default="label", help="label column (0/1, true/false, or a score with --positive-min)")
    p.add_argument("--positive-min", type=float, default=None, help="a score >= this is a positive pair (e.g. 4 for STS-B)")
    p.add_argument("--id-field", default=None, help="id field of --corpus/--labels records (default id; given, "
                                                     "every record must have it)")
    p.add_argument("--text-field", default="text", help="text field of the --corpus records")
    p.add_argument("--columns", default=None, help="comma-separated column names for a CSV/TSV without a header row")
    p.add_argument("--delimiter", default=None, help="CSV/TSV delimiter (default from the extension; 'tab' for a tab)")
    p.add_argument("--json", action="store_true", help="print JSON (default: off, a table)")
    add_config_args(p, source_thresholds=False)  # eval reads no --source-field
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("tune", help="sweep the threshold on labeled pairs and pick the F1 maximum", description="Label 200-500 pairs, then let this pick the threshold (and the LSH bands/rows it implies).")
    p.add_argument("--pairs", required=True, help="CSV/TSV/JSONL of labeled pairs: texts (--text-a/--text-b) or ids with --corpus")
    p.add_argument("--corpus", default=None, help="corpus holding the texts of --id-a/--id-b")
    p.add_argument("--text-a", default="text_a", help="column of the first text of a pair")
    p.add_argument("--text-b", default="text_b", help="column of the second text of a pair")
    p.add_argument("--id-a", default="id_a", help="column of the first id of a pair")
    p.add_argument("--id-b", default="id_b", help="column of the second id of a pair")
    p.add_argument("--id-field", default=None, help="id field of --corpus/--labels records (default id; given, "
                                                     "every record must have it)")
    p.add_argument("--text-field", default="text", help="text field of the --corpus records")
    p.add_argument("--label", default="label", help="label column (0/1, true/false, or a score with --positive-min)")
    p.add_argument("--positive-min", type=float, default=None, help="a score >= this is a positive pair")
    p.add_argument("--vectors", default=None, help="tune a cosine threshold instead: .npy vectors aligned with --corpus")
    p.add_argument("--delimiter", default=None, help="CSV/TSV delimiter (default from the extension; 'tab' for a tab)")
    add_config_args(p, only={"text.shingle", "text.k", "minhash.num_perm", "simhash.bits", "simhash.families"})
    p.add_argument("--plot", default=None, help="write the PR curve as PNG (needs matplotlib: pip install 'diversify-retrieval[plot]')")
    p.add_argument("--columns", default=None, help="comma-separated column names for a CSV/TSV without a header row")
    p.add_argument("--json", action="store_true", help="print JSON (default: off, a table)")
    p.set_defaults(func=cmd_tune)

    p = sub.add_parser("demo", help="build on generated data with planted duplicates and show diversified search", description="End-to-end demo on built-in generated data; no network.")
    p.add_argument("--n", type=int, default=20000, help="documents to generate (default 20000)")
    p.add_argument("--seed", type=int, default=0, help="seed of the generated corpus")
    p.add_argument("--threshold", type=float, default=model_default("minhash.threshold"),
                   help=f"Jaccard threshold (default {model_default('minhash.threshold')})")
    p.set_defaults(func=cmd_demo)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run one command; every failure is one stderr line and an exit status (see :mod:`.failures`)."""
    parser = make_parser()
    if isinstance(sys.stdout, io.TextIOWrapper):  # an id that the terminal's encoding lacks prints escaped
        sys.stdout.reconfigure(errors="backslashreplace")
    try:
        a, extra = parser.parse_known_args(argv)
    except BrokenPipeError:  # --help into a closed pipe
        return _stdout_closed()
    if not getattr(a, "func", None):
        error_line("diversify", "give a COMMAND: build, add, stats, show, export, eval, tune, demo, index or serve (see `diversify --help`)")
        return 2
    if extra:  # named by the command they were given to, as argparse does for its other errors
        error_line(f"diversify {a.command}", f"unrecognized arguments: {' '.join(extra)} "
                                             f"(see `diversify {a.command} --help`)")
        return 2
    return _run(f"diversify {a.command}", a)


#: set by the console script (:func:`run`): commands then tune the process
#: (:func:`diversify._tuning.tune_command`) and may compile kernels ahead in a helper process (:mod:`diversify.engines.ahead`)
_TUNE_ALLOCATOR = False


def run() -> NoReturn:
    """The ``diversify`` console script and ``python -m diversify``: :func:`main`, then leave
    without the interpreter's teardown.

    After a large build the teardown (every object freed one by one, the compiled kernels
    released) is a noticeable share of the whole process, with nothing in it to wait for. The
    exit handlers still run and the standard streams are flushed first; every file a command writes
    is complete and closed before it returns (written under a temporary name, then renamed).
    """
    import atexit
    import logging

    global _TUNE_ALLOCATOR
    _TUNE_ALLOCATOR = True
    status = main()
    run_exit_handlers = getattr(atexit, "_run_exitfuncs", None)
    if run_exit_handlers is None:  # not CPython: the ordinary exit
        sys.exit(status)
    run_exit_handlers()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing more can reach it
            pass
    os._exit(status)


def _run(prog: str, a: argparse.Namespace) -> int:
    if _TUNE_ALLOCATOR:  # the console script tunes its process for the command (diversify._tuning)
        tune_command(a.command, stream=bool(getattr(a, "stream", False)))
    a.compile_ahead = _TUNE_ALLOCATOR  # the console script may compile kernels in a helper (diversify.engines.ahead)
    restore = _on_sigterm()
    try:
        with warnings.catch_warnings():
            warnings.showwarning = lambda message, *args, **kwargs: warn_line(prog, message)
            status = a.func(a)
            with writing(STDOUT):
                sys.stdout.flush()
        return status
    except KeyboardInterrupt:
        error_line(prog, "interrupted (Ctrl-C); an output being written was discarded, the old file is unchanged")
        return 130
    except Terminated:
        error_line(prog, "terminated (SIGTERM); an output being written was discarded, the old file is unchanged")
        return 128 + signal.SIGTERM
    except BrokenPipeError as exc:
        return _stdout_closed() if _stdout_is_closed() else _fail(prog, exc)
    except Exception as exc:  # one line for every failure; a traceback only when asked for
        return _fail(prog, exc)
    finally:
        restore()


def _fail(prog: str, exc: BaseException) -> int:
    if os.environ.get("DIVERSIFY_TRACEBACK"):
        raise exc
    status, message = failure(exc)
    error_line(prog, message)
    return status


def _on_sigterm():
    """Turn SIGTERM into an exception while a command runs (so temp files are removed); returns the undo."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def handler(signum, frame):
        raise Terminated

    old = signal.signal(signal.SIGTERM, handler)
    return lambda: signal.signal(signal.SIGTERM, old)


def _stdout_is_closed() -> bool:
    """True when stdout is a pipe or socket whose reader has gone (poll reports an error on it)."""
    try:
        import select

        fd = sys.stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poller.poll(0))
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return False


def _stdout_closed() -> int:
    """The reader of stdout went away: stop without a message, like a tool killed by SIGPIPE."""
    try:  # what is still buffered would fail again at interpreter exit ("Exception ignored ...")
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        pass
    return 128 + signal.SIGPIPE if hasattr(signal, "SIGPIPE") else 1
