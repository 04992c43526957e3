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

__all__ = ["PairMetrics", "pair_metrics", "clustering_metrics", "pr_curve", "best_threshold", "jaccard_pairs"]


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


def pr_curve(scores, labels, thresholds: Optional[Sequence[float]] = None) -> list[dict]:
    """Precision, recall and F1 of "score >= t" for each threshold t (default 0.05..0.95 by 0.01)."""
    s = np.asarray(scores, dtype=np.float64)
    gold = _as_bool(labels, "labels")
    if s.shape != gold.shape:
        raise InputError(f"`scores` and `labels` must align; got {s.shape} and {gold.shape}.")
    ts = np.round(np.arange(0.05, 0.951, 0.01), 2) if thresholds is None else np.asarray(thresholds, dtype=np.float64)
    out = []
    for t in ts:
        m = pair_metrics(s >= t, gold)
        out.append({"threshold": float(t), **m.as_dict()})
    return out


def best_threshold(curve: list[dict]) -> dict:
    """The curve point with the highest F1 (ties: the higher threshold, i.e. the tighter clusters)."""
    if not curve:
        raise InputError("`curve` is empty; give at least one threshold.")
    return max(curve, key=lambda r: (r["f1"], r["threshold"]))


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
