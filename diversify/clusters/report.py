"""What a cluster is: folded share, member-to-representative similarity, suspicious clusters.

Computed from the signatures a build has (or an incremental artifact keeps), so ``build``,
``diversify stats`` and ``BuildResult.report`` say the same thing.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from .._spill import drop_pages

__all__ = ["fold_similarity", "cluster_report", "outcome_warnings"]

#: signature rows compared at a time
_ROWS = 65536


def fold_similarity(cluster_ids: np.ndarray, is_rep: np.ndarray, config: dict, extras: dict) -> Optional[np.ndarray]:
    """Similarity of every document to its cluster's representative, float64 (n,).

    What the fold check verified (``fold_similarity``, exact where it checked exactly) when the
    artifact records it; otherwise estimated from the signatures an incremental artifact keeps: the MinHash agreement rate (Jaccard
    estimate) where the text stage ran, else the cosine of the stored vectors; 1.0 for a
    representative and for an exact copy of it. None when the artifact keeps no signatures.
    """
    n = cluster_ids.size
    reps = np.flatnonzero(is_rep)
    rep_index = representative_of(np.asarray(cluster_ids), reps)
    if (rep_index < 0).any():
        return None
    verified = extras.get("fold_similarity")
    if verified is not None and np.asarray(verified).shape == (n,):
        v = np.asarray(verified, dtype=np.float64)
        if not np.isnan(v).any():
            return v
    sim = np.full(n, np.nan)
    sim[reps] = 1.0
    sigs = extras.get("minhash")
    if sigs is not None and sigs.shape[0] == n:
        sigs = np.asarray(sigs)
        sim = np.empty(n, dtype=np.float64)
        for lo in range(0, n, _ROWS):  # a block of rows at a time: not an (n, num_perm) comparison
            sim[lo: lo + _ROWS] = (sigs[lo: lo + _ROWS] == sigs[rep_index[lo: lo + _ROWS]]).mean(axis=1)
            drop_pages(sigs)  # signatures read through a file mapping (a spilled build): given back
        exact = extras.get("exact_hash")
        if exact is not None:
            exact = np.asarray(exact)
            sim[exact == exact[rep_index]] = 1.0
    vecs = extras.get("vectors")
    if vecs is not None and np.asarray(vecs).shape[0] == n:
        v = np.asarray(vecs, dtype=np.float64)
        cos = np.einsum("ij,ij->i", v, v[rep_index])
        if sigs is None:
            sim = cos
    if np.isnan(sim).any():
        return None
    sim[reps] = 1.0
    return sim


def representative_of(cluster_ids: np.ndarray, reps: np.ndarray) -> np.ndarray:
    """int64 (n,): the representative (a position in ``reps``' terms: a document) of each document's
    cluster, -1 where its cluster has none; of two representatives of one cluster, the later.
    By sorting, not a dict per document (a Python step per document, slow at scale)."""
    n = cluster_ids.size
    if reps.size == 0:
        return np.full(n, -1, dtype=np.int64)
    rc = cluster_ids[reps]
    order = np.argsort(rc, kind="stable")
    rc_sorted, rep_sorted = rc[order], reps[order]
    if int(cluster_ids.min()) >= 0 and int(cluster_ids.max()) < 4 * n + 16:  # ids are positions: a table
        last = np.ones(rc_sorted.size, dtype=bool)
        last[:-1] = rc_sorted[1:] != rc_sorted[:-1]
        table = np.full(int(cluster_ids.max()) + 1, -1, dtype=np.int64)
        table[rc_sorted[last]] = rep_sorted[last]
        return table[cluster_ids]
    at = np.searchsorted(rc_sorted, cluster_ids, side="right") - 1
    hit = (at >= 0) & (rc_sorted[np.maximum(at, 0)] == cluster_ids)
    return np.where(hit, rep_sorted[np.maximum(at, 0)], -1).astype(np.int64)


def cluster_report(cluster_ids: np.ndarray, is_rep: np.ndarray, config: dict, extras: dict, *, top: int = 10) -> dict:
    """Per corpus and per large cluster: size, share folded, similarity of members to the
    representative (min / median), and suspicious clusters (a member below the threshold, or one
    cluster holding more than 1% of the corpus)."""
    n = cluster_ids.size
    sim = fold_similarity(cluster_ids, is_rep, config, extras)
    threshold = (config.get("minhash") or {}).get("threshold") or (config.get("simhash") or {}).get("threshold")
    cids, inv, sizes = np.unique(cluster_ids, return_inverse=True, return_counts=True)
    folded = int(n - cids.size)
    out: dict = {"documents": n, "clusters": int(cids.size), "folded": folded, "folded_share": folded / max(1, n),
                 "largest_share": float(sizes.max() / max(1, n)) if n else 0.0, "threshold": threshold,
                 "similarity_known": sim is not None,
                 "similarity_source": "verified" if extras.get("fold_similarity") is not None else "estimated"}
    members = ~is_rep
    if sim is not None and members.any():
        out["member_similarity"] = {"min": float(sim[members].min()), "median": float(np.median(sim[members]))}
        out["members_below_threshold"] = int((sim[members] < (threshold or 0)).sum()) if threshold else 0
    rows = []
    for j in np.argsort(-sizes, kind="stable")[:top]:
        if sizes[j] < 2:
            break
        m = (inv == j) & members
        row: dict = {"cluster_id": int(cids[j]), "size": int(sizes[j]), "share": float(sizes[j] / n)}
        if sim is not None:
            row["min_similarity"] = float(sim[m].min())
            row["median_similarity"] = float(np.median(sim[m]))
        flags = []
        if _giant(int(sizes[j]), n):
            flags.append("holds more than 1% of the corpus")
        if sim is not None and threshold and row["min_similarity"] < threshold:
            flags.append(f"a member is estimated below the threshold {threshold}")
        row["suspicious"] = flags
        rows.append(row)
    out["largest"] = rows
    return out


#: a cluster is flagged when it holds more than this share of the corpus and at least GIANT_MIN documents
GIANT_SHARE = 0.01
GIANT_MIN = 100


def _giant(size: int, n: int) -> bool:
    """More than 1% of the corpus, and 100+ documents (on a small corpus 1% is a handful of copies)."""
    return size > GIANT_SHARE * n and size >= GIANT_MIN


def outcome_warnings(report: dict) -> list[str]:
    """Plain-language warnings about a build's outcome (empty when nothing looks wrong)."""
    out = []
    n = report["documents"]
    if report["largest"] and _giant(report["largest"][0]["size"], n):
        out.append(f"one cluster holds {report['largest_share']:.1%} of the corpus ({report['largest'][0]['size']:,} "
                   "documents): check it (`diversify stats`); boilerplate pages or a too-low threshold do this")
    if n >= 20 and report["folded_share"] > 0.5:
        out.append(f"{report['folded_share']:.0%} of the documents would be folded away: is the threshold too low?")
    return out
