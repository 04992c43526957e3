"""The offline build on Dask: the local builder's stages, partitioned, with the same clusters.

Stages (each a pure Dask task graph; a failed task is recomputed from its inputs):

1. **read + sketch** per input partition with the local builder's own code
   (:func:`~diversify.sketches.batch.sketch_texts`: normalization, exact hash, MinHash kernels).
   Partitions stay on the workers. Their sizes give every document its *global index* (its
   position in the input order), which is what cluster labels are made of. Under
   ``verify="auto"`` the texts stay on the workers too, and once the filter of stage 3 exists only
   the candidates' (:mod:`.texts`): the stages that read texts (borderline pairs, the cut) never
   read the input again.
2. **exact stage**: rows ``(exact hash, doc)`` split by hash (plain arrays); each document points
   at the smallest document with its hash.
3. **MinHash stage**, in two passes over the band keys. Pass 1 shuffles the bare keys (8 bytes
   a row) and keeps the keys held by two or more rows; their Bloom filter (no false negatives,
   ~1% false positives) goes to every worker. Pass 2 emits only the rows whose key passes the
   filter (key, document index, band), split by key into shuffle partitions; each document's exact
   hash goes once to each partition holding one of its rows. A shuffle partition then holds every
   member of its shared buckets and forms their candidate pairs with the local scan's rule (same
   bucket order (key, doc, band), same ``bucket_window``, the first copy of each text), each
   distinct pair once. No signature travels with the rows: the pairs meet their two signatures in
   a shuffle join by document owner (:mod:`.pairs`) and are decided there by the local verifier's
   agreement band; borderline pairs (``verify="auto"``) then go through a second such join with
   the documents' shingle sets and the local build's exact Jaccard check (:mod:`.borderline`).
4. **connected components** of the exact and MinHash edges by alternating large-star and
   small-star rounds (Kiveris et al. 2014) over the edge table, each a shuffle by node; O(log n)
   rounds. A component's label is its smallest member: the local build's cluster id.
5. **cut**, on the workers (:mod:`.cut`): member rows (sketch columns and, under
   ``verify="auto"``, texts) shuffled by component; each cut
   partition runs the local build's :func:`~diversify.clusters.cut_clusters` on a small Sketches
   of its members (representatives, labels, stage bits, fold similarities); the sampled purity is
   drawn and checked there too (:mod:`.purity`).
6. **artifact**: the cut's results and the per-document columns are gathered partition by
   partition and written by the local builder's :func:`~diversify.engines.finish.finish`.

Modules, one per stage: :mod:`.inputs` (partitions), :mod:`.sketch`, :mod:`.exact`, :mod:`.bands`
(with the Bloom filter of :mod:`diversify.linking.keyfilter`), :mod:`.scan` (bucket scan; the exact check of a block of pairs),
:mod:`.pairs` (the signature join), :mod:`.borderline` (the exact join), :mod:`.join` (the shuffle join both use), :mod:`.components`,
:mod:`.cut`, :mod:`.purity`, :mod:`.finish`, :mod:`.texts` (the texts kept for later stages); :mod:`.run` holds what they share; this module runs them in order.

Why the clusters are identical to the local build's
---------------------------------------------------
The local build links documents in buckets of equal band keys, sorted by (key, doc, band), each
member against the next ``bucket_window - 1`` members (all pairs in small buckets), among the
documents that are first of their exact hash; it skips a pair whose ends are already connected.
Skipping such pairs never changes connected components, so its clusters are the components of
the graph {exact edges} + {verified window pairs}. Here every window pair of a bucket is formed
within one partition, by the same rule, and each distinct pair is verified once, with the same
verifier, where its documents' signatures are; a borderline pair the accepted pairs there already
join is not checked exactly (again no change to components). Exact copies have equal texts, hence equal signatures and band keys,
so all copies of a text meet in each of its buckets and the "first of its exact hash" filter is
applied there, per bucket, with the same result as the global filter. Hence the same edge graph up
to edges inside components, the same components, the same smallest members, the same ids; and the
same stage flags (a document gets the MinHash flag iff it lies in a non-trivial component of the
MinHash graph, in both engines). The statistics that differ are ``verified["minhash"]`` (here
every distinct candidate pair is verified: none is skipped as already connected) and
``exact_checks``. A row left out by
the filter has a key no other row holds: it can never give a candidate pair.

Borderline pairs: both engines decide every one by exact Jaccard when the texts are at hand (a
full buffer pauses the bucket scan, never hands the pair to the estimate), and exact Jaccard is a
function of the pair alone, so the borderline edges agree too. The local build decides them
while it scans, this engine after all partitions scanned; ``exact_checks["minhash"]`` differs
(here a pair deferred in several bands is counted once per band).

Corner case (documented, not handled): two *different* texts with the same 64-bit exact hash
(probability ~ n**2 / 2**65) are one exact group in both engines, but the per-bucket filter may
keep the second text in a bucket where the first is absent.

Not supported on this engine (raise ConfigError): vectors / SimHash, ``MinHashConfig(verify="exact")``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from typing import Any, Optional, Union

import numpy as np

from ...config import BuildConfig
from ...errors import ConfigError, InputError, require
from ...hashing import lsh_seed
from ...linking.keys import minhash_params
from ...staging import agreement_band
from .bands import DOC_BYTES, ROW_BYTES, candidate_rows, shared_key_filter, shuffled_band_rows
from .borderline import decide_borderline
from .components import components_stage, connected_components
from .cut import cut_stage
from .exact import exact_stage
from .finish import finish_build
from .inputs import input_partitions
from .output import _check_dir
from .pairs import verified_of, verify_pairs
from .run import Edges, Report, Run, rows_of, spread, worker_addresses
from .scan import scan_partition, scan_summary
from .sketch import empty_of, n_of, sketch_part
from .texts import keep_candidates, kept_count, needs_texts, sketches_of, texts_of

__all__ = ["build_dask", "connected_components"]


def _dask():
    require("dask.dataframe", extra="dask", purpose="The Dask engine")
    return require("distributed", extra="dask", purpose="The Dask engine")


def _resolve_config(config) -> BuildConfig:
    from ...config import resolve_config

    cfg = resolve_config(config)
    if cfg.minhash is not None and cfg.minhash.verify == "exact":
        raise ConfigError(
            "`minhash.verify='exact'` is not supported by the Dask engine (the shingle sets would have to travel "
            "with every band row); got verify='exact'. Use verify='auto' (the default) or 'estimate' with engine='dask', "
            "or engine='local'."
        )
    if cfg.minhash is None and not cfg.exact:
        raise ConfigError("both text stages are off (`minhash=None`, `exact=False`); the Dask engine builds from "
                          "text only. Enable one of them.")
    if cfg.source_thresholds is not None:
        raise ConfigError("`source_thresholds` are not available with engine='dask' yet (the sources would have to "
                          f"travel with every band row); got {cfg.source_thresholds}. Use engine='local', or one "
                          "threshold (minhash.threshold) for the whole corpus.")
    return cfg


def _client_or_local(client):
    """(client, the LocalCluster the build started or None, the client's ``direct_to_workers``).

    The build's results and scattered partitions go between the client and the workers directly:
    Dask's default for a client outside the cluster (``direct_to_workers=None``) relays them
    through the scheduler. A client made with ``direct_to_workers=False`` (workers it cannot reach)
    keeps its relay."""
    distributed = _dask()
    own = None
    if client is None:
        try:
            client = distributed.get_client()
        except ValueError:
            own = distributed.LocalCluster(processes=True)
            client = distributed.Client(own)
    direct = client.direct_to_workers
    if direct is None:
        client.direct_to_workers = True
    return client, own, direct


def _close_own(client, own_cluster, direct) -> None:
    """Give the client its ``direct_to_workers`` back; close the temporary LocalCluster a build
    started (never a client it was given)."""
    client.direct_to_workers = direct
    if own_cluster is not None:
        client.close()
        own_cluster.close()


def _check_options(texts_or_paths, *, npartitions, shuffle_partitions, retries, output_dir) -> Optional[str]:
    """Check the options; the output directory made ready (absolute), if any."""
    if not isinstance(retries, int) or retries < 0:
        raise ConfigError(f"`retries` must be an int >= 0; got {retries!r}.")
    if npartitions is not None and (not isinstance(npartitions, int) or npartitions < 1):
        raise ConfigError(f"`npartitions` must be a positive int or None; got {npartitions!r}.")
    if shuffle_partitions is not None and (not isinstance(shuffle_partitions, int) or shuffle_partitions < 1):
        raise ConfigError(f"`shuffle_partitions` must be a positive int or None; got {shuffle_partitions!r}.")
    if isinstance(texts_or_paths, str) and not any(c in texts_or_paths for c in "*?[") and "://" not in texts_or_paths \
            and not os.path.exists(texts_or_paths):
        raise InputError(f"`texts_or_paths` {texts_or_paths!r} is not an existing path. Check it; to build from one "
                         "text, pass a list: [text].")
    return _check_dir(output_dir) if output_dir is not None else None


def build_dask(
    texts_or_paths: Any,
    *,
    ids: Optional[Iterable] = None,
    config: Union[BuildConfig, Mapping, None] = None,
    keys: Any = None,
    client: Any = None,
    npartitions: Optional[int] = None,
    shuffle_partitions: Optional[int] = None,
    text_field: str = "text",
    id_field: Optional[str] = None,
    key_field: Optional[str] = None,
    format: Optional[str] = None,
    blocksize: int = 64 * 2**20,
    shuffle_method: Optional[str] = None,
    retries: int = 2,
    metadata: Optional[Mapping] = None,
    progress: bool = False,
    created_at: Optional[str] = None,
    output_dir: Optional[str] = None,
):
    """Cluster near-duplicate documents on a Dask cluster; same clusters as :func:`diversify.build`.

    Parameters
    ----------
    texts_or_paths : paths, a dask DataFrame or Bag, or a sequence of str
        - a str or ``os.PathLike``: a file, directory glob or URL glob (``"data/*.parquet"``,
          ``"s3://bucket/part-*.jsonl"``); files are read in sorted path order, rows in file order;
          a list of ``os.PathLike`` is read in the order given;
        - a ``dask.dataframe.DataFrame`` with a ``text_field`` column (optionally ``id_field``,
          ``key_field``);
        - a ``dask.bag.Bag`` of str, or of dict records;
        - a sequence of str (cut into ``npartitions`` partitions and scattered to the workers).
        The global document index (the cluster labels) is the position in this order.
    ids : iterable, optional
        Only with a sequence of texts. Ids from files/frames come from ``id_field``: when it is
        given, every record must hold it (else :class:`InputError` naming the record); when it is
        None (default), from the field ``id`` where present, and a document without one gets its
        global index.
    config : BuildConfig or dict, optional
        As in :func:`diversify.build`. Not supported here: ``minhash.verify="exact"``; vectors.
    keys : array, optional
        Only with a sequence of texts; else ``key_field``. For ``representative="key"``.
    client : distributed.Client, optional
        Default: the current client, or a temporary ``LocalCluster`` (closed afterwards).
    npartitions : int, optional
        Input partitions for a sequence of texts (default one per 20,000 documents).
    shuffle_partitions : int, optional
        Partitions of the band shuffle (pass 2); default ~128 MiB of band rows and document
        records each. Higher -> less memory per task, a record sent to more partitions.
    blocksize : int
        Bytes per input partition for JSONL files and Parquet row groups (default 64 MiB).
    shuffle_method : {"p2p", "tasks"}, optional
        Ignored (accepted so that existing calls keep working): every shuffle of this engine
        splits plain arrays on the workers, cheaper than a DataFrame shuffle for its small rows.
    retries : int
        Times Dask retries a failed task (every task is pure: a retry recomputes the same result).
    progress : bool
        Stage lines and per-stage progress bars on stderr.
    output_dir : str, optional
        A new or empty directory every worker can write to: Parquet shards and a manifest (:mod:`diversify.artifact.shards`).

    Returns
    -------
    BuildResult (a :class:`~.output.ShardedBuild` with ``output_dir``): ``cluster_ids`` equal to the local
        build's (module docstring); ``stats["dask"]``: partition counts, shuffle rows and rounds.
    """
    cfg = _resolve_config(config)
    out = _check_options(texts_or_paths, npartitions=npartitions, shuffle_partitions=shuffle_partitions, retries=retries,
                         output_dir=output_dir)
    client, own_cluster, direct = _client_or_local(client)
    try:
        run = Run(client=client, cfg=cfg, retries=retries, shuffle_method=shuffle_method, report=Report(progress),
                  workers=worker_addresses(client))
        run.sources = input_partitions(texts_or_paths, ids=ids, keys=keys, client=client, npartitions=npartitions,
                                       text_field=text_field, id_field=id_field or "id", key_field=key_field, fmt=format,
                                       blocksize=blocksize, id_required=id_field is not None)
        return _run(run, shuffle_partitions=shuffle_partitions, metadata=metadata, created_at=created_at, output_dir=out)
    finally:
        _close_own(client, own_cluster, direct)


def _run(run: Run, *, shuffle_partitions: Optional[int], metadata, created_at, output_dir: Optional[str]):
    """The stages in order; each adds its edge tables to ``edges``."""
    _sketch_stage(run)
    edges = Edges()
    if run.cfg.exact and run.n_text:
        exact_stage(run, edges)
    if run.cfg.minhash is not None and run.n_text:
        _minhash_stage(run, edges, shuffle_partitions)
    label_futs, moved = components_stage(run, edges)
    if run.cfg.minhash is not None and run.n_text:
        run.stats.merged["minhash"] = int(moved - edges.exact_merged)
    _check_keys_present(run)
    if run.texts:
        run.info["texts_kept"] = int(sum(run.gather(kept_count, run.texts)))
    # the cut's member rows are the last readers of the kept texts: each leaves its worker once read
    cut_futs = cut_stage(run, edges, label_futs, 2 * moved) if label_futs else []
    run.texts = []
    edges.clear()  # the edge tables and labels may leave the workers now
    del label_futs
    return finish_build(run, cut_futs, metadata=metadata, created_at=created_at, output_dir=output_dir)


def _has_keys(skp: dict) -> bool:
    return skp["keys"] is not None


def _check_keys_present(run: Run) -> None:
    if run.cfg.representative == "key" and not all(run.gather(_has_keys, run.sketches)):
        raise ConfigError("`representative='key'` needs a key for every document: pass `keys` (with texts) or "
                          "`key_field` (with files or frames) naming a numeric column.")


def _sketch_stage(run: Run) -> None:
    """Sketch every input partition on the workers; learn their sizes (the global indices)."""
    from dask import delayed

    t0 = time.perf_counter()
    run.report.stage(f"sketching {len(run.sources)} partitions on {run.n_workers} workers")
    keep = needs_texts(run.cfg)
    sketched = [delayed(sketch_part, pure=True)(s, run.cfg_json, keep) for s in run.sources]
    if keep:  # the texts stay on the workers for the borderline join and the cut: the corpus is read once
        futs = run.compute([delayed(sketches_of, pure=True)(s) for s in sketched]
                           + [delayed(texts_of, pure=True)(s) for s in sketched], "sketch")
        run.sketches, run.texts = futs[:len(sketched)], futs[len(sketched):]
    else:
        run.sketches = run.compute(sketched, "sketch")
    counts = np.asarray(run.gather(n_of, run.sketches), dtype=np.int64)
    run.offsets = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=run.offsets[1:])
    run.timings["dask_sketch"] = time.perf_counter() - t0
    if run.n == 0:
        raise InputError("the corpus is empty: the input held no documents. Pass at least one document.")
    empties = run.gather(empty_of, run.sketches)
    run.n_empty = int(sum(e.size for e in empties))
    if run.cfg.empty == "error" and run.n_empty:
        bad = np.concatenate([e + run.offsets[i] for i, e in enumerate(empties)])
        raise InputError(
            f"documents must contain at least one word under `empty='error'`; {bad.size} do not, e.g. positions "
            f"{bad[:5].tolist()}. Drop them, or use BuildConfig(empty='singleton') to keep them as their own clusters."
        )
    run.report.stage(f"{run.n:,} documents ({run.n_empty:,} empty)")
    run.info.update(input_partitions=len(run.sources), workers=run.n_workers)


def _minhash_stage(run: Run, edges: Edges, shuffle_partitions: Optional[int]) -> None:
    """Bands in two shuffles, a bucket scan per shuffle partition, then the borderline pairs."""

    t0 = time.perf_counter()
    cfg, stats, info = run.cfg, run.stats, run.info
    assert cfg.minhash is not None
    p = minhash_params(cfg)
    key_filter, n_shared = shared_key_filter(run, p)
    seed_h = int(lsh_seed(cfg.seed))
    candidates = [run.client.submit(candidate_rows, s, p.rows, p.bands, seed_h, key_filter, pure=False)
                  for s in run.sketches]
    if run.texts:
        run.texts = [run.client.submit(keep_candidates, t, c, pure=False) for t, c in zip(run.texts, candidates)]
    rows = shuffled_band_rows(run, p, candidates, n_shared, shuffle_partitions)
    del candidates  # released once the splits have read them
    scanned = run.compute(spread(run.workers, scan_partition, [(run.cfg_json, *pieces) for pieces in rows]), "bands")
    verified = verify_pairs(run, scanned)  # submitted at once: the join starts as the first scans end
    summ = run.gather(scan_summary, scanned)
    del scanned
    stats.candidates["minhash"] = int(sum(s[0] for s in summ))
    stats.lsh["minhash"] = p.as_dict()
    n_rows, n_records = int(sum(s[2] for s in summ)), int(sum(s[4] for s in summ))
    info.update(band_rows=n_rows, band_rows_in_buckets=int(sum(s[3] for s in summ)), band_doc_records=n_records,
                band_bytes=n_rows * ROW_BYTES + n_records * DOC_BYTES, scan_pairs=int(sum(s[1] for s in summ)),
                scan_task_seconds=round(float(sum(s[5] for s in summ)), 3),
                band_shuffle_seconds=round(time.perf_counter() - t0, 3))
    vsumm = run.client.gather(run.client.map(verified_of, verified, offsets=run.offsets, pure=False))
    stats.verified["minhash"] = int(sum(s[0] for s in vsumm))
    edges.forest_edges = int(sum(s[1] for s in vsumm))
    info.update(pairs_verified=stats.verified["minhash"], borderline_pairs=int(sum(s[2][0] for s in vsumm)),
                forest_edges=edges.forest_edges)
    edges.parts += verified
    edges.minhash = list(verified)
    stats.exact_checks["minhash"] = 0
    lo, hi = agreement_band(cfg, auto=True)
    if lo < hi:
        decided, n_checked = decide_borderline(run, verified, [s[2] for s in vsumm])
        stats.exact_checks["minhash"] = n_checked
        info["borderline_tasks"] = len(decided)
        edges.parts += decided
        edges.minhash += decided
        edges.forest_edges += int(sum(run.gather(rows_of, decided)))
        info["forest_edges"] = edges.forest_edges
    run.timings["dask_minhash"] = time.perf_counter() - t0
    run.report.stage(f"MinHash stage: {stats.candidates['minhash']:,} candidate pairs")
