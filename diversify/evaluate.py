"""Measuring a build against labels, and choosing a threshold from labeled pairs.

- :func:`pair_metrics`: labeled pairs (same / not same) against predicted cluster ids.
- :func:`clustering_metrics`: gold cluster labels against predicted clusters, by pair counting
  over a contingency table (no O(n²) loop) plus the adjusted Rand index.
- :func:`pr_curve` / :func:`best_threshold`: precision-recall over a threshold sweep of a pair
  similarity, the F1-maximizing threshold and the LSH (bands, rows) it implies — the "label a few
  hundred pairs, take the F1 maximum" workflow.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Optional

import numpy as np

from .config import TextConfig
from .errors import InputError

__all__ = ["PairMetrics", "pair_metrics", "clustering_metrics", "pr_curve", "best_threshold", "check_labels", "jaccard_pairs",
           "cosine_pairs", "DEFAULT_GRID", "all_positive_baseline", "tune_notes"]


@dataclass(frozen=True)
class PairMetrics:
    tp: int
    fp: int
    fn: int
    tn: int

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    def as_dict(self) -> dict:
        return {**asdict(self), "precision": self.precision, "recall": self.recall, "f1": self.f1}


def _as_bool(labels, name: str) -> np.ndarray:
    arr = np.asarray(labels)
    if arr.dtype == bool:
        return arr
    try:
        num = arr.astype(np.float64)
    except (TypeError, ValueError):
        raise InputError(f"`{name}` must be 0/1 or true/false; got values like {arr[:3].tolist()}.") from None
    bad = ~np.isin(num, (0.0, 1.0))
    if bad.any():
        raise InputError(f"`{name}` must be 0/1; got {num[bad][:3].tolist()} (use --positive-min to binarize scores).")
    return num.astype(bool)


def pair_metrics(predicted_same, labels) -> PairMetrics:
    """Confusion counts of predicted "same cluster" against labeled pairs (both bool arrays)."""
    pred = _as_bool(predicted_same, "predicted_same")
    gold = _as_bool(labels, "labels")
    if pred.shape != gold.shape:
        raise InputError(f"`predicted_same` and `labels` must align; got {pred.shape} and {gold.shape}.")
    return PairMetrics(
        tp=int((pred & gold).sum()), fp=int((pred & ~gold).sum()), fn=int((~pred & gold).sum()), tn=int((~pred & ~gold).sum())
    )


def _comb2(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    return x * (x - 1) / 2


def clustering_metrics(gold, predicted) -> dict:
    """Pair-counting precision/recall/F1 and ARI of a predicted clustering against gold labels.

    Both are label arrays over the same documents (any hashable labels).
    """
    g = np.asarray(gold)
    p = np.asarray(predicted)
    if g.shape != p.shape or g.ndim != 1:
        raise InputError(f"`gold` and `predicted` must be 1-D and of equal length; got {g.shape} and {p.shape}.")
    n = g.size
    _, gi = np.unique(g, return_inverse=True)
    _, pi = np.unique(p, return_inverse=True)
    cells = np.unique(gi.astype(np.int64) * (pi.max() + 1 if n else 1) + pi, return_counts=True)[1]
    same_both = _comb2(cells).sum()
    same_gold = _comb2(np.bincount(gi)).sum()
    same_pred = _comb2(np.bincount(pi)).sum()
    total = n * (n - 1) / 2
    tp = same_both
    fp = same_pred - same_both
    fn = same_gold - same_both
    tn = total - tp - fp - fn
    precision = tp / same_pred if same_pred else 1.0
    recall = tp / same_gold if same_gold else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    expected = same_gold * same_pred / total if total else 0.0
    max_index = (same_gold + same_pred) / 2
    ari = (same_both - expected) / (max_index - expected) if max_index != expected else 1.0
    return {"tp": int(tp), "fp": int(fp), "fn": int(fn), "tn": int(tn), "precision": float(precision),
            "recall": float(recall), "f1": float(f1), "ari": float(ari), "documents": int(n)}


#: the default threshold grid of `pr_curve` and `tune`: 0.05 .. 0.99 by 0.01
DEFAULT_GRID = np.round(np.arange(0.05, 0.9951, 0.01), 2)
#: fewer labeled pairs than this (or fewer positives / negatives than MIN_PER_CLASS) give a
#: threshold too noisy to trust; `check_labels` warns
MIN_PAIRS = 50
MIN_PER_CLASS = 10


def check_labels(labels) -> list[str]:
    """Refuse labels a threshold cannot be tuned on; return warnings for thin ones.

    Raises InputError when every pair is positive or every pair is negative (any threshold then
    looks perfect, or none does).
    """
    gold = _as_bool(labels, "labels")
    pos, neg = int(gold.sum()), int((~gold).sum())
    if pos == 0 or neg == 0:
        raise InputError(
            f"labeled pairs must hold both positives and negatives to tune a threshold; got {pos} positive and {neg} "
            "negative pairs. Label pairs on both sides of the decision (e.g. near-copies and look-alikes that are not), "
            "or check --label/--positive-min."
        )
    notes = []
    if gold.size < MIN_PAIRS:
        notes.append(f"only {gold.size} labeled pairs: the chosen threshold is noisy (label {MIN_PAIRS}-500)")
    if min(pos, neg) < MIN_PER_CLASS:
        notes.append(f"only {min(pos, neg)} {'positive' if pos < neg else 'negative'} pairs: the chosen threshold is "
                     f"noisy (label at least {MIN_PER_CLASS} of each)")
    return notes


def pr_curve(scores, labels, thresholds: Optional[Sequence[float]] = None) -> list[dict]:
    """Precision, recall and F1 of "score >= t" for each threshold t (default 0.05..0.99 by 0.01)."""
    s = np.asarray(scores, dtype=np.float64)
    gold = _as_bool(labels, "labels")
    if s.shape != gold.shape:
        raise InputError(f"`scores` and `labels` must align; got {s.shape} and {gold.shape}.")
    ts = DEFAULT_GRID if thresholds is None else np.asarray(thresholds, dtype=np.float64)
    out = []
    for t in ts:
        m = pair_metrics(s >= t, gold)
        out.append({"threshold": float(t), **m.as_dict()})
    return out


def best_threshold(curve: list[dict]) -> dict:
    """The curve point with the highest F1; on a plateau (consecutive thresholds with the same best
    F1) the middle of the widest plateau, so the choice does not sit on its edge.

    The returned point carries ``plateau = [lowest, highest]`` threshold of that plateau.
    """
    if not curve:
        raise InputError("`curve` is empty; give at least one threshold.")
    best = max(r["f1"] for r in curve)
    runs, cur = [], []
    for i, r in enumerate(curve):
        if abs(r["f1"] - best) <= 1e-12:
            cur.append(i)
        elif cur:
            runs.append(cur)
            cur = []
    if cur:
        runs.append(cur)
    widest = max(runs, key=lambda run: (len(run), curve[run[-1]]["threshold"]))
    point = dict(curve[widest[(len(widest) - 1) // 2 if len(widest) % 2 else len(widest) // 2]])
    point["plateau"] = [curve[widest[0]]["threshold"], curve[widest[-1]]["threshold"]]
    return point


def all_positive_baseline(labels) -> dict:
    """Precision, recall and F1 of calling every labeled pair a duplicate (no threshold at all).

    A tuned threshold is worth its F1 above this one: with 80% positive pairs, calling all of them
    duplicates already scores F1 0.889.
    """
    gold = _as_bool(labels, "labels")
    m = pair_metrics(np.ones(gold.shape, dtype=bool), gold)
    return {"precision": m.precision, "recall": m.recall, "f1": m.f1}


def tune_notes(best: dict, baseline: dict, grid: Sequence[float]) -> list[str]:
    """Warnings about a tuned threshold: the chosen threshold sits at an edge of the thresholds
    tried (a threshold beyond the grid might do better), or its F1 is no better than the
    all-positive baseline (the similarity does not separate the labels). A plateau of the best F1
    that merely reaches an edge (negatives far below every threshold) is no warning: the chosen
    threshold is its middle."""
    notes = []
    t = float(best["threshold"])
    first, last = float(grid[0]), float(grid[-1])
    if t <= first + 1e-9:
        notes.append(f"the best F1 ({best['f1']:.4f}) is reached at the lowest threshold tried ({first:.2f}): a "
                     "lower one might do as well or better, and almost every pair counts as a duplicate there; "
                     "check the labels (are the negatives really different?) before building with it")
    if t >= last - 1e-9:
        notes.append(f"the best F1 ({best['f1']:.4f}) is reached at the highest threshold tried ({last:.2f}): only "
                     "near-identical pairs count as duplicates; the labeled positives may be too few or too loose "
                     "for a lower threshold to pay off")
    if best["f1"] <= baseline["f1"] + 1e-12:
        notes.append(f"F1 at the best threshold ({best['f1']:.4f}) is no better than calling every pair a duplicate "
                     f"(F1 {baseline['f1']:.4f}): the similarity does not separate these labels")
    return notes


def cosine_pairs(vectors_a, vectors_b) -> np.ndarray:
    """Cosine similarity of each (a, b) row pair (rows need not be normalized).

    Both arrays are checked as :func:`~diversify.sketches.simhash.normalize_vectors` checks a
    build's vectors: real numbers, finite, no zero rows.
    """
    from .sketches.simhash import normalize_vectors

    shape_a, shape_b = np.shape(vectors_a), np.shape(vectors_b)
    if shape_a != shape_b or len(shape_a) != 2:
        raise InputError(f"`vectors_a` and `vectors_b` must be aligned 2-D arrays; got {shape_a} and {shape_b}.")
    a = normalize_vectors(vectors_a, name="vectors_a")
    b = normalize_vectors(vectors_b, name="vectors_b")
    return np.einsum("ij,ij->i", a, b)


def jaccard_pairs(texts_a: Sequence[str], texts_b: Sequence[str], text_config: Optional[TextConfig] = None,
                  seed: int = 1) -> np.ndarray:
    """Exact Jaccard similarity of the shingle sets of each (a, b) text pair, float64 (n,)."""
    from .text import exact_jaccard, sorted_unique_shingles

    if len(texts_a) != len(texts_b):
        raise InputError(f"`texts_a` and `texts_b` must align; got {len(texts_a)} and {len(texts_b)}.")
    n = len(texts_a)
    starts, counts, hashes = sorted_unique_shingles(list(texts_a) + list(texts_b), text_config or TextConfig(), seed)
    sets = [hashes[s : s + c] for s, c in zip(starts.tolist(), counts.tolist())]
    return np.array([exact_jaccard(sets[i], sets[n + i]) for i in range(n)], dtype=np.float64)
