"""`diversify build | add | stats | export | demo`."""

from __future__ import annotations

import json
import os
import sys
import time
import warnings

import numpy as np

from ..clusters import cluster_report, outcome_warnings
from ..errors import DiversifyError, DiversifyWarning
from ..files import check_output_path, file_lock
from .options import config_from_args, key_fields, parse_metadata, streams


def _inputs(a) -> tuple:
    """(flag, path) of the files build/add read, which an output must not be."""
    return (("INPUT", a.input), ("--vectors", a.vectors), ("--ids", a.ids_file))


def cmd_build(a) -> int:
    import diversify

    check_output_path(a.output, param="-o", what="the artifact", inputs=_inputs(a))  # before the build, not after
    cfg = config_from_args(a)
    t0 = time.perf_counter()
    if a.engine == "dask":
        res = _build_dask(a, cfg)
    else:
        texts, ids, keys, vectors, sources = streams(a)
        with warnings.catch_warnings():  # the summary below prints them
            warnings.simplefilter("ignore", DiversifyWarning)
            res = diversify.build(texts, ids=ids, vectors=vectors, config=cfg, keys=keys, sources=sources,
                                  metadata=parse_metadata(a.metadata), progress=not a.no_progress,
                                  chunk_size=a.chunk_size)
    res.save(a.output)
    dt = time.perf_counter() - t0
    print(res.summary())
    print(f"wrote {a.output} ({os.path.getsize(a.output):,} bytes) in {dt:.2f}s ({res.n_docs / max(dt, 1e-9):,.0f} docs/s)")
    return 0


def _build_dask(a, cfg):
    import diversify

    from ..errors import require

    if a.input is None or a.vectors:
        raise DiversifyError("`--engine dask` needs an INPUT path or glob of JSONL/Parquet files and no --vectors.")
    client = None
    if a.scheduler:
        distributed = require("distributed", extra="dask", purpose="--engine dask")
        client = distributed.Client(a.scheduler)
    try:
        return diversify.build(a.input, engine="dask", client=client, config=cfg, metadata=parse_metadata(a.metadata),
                               progress=not a.no_progress, text_field=a.text_field, id_field=a.id_field,
                               key_field=key_fields(a), format=a.format)
    finally:
        if client is not None:
            client.close()


def cmd_add(a) -> int:
    import diversify

    out = a.output or a.artifact
    check_output_path(out, param="-o" if a.output else "artifact", what="the artifact", inputs=_inputs(a))
    texts, ids, keys, vectors, sources = streams(a)
    # the lock is held from the read of the artifact to the write: concurrent adds serialize, none is lost
    with file_lock(out, timeout=a.lock_timeout, what="the artifact", param="-o" if a.output else "artifact",
                   timeout_param="--lock-timeout", on_wait=lambda note: print(f"diversify add: {note}", file=sys.stderr)):
        res = diversify.add(a.artifact, texts, ids=ids, vectors=vectors, keys=keys, sources=sources,
                            progress=not a.no_progress, chunk_size=a.chunk_size)
        res.save(out)
    print(res.summary())
    print(f"wrote {out}")
    return 0


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
        "metadata": cm.metadata,
    }
    if a.json:
        print(json.dumps(info, indent=2, default=str))
        return 0
    print(f"artifact         {a.artifact}")
    print(f"documents        {info['documents']:,}")
    print(f"clusters         {info['clusters']:,}")
    print(f"would be removed {info['would_be_removed']:,} ({info['would_be_removed'] / max(1, cm.n_docs):.1%}) at max one per cluster")
    print("cluster sizes    size: clusters (documents)")
    for row in info["histogram"]:
        if row["clusters"]:
            print(f"  {row['size']:>9}: {row['clusters']:,} ({row['documents']:,})")
    print("largest clusters (stages: 1 exact, 2 minhash, 4 simhash)")
    for row in info["largest"]:
        if row["size"] < 2:
            break
        print(f"  #{row['cluster_id']:<8} size {row['size']:<6} stages {row['stages']}  e.g. {', '.join(map(str, row['sample_ids']))}")
    _print_fold(info["fold"], cm.config.get("clustering", "components"))
    for name, p in info["lsh"].items():
        print(f"{name:<16} bands={p.get('bands')} rows={p.get('rows')} recall@threshold={p.get('recall_at_threshold', 0):.3f}")
    mh = cm.config.get("minhash") or {}
    print(f"params           threshold={mh.get('threshold')} num_perm={mh.get('num_perm')} method={mh.get('method')} "
          f"shingle={cm.config.get('text', {}).get('shingle')}/{cm.config.get('text', {}).get('k')} seed={cm.seed}")
    print(f"fingerprint      {cm.fingerprint}")
    print(f"built            {cm.created_at} by diversify {cm.library_version}")
    if cm.metadata:
        print(f"metadata         {cm.metadata}")
    return 0


def _print_fold(rep: dict, clustering: str) -> None:
    print(f"clustering       {clustering}" + ("  (every folded document verified similar to its representative)"
                                              if clustering == "guaranteed" else "  (transitive components: may chain)"))
    sim = rep.get("member_similarity")
    if not rep["similarity_known"]:
        print("similarity       unknown (built with --no-incremental: no signatures kept)")
    elif sim:
        how = "as the fold check verified it" if rep.get("similarity_source") == "verified" else "MinHash estimate"
        print(f"similarity       folded documents to their representative ({how}): min {sim['min']:.3f}, "
              f"median {sim['median']:.3f}; {rep.get('members_below_threshold', 0):,} below the threshold "
              f"{rep['threshold']}")
    for row in rep["largest"]:
        if row["suspicious"]:
            print(f"suspicious       #{row['cluster_id']} (size {row['size']:,}): {'; '.join(row['suspicious'])}")
    for note in outcome_warnings(rep):
        print(f"warning          {note}")


def cmd_export(a) -> int:
    from ..artifact import load
    from ..corpus.export import write_export

    check_output_path(a.output, param="--output", what="the export", inputs=(("artifact", a.artifact),))
    cm = load(a.artifact)
    n = write_export(cm, a.output, a.format)
    print(f"wrote {n:,} records to {a.output}")
    return 0


def cmd_demo(a) -> int:
    from ..demo import run_demo

    if a.n < 0:
        raise DiversifyError(f"`--n` must be a number of documents >= 1; got {a.n}. The default 20000 runs in seconds.")
    return run_demo(n_docs=a.n, seed=a.seed, threshold=a.threshold)
