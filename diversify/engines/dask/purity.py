"""The sampled purity of a Dask build (``build_info["purity"]``), drawn on the workers with the
same seed and the same draws as :func:`diversify.clusters.purity.sampled_purity`, so the figure is
the local build's to the bit.

The local sample picks a cluster with probability proportional to its member pairs (numpy's
``Generator.choice`` with ``p``: a cumulative sum of ``p`` in label order, normalized by its last
value, searched with uniform draws), then two distinct members. Here:

1. each cut partition's clusters of two or more go to the input partition that holds their label
   (so an input partition's clusters are in label order once sorted);
2. a chain of one small task per input partition carries the running cumulative sum (the same
   additions in the same order as ``cumsum``); the client learns its end and each partition's start
   (two floats per partition) and the total number of member pairs (exact: an integer);
3. the client draws the uniforms; each input partition finds those that fall in its stretch of
   the cumulative sum, and the client, in draw order, draws the two members' positions;
4. the cut partition holding each picked cluster checks its pairs with the build's own
   :class:`~diversify.clusters.similarity.Similarity`, from the member rows it already holds.

tests/integration/test_dask_cut.py compares the result with the local build's ``purity``;
tests/unit/test_dask_purity_draws.py pins the reproduction of ``Generator.choice``.
"""

from __future__ import annotations

import numpy as np

from ...clusters.purity import PROMISES, SAMPLE_PAIRS
from .run import Run, owner_split, split_task

__all__ = ["distributed_purity", "choice_positions"]

#: the seed words of the purity sample (those of diversify.clusters.purity.sampled_purity)
_SEED_WORD = 0x9E3779B9


def _cluster_rows(res: dict, part: int, offsets: np.ndarray) -> tuple:
    """(label, size, cut partition) of this cut partition's clusters of two or more, by owner of the label."""
    labels, sizes = np.unique(res["labels"], return_counts=True)
    keep = sizes >= 2
    labels, sizes = labels[keep], sizes[keep].astype(np.int64)
    return owner_split(labels, offsets, sizes, np.full(labels.size, part, np.int64))


def _weights(*pieces) -> dict:
    """An input partition's clusters in label order, with their member pairs."""
    label = np.concatenate([p[0] for p in pieces]) if pieces else np.zeros(0, np.int64)
    size = np.concatenate([p[1] for p in pieces]) if pieces else np.zeros(0, np.int64)
    part = np.concatenate([p[2] for p in pieces]) if pieces else np.zeros(0, np.int64)
    o = np.argsort(label, kind="stable")
    size = size[o]
    weight = size.astype(np.float64) * (size - 1) / 2
    return {"label": label[o], "size": size, "part": part[o], "weight": weight,
            "pairs": int(size.astype(object).dot(size - 1) // 2) if size.size else 0}


def _pairs_of(w: dict) -> int:
    return int(w["pairs"])


def _segment(w: dict, carry: float, total: float) -> np.ndarray:
    """This partition's stretch of ``cumsum(weight / total)``, continuing from ``carry``."""
    p = w["weight"] / total
    return np.cumsum(np.r_[carry, p])[1:]


def _carry(w: dict, carry: float, total: float) -> float:
    seg = _segment(w, carry, total)
    return float(seg[-1]) if seg.size else carry


def _picks(w: dict, carry: float, total: float, last: float, uniforms: np.ndarray) -> np.ndarray:
    """(draw index, label, size, cut partition) of the draws that land in this partition's stretch."""
    seg = _segment(w, carry, total)
    if seg.size == 0:
        return np.zeros((0, 4), np.int64)
    cdf = seg / last
    start = carry / last
    mine = np.flatnonzero((uniforms >= start) & (uniforms < cdf[-1]))
    at = np.searchsorted(cdf, uniforms[mine], side="right")
    return np.stack([mine, w["label"][at], w["size"][at], w["part"][at]], axis=1).astype(np.int64)


def choice_positions(cdf_last: float, uniforms: np.ndarray, segments: list) -> np.ndarray:
    """The reference of steps 2-3 on one process (what the tests compare with ``Generator.choice``):
    the index, in the concatenation of ``segments`` (cumulative sums), each uniform picks."""
    cdf = np.concatenate(segments) / cdf_last
    return np.searchsorted(cdf, uniforms, side="right")


def _check_pairs(res: dict, picks: np.ndarray, cfg_json: dict) -> int:
    """How many of the picked pairs (label, first, second) the build's verification finds similar."""
    from ...clusters.similarity import FoldStats, Similarity
    from ...config import BuildConfig

    docs, labels = res["docs"], res["labels"]
    order = np.lexsort((docs, labels))
    sl = labels[order]
    start = np.searchsorted(sl, picks[:, 0])
    a = order[start + picks[:, 1]]
    b = order[start + picks[:, 2]]
    sim = Similarity(res["sketches"], BuildConfig(**cfg_json), FoldStats(), None, res["source"])
    sim.prefetch(np.unique(np.r_[a, b]))
    ok = sum(bool(sim(int(x), np.array([y], dtype=np.int64))[0]) for x, y in zip(a.tolist(), b.tolist()))
    sim.prefetch(np.zeros(0, dtype=np.int64))
    return int(ok)


def distributed_purity(run: Run, cut_futs: list, pairs: int = SAMPLE_PAIRS) -> dict:
    """``build_info["purity"]`` of the cut partitions ``cut_futs``: the local build's figure."""
    from dask import delayed

    cfg = run.cfg
    out: dict = {"promise": PROMISES[cfg.clustering]}
    p = len(run.sources)
    offsets = run.offsets
    rows = [split_task(_cluster_rows, p, f, j, offsets) for j, f in enumerate(cut_futs)]
    weights = run.compute([delayed(_weights, pure=True)(*[r[i] for r in rows]) for i in range(p)], "purity")
    total = int(sum(run.gather(_pairs_of, weights)))
    out["pairs_in_clusters"] = total
    if total == 0 or cfg.minhash is None:
        out.update(pairs_sampled=0, pairs_similar=0, purity=None)
        return out
    w_total = float(total)  # the sum of integer weights is exact in float64
    carries = [delayed(0.0)]
    for w in weights:
        carries.append(delayed(_carry, pure=True)(w, carries[-1], w_total))
    starts = run.client.gather(run.client.compute(carries, retries=run.retries))
    last = float(starts[-1])
    rng = np.random.default_rng([cfg.seed, _SEED_WORD])
    k = min(pairs, total)
    uniforms = rng.random(k)
    u_fut = run.client.scatter(uniforms, broadcast=False)
    found = run.client.gather([run.client.submit(_picks, w, starts[i], w_total, last, u_fut, pure=False)
                               for i, w in enumerate(weights)])
    got = np.concatenate(found)
    got = got[np.argsort(got[:, 0], kind="stable")]
    assert got.shape[0] == k, "every draw lands in one partition's stretch"
    sizes = got[:, 2]
    first = rng.integers(0, sizes)
    second = rng.integers(0, sizes - 1)
    second = second + (second >= first)
    checks = []
    for j in np.unique(got[:, 3]).tolist():
        sel = got[:, 3] == j
        mine = np.stack([got[sel, 1], first[sel], second[sel]], axis=1)
        checks.append(run.client.submit(_check_pairs, cut_futs[j], mine, run.cfg_json, pure=False))
    similar = int(sum(run.client.gather(checks)))
    out.update(pairs_sampled=int(k), pairs_similar=similar, purity=round(float(similar / k), 6))
    return out
