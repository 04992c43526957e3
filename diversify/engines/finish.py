"""What both engines finish with: labels (the cut the config names, or components), representatives,
the artifact, the report and the log record. The local engine (:mod:`.local`) and the Dask engine
(:mod:`.dask`) hand their sketches and union-find forest to :func:`finish`.
"""

from __future__ import annotations

import logging
import os
import time
import warnings
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional, TypedDict, Union

import numpy as np
from typing_extensions import NotRequired  # typing.NotRequired is 3.11+; pydantic brings typing_extensions

from .._arrays import unique_sorted
from ..clusters import (
    cluster_report,
    component_roots,
    cut_clusters,
    follow_alias,
    outcome_warnings,
    priority_rank,
    representatives,
    stable_labels,
)
from ..clusters.purity import sampled_purity
from ..config import BuildConfig, fingerprint
from ..errors import ArtifactError, DiversifyWarning
from ..files import DEFAULT_LOCK_TIMEOUT, FileIdentity, file_identity, write_guard
from ..hashing import HASH_SCHEME
from ..linking.link import Linked, LinkStats
from ..sketches.batch import Sketches
from ..sketches.memo import ExactMemo
from ..sketches.source import TextSource
from ..stages import STAGE_NAMES
from ..staging import incremental_extras

if TYPE_CHECKING:
    from ..artifact import ClusterMap

__all__ = ["BuildResult", "BuildStats", "build_stats", "stage_line", "finish", "make_build_info"]

log = logging.getLogger("diversify")


class BuildStats(TypedDict):
    """Counts per stage (``"exact"``, ``"minhash"``, ``"text_simhash"``, ``"simhash"``).

    For every stage ``candidates == already_joined + checked``, and ``merged <= checked``:

    - ``candidates``: candidate pairs the stage's buckets proposed (equal exact hashes, or equal
      LSH band keys within ``bucket_window``); a pair that shares several bands counts once per band.
    - ``already_joined``: of those, pairs whose documents were already in one cluster (no check).
    - ``checked``: of those, pairs checked: by the MinHash estimate, exact Jaccard, cosine or the
      SimHash estimate, as the stage verifies (a borderline pair is one check here, however it is
      then decided).
    - ``exact_checks``: distinct borderline pairs (``verify="auto"``) decided by exact Jaccard.
    - ``merged``: accepted pairs that joined two clusters (the edges of the clusters).
    - ``verified``: ``checked`` plus, on the local engine, the exact Jaccard re-checks of
      borderline pairs; kept for compatibility (it is what the artifact's ``build_info`` stores),
      which is why it may exceed ``candidates``.
    """

    candidates: dict[str, int]
    already_joined: dict[str, int]
    checked: dict[str, int]
    verified: dict[str, int]
    merged: dict[str, int]
    lsh: dict[str, dict]  # chosen LSH parameters (bands, rows, recall at the threshold, ...)
    exact_checks: dict[str, int]
    dask: NotRequired[dict]  # engine="dask" only: partitions, shuffle sizes, retries


def build_stats(stats: LinkStats) -> BuildStats:
    """The :class:`BuildStats` of a stage's counters (``checked`` and ``already_joined`` derived)."""
    checked = {k: int(v) - int(stats.rechecked.get(k, 0)) for k, v in stats.verified.items()}
    return {"candidates": stats.candidates, "already_joined": {k: int(v) - checked.get(k, 0) for k, v in
                                                              stats.candidates.items()},
            "checked": checked, "verified": stats.verified, "merged": stats.merged, "lsh": stats.lsh,
            "exact_checks": stats.exact_checks}


def stage_line(stats: BuildStats, name: str) -> str:
    """One stage's counters in the summary, in words whose numbers add up (see :class:`BuildStats`)."""
    c, m = stats["candidates"][name], stats["merged"][name]
    checked = stats.get("checked", stats["verified"]).get(name, 0)
    joined = stats.get("already_joined", {}).get(name, c - checked)
    x = stats.get("exact_checks", {}).get(name)
    extra = f"; {x:,} borderline re-checked by exact Jaccard" if x else ""
    return (f"{name:<16} candidate pairs {c:,} = {joined:,} already in one cluster + {checked:,} checked{extra}; "
            f"{m:,} merged two clusters")


@dataclass
class BuildResult:
    """What a build produced: the cluster map plus counts and timings.

    Attributes
    ----------
    cluster_map : ClusterMap  the artifact (``save`` it, or query it directly)
    cluster_ids : int64 (n,)  cluster id per document (the index of the cluster's first member)
    timings : stage -> seconds
    stats : candidate pairs, checks and merges per stage (:class:`BuildStats`); chosen LSH parameters
    """

    cluster_map: ClusterMap
    cluster_ids: np.ndarray  # int64 (n,)
    is_representative: np.ndarray  # bool (n,)
    doc_stages: np.ndarray  # uint8 (n,) stage bits (diversify.stages)
    timings: dict[str, float]
    stats: BuildStats
    #: what the clusters are: folded share, member-to-representative similarity, largest clusters
    #: (see diversify.clusters.report); warnings about the outcome
    report: dict = field(default_factory=dict)
    warnings: list = field(default_factory=list)
    #: ``add`` only: the version of the artifact file the result was derived from (compare and swap in ``save``)
    origin: Optional[FileIdentity] = field(default=None, repr=False)
    #: ``add(on_existing="skip")`` only: the ids of the documents left out (already in the artifact)
    skipped: list = field(default_factory=list, repr=False)
    #: True when ``add`` left every document out: ``cluster_map`` is the artifact as it was
    unchanged: bool = field(default=False, repr=False)

    @classmethod
    def nothing_added(cls, cmap, origin: Optional[FileIdentity], skipped: list) -> BuildResult:
        """The result of an ``add`` that left every document out: the artifact as it was."""
        stats: BuildStats = {"candidates": {}, "already_joined": {}, "checked": {}, "verified": {}, "merged": {},
                             "lsh": {}, "exact_checks": {}}
        return cls(cluster_map=cmap, cluster_ids=np.asarray(cmap.cluster_ids), timings={}, stats=stats,
                   is_representative=np.asarray(cmap.is_representative, dtype=bool),
                   doc_stages=np.asarray(cmap.doc_stages), origin=origin, skipped=list(skipped),
                   unchanged=True)

    @property
    def n_docs(self) -> int:
        return int(self.cluster_ids.size)

    @property
    def n_clusters(self) -> int:
        return int(unique_sorted(self.cluster_ids).size)

    @property
    def n_duplicates(self) -> int:
        return self.n_docs - self.n_clusters

    @property
    def n_candidates(self) -> int:
        return int(sum(self.stats["candidates"].values()))

    @property
    def n_verified_edges(self) -> int:
        return int(sum(self.stats["merged"].values()))

    def save(self, path: Union[str, os.PathLike], *, overwrite: bool = False,
             lock_timeout: Optional[float] = DEFAULT_LOCK_TIMEOUT) -> None:
        """Write the artifact atomically (temp file + rename), holding the path's writer lock.

        A result of :func:`diversify.add` remembers the version of the file it was read from
        (``origin``). Saving it to that file raises :class:`~diversify.errors.WriteConflictError`
        if the file has changed since (another writer's update would be lost); re-run ``add`` on
        the current file, or pass ``overwrite=True`` to replace it anyway. ``lock_timeout``:
        seconds to wait for another writer of ``path`` (:class:`~diversify.errors.LockTimeoutError`).
        """
        with write_guard(path, what="the artifact", error=ArtifactError, lock_timeout=lock_timeout):
            onto_origin = self.origin is not None and self.origin.names(path)
            self.cluster_map.save(path, expect=None if overwrite else self.origin, lock_timeout=lock_timeout)
            if onto_origin:  # the file now holds this result: saving it again is no conflict
                self.origin = file_identity(path)

    def summary(self) -> str:
        n_clusters = self.n_clusters  # a sort of every cluster id: once
        n_dup = self.n_docs - n_clusters
        lines = [
            f"documents        {self.n_docs:,}",
            f"clusters         {n_clusters:,}",
            f"duplicates       {n_dup:,} ({(n_dup / max(1, self.n_docs)):.1%} would be folded away)",
        ]
        for name, p in self.stats.get("lsh", {}).items():
            lines.append(
                f"{name:<16} bands={p['bands']} rows={p['rows']} recall@threshold={p['recall_at_threshold']:.3f}"
            )
        for name in self.stats["candidates"]:
            lines.append(stage_line(self.stats, name))
        sim = self.report.get("member_similarity")
        if sim:
            lines.append(f"folded members   similarity to their representative: min {sim['min']:.3f}, "
                         f"median {sim['median']:.3f} ({self.report.get('similarity_source', 'estimated')})")
        purity = self.report.get("purity") or {}
        if purity.get("purity") is not None:
            lines.append(f"clusters promise {purity['promise']}; measured: {purity['purity']:.1%} of "
                         f"{purity['pairs_sampled']:,} sampled member pairs verified similar")
        for note in self.warnings:
            lines.append(f"warning          {note}")
        # encode, sketch, ids (and a vector SimHash) run inside sketch_total: counted once
        inner = {"encode", "sketch", "signatures", "ids", "simhash"} if "sketch_total" in self.timings else set()
        total = sum(v for k, v in self.timings.items() if k not in inner)
        lines.append("time             " + ", ".join(f"{k} {v:.2f}s" for k, v in self.timings.items()) + f" (total {total:.2f}s)")
        return "\n".join(lines)


def finish(sk: Sketches, cfg: BuildConfig, linked: Linked, timings: dict, *, aliases: np.ndarray,
           raw_cluster: Optional[np.ndarray], metadata, created_at, thresholds: Optional[np.ndarray] = None,
           source: Optional[TextSource] = None, old_reps: Optional[np.ndarray] = None,
           old_similarity: Optional[np.ndarray] = None, ids_ahead: Optional[Future] = None,
           cut: Optional[tuple] = None, purity: Optional[dict] = None) -> BuildResult:
    """Cut the linking's components into clusters and make the artifact and the BuildResult.

    ``thresholds``: each document's Jaccard threshold from its source (``source_thresholds``;
    :func:`diversify.staging.doc_thresholds`), which the cut into clusters verifies each pair at and the
    artifact keeps for ``add``. ``source``: the texts at hand, which the cut re-shingles
    for its exact checks (:class:`~diversify.sketches.source.TextSource`), else None. ``add`` only:
    ``raw_cluster``, ``aliases`` and ``old_reps``, the artifact's clusters, and ``old_similarity``
    (float32, one per old document), what the artifact's cut verified, which its documents keep.
    ``cut``: (labels, reps, stage bits, cut counters, similarities) of a cut made elsewhere (the Dask
    engine's workers); ``purity``: its sampled purity."""
    from ..artifact import ClusterMap

    t0 = time.perf_counter()
    flags, stats = linked.flags, linked.stats
    root = component_roots(linked.parent)
    cut_stats: dict = {}  # what the cut into clusters did (build_info["fold"])
    member_sim: Optional[np.ndarray] = None  # each member's verified similarity to its representative
    if cut is not None:
        cluster_ids, rep, flags, cut_stats, member_sim = cut  # cut elsewhere (the Dask engine's workers)
        stored = cluster_ids
    elif cfg.clustering == "components":
        if raw_cluster is None:
            cluster_ids = stored = root
        else:
            cluster_ids, stored, aliases = stable_labels(root, raw_cluster, aliases)
        rep = representatives(cluster_ids, cfg.representative, sk.lengths, sk.keys)
    else:
        cluster_ids, rep, flags, cut_stats, member_sim = _cut(root, sk, cfg, flags, linked.memo, thresholds, source,
                                                                 raw_cluster, aliases, old_reps, old_similarity)
        stored = cluster_ids
    timings["cluster"] = time.perf_counter() - t0
    # the per-document state: kept in the artifact for `add` (incremental), read by the report either way
    state = incremental_extras(sk, thresholds)
    extras: dict = dict(state) if cfg.incremental else {}
    if member_sim is not None:  # what the cut verified, for `stats` and `eval`
        extras["fold_similarity"] = member_sim
    if aliases.size:
        extras["aliases"] = aliases
    n_clusters = int(unique_sorted(cluster_ids).size)
    # no wall-clock timings in the artifact: same input, config and seed => same bytes
    build_info = make_build_info(sk.n, n_clusters, int(sk.empty.sum()) if sk.has_text else 0, stats, cut_stats,
                                 purity if purity is not None else sampled_purity(cluster_ids, sk, cfg, thresholds,
                                                                                   source))
    cmap = ClusterMap.from_arrays(
        sk.ids if ids_ahead is None else ids_ahead.result(),
        stored,
        rep,
        flags,
        sk.lengths,
        config=cfg.model_dump(mode="json"),
        fingerprint=fingerprint(cfg),
        seed=cfg.seed,
        hash_scheme=HASH_SCHEME,
        build_info=build_info,
        metadata=dict(metadata) if metadata else None,
        created_at=created_at,
        extras=extras,
    )
    stats_dict = build_stats(stats)
    config_json = cfg.model_dump(mode="json")
    report = cluster_report(cluster_ids, rep, config_json, {**state, **extras})
    report["purity"] = build_info["purity"]
    notes = outcome_warnings(report)
    _log_build(cfg, config_json, build_info, report, fingerprint(cfg))
    for note in notes:
        warnings.warn(note, DiversifyWarning, stacklevel=3)
    return BuildResult(cluster_map=cmap, cluster_ids=cluster_ids, is_representative=rep, doc_stages=flags,
                       timings=timings, stats=stats_dict, report=report, warnings=notes)


def make_build_info(n_docs: int, n_clusters: int, n_empty: int, stats: LinkStats, cut_stats: dict,
                    purity: dict) -> dict:
    """The artifact's ``build_info``: counts, the stages' counters, the cut's counters, the purity."""
    build_info = {
        "n_docs": n_docs,
        "n_clusters": n_clusters,
        "n_empty": n_empty,
        "candidates": stats.candidates,
        "verified": stats.verified,
        "merged": stats.merged,
        "lsh": stats.lsh,
        "exact_checks": stats.exact_checks,
        "stages": {str(k): v for k, v in STAGE_NAMES.items()},
    }
    if cut_stats:
        build_info["fold"] = cut_stats
    build_info["purity"] = purity
    return build_info


def _log_build(cfg: BuildConfig, config: dict, build_info: dict, report: dict, fp: str) -> None:
    """One INFO record per build with what a production log needs; DEBUG with the config."""
    sim = report.get("member_similarity") or {}
    log.info("built %d documents into %d clusters (%d folded, %.1f%%); candidates %s, merged %s; largest cluster "
             "%.2f%% of the corpus; member similarity to representative min %s median %s; clustering=%s seed=%d "
             "fingerprint=%s", report["documents"], report["clusters"], report["folded"],
             100 * report["folded_share"], build_info["candidates"], build_info["merged"],
             100 * report["largest_share"], f"{sim['min']:.3f}" if sim else "n/a",
             f"{sim['median']:.3f}" if sim else "n/a", cfg.clustering, cfg.seed, fp)
    log.debug("config %s", config)


def _cut(root, sk: Sketches, cfg: BuildConfig, flags: np.ndarray, memo: ExactMemo,
                thresholds: Optional[np.ndarray], source: Optional[TextSource], raw_cluster, aliases, old_reps,
                old_sim: Optional[np.ndarray]):
    """Labels, representatives and stage bits of the cut the config names (diversify.clusters.cut_clusters)."""
    rank = priority_rank(cfg.representative, sk.lengths, sk.keys)
    if raw_cluster is None:
        labels, rep, bits, fstats = cut_clusters(cfg.clustering, root, sk, cfg, rank, memo=memo,
                                                 thresholds=thresholds, source=source)
    else:
        amap = {int(a): int(b) for a, b in aliases}
        old = np.array([follow_alias(amap, int(c)) for c in raw_cluster], dtype=np.int64)
        n_old = old.size
        labels, rep, bits, fstats = cut_clusters(cfg.clustering, root, sk, cfg, rank, memo=memo, thresholds=thresholds,
                                                 source=source, n_old=n_old, old_labels=old, old_reps=old_reps,
                                                       old_flags=flags[:n_old])
    sim = fstats.similarity.astype(np.float32)
    if old_sim is not None:  # add: old documents keep what their build verified
        keep = np.isnan(sim[: old_sim.size])
        sim[: old_sim.size][keep] = old_sim[keep]
    sim[rep] = 1.0
    return labels, rep, bits, fstats.as_dict(), sim


