"""Clusters: from verified edges to one cluster id and one representative per document.

- :mod:`.labels`: union-find components, stable ids across ``add``, representatives, keys;
- :mod:`.guarantee`: the fold guarantee (``clustering="guaranteed"``, the default): components cut
  around representatives so that every folded document is verified similar to its representative;
- :mod:`.report`: what the clusters are (folded share, member similarity, suspicious clusters).
"""

from .guarantee import FoldStats, guaranteed_clusters, priority_rank
from .labels import component_roots, follow_alias, representatives, stable_labels, union_pairs
from .report import cluster_report, fold_similarity, outcome_warnings

__all__ = ["component_roots", "union_pairs", "stable_labels", "follow_alias", "representatives",
           "FoldStats", "guaranteed_clusters", "priority_rank", "cluster_report", "fold_similarity",
           "outcome_warnings"]
