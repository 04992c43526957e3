"""Command-line options generated from the config models: one source of every default.

Every clustering flag maps to one field of :class:`~diversify.config.BuildConfig`. Its default,
its choices and the "(default ...)" of its help text are read from the model, and a flag that is
not given leaves the model's default in place, so ``diversify build X -o a`` and
``diversify.build(texts)`` build with the same config (same fingerprint), and they cannot drift.
"""

from __future__ import annotations

import argparse
import itertools
import os
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

from ..config import BuildConfig, MinHashConfig, SimHashConfig, TextConfig, TextSimHashConfig
from ..errors import DiversifyError

__all__ = ["CONFIG_OPTIONS", "ConfigOption", "add_config_args", "config_from_args", "model_default", "add_input_args",
           "streams", "Inputs", "ids_note", "parse_metadata", "metadata_item", "show_defaults", "DEFAULT_CHUNK"]

_MODELS: dict[str, Any] = {"": BuildConfig, "text": TextConfig, "minhash": MinHashConfig, "simhash": SimHashConfig,
                           "text_simhash": TextSimHashConfig}


@dataclass(frozen=True)
class ConfigOption:
    """One flag: ``field`` is a dotted path into BuildConfig (``"minhash.threshold"``).

    ``switch`` flags take no value and set the field to ``switch_value`` (e.g. ``--no-exact``
    sets ``exact`` to False).
    """

    flags: tuple[str, ...]
    field: str
    help: str
    switch: bool = False
    switch_value: Any = None


CONFIG_OPTIONS: tuple[ConfigOption, ...] = (
    ConfigOption(("--threshold",), "minhash.threshold", "Jaccard threshold; higher -> fewer, tighter clusters"),
    ConfigOption(("--num-perm",), "minhash.num_perm", "MinHash signature length; higher -> more accurate"),
    ConfigOption(("--method",), "minhash.method", "MinHash variant: oph = one permutation + densification, "
                                                  "classic = k permutations"),
    ConfigOption(("--verify",), "minhash.verify", "how MinHash candidates are verified: by the signature estimate, "
                                                  "by exact Jaccard, or auto = exact for borderline pairs only"),
    ConfigOption(("--borderline",), "minhash.borderline", "half-width of auto's borderline band in standard errors; "
                                                          "higher -> more exact checks"),
    ConfigOption(("--bands",), "minhash.bands", "LSH bands (give with --rows; unset: chosen from the threshold)"),
    ConfigOption(("--rows",), "minhash.rows", "LSH rows per band (give with --bands)"),
    ConfigOption(("--shingle",), "text.shingle", "shingle unit"),
    ConfigOption(("-k", "--k"), "text.k", "shingle length in units; higher -> only closer copies match"),
    ConfigOption(("--char-k",), "text.char_k", "character k-gram length of the documents --shingle auto shingles by "
                                               "character (scripts without spaces: Chinese, Japanese, Thai, ...)"),
    ConfigOption(("--no-exact",), "exact", "skip the exact normalized-text stage", switch=True, switch_value=False),
    ConfigOption(("--no-minhash",), "minhash", "skip MinHash (vectors only)", switch=True, switch_value=None),
    ConfigOption(("--simhash-threshold",), "simhash.threshold", "cosine threshold for vectors; higher -> tighter"),
    ConfigOption(("--simhash-bits",), "simhash.bits", "SimHash bits per family"),
    ConfigOption(("--families",), "simhash.families", "independent SimHash families; more -> higher recall"),
    ConfigOption(("--pigeonhole",), "simhash.pigeonhole", "SimHash bands that guarantee recall within the Hamming "
                                                          "radius", switch=True, switch_value=True),
    ConfigOption(("--simhash-verify",), "simhash.verify", "verify vector candidates by exact cosine or the estimate"),
    ConfigOption(("--representative",), "representative", "which member represents a cluster"),
    ConfigOption(("--clustering",), "clustering", "clique = every two members of a cluster are verified similar; "
                                                  "star = every member is verified similar to the representative "
                                                  "(formerly 'guaranteed'); components = transitive connected "
                                                  "components"),
    ConfigOption(("--empty",), "empty", "documents with no words: their own cluster, or an error"),
    ConfigOption(("--bucket-window",), "bucket_window", "members compared within a giant LSH bucket; higher -> "
                                                        "more recall in giant buckets, more time"),
    ConfigOption(("--seed",), "seed", "hash seed (part of the artifact)"),
    ConfigOption(("--no-incremental",), "incremental", "do not keep signatures for `add` (smaller file)",
                 switch=True, switch_value=False),
)


def _split(field: str) -> tuple[str, str]:
    head, _, tail = field.rpartition(".")
    return head, tail


def model_default(field: str) -> Any:
    """The default of a dotted BuildConfig field, read from its model."""
    head, name = _split(field)
    return _MODELS[head].model_fields[name].default


def _annotation(field: str) -> Any:
    head, name = _split(field)
    return _MODELS[head].model_fields[name].annotation


def _choices_and_type(field: str) -> tuple[Optional[list], Any]:
    ann = _annotation(field)
    args = [a for a in typing.get_args(ann) if a is not type(None)] if typing.get_origin(ann) else []
    if typing.get_origin(ann) is typing.Literal:
        choices = list(typing.get_args(ann))
        return choices, type(choices[0])
    if args and typing.get_origin(args[0]) is typing.Literal:  # Optional[Literal[...]]
        choices = list(typing.get_args(args[0]))
        return choices, type(choices[0])
    base = args[0] if args else ann
    return None, base if base in (int, float, str) else str


def _clustering_name(text: str) -> str:
    """``--clustering``: "guaranteed", the earlier name of "star", is still taken."""
    return "star" if text == "guaranteed" else text


#: flags whose values had other names in earlier releases: the conversion to today's name
_EARLIER_NAMES: dict = {"clustering": _clustering_name}


def _dest(opt: ConfigOption) -> str:
    return "cfg__" + opt.field.replace(".", "__")


def add_config_args(p: argparse.ArgumentParser, *, only: Optional[set] = None, exclude: frozenset = frozenset(),
                    source_thresholds: bool = True) -> None:
    """Add the clustering flags (all, or the fields in ``only``; never those in ``exclude``) with
    defaults from the models; ``source_thresholds``: also ``--source-threshold`` (with every flag
    only, for a command that reads ``--source-field``)."""
    if only is None and source_thresholds:
        p.add_argument("--source-threshold", action="append", default=None, metavar="NAME=T",
                       help="Jaccard threshold for documents whose --source-field is NAME (repeat per source; a pair "
                            "of two sources must meet the stricter; default: none, every source uses --threshold)")
    g = p.add_argument_group("clustering (defaults are BuildConfig()'s: exact stage + MinHash on word 5-shingles at "
                             "Jaccard 0.8, borderline pairs checked exactly)")
    for opt in CONFIG_OPTIONS:
        if (only is not None and opt.field not in only) or opt.field in exclude:
            continue
        if opt.switch:
            g.add_argument(*opt.flags, dest=_dest(opt), action="store_const", const=True, default=None,
                           help=f"{opt.help} (default: off)")
            continue
        choices, kind = _choices_and_type(opt.field)
        if opt.field in _EARLIER_NAMES:  # argparse converts before it checks the choices
            kind = _EARLIER_NAMES[opt.field]
        default = model_default(opt.field)
        shown = "chosen automatically" if default is None else f"{default}"
        g.add_argument(*opt.flags, dest=_dest(opt), type=kind, choices=choices, default=None,
                       metavar=None if choices else _split(opt.field)[1].upper(), help=f"{opt.help} (default {shown})")


def _source_thresholds(items) -> Optional[dict]:
    if not items:
        return None
    out = {}
    for item in items:
        name, sep, value = item.rpartition("=")
        try:
            if not sep or not name:
                raise ValueError
            out[name] = float(value)
        except ValueError:
            raise DiversifyError(f"`--source-threshold` must be NAME=THRESHOLD (e.g. titles=0.9); got {item!r}.") from None
    return out


def given_config_options(a: argparse.Namespace) -> dict[str, Any]:
    """{field: value} of every clustering flag the user gave."""
    out: dict[str, Any] = {}
    st = _source_thresholds(getattr(a, "source_threshold", None))
    if st is not None:
        out["source_thresholds"] = st
    for opt in CONFIG_OPTIONS:
        v = getattr(a, _dest(opt), None)
        if v is not None:
            out[opt.field] = opt.switch_value if opt.switch else v
    return out


def config_from_args(a: argparse.Namespace) -> BuildConfig:
    """BuildConfig() with the fields of the flags that were given replaced; nothing else changes."""
    data = BuildConfig().model_dump()
    given = given_config_options(a)
    for field, value in sorted(given.items(), key=lambda kv: kv[0].count(".")):
        head, name = _split(field)
        if head:
            if data.get(head) is None:  # e.g. --no-minhash together with --threshold: the stage stays off
                continue
            data[head][name] = value
        else:
            data[name] = value
    return BuildConfig(**data)


# --------------------------------------------------------------------------- input options

MAX_CHUNK = 2**31 - 1


DEFAULT_CHUNK = 16384


def add_input_args(p: argparse.ArgumentParser, *, keys: bool = True, chunks: bool = True, stream: bool = True) -> None:
    """The input options of a command that reads a corpus (:func:`streams`): only those it uses.

    ``keys``: ``--key-field`` (the representative rule; a command that writes nothing has no use
    for it). ``chunks``: ``--chunk-size`` (the batch build's chunks). ``stream``: ``--stream``
    (a command that always reads in batches has none to offer). An option left out keeps the value
    :func:`streams` reads (no keys, the default chunk, streamed), set as a parser default that
    ``--help`` does not list.
    """
    p.add_argument("input", nargs="?", help="JSONL / CSV / Parquet file; a quoted glob ('dir/*.jsonl') or a directory "
                                           "of JSONL or Parquet shards, read in sorted path order; a directory of text "
                                           "files (one document each); '-' reads JSONL or CSV from stdin (with "
                                           "--format). Named pipes and devices are refused")
    p.add_argument("--format", choices=["jsonl", "csv", "parquet", "dir"], default=None, help="input format (default: from the name)")
    p.add_argument("--id-field", default=None,
                   help="record field holding the id; given, every record must have it (default: id if the first "
                        "record has it, then every record must; else the record numbers, with a note)")
    p.add_argument("--text-field", default=None, help="record field holding the text (default text)")
    if keys:
        p.add_argument("--key-field", action="append", default=None, metavar="FIELD",
                       help="numeric field for --representative key (largest wins); repeat for several keys in "
                            "priority order, e.g. --key-field authority --key-field updated_at (ties: the longest "
                            "text; default: none)")
    p.add_argument("--source-field", default=None, metavar="FIELD",
                   help="record field naming each document's source or kind, for per-source thresholds "
                        "(--source-threshold NAME=T; a live index keeps those it was created with) (default: none)")
    p.add_argument("--vectors", default=None, help=".npy array (n, dim) of embeddings, aligned with the records "
                                                   "(default: none, text only)")
    p.add_argument("--ids", dest="ids_file", default=None, help="ids file (one per line) for --vectors without text "
                                                                "input (default: the row numbers)")
    p.add_argument("--encoding-errors", choices=["strict", "replace"], default="strict",
                   help="non-UTF-8 bytes in text files: an error, or replaced by U+FFFD (default strict)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (default: off, a bar on stderr)")
    if chunks:
        p.add_argument("--chunk-size", type=int, default=DEFAULT_CHUNK,
                       help=f"documents per processing chunk (default {DEFAULT_CHUNK})")
    if stream:
        p.add_argument("--stream", action="store_true",
                       help="keep no texts: without it a JSONL file's texts stay in the file and the few that exact "
                            "checks need are read again (other inputs are held in memory); with it borderline pairs "
                            "are decided by the MinHash estimate instead of exact Jaccard, and `build` keeps the "
                            "signatures and band keys in temporary files (--spill-dir) instead of in memory "
                            "(default: off)")
    p.add_argument("--verbose", action="store_true",
                   help="also print start-up, read/build/write times, build stages, CPU seconds and the time spent "
                        "compiling kernels (or loading them from the numba cache) (default: off)")
    hidden: dict = {}
    if not keys:
        hidden["key_field"] = None
    if not chunks:
        hidden["chunk_size"] = DEFAULT_CHUNK
    if not stream:
        hidden["stream"] = True
    if hidden:
        p.set_defaults(**hidden)


class Inputs(typing.NamedTuple):
    """What build/add read from the input arguments; ``info`` says where the ids came from."""

    texts: Any
    ids: Any
    keys: Optional[list]
    vectors: Any
    sources: Optional[list]
    info: dict


def streams(a) -> Inputs:
    """(texts, ids, keys, vectors, sources, info) for build/add from the CLI input arguments."""
    from ..corpus.filetexts import BlockColumns, JsonlTexts
    from ..corpus.inputs import STDIN, detect_format
    from ..corpus.readers import read_blocks, read_records
    from ..corpus.shards import expand_shards
    from ..corpus.tables import read_vectors

    if not 1 <= a.chunk_size <= MAX_CHUNK:
        raise DiversifyError(f"`chunk_size` (--chunk-size) must be between 1 and {MAX_CHUNK:,} documents; got "
                             f"{a.chunk_size}. The default {DEFAULT_CHUNK} suits most corpora.")

    if a.ids_file and (a.input is not None or not a.vectors):
        raise DiversifyError("`--ids` names the ids of --vectors when there is no INPUT; "
                             + ("with an INPUT the ids come from its records (--id-field). Drop --ids."
                                if a.input is not None else "give --vectors FILE.npy too."))
    vectors = None
    vec_ids = None
    if a.vectors:
        vectors, vec_ids = read_vectors(a.vectors, a.ids_file)
    info: dict = {}
    if a.input is None:
        if vectors is None:
            raise DiversifyError("give an INPUT file/directory, or --vectors FILE.npy (with --ids FILE). See --help.")
        info["ids"] = "field" if vec_ids is not None else "numbers"
        return Inputs(None, vec_ids, None, vectors, None, info)
    shards = expand_shards(a.input, fmt=a.format)  # a glob or a directory of JSONL/Parquet files
    if shards is None and a.input != STDIN and not os.path.exists(a.input):
        raise DiversifyError(f"`input` path {a.input!r} does not exist. Check the path (a file, a directory or a "
                             "quoted glob such as 'dir/*.jsonl').")
    nk = len(a.key_field or [])
    source = getattr(a, "source_field", None)
    parent = getattr(a, "parent_field", None)
    fields = list(a.key_field or []) + ([source] if source else []) + ([parent] if parent else [])
    keys: Optional[list] = [] if nk else None
    sources: Optional[list] = [] if source else None
    parents: Optional[list] = info.setdefault("parents", []) if parent else None
    if keys is None and sources is None and parents is None and not getattr(a, "stream", False) and a.input != STDIN and shards is None \
            and hasattr(os, "pread") and (a.format or detect_format(a.input)) == "jsonl":
        # the texts stay in the file: read in blocks while the build sketches them, the few it checks
        # exactly read again by their offsets (diversify.corpus.filetexts); the same decisions
        texts = JsonlTexts(a.input, id_field=a.id_field, text_field=a.text_field, info=info)
        info["texts"] = "file"
        return Inputs(texts, texts.ids(), None, vectors, None, info)
    if keys is None and sources is None and parents is None:  # blocks of ids and texts, no Python work per document
        blocks = read_blocks(a.input, fmt=a.format, id_field=a.id_field, text_field=a.text_field,
                             encoding_errors=a.encoding_errors, info=info)
        if not getattr(a, "stream", False):
            all_ids: list = []
            all_texts: list = []
            for block_ids, texts, _ in blocks:
                all_ids.extend(block_ids)
                all_texts.extend(texts)
            return Inputs(all_texts, all_ids, None, vectors, None, info)
        split = BlockColumns(blocks)
        return Inputs(split.column(1), split.column(0), None, vectors, None, info)
    records = read_records(a.input, fmt=a.format, id_field=a.id_field, text_field=a.text_field,
                           key_field=fields or None, encoding_errors=a.encoding_errors, info=info)

    def tap(recs):
        for i, r in enumerate(recs):
            if keys is not None:
                if any(v is None or v == "" for v in r[2][:nk]):
                    raise DiversifyError(f"`--key-field`: record {i} (id {r[0]!r}) has no value for "
                                         f"{', '.join(repr(f) for f in a.key_field)}; every record needs a number "
                                         "there. Fill it in, or drop --key-field.")
                keys.append(r[2][0] if nk == 1 else r[2][:nk])
            if sources is not None:
                sources.append(_source_of(r, i, source, nk))
            if parents is not None:
                parents.append(_parent_of(r, i, parent, nk + (source is not None)))
            yield r

    if not getattr(a, "stream", False):
        # texts in memory: verify="auto" can re-read borderline documents for an exact check
        recs = list(tap(records))
        return Inputs([r[1] for r in recs], [r[0] for r in recs], keys, vectors, sources, info)
    r1, r2 = itertools.tee(tap(records))
    return Inputs((r[1] for r in r1), (r[0] for r in r2), keys, vectors, sources, info)


def _source_of(record, i: int, field: Optional[str], at: int) -> str:
    """The source name in ``--source-field`` of one record: a non-empty str."""
    value = record[2][at]
    if not isinstance(value, str) or not value:
        raise DiversifyError(f"`--source-field` {field!r}: record {i} (id {record[0]!r}) has no source name there (got "
                             f"{value!r}); every record needs one. Fill it in, or drop --source-field and "
                             "--source-threshold.")
    return value


def _parent_of(record, i: int, field: Optional[str], at: int):
    """The page id in ``--parent-field`` of one record: a non-empty str or an int."""
    value = record[2][at]
    if isinstance(value, bool) or not isinstance(value, (str, int)) or value == "":
        raise DiversifyError(f"`--parent-field` {field!r}: record {i} (id {record[0]!r}) has no page id there (got "
                             f"{value!r}); every chunk needs the id (a str or an int) of the page it was cut from. "
                             "Fill it in, or drop --parent-field.")
    return value


def ids_note(a, info: dict) -> Optional[str]:
    """The note printed when a corpus's ids are record numbers (no --id-field and no ``id`` field)."""
    if info.get("ids") != "numbers":
        return None
    if a.input is None:
        return "no --ids file: the ids are the vectors' row numbers 0..n-1. Pass --ids FILE if they have ids."
    return (f"the records have no 'id' field (fields: {info.get('fields', [])}): the ids are record numbers (0-based; "
            "JSONL: line numbers). If a field holds the ids the vector store uses, pass --id-field NAME, or "
            "the artifact will not match the store's ids.")


def key_fields(a: argparse.Namespace):
    """--key-field as the readers take it: None, one field name, or a list of names in priority order."""
    if not a.key_field:
        return None
    return a.key_field[0] if len(a.key_field) == 1 else list(a.key_field)


def metadata_item(value: str) -> str:
    """One ``--metadata`` occurrence: exactly one KEY=VALUE (argparse ``type``), so a word after
    it is the next argument (the INPUT), never a second entry."""
    key, sep, _ = value.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(
            f"takes one KEY=VALUE per occurrence (repeat the flag for more: --metadata model=m --metadata "
            f"source=s); got {value!r}, which has {'no =' if not sep else 'an empty KEY'}. Write KEY=VALUE, "
            "and give the INPUT as its own argument")
    return value


def parse_metadata(items: Optional[Sequence[str]]) -> dict:
    """{KEY: VALUE} of the ``--metadata`` occurrences (each checked by :func:`metadata_item`); a
    KEY given twice with different values is an error (which one was meant?)."""
    out: dict = {}
    for item in items or []:
        if "=" not in item:
            raise DiversifyError(f"`--metadata` entries must be KEY=VALUE; got {item!r}.")
        k, v = item.split("=", 1)
        if k in out and out[k] != v:
            raise DiversifyError(f"`--metadata` gives the KEY {k!r} twice ({out[k]!r} and {v!r}); each KEY may be "
                                 "given once. Drop one of them.")
        out[k] = v
    return out


# --------------------------------------------------------------------------- --help shows every default


def default_text(action: argparse.Action) -> str:
    """How ``--help`` states an option's default: ``off`` for a flag, ``none`` when unset, else the value."""
    if action.nargs == 0:  # store_true / store_const / append_const: a flag
        return "default: off"
    d = action.default
    if d is None or d == [] or d == argparse.SUPPRESS:
        return "default: none"
    return f"default {d:g}" if isinstance(d, float) else f"default {d}"


def show_defaults(parser: argparse.ArgumentParser) -> None:
    """Give every option of ``parser`` and of its sub-commands a stated default in ``--help``:
    an option whose help says nothing of its default gets ``(default ...)`` (:func:`default_text`)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                show_defaults(sub)
            continue
        if not action.option_strings or action.help == argparse.SUPPRESS or action.dest in ("help", "version"):
            continue
        text = action.help or ""
        if "default" not in text.lower():
            note = "(" + default_text(action).replace("%", "%%") + ")"
            action.help = f"{text} {note}" if text else note
