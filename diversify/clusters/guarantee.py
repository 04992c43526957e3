"""``clustering="star"``: every document folded under a representative is verified similar to it.

Connected components of verified edges chain: A~B and B~C put A with C whatever J(A, C) is, so a
component of ``... list`` reference pages can hold pages that are 0.5 similar. Under the default
``clustering="guaranteed"`` each component is cut into clusters around representatives:

1. the component's members are ordered by the representative rule (``longest`` / ``first`` /
   ``key``; ties by position), and
2. the first unassigned member becomes a representative and takes every unassigned member that is
   verified similar *to it* (the same verification as the edges: exact hash, MinHash estimate or
   exact Jaccard, text SimHash, vector cosine); repeat until every member is assigned.

So "N very similar results omitted" is true of every fold: each member is threshold-similar to its
representative (and, for Jaccard, any two members of one cluster are within Jaccard distance
2(1-t) of each other). The same greedy run one document at a time in priority order gives the same
clusters, which is how ``add`` assigns new documents: existing representatives first, then new ones.

``clustering="components"`` keeps plain transitive components (the union-find clusters).

The greedy runs in one kernel per batch of components (:mod:`diversify._kernels.fold`) for the
text stages (unless it is not compiled yet and the components are too few to pay for compiling
it); with embeddings (the cosine stage), in the numpy path below, which is also the kernel's
reference in the tests. Both give the same bits.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Optional

import numpy as np

from .._spill import HeldRows
from ..config import BuildConfig
from ..sketches.batch import Sketches
from ..sketches.memo import ExactMemo
from ..sketches.source import TextSource
from ..stages import STAGE_EXACT, STAGE_MINHASH, STAGE_SIMHASH, STAGE_TEXT_SIMHASH
from ..staging import agreement_bounds
from .similarity import FoldStats, Similarity, priority_rank

__all__ = ["FoldStats", "Similarity", "priority_rank", "guaranteed_clusters", "run_batches"]

#: documents whose shingle sets are held at once for the fold check's exact comparisons
_PREFETCH_DOCS = 4096
#: run every stage through the numpy reference path (tests compare it with the kernel path)
_REFERENCE = False
#: components from which the kernel is worth compiling (seconds, once per install) when it is not
#: compiled yet; below, the numpy path takes a fraction of that. A compiled kernel is always used.
_KERNEL_FROM = 1024
#: the same bound while the console script's helper (:mod:`diversify.engines.ahead`) is compiling
#: the kernel into the cache: the numpy path then runs up to this many components instead of the
#: command compiling the same kernel a second time on the same cores, and the command waits for the
#: helper at its end (so the next build finds the kernel)
_KERNEL_FROM_WHILE_AHEAD = 16384


def guaranteed_clusters(root: np.ndarray, sk: Sketches, cfg: BuildConfig, rank: np.ndarray, *,
                        memo: Optional[ExactMemo] = None, thresholds: Optional[np.ndarray] = None,
                        source: Optional[TextSource] = None, n_old: int = 0, old_labels: Optional[np.ndarray] = None,
                        old_reps: Optional[np.ndarray] = None,
                        old_flags: Optional[np.ndarray] = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, FoldStats]:
    """Cut components into clusters around representatives. Returns (labels, representative mask,
    stage bits per document, stats).

    ``root`` is each document's component (its smallest member). For an incremental ``add`` the
    first ``n_old`` documents keep ``old_labels``, ``old_reps`` and ``old_flags``; new documents join
    an existing representative of their component first (in representative order), then form new
    clusters among themselves. A cluster's label is its smallest member's index. ``memo``: the
    exact Jaccard of the pairs the linking checked (:class:`diversify.linking.link.Linked`), which
    the fold check takes instead of re-shingling their documents. ``thresholds``: each document's
    Jaccard threshold (``source_thresholds``; a pair meets the stricter of its two), else None.
    ``source``: the texts at hand, re-shingled for the exact checks, else None.
    """
    n = root.size
    stats, sim, labels, reps, flags, members, bounds = cut_setup(root, sk, cfg, rank, thresholds, source,
                                                                 n_old, old_labels, old_reps, old_flags)
    if sim.ham is None and not _REFERENCE and _kernel_pays(bounds.size - 1):
        # every stage has a kernel path: one kernel call per batch of components
        _fold_kernel(members, bounds, n_old, sim, labels, reps, flags, stats, memo or ExactMemo(n))
    else:  # vector SimHash (cosine of float vectors): the numpy reference path
        groups = [members[a:b] for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist())]
        for lo, hi in _batches(bounds):
            sim.prefetch(members[bounds[lo]: bounds[hi]])
            for members in groups[lo:hi]:
                _cut_component(members, n_old, sim, labels, reps, flags, stats)
        sim.prefetch(np.zeros(0, dtype=np.int64))
    stats.similarity = sim.similarity
    return labels, reps, flags, stats


def cut_setup(root: np.ndarray, sk: Sketches, cfg: BuildConfig, rank: np.ndarray,
              thresholds: Optional[np.ndarray], source: Optional[TextSource], n_old: int,
              old_labels: Optional[np.ndarray], old_reps: Optional[np.ndarray], old_flags: Optional[np.ndarray]):
    """What both cuts start from: fresh stats and their :class:`Similarity`, every document its own
    cluster (the first ``n_old`` keep their stored label, representative flag and stage bits), and
    the documents of each multi-member component in (component, rank) order.

    Returns ``(stats, sim, labels, reps, flags, members, bounds)``."""
    n = root.size
    stats = FoldStats()
    sim = Similarity(sk, cfg, stats, thresholds, source)
    labels = np.arange(n, dtype=np.int64)
    reps = np.ones(n, dtype=bool)
    flags = np.zeros(n, dtype=np.uint8)
    if n_old:
        assert old_labels is not None and old_reps is not None and old_flags is not None
        labels[:n_old], reps[:n_old], flags[:n_old] = old_labels, old_reps, old_flags
    order = np.lexsort((rank, root))
    members, bounds = _components(root[order], order, n_old)
    return stats, sim, labels, reps, flags, members, bounds


def _kernel_pays(n_components: int) -> bool:
    from .._kernels._runtime import kernel_ready
    from .._kernels.ahead import defer_to_helper
    from .._kernels.fold import fold_groups

    if kernel_ready(fold_groups):
        return True
    if n_components < _KERNEL_FROM:
        return False
    return n_components >= _KERNEL_FROM_WHILE_AHEAD or not defer_to_helper()


def _components(sroot: np.ndarray, order: np.ndarray, n_old: int) -> tuple[np.ndarray, np.ndarray]:
    """The components the fold check cuts (two or more members, at least one new, ``>= n_old``):
    (members, bounds), component g being ``members[bounds[g]:bounds[g + 1]]`` in ``order``'s order."""
    n = sroot.size
    starts = np.flatnonzero(np.r_[True, sroot[1:] != sroot[:-1]]) if n else np.zeros(0, dtype=np.int64)
    sizes = np.diff(np.r_[starts, n])
    keep = sizes >= 2
    if n_old and starts.size:
        keep &= np.maximum.reduceat(order, starts) >= n_old
    starts, sizes = starts[keep], sizes[keep]
    bounds = np.zeros(starts.size + 1, dtype=np.int64)
    np.cumsum(sizes, out=bounds[1:])
    pos = np.repeat(starts - bounds[:-1], sizes) + np.arange(int(bounds[-1]), dtype=np.int64)
    return order[pos], bounds


def _fold_kernel(members: np.ndarray, bounds: np.ndarray, n_old: int, sim: Similarity, labels: np.ndarray,
                 reps: np.ndarray, flags: np.ndarray, stats: FoldStats, memo: ExactMemo) -> None:
    """The greedy of :func:`_cut_component` for every component, in :func:`fold_groups` (the
    exact hash, MinHash and text SimHash stages; same decisions, similarities and counts)."""
    from .._kernels.fold import FoldState, fold_groups

    n = sim.sk.n
    fold_bit = np.zeros(n, dtype=np.uint8)
    state = FoldState(labels, reps, flags, fold_bit, sim.similarity, np.zeros(6, dtype=np.int64))
    width = int(np.diff(bounds).max()) if bounds.size > 1 else 0
    todo, got = np.empty(width, dtype=np.int64), np.empty(width, dtype=np.int64)

    def call(rule, bnds: np.ndarray) -> None:
        fold_groups(members, bnds, n_old, rule, state, todo, got)

    run_batches(members, bounds, sim, memo, call)
    c = state.counters.tolist()
    stats.pairs_checked += c[0]
    stats.exact_checks += c[1]
    stats.components_cut += c[2]
    for name, k in (("exact", c[3]), ("minhash", c[4]), ("text_simhash", c[5])):
        if k:
            stats.by_stage[name] = stats.by_stage.get(name, 0) + k
    hamming = fold_bit == STAGE_TEXT_SIMHASH
    if hamming.any():
        sim.similarity[hamming] = np.cos(np.pi * sim.similarity[hamming] / 64)


def run_batches(members: np.ndarray, bounds: np.ndarray, sim: Similarity, memo: ExactMemo, call) -> None:
    """Run a cut kernel over the components in batches of at most ``_PREFETCH_DOCS`` members:
    ``call(rule, bounds_of_batch)`` with the :class:`diversify._kernels.fold.FoldRule` of the batch,
    whose shingle sets (texts re-shingled batch by batch) and held signatures (a spilled build) are
    those of the batch's members."""
    from .._kernels.linking import ShingleRows

    sk, cfg = sim.sk, sim.cfg
    n = sk.n
    mc = cfg.minhash
    use_minhash = mc is not None and sk.minhash is not None
    rule, prefetch = _fold_rule(sim)
    rows = rule.rows  # the row of each document in rule.sets (-1: none), filled batch by batch
    # signatures on disk (diversify._spill): the members' are read back, a group of batches at a time
    held = HeldRows(sk.minhash, sk.spill) if use_minhash and sk.spill is not None and sk.minhash is not None else None
    ranges = list(_batches(bounds))
    batch_docs = [np.zeros(0, dtype=np.int64)] * len(ranges)
    batch_rows: list = []  # per batch: which of its documents are shingled, and each one's row
    shingled: Iterator = iter(())
    if prefetch:  # the documents each batch may check exactly, shingled batch by batch (texts read ahead)
        from ..sketches.source import reshingled

        keys, vals = memo.known()
        rule = rule._replace(known_keys=keys, known_vals=vals)
        # a component of two whose pair the linking checked exactly needs neither set
        pairs = np.flatnonzero(np.diff(bounds) == 2)
        a, b = members[bounds[pairs]], members[bounds[pairs] + 1]
        known = np.isin(memo.pair_keys(a, b), keys)
        skip = np.zeros(n, dtype=bool)
        skip[a[known]] = skip[b[known]] = True
        source = sim.source
        assert source is not None and mc is not None
        for b_, (g0, g1) in enumerate(ranges):
            docs = members[bounds[g0]: bounds[g1]]
            batch_docs[b_] = docs[(docs >= source.offset) & sim.text_ok[docs] & ~skip[docs]]
        batch_rows = [_distinct_texts(sk.exact, docs) for docs in batch_docs]
        shingled = reshingled(source, (docs[first].tolist() for docs, (first, _) in zip(batch_docs, batch_rows)
                                       if docs.size), cfg)
    held_to = 0  # the batches before this one have their members' signatures held
    for at, ((g0, g1), docs) in enumerate(zip(ranges, batch_docs)):
        if held is not None and at >= held_to:
            held_to = _held_batches(ranges, bounds, at, held.budget)
            lo_m, hi_m = int(bounds[g0]), int(bounds[ranges[held_to - 1][1]])
            rule = rule._replace(minhash=held.hold(np.sort(members[lo_m:hi_m])), sig_rows=held.sig_rows)
        if docs.size:
            starts, counts, hashes = next(shingled)
            rows[docs] = batch_rows[at][1]
            rule = rule._replace(sets=ShingleRows(starts, counts, hashes))
        call(rule, bounds[g0: g1 + 1])
        rows[docs] = -1
    if held is not None:
        held.release()


def _distinct_texts(exact: np.ndarray, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(positions in ``docs`` of the first document of each exact hash, the row of each document
    among those firsts): copies of one normalized text share its shingle set, so a family of exact
    copies is shingled once, not once per copy (the sets are only read)."""
    if not docs.size:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    _, first, inv = np.unique(exact[docs], return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(order.size, dtype=np.int64)
    rank[order] = np.arange(order.size, dtype=np.int64)
    return first[order].astype(np.int64), rank[inv.reshape(-1)]


def _fold_rule(sim: Similarity):
    """The :class:`diversify._kernels.fold.FoldRule` of :func:`_fold_kernel` (the stages, their
    thresholds, where each document's shingle set is) and whether the members' texts are
    re-shingled batch by batch (``prefetch``)."""
    from .._kernels.fold import BAND, EXACT_ALL, EXACT_WITH_TEXTS, FoldRule
    from .._kernels.linking import ShingleRows

    sk, cfg = sim.sk, sim.cfg
    n = sk.n
    mc = cfg.minhash
    use_minhash = mc is not None and sk.minhash is not None
    ts = cfg.text_simhash if sk.text_simhash is not None else None
    rows = np.full(n, -1, dtype=np.int64)
    sets = ShingleRows(np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(1, np.uint64))
    mode, check_consider, count_exact, prefetch = BAND, False, False, False
    lo = hi = np.zeros(1, np.int64)
    thr = np.ones(1)
    if use_minhash:
        assert mc is not None
        if sim.thresholds is not None:
            thr = np.ascontiguousarray(sim.thresholds, dtype=np.float64)
            lo, hi = agreement_bounds(thr, mc.num_perm, mc.borderline if mc.verify == "auto" else 0.0)
        else:
            lo, hi, thr = np.array([sim.band[0]]), np.array([sim.band[1]]), np.array([mc.threshold], np.float64)
        if sk.sets32 is not None and mc.verify in ("auto", "exact"):  # the live index's stored sets
            assert sk.sets32_indptr is not None
            rows = np.arange(n, dtype=np.int64)
            sets = ShingleRows(sk.sets32_indptr[:-1], np.diff(sk.sets32_indptr), sk.sets32)
            mode, check_consider, count_exact = (EXACT_ALL, False, True) if mc.verify == "exact" else (BAND, True, False)
        elif mc.verify == "exact" and sk.shingle_indptr is not None and sk.shingle_hashes is not None:
            rows = np.arange(n, dtype=np.int64)
            sets = ShingleRows(sk.shingle_indptr[:-1], np.diff(sk.shingle_indptr), sk.shingle_hashes)
            mode = EXACT_ALL
        elif sim.source is not None and mc.verify in ("auto", "exact"):  # re-shingle the texts at hand
            mode = EXACT_WITH_TEXTS if mc.verify == "exact" else BAND
            check_consider = prefetch = True
    return FoldRule(
        text_ok=np.ascontiguousarray(sim.text_ok), use_exact=bool(cfg.exact), exact=np.ascontiguousarray(sk.exact),
        use_minhash=use_minhash,
        minhash=np.ascontiguousarray(sk.minhash) if use_minhash else np.zeros((1, 1), np.uint32),
        sig_rows=np.zeros(0, np.int64),
        per_doc=use_minhash and sim.thresholds is not None, agree_lo=np.ascontiguousarray(lo, dtype=np.int64),
        agree_hi=np.ascontiguousarray(hi, dtype=np.int64), threshold=thr, minhash_mode=mode,
        check_consider=check_consider, count_exact=count_exact, rows=rows, sets=sets,
        use_text_simhash=ts is not None,
        text_simhash=np.ascontiguousarray(sk.text_simhash) if ts is not None else np.zeros(1, np.uint64),
        max_hamming=int(ts.max_hamming) if ts is not None else 0, known_keys=np.zeros(0, np.int64),
        known_vals=np.zeros(0, np.float64)), prefetch


def _held_batches(ranges: list, bounds: np.ndarray, at: int, budget: int) -> int:
    """The end of the run of batches from ``ranges[at]`` whose members number at most ``budget``
    (at least that one batch): those whose signatures a spilled build holds together."""
    end = at + 1
    count = int(bounds[ranges[at][1]] - bounds[ranges[at][0]])
    while end < len(ranges):
        more = int(bounds[ranges[end][1]] - bounds[ranges[end][0]])
        if count + more > budget:
            break
        count += more
        end += 1
    return end


def _batches(bounds: np.ndarray):
    """(first, end) component ranges of at most ``_PREFETCH_DOCS`` members (a larger component is
    a batch of its own): the documents whose shingle sets are held at once."""
    g = bounds.size - 1
    lo = 0
    while lo < g:
        hi = int(np.searchsorted(bounds, bounds[lo] + _PREFETCH_DOCS, side="right")) - 1
        hi = min(max(hi, lo + 1), g)
        yield lo, hi
        lo = hi


def _cut_component(members: np.ndarray, n_old: int, sim: Similarity, labels: np.ndarray, reps: np.ndarray,
                   flags: np.ndarray, stats: FoldStats) -> None:
    """The greedy of the module docstring on one component (members in representative order)."""
    old = members[members < n_old]
    todo = members[members >= n_old]
    for r in old[reps[old]]:  # existing representatives claim first (add)
        if todo.size == 0:
            break
        todo = _claim(int(r), todo, sim, labels, reps, flags, stats)
    n_clusters = 0
    while todo.size:
        r, todo = int(todo[0]), todo[1:]
        n_clusters += 1
        reps[r] = True
        todo = _claim(r, todo, sim, labels, reps, flags, stats, new_rep=True)
    if n_old == 0 and n_clusters > 1:
        stats.components_cut += 1


def _claim(r: int, todo: np.ndarray, sim: Similarity, labels: np.ndarray, reps: np.ndarray, flags: np.ndarray,
           stats: FoldStats, *, new_rep: bool = False) -> np.ndarray:
    """Fold every document of ``todo`` that is verified similar to representative ``r`` under it;
    return the rest (order kept)."""
    bits = sim(r, todo)
    hit = bits != 0
    if hit.any():
        got = todo[hit]
        if new_rep:
            label = int(min(r, int(got.min())))
            labels[r] = label
        else:
            label = int(labels[r])
        labels[got] = label
        reps[got] = False
        flags[got] = bits[hit]
        sim.similarity[got] = sim.last_similarity[hit]
        flags[r] |= np.bitwise_or.reduce(bits[hit])
        for bit, name in ((STAGE_EXACT, "exact"), (STAGE_MINHASH, "minhash"), (STAGE_TEXT_SIMHASH, "text_simhash"),
                          (STAGE_SIMHASH, "simhash")):
            c = int(((bits[hit] & bit) != 0).sum())
            if c:
                stats.by_stage[name] = stats.by_stage.get(name, 0) + c
    return todo[~hit]
