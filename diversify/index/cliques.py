"""The live index under ``clustering="clique"``: stored clusters are compared whole, and deletes keep them.

Only representatives have band rows, so a new batch finds the stored clusters it may join through
their representatives (:meth:`diversify.index.Index._reps_near`). Under ``"star"`` that is all the
assignment needs: a new document joins a representative it is verified similar to. Under
``"clique"`` a stored cluster takes a new document only when it is verified similar to EVERY
member, so :func:`with_members` loads every live member of the candidate clusters too (the
representatives first, at positions ``0..len(rows) - 1``, then the other members), each labelled
with its representative's position (:class:`StoredClusters`). That costs, per ``add`` (and per
re-assignment after a delete), one read of the candidate clusters' rows: linear in the size of the
clusters the batch touches. The payloads read, and the checks, are those of the members the metric
bound does not vouch for (:func:`_needed`); docs/index.md, "Cost of clique".

:func:`keep_cliques` is the delete side: removing a representative leaves a clique, so its remaining
members stay one cluster with the same id; the first of them by the representative rule
(:func:`diversify.clusters.priority_rank`) represents it, and every other member's stored similarity
and stage bits are re-verified against it with :class:`diversify.clusters.similarity.Similarity`.
A member that does not verify (the MinHash estimate's noise, where no exact sets are stored) is
returned for the index's ordinary re-assignment.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..clusters.similarity import FoldStats, Similarity, priority_rank
from ..config import BuildConfig
from ..stages import STAGE_EXACT, STAGE_MINHASH
from ..text import exact_jaccard
from .payload import Docs, Layout, band_rows, concat, decode
from .storage import Assignment, DocRow, Transaction, View

__all__ = ["PROMISES", "StoredClusters", "with_members", "clique_hits", "keep_cliques", "unverified_pairs"]

#: other members a stored cluster has from which :func:`_needed` certifies members by the metric
#: bound instead of loading them all (below, loading them costs less than checking the batch)
CERTIFY_FROM = 64

#: what an index's clusters promise, by its ``clustering`` (``Index.stats()["promise"]``)
PROMISES = {
    "clique": "every two members of a cluster are verified similar",
    "star": "every member of a cluster is verified similar to its representative",
}


@dataclass(frozen=True)
class StoredClusters:
    """The stored documents :func:`diversify.index.assign.assign` starts from (local positions)."""

    #: int64 (n_old,): the position of each stored document's representative
    labels: np.ndarray
    #: bool (n_old,): whether it is its cluster's representative
    reps: np.ndarray


def with_members(view: View, rows: list[DocRow], old: Docs, new: Docs, cfg: BuildConfig, layout: Layout,
                 url: str, skip: frozenset = frozenset()) -> tuple[list[DocRow], Docs, Optional[StoredClusters]]:
    """``rows``/``old`` (the candidate representatives and their sketches) followed, under
    ``clustering="clique"``, by the other live members of their clusters that ``new`` has to be
    checked against (:func:`_needed`), in cluster order then seq (``skip``: seqs to leave out,
    documents being re-assigned), and the stored clusters; under ``"star"`` they are returned as
    they are, with None (each its own cluster). ``rows[label]`` stays the representative of label
    ``label``."""
    if cfg.clustering != "clique":
        return rows, old, None
    n_reps = len(rows)
    pos = {r.cluster: i for i, r in enumerate(rows)}
    have = {r.seq for r in rows}
    listed = view.docs_in_clusters(list(pos), payload=False) if rows else []
    listed = [m for m in listed if m.seq not in have and m.seq not in skip and m.cluster in pos]
    seqs = sorted(_needed(listed, pos, old, new, cfg, layout))
    extra = view.docs_by_seq(seqs) if seqs else []
    extra = [m for m in extra if m.cluster in pos]  # (a backend without snapshots may have moved one)
    extra.sort(key=lambda m: (pos[m.cluster], m.seq))
    labels = np.concatenate([np.arange(n_reps, dtype=np.int64),
                             np.array([pos[m.cluster] for m in extra], dtype=np.int64)])
    reps = np.zeros(labels.size, dtype=bool)
    reps[:n_reps] = True
    if extra:
        old = concat(old, decode([m.payload for m in extra], cfg, layout, url))
    return rows + extra, old, StoredClusters(labels, reps)


def _needed(listed: list[DocRow], pos: dict[int, int], old: Docs, new: Docs, cfg: BuildConfig,
            layout: Layout) -> list[int]:
    """The seqs of the members (``listed``, without payloads) that a new document could fail, by
    the metric bound: Jaccard distance obeys the triangle inequality, so a member ``m`` whose stored
    exact Jaccard to its representative ``r`` is ``s_m`` is within the threshold of every new ``x``
    with ``(1 - J(x, r)) + (1 - s_m) <= 1 - t`` (``t`` the strictest threshold), and a new document
    not similar to ``r`` joins no cluster of ``r``. So for a cluster of at least :data:`CERTIFY_FROM`
    other members, ``r`` is checked against the whole batch and only the members the bound does not
    certify for the least similar ``x`` are loaded (none when no ``x`` is similar to ``r``). Only
    where the stored similarities are exact Jaccards (the shingle sets are stored: ``verify="auto"``
    or ``"exact"``) and only for members folded by the exact hash or MinHash stage."""
    by_rep: dict[int, list[DocRow]] = {}
    for m in listed:
        by_rep.setdefault(pos[m.cluster], []).append(m)
    mc = cfg.minhash
    if mc is None or not layout.shingles or mc.verify not in ("auto", "exact") or new.sketches.minhash is None:
        return [m.seq for m in listed]
    big = [p for p, ms in by_rep.items() if len(ms) >= CERTIFY_FROM]
    if not big:
        return [m.seq for m in listed]
    radius = 1.0 - max([mc.threshold, *(cfg.source_thresholds or {}).values()]) - 1e-9
    both = concat(old, new)
    if both.sketches.sets32 is None:  # (the batch's sets are attached whenever the index stores them)
        return [m.seq for m in listed]
    sim = Similarity(both.sketches, cfg, FoldStats(), both.thresholds, both.source)
    batch = np.arange(old.n, both.n, dtype=np.int64)
    out = [m.seq for p, ms in by_rep.items() if len(ms) < CERTIFY_FROM for m in ms]
    for p in big:
        bits = sim(p, batch)
        hit = bits != 0
        if not hit.any():
            continue  # no new document can join this cluster: none of its members is needed
        if not np.isin(bits[hit], (STAGE_EXACT, STAGE_MINHASH)).all():
            out += [m.seq for m in by_rep[p]]
            continue
        near = 1.0 - float(np.min(sim.last_similarity[hit]))  # the farthest new document from r
        out += [m.seq for m in by_rep[p] if m.stages not in (STAGE_EXACT, STAGE_MINHASH)
                or near + (1.0 - m.similarity) > radius]
    return out


def clique_hits(storage, rows: list[DocRow], new: Docs, cfg: BuildConfig, layout: Layout, url: str,
                found: list[list[tuple[int, int, float]]]) -> list[list[tuple[int, int, float]]]:
    """``query`` under ``clustering="clique"``: of each queried document's hits (representatives it
    is verified similar to, positions in ``rows``), keep those whose every member it is verified
    similar to too, the clusters ``add`` would let it join (members read as :func:`with_members`
    reads them, in a read of their own)."""
    if cfg.clustering != "clique" or not any(found):
        return found
    hit = sorted({p for hits in found for p, _, _ in hits})
    reps = [rows[p] for p in hit]
    with storage.read() as view:
        _, old, stored = with_members(view, reps, decode([r.payload for r in reps], cfg, layout, url), new, cfg,
                                      layout, url)
    assert stored is not None
    n_reps = len(reps)
    if old.n == n_reps:  # every cluster hit is its representative alone, or vouched for by the bound
        return found
    both = concat(old, new)
    sim = Similarity(both.sketches, cfg, FoldStats(), both.thresholds, both.source)
    members_of = {p: n_reps + np.flatnonzero(stored.labels[n_reps:] == i) for i, p in enumerate(hit)}
    return [[(p, b, s) for p, b, s in hits if not members_of[p].size or (sim(old.n + q, members_of[p]) != 0).all()]
            for q, hits in enumerate(found)]


def keep_cliques(tx: Transaction, cfg: BuildConfig, layout: Layout, url: str,
                 orphans: list[DocRow]) -> tuple[list[DocRow], set[int]]:
    """Re-choose the representative of each cluster whose representative was deleted (``orphans``:
    its remaining members) and re-verify the members against it; write the changes and the new
    representatives' band rows. Returns (the members that did not verify, in seq order, for the
    ordinary re-assignment; the cluster ids kept)."""
    by_cluster: dict[int, list[DocRow]] = {}
    for r in sorted(orphans, key=lambda r: r.seq):
        by_cluster.setdefault(r.cluster, []).append(r)
    changes: list[Assignment] = []
    left: list[DocRow] = []
    band_keys: list[np.ndarray] = []
    band_seqs: list[np.ndarray] = []
    for cluster in sorted(by_cluster):
        group = by_cluster[cluster]
        docs = decode([r.payload for r in group], cfg, layout, url)
        sk = docs.sketches
        rank = priority_rank(cfg.representative, sk.lengths, sk.keys)  # ties: the earlier seq
        rep = int(np.argmin(rank))
        others = np.array([j for j in range(len(group)) if j != rep], dtype=np.int64)
        changes.append(Assignment(seq=group[rep].seq, cluster=cluster, is_rep=True, similarity=1.0, stages=0))
        if others.size:
            sim = Similarity(sk, cfg, FoldStats(), docs.thresholds)
            bits = sim(rep, others)
            vals = sim.last_similarity
            for j, b, v in zip(others.tolist(), bits.tolist(), vals.tolist()):
                if b:
                    changes.append(Assignment(seq=group[j].seq, cluster=cluster, is_rep=False, similarity=float(v),
                                              stages=int(b)))
                else:
                    left.append(group[j])
        _, keys = band_rows(sk, np.array([rep], dtype=np.int64), cfg)
        band_keys.append(keys)
        band_seqs.append(np.full(keys.size, group[rep].seq, dtype=np.int64))
    tx.update_docs(changes)
    if band_keys and sum(k.size for k in band_keys):
        tx.insert_bands(np.concatenate(band_keys), np.concatenate(band_seqs))
    left.sort(key=lambda r: r.seq)
    return left, set(by_cluster)


def unverified_pairs(sim: Similarity, layout: Layout, members: np.ndarray, stored_sim: np.ndarray,
                     stored_stages: np.ndarray, limit: int = 5) -> list[tuple[int, int]]:
    """``Index.check()`` under ``clustering="clique"``: up to ``limit`` pairs of ``members`` (a
    cluster's members other than its representative, positions in ``sim.sk``) not verified similar
    to each other. A pair the metric bound vouches for through the representative (both folded by
    the exact-hash or MinHash stage with exact stored Jaccards ``s_a``, ``s_b`` and ``(1 - s_a) +
    (1 - s_b) <= 1 - t``) needs no check, so a family of near-copies costs no pair check; the others
    are checked by the verification, and one it rejects passes when the exact Jaccard of the stored
    shingle sets reaches the pair's threshold (a pair the cut certified by the bound)."""
    sk, cfg = sim.sk, sim.cfg
    mc = cfg.minhash
    exact_sims = mc is not None and layout.shingles and mc.verify in ("auto", "exact") and sk.sets32 is not None
    radius = -1.0
    if exact_sims:
        assert mc is not None
        radius = 1.0 - max([mc.threshold, *(cfg.source_thresholds or {}).values()]) - 1e-9
    dist = 1.0 - stored_sim[members]
    kind_ok = np.isin(stored_stages[members], (STAGE_EXACT, STAGE_MINHASH)) & exact_sims
    order = np.lexsort((dist, ~kind_ok))  # vouchable members first, nearest first
    members, dist, kind_ok = members[order], dist[order], kind_ok[order]
    n_ok = int(kind_ok.sum())
    out: list[tuple[int, int]] = []
    for i in range(members.size - 1):
        # partners after i that the bound vouches for: a prefix of the vouchable ones
        vouched = int(np.searchsorted(dist[:n_ok], radius - dist[i], side="right")) if kind_ok[i] else 0
        rest = members[max(i + 1, vouched):]
        if not rest.size:
            continue
        a = int(members[i])
        bad = rest[sim(a, rest) == 0]
        if bad.size and exact_sims:
            assert sk.sets32 is not None and sk.sets32_indptr is not None
            lo, _, t = sim.bounds(a, bad)
            sets, ptr = sk.sets32, sk.sets32_indptr
            jac = np.array([exact_jaccard(sets[ptr[a]: ptr[a + 1]], sets[ptr[b]: ptr[b + 1]]) for b in bad.tolist()])
            bad = bad[jac < t]
        out += [(a, int(b)) for b in bad.tolist()]
        if len(out) >= limit:
            return out[:limit]
    return out
