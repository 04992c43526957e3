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
from .inputs import Part
from .run import Edges, Run

__all__ = ["cut_stage", "cut_partition", "member_rows", "split_labels", "split_flagged", "ids_at",
           "CUT_PARTITION_BYTES"]

#: target bytes of the member rows of one cut partition
CUT_PARTITION_BYTES = 64 * 2**20
#: bytes a member row is assumed to take besides its signature (text, columns) when sizing the cut
_ROW_BYTES_GUESS = 2048
_EMPTY = np.zeros(0, np.int64)
#: the member-row columns that are Python lists (the rest are numpy arrays)
_LISTS = ("texts", "ids")


def ids_at(ids: Optional[list], local: np.ndarray, offset: int) -> list:
    """The ids of the documents ``local`` of an input partition: a missing id is the global index."""
    if ids is None:
        return (local + np.int64(offset)).tolist()
    return [offset + int(i) if ids[int(i)] is None else ids[int(i)] for i in local]


def _owner_split(docs: np.ndarray, offsets: np.ndarray, *cols: np.ndarray) -> tuple:
    """Split ``docs`` (and columns aligned with it) by the input partition that holds each doc."""
    p = offsets.size - 1
    owner = np.searchsorted(offsets, docs, side="right") - 1
    order = np.argsort(owner, kind="stable")
    bounds = np.searchsorted(owner[order], np.arange(p + 1))
    arrays = [docs[order]] + [c[order] for c in cols]
    pieces = tuple(tuple(a[bounds[i]:bounds[i + 1]] for a in arrays) for i in range(p))
    return pieces if p > 1 else pieces[0]


def split_labels(lab: dict, offsets: np.ndarray) -> tuple:
    """A label table's (doc, component) rows by owner; each label is a member of its component."""
    u = np.asarray(lab["u"], np.int64)
    v = np.asarray(lab["v"], np.int64)
    roots = np.unique(v)
    return _owner_split(np.concatenate([u, roots]), offsets, np.concatenate([v, roots]))


def split_flagged(res: dict, offsets: np.ndarray) -> tuple:
    """The documents an edge table flagged (its stage bit), by owner."""
    return _owner_split(np.asarray(res["flagged"], np.int64), offsets)


def _cut_part_of(comp: np.ndarray, q: int) -> np.ndarray:
    h = (comp.astype(np.uint64) * np.uint64(GOLDEN)) >> np.uint64(33)
    return (h % np.uint64(q)).astype(np.int64)


def member_rows(skp: dict, part: Optional[Part], offset: int, q: int, what: dict, n_labels: int, *pieces) -> Any:
    """The rows of this input partition's members, split into ``q`` cut partitions by component.

    ``pieces``: ``n_labels`` label pieces (doc, comp), then the flagged pieces of the exact tables
    (``what["n_exact"]`` of them) and of the MinHash tables."""
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
    if part is not None:
        texts = part.texts
        rows["texts"] = [texts[int(i)] for i in local]
    rows["ids"] = ids_at(skp["ids"], local, offset)
    dest = _cut_part_of(comps, q)
    order = np.argsort(dest, kind="stable")
    bounds = np.searchsorted(dest[order], np.arange(q + 1))
    out = []
    for j in range(q):
        sel = order[bounds[j]:bounds[j + 1]]
        out.append({k: ([v[int(i)] for i in sel] if k in _LISTS else v[sel]) for k, v in rows.items()})
    return tuple(out) if q > 1 else out[0]


def _concat_rows(pieces) -> dict:
    out: dict = {}
    for k in pieces[0]:
        if k in _LISTS:
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
    order = np.argsort(rows["doc"], kind="stable")
    rows = {k: ([v[int(i)] for i in order] if k in _LISTS else v[order]) for k, v in rows.items()}
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
    return max(run.n_workers, math.ceil(members * row / CUT_PARTITION_BYTES))


def cut_stage(run: Run, edges: Edges, label_futs: list, n_members: int) -> list:
    """Futures of the cut partitions (:func:`cut_partition`) of every component of two or more."""
    from dask import delayed

    t0 = time.perf_counter()
    cfg = run.cfg
    cut = cfg.clustering != "components"
    p = len(run.sources)
    q = _n_cut_partitions(run, n_members)
    offsets = run.offsets
    need_texts = cfg.minhash is not None and cfg.minhash.verify == "auto"
    flag_tables = [] if cut else list(edges.exact) + list(edges.minhash)
    what = {"minhash": cfg.minhash is not None, "keys": cfg.representative == "key",
            "n_exact": 0 if cut else len(edges.exact)}

    def by_owner(func, futs):
        if p == 1:
            return [[delayed(func, pure=True)(f, offsets)] for f in futs]
        return [list(delayed(func, nout=p, pure=True)(f, offsets)) for f in futs]

    lab = by_owner(split_labels, label_futs)
    flg = by_owner(split_flagged, flag_tables)
    rows = []
    for i in range(p):
        args = [pc[i] for pc in lab] + [pc[i] for pc in flg]
        src = run.texts[i] if need_texts else None
        if q == 1:
            rows.append([delayed(member_rows, pure=True)(run.sketches[i], src, int(offsets[i]), q, what, len(lab),
                                                         *args)])
        else:
            rows.append(list(delayed(member_rows, nout=q, pure=True)(run.sketches[i], src, int(offsets[i]), q, what,
                                                                     len(lab), *args)))
    tasks = [delayed(cut_partition, pure=True)(run.cfg_json, *[r[j] for r in rows]) for j in range(q)]
    futs = run.compute(tasks, "cut")
    summ = run.gather(cut_summary, futs)
    run.info.update(cut_partitions=q, cut_members=int(sum(s[0] for s in summ)),
                    cut_task_seconds=round(float(sum(s[2] for s in summ)), 3))
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
