"""``Index.check()``: the invariants of a live index, verified from what is stored.

1. every cluster has exactly one representative;
2. every member is verified similar to its representative (the fold guarantee), by the same
   verification as the build (:class:`diversify.clusters.similarity.Similarity`) on the stored
   sketches; a borderline pair that ``add`` decided by exact Jaccard (both texts were in one batch)
   passes when its stored similarity (that exact Jaccard) reaches the threshold and its estimate is
   within the borderline band;
3. the band rows are exactly the band keys of the representatives (none missing, none extra, none
   of a deleted document);
4. the counters are ahead of every stored seq and cluster id; ids are unique (the backend's key);
5. every payload decodes under the index's config and layout.

Reads one snapshot (:meth:`Storage.read`); on a big index this reads everything, like ``export``.
"""

from __future__ import annotations

import numpy as np

from .._arrays import unique_sorted
from ..clusters.similarity import FoldStats, Similarity
from ..stages import STAGE_MINHASH
from .payload import Layout, band_rows, decode

__all__ = ["check"]



def check(index) -> list[str]:
    """The problems found (empty when the index is consistent)."""
    cfg = index.config
    rows = []
    with index.storage.read() as view:
        st = view.state()
        rows.extend(view.rows())
        counts = view.counts()
        layout = Layout.loads(st.layout, index.url)
        problems: list[str] = []
        if not rows:
            if counts.band_rows:
                problems.append(f"{counts.band_rows} band rows in an index without documents")
            return problems
        if layout is None:
            return ["documents are stored but the layout is unset"]
        docs = decode([r.payload for r in rows], cfg, layout, index.url)
        sk = docs.sketches
        owner, keys = band_rows(sk, np.flatnonzero([r.is_rep for r in rows]), cfg)
        want = set(zip(keys.tolist(), (np.array([r.seq for r in rows], dtype=np.int64)[owner]).tolist()))
        ck, cs = view.candidates(unique_sorted(keys)) if keys.size else (np.zeros(0, np.int64), np.zeros(0, np.int64))
        have = set(zip(ck.tolist(), cs.tolist()))
    if len(have) != counts.band_rows or have != want:
        missing, extra = len(want - have), counts.band_rows - len(have & want)
        problems.append(f"band rows differ from the representatives' band keys: {missing} missing, {extra} extra")
    seqs = np.array([r.seq for r in rows], dtype=np.int64)
    if st.next_seq <= int(seqs.max()):
        problems.append(f"next_seq {st.next_seq} is not above the largest seq {int(seqs.max())}")
    clusters = np.array([r.cluster for r in rows], dtype=np.int64)
    if st.next_cluster <= int(clusters.max()):
        problems.append(f"next_cluster {st.next_cluster} is not above the largest cluster id {int(clusters.max())}")
    if len({r.id for r in rows}) != len(rows):
        problems.append("an id is stored twice")
    reps: dict[int, list[int]] = {}
    for i, r in enumerate(rows):
        if r.is_rep:
            reps.setdefault(r.cluster, []).append(i)
    for c in unique_sorted(clusters).tolist():
        if len(reps.get(c, [])) != 1:
            problems.append(f"cluster {c} has {len(reps.get(c, []))} representatives")
    sim = Similarity(sk, cfg, FoldStats(), docs.thresholds)
    stored_sim = np.array([r.similarity for r in rows], dtype=np.float64)
    stored_stages = np.array([r.stages for r in rows], dtype=np.int64)
    is_rep = np.array([r.is_rep for r in rows], dtype=bool)
    folded = np.flatnonzero(~is_rep)
    order = folded[np.argsort(clusters[folded], kind="stable")]  # members grouped by cluster, once
    starts = np.searchsorted(clusters[order], np.array(sorted(reps), dtype=np.int64), side="left")
    ends = np.searchsorted(clusters[order], np.array(sorted(reps), dtype=np.int64), side="right")
    for c, first, last in zip(sorted(reps), starts.tolist(), ends.tolist()):
        who = reps[c]
        if len(who) != 1:
            continue
        members = order[first:last]
        if members.size:
            ok = sim(who[0], members) != 0
            if cfg.minhash is not None and sk.minhash is not None and not ok.all():
                # a borderline pair decided by exact Jaccard when both texts were at hand (one batch,
                # verify="auto"): its stored similarity is that exact Jaccard, and the estimate lies in
                # the borderline band; the texts are not stored, so that is what can be checked
                agree = (sk.minhash[members] == sk.minhash[who[0]]).sum(axis=1)
                lo, _, t = sim.bounds(who[0], members)  # with per-source thresholds: each pair's stricter one
                exact_ok = ((stored_stages[members] & STAGE_MINHASH) != 0) & (stored_sim[members] >= t) & (agree >= lo)
                ok |= exact_ok
            bad = members[~ok]
            for b in bad[:5].tolist():
                problems.append(f"document {rows[b].id!r} is in cluster {c} but not verified similar to its "
                                f"representative {rows[who[0]].id!r}")
    return problems
