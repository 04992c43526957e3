"""Stage 5, the cut into clusters, on the workers: rows shuffled by component, each partition of
components cut by the local build's own :func:`diversify.clusters.cut_clusters`.

1. **members by owner**: every label table of the components stage (``u`` -> its component ``v``)
   is split by the input partition that holds each document (its *owner*); a component's smallest
   member (its label) is a member too. In ``clustering="components"`` the documents the edge
   tables flagged (exact, MinHash) are split the same way, for the stage bits.
2. **member rows**: each input partition joins its members with their sketches (length, exact
   hash, emptiness, signature, key) and, where the cut checks pairs exactly (``verify="auto"``),
   their texts, kept on that worker since the read (:mod:`.texts`); the rows are split by a hash
   of the component into the cut partitions.
3. **cut**: a cut partition holds every member of its components, sorted by global index, which
   is also their order as a small :class:`~diversify.sketches.batch.Sketches` of just those
   members. Ranks, labels (a cluster's smallest member) and the pairs a cut checks depend only on
   that order, so the local index maps back to the global one and gives the local engine's labels,
   representatives, stage bits and fold similarities (tests/integration/test_dask_cut.py).

**Giant components** (more than :data:`GIANT_MEMBERS` members: the boilerplate case, 10^5 copies
of one page) are found on the workers before the member rows move: each label table counts its
members per component, the counts are summed by component in ``q`` small tasks, and only the
labels of the giants reach the client. Each giant then gets a cut partition of its own (so no
other component waits on it or shares its memory), cut by the same :func:`cut_clusters` (the local
large-family path: centers from a sample, the metric bound, a budget of checks per member), hence
the local engine's clusters. Texts travel once per distinct normalized text (exact hash) of an input partition (a member
row carries an index into its piece's texts), so exact copies of a page cost one text per input
partition. A cut task holds, per member of its components, the row (4 x ``num_perm`` bytes of
signature and ~100 bytes of columns and id), its share of the distinct texts, and during the cut the
shingle sets of a batch (a giant is one batch: 8 bytes per distinct shingle of each distinct text;
exact copies share one set), as the local cut does; docs/dask.md states the bound per worker.

Documents in no component of two or more are their own clusters: label = their index, each its
own representative, no stage bit, similarity 1. Nothing here passes through the client but the
partition counts, the fold counters and, when a single artifact is asked for, the results.
"""

from __future__ import annotations

import math
import time
from typing import Any, Optional

import numpy as np

from ...config import BuildConfig
from ...hashing import GOLDEN
from ...stages import STAGE_EXACT, STAGE_MINHASH
from .run import Edges, Run, owner_split, split_positions, split_task, spread, whole_rounds
from .texts import KeptTexts

__all__ = ["cut_stage", "cut_partition", "member_rows", "split_labels", "split_flagged", "ids_at",
           "CUT_PARTITION_BYTES", "GIANT_MEMBERS", "giant_components"]

#: target bytes of the member rows of one cut partition
CUT_PARTITION_BYTES = 64 * 2**20
#: members from which a component is cut in a partition of its own (module docstring)
GIANT_MEMBERS = 16384
#: bytes a member row is assumed to take besides its signature (text, columns) when sizing the cut
_ROW_BYTES_GUESS = 2048
_EMPTY = np.zeros(0, np.int64)
#: the member-row columns that are Python lists (the rest are numpy arrays; ``texts`` is a piece's
#: distinct texts, which its rows' ``text_of`` index)
_LISTS = ("ids",)


def ids_at(ids: Optional[list], local: np.ndarray, offset: int) -> list:
    """The ids of the documents ``local`` of an input partition: a missing id is the global index."""
    if ids is None:
        return (local + np.int64(offset)).tolist()
    at = local.tolist()
    out = [ids[i] for i in at]
    if any(x is None for x in out):
        out = [offset + i if x is None else x for i, x in zip(at, out)]
    return out


def split_labels(lab: dict, offsets: np.ndarray) -> tuple:
    """A label table's (doc, component) rows by owner; each label is a member of its component."""
    u = np.asarray(lab["u"], np.int64)
    v = np.asarray(lab["v"], np.int64)
    roots = np.unique(v)
    return owner_split(np.concatenate([u, roots]), offsets, np.concatenate([v, roots]))


def split_flagged(res: dict, offsets: np.ndarray) -> tuple:
    """The documents an edge table flagged (its stage bit), by owner."""
    return owner_split(np.asarray(res["flagged"], np.int64), offsets)


def _cut_part_of(comp: np.ndarray, q: int, giants: Optional[np.ndarray] = None) -> np.ndarray:
    """The cut partition of each component: a hash of its label in ``[0, q)``, or ``q + k`` for the
    ``k``-th of the (sorted) giant components."""
    h = (comp.astype(np.uint64) * np.uint64(GOLDEN)) >> np.uint64(33)
    dest = (h % np.uint64(q)).astype(np.int64)
    if giants is not None and giants.size:
        k = np.searchsorted(giants, comp)
        is_giant = giants[np.minimum(k, giants.size - 1)] == comp
        dest[is_giant] = q + k[is_giant]
    return dest


def _count_members(lab: dict, q: int) -> Any:
    """(component, its non-label members in this label table) split into ``q`` pieces by component."""
    v, c = np.unique(np.asarray(lab["v"], np.int64), return_counts=True)
    pieces = [(v[sel], c[sel].astype(np.int64)) for sel in split_positions(_cut_part_of(v, q), q)]
    return tuple(pieces) if q > 1 else pieces[0]


def _giants_of(bound: int, *pieces) -> tuple:
    """(labels, sizes) of the components of more than ``bound`` members among ``pieces``."""
    v = np.concatenate([p[0] for p in pieces]) if pieces else _EMPTY
    c = np.concatenate([p[1] for p in pieces]) if pieces else _EMPTY
    labels, inv = np.unique(v, return_inverse=True)
    sizes = np.zeros(labels.size, dtype=np.int64)
    np.add.at(sizes, inv, c)
    sizes += 1  # the label itself
    big = sizes > bound
    return labels[big], sizes[big]


def giant_components(run: Run, label_futs: list, bound: int) -> tuple[np.ndarray, np.ndarray]:
    """(sorted labels, sizes) of the components of more than ``bound`` members, counted on the
    workers: only these reach the client."""
    from dask import delayed

    q = max(1, min(len(label_futs), run.n_workers))
    counts = [split_task(_count_members, q, f, q) for f in label_futs]
    tasks = [delayed(_giants_of, pure=True)(bound, *[c[j] for c in counts]) for j in range(q)]
    found = run.client.gather(run.compute(tasks, "giants"))
    labels = np.concatenate([f[0] for f in found])
    sizes = np.concatenate([f[1] for f in found])
    order = np.argsort(labels)
    return labels[order], sizes[order]


def _distinct(part, local: np.ndarray, exact: np.ndarray) -> tuple[list, np.ndarray]:
    """(one text per distinct exact hash among documents ``local`` of a partition, the index of each
    document's text among them). Copies of one normalized text share its shingle set, as in the
    local cut (:func:`diversify.clusters.guarantee.run_batches`), so one of them stands for all."""
    if local.size == 0:
        return [], np.zeros(0, np.int64)
    _, first, inv = np.unique(exact, return_index=True, return_inverse=True)
    return part.take(local[first]), inv.reshape(-1).astype(np.int64)


def member_rows(skp: dict, part: Optional[KeptTexts], offset: int, q: int, what: dict, n_labels: int, *pieces) -> Any:
    """The rows of this input partition's members, split into the cut partitions by component:
    ``q`` by hash, then one per giant component (``what["giants"]``, sorted labels).

    ``pieces``: ``n_labels`` label pieces (doc, comp), then the flagged pieces of the exact tables
    (``what["n_exact"]`` of them) and of the MinHash tables. A piece's ``texts`` are its distinct
    texts, ``text_of`` the index of each row's text among them."""
    lab = pieces[:n_labels]
    docs = np.concatenate([p[0] for p in lab]) if lab else _EMPTY
    comps = np.concatenate([p[1] for p in lab]) if lab else _EMPTY
    docs, first = np.unique(docs, return_index=True)
    comps = comps[first]
    local = docs - np.int64(offset)
    flags = np.zeros(docs.size, dtype=np.uint8)
    n_exact = what["n_exact"]
    for k, got in enumerate(pieces[n_labels:]):
        flags[np.isin(docs, got[0])] |= STAGE_EXACT if k < n_exact else STAGE_MINHASH
    rows: dict = {"doc": docs, "comp": comps, "flags": flags, "lengths": skp["lengths"][local],
                  "exact": skp["exact"][local], "empty": skp["empty"][local]}
    if what["minhash"]:
        rows["minhash"] = skp["minhash"][local]
    if what["keys"]:
        rows["keys"] = np.asarray(skp["keys"], np.float64)[local]
    giants = what.get("giants")
    n_out = q + (giants.size if giants is not None else 0)
    out = []
    for sel in split_positions(_cut_part_of(comps, q, giants), n_out):
        piece = {k: v[sel] for k, v in rows.items()}
        piece["ids"] = ids_at(skp["ids"], local[sel], offset)
        if part is not None:
            piece["texts"], piece["text_of"] = _distinct(part, local[sel], piece["exact"])
        out.append(piece)
    return tuple(out) if n_out > 1 else out[0]


def _concat_rows(pieces) -> dict:
    out: dict = {}
    base = 0
    for k in pieces[0]:
        if k == "texts":
            out[k] = [t for p in pieces for t in p[k]]
        elif k == "text_of":
            shifted = []
            for p in pieces:
                shifted.append(p[k] + np.int64(base))
                base += len(p["texts"])
            out[k] = np.concatenate(shifted)
        elif k in _LISTS:
            out[k] = [t for p in pieces for t in p[k]]
        else:
            out[k] = np.concatenate([p[k] for p in pieces])
    return out


def cut_partition(cfg_json: dict, *pieces) -> dict:
    """Cut the components of one cut partition (see the module docstring). Returns the members'
    global indices (sorted) with their labels, representative mask, stage bits and similarities
    (float32, 1 for representatives; None under ``components``), the fold counters, and the small
    Sketches and texts the sampled purity checks its pairs with."""
    from ...clusters import cut_clusters, priority_rank, representatives
    from ...sketches.batch import Sketches
    from ...sketches.memo import ExactMemo
    from ...sketches.source import TextSource

    t0 = time.perf_counter()
    cfg = BuildConfig(**cfg_json)
    rows = _concat_rows(pieces)
    distinct = rows.pop("texts", None)
    order = np.argsort(rows["doc"], kind="stable")
    rows = {k: ([v[int(i)] for i in order] if k in _LISTS else v[order]) for k, v in rows.items()}
    if distinct is not None:  # every member's text, as references to the distinct ones
        rows["texts"] = [distinct[int(j)] for j in rows.pop("text_of")]
    docs = rows["doc"]
    n = docs.size
    root = np.searchsorted(docs, rows["comp"]).astype(np.int64)
    ids: Any = range(n)  # the cut reads no id: a range stands for them
    sk = Sketches(ids=ids, lengths=rows["lengths"], exact=rows["exact"], empty=rows["empty"],
                  minhash=rows.get("minhash"), keys=rows.get("keys"))
    source = TextSource(rows["texts"], 0) if "texts" in rows else None
    cut_stats: Optional[dict] = None
    sim: Optional[np.ndarray] = None
    if cfg.clustering == "components":
        labels, reps, flags = root, representatives(root, cfg.representative, sk.lengths, sk.keys), rows["flags"]
    else:
        rank = priority_rank(cfg.representative, sk.lengths, sk.keys)
        labels, reps, flags, fstats = cut_clusters(cfg.clustering, root, sk, cfg, rank, memo=ExactMemo(n),
                                                   source=source)
        sim = fstats.similarity.astype(np.float32)
        sim[reps] = 1.0
        cut_stats = {"components_cut": fstats.components_cut, "pairs_checked": fstats.pairs_checked,
                "exact_checks": fstats.exact_checks, "pairs_certified": fstats.pairs_certified,
                "by_stage": dict(fstats.by_stage)}
    rep_of = np.zeros(n, dtype=np.int64)
    rep_of[labels[reps]] = np.flatnonzero(reps)
    ids = rows["ids"]
    return {"docs": docs, "labels": docs[labels], "reps": reps, "flags": flags, "similarity": sim, "cut_stats": cut_stats,
            "rep_ids": [ids[int(i)] for i in rep_of[labels]], "sketches": sk, "source": source,
            "seconds": time.perf_counter() - t0}


def cut_summary(res: dict) -> tuple:
    """(members, the cut's counters or None, seconds) of a cut partition."""
    return int(res["docs"].size), res["cut_stats"], res["seconds"]


def cut_columns(res: dict) -> dict:
    """What the single artifact needs of a cut partition."""
    return {k: res[k] for k in ("docs", "labels", "reps", "flags", "similarity")}


def _n_cut_partitions(run: Run, members: int) -> int:
    num_perm = run.cfg.minhash.num_perm if run.cfg.minhash is not None else 0
    row = 4 * num_perm + 64 + _ROW_BYTES_GUESS
    return whole_rounds(math.ceil(members * row / CUT_PARTITION_BYTES), run.n_workers)


def cut_stage(run: Run, edges: Edges, label_futs: list, n_members: int) -> list:
    """Futures of the cut partitions (:func:`cut_partition`) of every component of two or more."""
    from dask import delayed

    t0 = time.perf_counter()
    cfg = run.cfg
    cut = cfg.clustering != "components"
    p = len(run.sources)
    giants, sizes = giant_components(run, label_futs, GIANT_MEMBERS) if n_members > GIANT_MEMBERS else (_EMPTY, _EMPTY)
    q = _n_cut_partitions(run, n_members - int(sizes.sum()))
    offsets = run.offsets
    need_texts = cfg.minhash is not None and cfg.minhash.verify == "auto"
    flag_tables = [] if cut else list(edges.exact) + list(edges.minhash)
    what = {"minhash": cfg.minhash is not None, "keys": cfg.representative == "key",
            "n_exact": 0 if cut else len(edges.exact), "giants": delayed(giants, pure=True) if giants.size else None}

    lab = [split_task(split_labels, p, f, offsets) for f in label_futs]
    flg = [split_task(split_flagged, p, f, offsets) for f in flag_tables]
    rows = [split_task(member_rows, q + giants.size, run.sketches[i], run.texts[i] if need_texts else None,
                       int(offsets[i]), q, what, len(lab), *[pc[i] for pc in lab], *[pc[i] for pc in flg])
            for i in range(p)]
    tasks = spread(run.workers, cut_partition, [(run.cfg_json, *[r[j] for r in rows]) for j in range(q + giants.size)])
    futs = run.client.compute(tasks, retries=run.retries)
    # nothing here holds the kept texts any more: each leaves its worker once its member rows are made
    del tasks, rows
    run.texts = []
    run.report.wait(futs, "cut")
    summ = run.gather(cut_summary, futs)
    run.info.update(cut_partitions=q + giants.size, cut_members=int(sum(s[0] for s in summ)),
                    cut_task_seconds=round(float(sum(s[2] for s in summ)), 3), cut_giants=int(giants.size),
                    cut_largest_giant=int(sizes.max()) if sizes.size else 0)
    run.cut_stats = _cut_counts([s[1] for s in summ]) if cut else None
    run.timings["dask_cut"] = time.perf_counter() - t0
    run.report.stage(f"cut {run.info['cut_members']:,} members of components in {q} partitions")
    return futs


def _cut_counts(parts: list) -> dict:
    """The cut's counters of the whole build (``FoldStats.as_dict`` of the local cut)."""
    from ...clusters import FoldStats

    total = FoldStats()
    for f in parts:
        if f is None:
            continue
        total.components_cut += f["components_cut"]
        total.pairs_checked += f["pairs_checked"]
        total.exact_checks += f["exact_checks"]
        total.pairs_certified += f["pairs_certified"]
        for k, v in f["by_stage"].items():
            total.by_stage[k] = total.by_stage.get(k, 0) + v
    return total.as_dict()
