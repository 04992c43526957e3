"""`diversify build | add | stats | show | export | demo`."""

from __future__ import annotations

import json
import os
import re
import warnings
from contextlib import contextmanager
from typing import Optional

import numpy as np

from ..errors import DiversifyError, DiversifyWarning
from ..files import check_output_path, file_lock
from .embedding import (
    check_embed_options,
    cosine_threshold,
    embed_inputs,
    embed_line,
    fold_stages,
    stats_lines,
    with_embedding,
)
from .failures import writing
from .options import config_from_args, ids_note, key_fields, parse_metadata, streams
from .output import printable, say, say_line, warn_line


def _inputs(a) -> tuple:
    """(flag, path) of the files build/add read, which an output must not be."""
    return (("INPUT", a.input), ("--vectors", a.vectors), ("--ids", a.ids_file))


def cmd_build(a) -> int:
    import diversify

    from .clock import Clock

    if a.from_store is not None:  # the documents come from a vector store (cli/fromstore.py)
        from .fromstore import cmd_build_from_store

        return cmd_build_from_store(a)
    clock = Clock()
    if a.shards and a.engine != "dask":
        raise DiversifyError("`--shards` writes the result from the Dask workers; it needs --engine dask. Add "
                             "--engine dask, or drop --shards.")
    if not a.shards:
        check_output_path(a.output, param="-o", what="the artifact", inputs=_inputs(a))  # before the build, not after
    cfg = config_from_args(a)
    _check_parent_options(a)
    check_embed_options(a)
    embedding = None
    if a.engine == "dask":
        if a.spill_dir is not None:
            raise DiversifyError("`--spill-dir` applies to the local engine's `build --stream`; the Dask engine keeps "
                                 "its data with its workers. Drop --spill-dir, or use --engine local.")
        with clock.phase("build"):
            res = _build_dask(a, cfg)
        if a.shards:
            say(f"wrote {len(res.manifest['shards'])} shards and {res.path}/manifest.json: {res.n_docs:,} documents, "
                f"{res.n_clusters:,} clusters ({res.n_duplicates:,} would be folded away) in {clock.wall():.2f}s")
            return 0
    else:
        with _ahead(a, cfg):  # a cold kernel cache: the linking kernels compile beside reading and sketching
            with clock.phase("read"):
                texts, ids, keys, vectors, sources, info = streams(a)
            if a.embed is not None:
                with clock.phase("embed"):
                    texts, ids, vectors, embedding = embed_inputs(a, texts, ids)
            lazy = _texts_read_while_building(a, clock, info)
            with warnings.catch_warnings(), clock.phase("read+build" if lazy else "build"), _in_the_input(a):
                warnings.simplefilter("ignore", DiversifyWarning)  # the summary below prints them
                if a.parent_field is not None:
                    res = _build_chunks(a, cfg, texts, ids, info)
                else:
                    res = diversify.build(texts, ids=ids, vectors=vectors, config=cfg, keys=keys, sources=sources,
                                          metadata=parse_metadata(a.metadata), progress=not a.no_progress,
                                          chunk_size=a.chunk_size, spill_dir=_spill_dir(a, texts))
    if embedding is not None:
        res = with_embedding(res, embedding)
    with writing(a.output), clock.phase("write"):
        res.save(a.output)
    dt = clock.wall()
    say(res.summary())
    if embedding is not None:
        say(embed_line(embedding))
    if "chunks" in res.report:
        c = res.report["chunks"]
        say(f"chunks           {c['pages']} pages, {c['page_clusters_with_copies']} page clusters with copies; "
            f"{c['containment_folds']} chunks folded under a chunk of a near-duplicate page that holds >= "
            f"{c['containment']:g} of them")
    say(f"wrote {a.output} ({os.path.getsize(a.output):,} bytes) in {dt:.2f}s ({res.n_docs / max(dt, 1e-9):,.0f} docs/s; "
        f"{clock.cost_line(res.n_docs)})")
    if a.verbose:
        for line in clock.verbose_lines(res.n_docs, res.timings):
            say(line)
    if a.engine != "dask":
        _note_ids(a, info)
    return 0


def _check_parent_options(a) -> None:
    """``--parent-field`` builds chunks with their pages (:func:`diversify.engines.chunked.build_chunks`):
    texts held in memory, one engine, no vectors, no per-document keys or sources."""
    if a.parent_field is None:
        if a.containment is not None:
            raise DiversifyError(f"`--containment` applies with --parent-field; got --containment {a.containment} "
                                 "alone. Add --parent-field FIELD (the page of each chunk), or drop --containment.")
        return
    clash = [flag for flag, given in (("--engine dask", a.engine == "dask"), ("--stream", a.stream),
                                      ("--vectors", a.vectors is not None), ("--key-field", bool(a.key_field)),
                                      ("--source-field", a.source_field is not None)) if given]
    if clash:
        raise DiversifyError(f"`--parent-field` builds the chunks and their pages in memory with the text stages only; "
                             f"it does not combine with {', '.join(clash)}. Drop {' and '.join(clash)}, or drop "
                             "--parent-field.")


def _build_chunks(a, cfg, texts, ids, info):
    from ..engines.chunked import DEFAULT_CONTAINMENT, build_chunks

    containment = DEFAULT_CONTAINMENT if a.containment is None else a.containment
    return build_chunks(list(texts), parents=info["parents"], ids=list(ids), config=cfg, containment=containment,
                        metadata=parse_metadata(a.metadata))


def _spill_dir(a, texts) -> Optional[str]:
    """Where ``build --stream`` keeps its signatures and band keys (:mod:`diversify._spill`): the
    ``--spill-dir``, else the output's directory (which needs room for the artifact anyway);
    nothing spills without --stream or without texts."""
    if a.spill_dir is not None and not a.stream:
        raise DiversifyError(f"`--spill-dir` applies to `build --stream`; got --spill-dir {a.spill_dir!r} without --stream. "
                             "Add --stream, or drop --spill-dir.")
    if a.spill_dir is not None and not os.path.isdir(a.spill_dir):
        raise DiversifyError(f"`--spill-dir` must be an existing directory for the build's temporary files; got "
                             f"{a.spill_dir!r}. Create it, or pick another directory (~670 bytes of disk a document).")
    if not a.stream or texts is None:
        return None
    return a.spill_dir if a.spill_dir is not None else os.path.dirname(os.path.abspath(a.output))


def _texts_read_while_building(a, clock, info: dict) -> bool:
    """Whether the build reads the texts as it goes (``--stream``, or a JSONL file whose texts stay
    in the file: diversify.corpus.filetexts); the phase before it only opened the input: "open"."""
    lazy = bool(a.stream) or info.get("texts") == "file"
    if lazy:
        clock.rename("read", "open")
    return lazy


def _ahead(a, cfg):
    """:func:`diversify.engines.ahead.compile_ahead` under the console script, else nothing."""
    import contextlib

    if not getattr(a, "compile_ahead", False):
        return contextlib.nullcontext()
    from ..engines.ahead import compile_ahead

    return compile_ahead(cfg)


def _note_ids(a, info: dict) -> None:
    note = ids_note(a, info)
    if note:
        warn_line(f"diversify {a.command}", note)


def _build_dask(a, cfg):
    import diversify

    from ..errors import require

    if a.input is None or a.vectors:
        raise DiversifyError("`--engine dask` needs an INPUT path or glob of JSONL/Parquet files and no --vectors.")
    if os.path.exists(a.input) and not os.path.isdir(a.input):
        from ..corpus.inputs import check_input_file

        check_input_file(a.input, "input")  # a named pipe or a device would block or never end
    client = None
    if a.scheduler:
        distributed = require("distributed", extra="dask", purpose="--engine dask")
        client = distributed.Client(a.scheduler)
    try:
        return diversify.build(a.input, engine="dask", client=client, config=cfg, metadata=parse_metadata(a.metadata),
                               progress=not a.no_progress, text_field=a.text_field or "text", id_field=a.id_field,
                               key_field=key_fields(a), format=a.format, **({"output_dir": a.output} if a.shards else {}))
    finally:
        if client is not None:
            client.close()


def cmd_add(a) -> int:
    import diversify

    from .clock import Clock

    clock = Clock()
    out = a.output or a.artifact
    check_output_path(out, param="-o" if a.output else "artifact", what="the artifact", inputs=_inputs(a))
    with clock.phase("read"):
        texts, ids, keys, vectors, sources, info = streams(a)
    lazy = _texts_read_while_building(a, clock, info)
    # the lock is held from the read of the artifact to the write: concurrent adds serialize, none is lost
    with file_lock(out, timeout=a.lock_timeout, what="the artifact", param="-o" if a.output else "artifact",
                   timeout_param="--lock-timeout", on_wait=lambda note: warn_line("diversify add", note)):
        with clock.phase("read+add" if lazy else "add"), _in_the_input(a):
            res = diversify.add(a.artifact, texts, ids=ids, vectors=vectors, keys=keys, sources=sources,
                                progress=not a.no_progress, chunk_size=a.chunk_size,
                                on_existing="skip" if a.skip_existing else "error")
        if res.unchanged:
            say(f"nothing to add: the {_records(len(res.skipped))} given have ids already in {printable(a.artifact)}; "
                "the artifact is unchanged")
            return 0
        with writing(out), clock.phase("write"):
            res.save(out)
    say(res.summary())
    if res.skipped:
        say(f"skipped          {_records(len(res.skipped))} whose ids the artifact already has (--skip-existing)")
    say(f"wrote {out} in {clock.wall():.2f}s ({clock.cost_line(res.n_docs)})")
    if a.verbose:
        for line in clock.verbose_lines(res.n_docs, res.timings):
            say(line)
    _note_ids(a, info)
    return 0


def _records(n: int) -> str:
    return f"{n:,} record{'' if n == 1 else 's'}"


@contextmanager
def _in_the_input(a):
    """A refused id is named by its place in the user's file (line, row, shard), not by its
    position in the list of documents the reader made."""
    from ..corpus.locate import record_location
    from ..errors import DuplicateIdError, ExistingIdError

    def where(position: int) -> str:
        if a.input is None:
            return f"line {position + 1} of --ids {a.ids_file}"
        return record_location(a.input, position, fmt=a.format)

    try:
        yield
    except ExistingIdError as exc:
        raise ExistingIdError(
            f"{where(exc.position)}: id {exc.id!r:.60} is already in the artifact (its document {exc.doc}). Pass "
            "--skip-existing to leave out the records whose id the artifact has, or give them new ids"
            f"{'' if a.id_field else ' (--id-field NAME picks the field that holds them)'}.",
            position=exc.position, id=exc.id, doc=exc.doc) from None
    except DuplicateIdError as exc:
        positions = getattr(exc, "positions", None)
        if positions is None:
            raise
        said = f"positions {positions[0]} and {positions[1]}"
        raise DuplicateIdError(str(exc).replace(said, f"{said} of the input ({where(positions[0])} and "
                                                      f"{where(positions[1])})", 1)) from None


def _histogram(sizes: np.ndarray) -> list[tuple[str, int, int]]:
    bins = [(1, 1), (2, 2), (3, 5), (6, 10), (11, 100), (101, 1000), (1001, None)]
    rows = []
    for lo, hi in bins:
        m = (sizes >= lo) if hi is None else ((sizes >= lo) & (sizes <= hi))
        label = f"{lo}" if lo == hi else (f"{lo}+" if hi is None else f"{lo}-{hi}")
        rows.append((label, int(m.sum()), int(sizes[m].sum())))
    return rows


def cmd_stats(a) -> int:
    from ..artifact import load
    from ..clusters import cluster_report

    if a.top < 0:
        raise DiversifyError(f"`--top` must be a number of clusters >= 0; got {a.top}. Use 0 to list none.")
    cm = load(a.artifact)
    cids, sizes = cm.cluster_sizes()
    order = np.lexsort((cids, -sizes))[: a.top]
    info = {
        "path": a.artifact,
        "documents": cm.n_docs,
        "clusters": cm.n_clusters,
        "would_be_removed": cm.n_docs - cm.n_clusters,
        "histogram": [{"size": size, "clusters": c, "documents": d} for size, c, d in _histogram(sizes)],
        "largest": [
            {"cluster_id": int(cids[i]), "size": int(sizes[i]), "sample_ids": cm.members(int(cids[i]))[:5],
             "stages": cm.cluster_stages(int(cids[i]))}
            for i in order
        ],
        "fingerprint": cm.fingerprint,
        "seed": cm.seed,
        "hash_scheme": cm.hash_scheme,
        "created_at": cm.created_at,
        "library_version": cm.library_version,
        "config": cm.config,
        "fold": cluster_report(np.asarray(cm.cluster_ids), np.asarray(cm.is_representative, dtype=bool), cm.config,
                               cm.extras, top=a.top),
        "lsh": cm.build_info.get("lsh", {}),
        "purity": cm.build_info.get("purity"),
        "metadata": cm.metadata,
        "folded_by_stage": fold_stages(cm),
        "cosine_threshold": cosine_threshold(cm),
        "embedding": cm.build_info.get("embedding"),
    }
    if a.json:  # json.dumps escapes every control character (and all non-ASCII)
        say(json.dumps(info, indent=2, default=str))
        return 0
    say_line(f"artifact         {printable(a.artifact)}")
    say_line(f"documents        {info['documents']:,}")
    say_line(f"clusters         {info['clusters']:,}")
    say_line(f"would be removed {info['would_be_removed']:,} ({info['would_be_removed'] / max(1, cm.n_docs):.1%}) at max one per cluster")
    say_line("cluster sizes    size: clusters (documents)")
    for row in info["histogram"]:
        if row["clusters"]:
            say_line(f"  {row['size']:>9}: {row['clusters']:,} ({row['documents']:,})")
    say_line("largest clusters (stages: 1 exact, 2 minhash, 4 simhash)")
    for row in info["largest"]:
        if row["size"] < 2:
            break
        say_line(f"  #{row['cluster_id']:<8} size {row['size']:<6} stages {row['stages']}  "
                 f"e.g. {', '.join(printable(i) for i in row['sample_ids'])}")
    _print_fold(info["fold"], cm.config.get("clustering", "components"))
    for line in stats_lines(cm, info["folded_by_stage"], info["embedding"]):
        say_line(line)
    _print_purity(info["purity"])
    for name, p in info["lsh"].items():
        say_line(f"{printable(name):<16} bands={_shown(p.get('bands'))} rows={_shown(p.get('rows'))} "
                 f"recall@threshold={_shown(p.get('recall_at_threshold', 0), '.3f')}")
    mh = cm.config.get("minhash") or {}
    text = cm.config.get("text") or {}
    say_line(f"params           threshold={_shown(mh.get('threshold'))} num_perm={_shown(mh.get('num_perm'))} "
             f"method={_shown(mh.get('method'))} shingle={_shown(text.get('shingle'))}/{_shown(text.get('k'))} "
             f"seed={_shown(cm.seed)}")
    say_line(f"fingerprint      {printable(cm.fingerprint)}")
    say_line(f"built            {printable(cm.created_at)} by diversify {printable(cm.library_version)}")
    if cm.metadata:
        say_line("metadata         " + ", ".join(f"{printable(k)}={printable(v)}" for k, v in cm.metadata.items()))
    return 0


def _print_fold(rep: dict, clustering: str) -> None:
    from ..clusters import outcome_warnings

    say_line(f"clustering       {printable(clustering)}"
             + {"clique": "  (every two members of a cluster verified similar)",
                "star": "  (every folded document verified similar to its representative)"}.get(
                    clustering, "  (transitive components: may chain)"))
    sim = rep.get("member_similarity")
    if not rep["similarity_known"]:
        say_line("similarity       unknown (built with --no-incremental: no signatures kept)")
    elif sim:
        how = "as the build verified it" if rep.get("similarity_source") == "verified" else "MinHash estimate"
        say_line(f"similarity       folded documents to their representative ({how}): min {sim['min']:.3f}, "
                 f"median {sim['median']:.3f}; {rep.get('members_below_threshold', 0):,} below the threshold "
                 f"{_shown(rep['threshold'])}")
    for row in rep["largest"]:
        if row["suspicious"]:
            say_line(f"suspicious       #{row['cluster_id']} (size {row['size']:,}): "
                     f"{'; '.join(printable(x) for x in row['suspicious'])}")
    for note in outcome_warnings(rep):
        say_line(f"warning          {printable(note, backslash=False)}")


def _print_purity(purity) -> None:
    """The line of `stats` and `show` that measures the promise (an artifact's header may lack it
    or hold anything: shown escaped)."""
    if not isinstance(purity, dict) or not isinstance(purity.get("purity"), (int, float)):
        return
    say_line(f"pairwise purity  {_shown(purity['purity'], '.1%')} of {_shown(purity.get('pairs_sampled'))} "
             f"sampled member pairs verified similar (of {_shown(purity.get('pairs_in_clusters'))} pairs inside "
             "clusters)")


def _shown(value, spec: str = "") -> str:
    """A value read from an artifact's header, for a line of `stats`: a number formatted with
    ``spec``, anything else escaped (a crafted header may hold any type or text)."""
    if spec and isinstance(value, (int, float)) and not isinstance(value, bool):
        return format(value, spec)
    return printable(value)


def cmd_export(a) -> int:
    from ..artifact import load
    from ..corpus.export import write_export

    check_output_path(a.output, param="--output", what="the export", inputs=(("artifact", a.artifact),))
    cm = load(a.artifact)
    with writing(a.output):
        n = write_export(cm, a.output, a.format)
    say(f"wrote {n:,} records to {a.output}")
    return 0


def cmd_show(a) -> int:
    from ..artifact import load
    from ..artifact.views import SIMILARITY_NOT_STORED, cluster_view

    if (a.cluster_id is None) == (a.id is None):
        raise DiversifyError("give a CLUSTER_ID or --id ID (one of them): the cluster to show, or a document of it. "
                             "`diversify stats ARTIFACT` lists the largest clusters.")
    if a.limit < 0:
        raise DiversifyError(f"`--limit` must be a number of members >= 0; got {a.limit}. Use 0 for the cluster alone.")
    cm = load(a.artifact)
    if a.cluster_id is not None:
        view = cluster_view(cm, cluster_id=_cluster_arg(a.cluster_id, cm.n_clusters), limit=a.limit)
    else:
        view = cluster_view(cm, doc_id=_id_arg(a.id, cm.id_kind), limit=a.limit)
    if a.json:  # json.dumps escapes every control character (and all non-ASCII)
        say(json.dumps(view, indent=2))
        return 0
    if "asked_id" in view:
        say(f"document {printable(view['asked_id'])} is in cluster #{view['cluster_id']}")
    elif "asked_cluster_id" in view:
        say(f"cluster #{view['asked_cluster_id']} was merged into cluster #{view['cluster_id']}")
    say(f"cluster          #{view['cluster_id']}")
    say(f"size             {view['size']:,}")
    clustering = cm.config.get("clustering")
    if isinstance(clustering, str):
        from ..clusters.purity import PROMISES

        say(f"promise          {printable(PROMISES.get(clustering, clustering))} ({printable(clustering)})")
    say(f"representative   {printable(view['representative'])}")
    if not view["similarity_stored"]:
        say(f"similarity       {SIMILARITY_NOT_STORED}")
    say("members          similarity to the representative (as verified), stages that joined it")
    for m in view["members"]:
        sim = "-" if m["similarity"] is None else f"{m['similarity']:.3f}"
        what = "representative" if m["is_representative"] else (", ".join(m["stages"]) or "-")
        say(f"  {sim:>6}  {what:<22} {printable(m['id'])}")
    if view["more"]:
        say(f"  ... {view['more']:,} more (raise --limit to list them)")
    if view["similarity_stored"] and any(m["similarity"] is None for m in view["members"]):
        say("  (-: no verified similarity stored for that member)")
    return 0


#: an integer as the command line takes one: ASCII digits, an optional minus (int() would also take
#: "1_0", " 5", "+5" and other scripts' digits, and find a document the user did not name)
_INTEGER = re.compile(r"-?[0-9]+")


def _cluster_arg(text: str, n_clusters: int) -> int:
    if not _INTEGER.fullmatch(text):
        raise DiversifyError(f"`CLUSTER_ID` must be an integer cluster id (as `stats`, `export` and lookup() give "
                             f"them); got {text!r}. To show the cluster of a document, pass --id ID.")
    return int(text)


def _id_arg(text: str, id_kind: str):
    """The document id as the artifact holds it: an int for an artifact of int ids."""
    if id_kind != "int":
        return text
    if not _INTEGER.fullmatch(text):
        raise DiversifyError(f"`--id` must be an integer written with digits: this artifact's ids are ints; got "
                             f"{text!r}.")
    return int(text)


def cmd_demo(a) -> int:
    from ..demo import demo_config, run_demo

    if a.n < 0 or a.n > 10_000_000:
        raise DiversifyError(f"`--n` must be a number of documents from 1 to 10,000,000 (the demo holds them in "
                             f"memory); got {a.n}. The default 20000 runs in seconds.")
    if a.seed < 0:
        raise DiversifyError(f"`--seed` must be an integer >= 0; got {a.seed}.")
    with _ahead(a, demo_config(a.threshold)):
        return run_demo(n_docs=a.n, seed=a.seed, threshold=a.threshold)
