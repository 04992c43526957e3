"""Clusters: from verified edges to one cluster id and one representative per document.

- :mod:`.labels`: union-find components, stable ids across ``add``, representatives, keys;
- :mod:`.clique`: ``clustering="clique"`` (the default): components cut so that every two members
  of a cluster are verified similar;
- :mod:`.guarantee`: ``clustering="star"``: components cut around representatives so that every
  folded document is verified similar to its representative;
- :mod:`.report`: what the clusters are (folded share, member similarity, suspicious clusters).
"""

from .clique import clique_clusters
from .guarantee import FoldStats, guaranteed_clusters, priority_rank
from .labels import component_roots, follow_alias, representatives, stable_labels, union_pairs
from .report import cluster_report, fold_similarity, outcome_warnings

__all__ = ["component_roots", "union_pairs", "stable_labels", "follow_alias", "representatives",
           "FoldStats", "guaranteed_clusters", "clique_clusters", "cut_clusters", "priority_rank", "cluster_report", "fold_similarity",
           "outcome_warnings"]


def cut_clusters(clustering: str, *args, **kwargs):
    """The cut a config names: :func:`clique_clusters` for ``"clique"``, :func:`guaranteed_clusters`
    for ``"star"`` (same arguments and results)."""
    if clustering == "clique":
        return clique_clusters(*args, **kwargs)
    if clustering == "star":
        return guaranteed_clusters(*args, **kwargs)
    raise ValueError(f"clustering={clustering!r} has no cut (components are not cut)")
