"""Pair precision / recall / F1 of a clustering against truth pairs, without listing cluster pairs."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components


def canonical(labels: np.ndarray) -> np.ndarray:
    """Relabel so each cluster's label is its smallest member index (int64)."""
    labels = np.asarray(labels)
    _, inv = np.unique(labels, return_inverse=True)
    inv = inv.ravel()
    smallest = np.full(inv.max() + 1 if inv.size else 0, labels.size, dtype=np.int64)
    np.minimum.at(smallest, inv, np.arange(labels.size, dtype=np.int64))
    return smallest[inv]


def labels_from_pairs(n: int, pairs: np.ndarray) -> np.ndarray:
    """Union-find (connected components) over undirected pairs → canonical labels."""
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    if pairs.size == 0:
        return np.arange(n, dtype=np.int64)
    g = sp.coo_matrix((np.ones(len(pairs), dtype=np.int8), (pairs[:, 0], pairs[:, 1])), shape=(n, n))
    _, lab = connected_components(g.tocsr(), directed=False)
    return canonical(lab)


def _n_pairs(sizes: np.ndarray) -> int:
    sizes = sizes.astype(np.int64)
    return int((sizes * (sizes - 1) // 2).sum())


def prf(tp: int, predicted: int, actual: int) -> dict:
    p = tp / predicted if predicted else 1.0
    r = tp / actual if actual else 1.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return dict(precision=p, recall=r, f1=f, tp=int(tp), predicted_pairs=int(predicted), truth_pairs=int(actual))


def pair_scores(labels: np.ndarray, truth_pairs: np.ndarray) -> dict:
    """Predicted pairs = all pairs inside a predicted cluster; truth = the given pairs (J ≥ t)."""
    labels = np.asarray(labels)
    predicted = _n_pairs(np.unique(labels, return_counts=True)[1])
    tp = int((labels[truth_pairs[:, 0]] == labels[truth_pairs[:, 1]]).sum()) if len(truth_pairs) else 0
    return prf(tp, predicted, len(truth_pairs))


def cluster_pair_scores(labels: np.ndarray, truth_labels: np.ndarray) -> dict:
    """Pairs inside predicted clusters vs pairs inside truth clusters (connected components)."""
    labels = np.asarray(labels, dtype=np.int64)
    truth_labels = np.asarray(truth_labels, dtype=np.int64)
    predicted = _n_pairs(np.unique(labels, return_counts=True)[1])
    actual = _n_pairs(np.unique(truth_labels, return_counts=True)[1])
    joint = labels * (truth_labels.max() + 1) + truth_labels
    tp = _n_pairs(np.unique(joint, return_counts=True)[1])
    return prf(tp, predicted, actual)


def labeled_pair_scores(labels: np.ndarray, a: np.ndarray, b: np.ndarray, positive: np.ndarray) -> dict:
    """P/R/F1 on a list of labeled pairs: predicted positive = same cluster."""
    same = labels[a] == labels[b]
    positive = np.asarray(positive, dtype=bool)
    tp = int((same & positive).sum())
    return prf(tp, int(same.sum()), int(positive.sum()))
