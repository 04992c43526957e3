"""The cluster side of a :class:`~diversify.artifact.clustermap.ClusterMap`: a cluster's members,
representative, stages and current id (merges in ``extras["aliases"]`` followed)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from diversify.artifact.aliases import alias_map
from diversify.artifact.schema import EXTRA_PREFIX
from diversify.errors import InputError, InputTypeError
from diversify.ids import id_kind_of

__all__ = ["ClusterQueries"]


class ClusterQueries:
    """The cluster queries of :class:`~diversify.artifact.clustermap.ClusterMap`, over its arrays."""

    __slots__ = ()

    # the ClusterMap's own state (its slots)
    _arrays: Mapping[str, np.ndarray]
    _lazy: dict[str, Any]
    _n: int
    _k: int

    def _id_at(self, doc: int) -> str | int:  # pragma: no cover - ClusterMap's
        raise NotImplementedError

    def _aliases(self) -> dict[int, int]:
        al = self._lazy.get("aliases")
        if al is None:
            al = alias_map(self._arrays.get(EXTRA_PREFIX + "aliases"), self._n, self._arrays["doc/cluster_id"])
            self._lazy["aliases"] = al
        return al

    def _cluster_row(self, cluster_id) -> int:
        if id_kind_of(cluster_id) != "int":  # cluster ids are document indices
            raise InputTypeError(
                f"`cluster_id` must be an int; got {type(cluster_id).__name__} {cluster_id!r}. "
                "Use an id returned by lookup()/cluster_of() on this artifact."
            )
        c = int(cluster_id)
        j = self._row_of(c)
        if j is None:
            alias = self._aliases().get(c)  # only now: the aliases load (and are checksummed) on first need
            j = None if alias is None else self._row_of(alias)
        if j is not None:
            return j
        raise InputError(
            f"`cluster_id` {c} is not a cluster of this artifact ({self._k} clusters). "
            "Use an id returned by lookup()/cluster_of() on this artifact."
        )

    def _row_of(self, c: int) -> int | None:
        cids = self._arrays["cluster/id"]
        j = int(cids.searchsorted(c)) if self._k else 0
        return j if j < self._k and int(cids[j]) == c else None

    def resolve_cluster(self, cluster_id: int) -> int:
        """The current id of a cluster (follows merges recorded in ``extras["aliases"]``)."""
        return int(self._arrays["cluster/id"][self._cluster_row(cluster_id)])

    def _member_docs(self, cluster_id) -> np.ndarray:
        j = self._cluster_row(cluster_id)
        indptr = self._arrays["cluster/indptr"]
        return self._arrays["cluster/members"][int(indptr[j]) : int(indptr[j + 1])]

    def members(self, cluster_id: int) -> list:
        """Ids of the cluster's members, in document order."""
        return [self._id_at(int(d)) for d in self._member_docs(cluster_id).tolist()]

    def member_indices(self, cluster_id: int) -> np.ndarray:
        """Document indices of the cluster's members (int64, ascending)."""
        return self._member_docs(cluster_id)

    def representative_of(self, cluster_id: int) -> str | int:
        """Id of the cluster's representative document."""
        j = self._cluster_row(cluster_id)
        return self._id_at(int(self._arrays["cluster/representative"][j]))

    def cluster_sizes(self) -> tuple[np.ndarray, np.ndarray]:
        """``(cluster_ids, sizes)``: int64 arrays of shape (n_clusters,), cluster ids ascending."""
        indptr = self._arrays["cluster/indptr"]
        return self._arrays["cluster/id"], np.diff(indptr)

    def cluster_stages(self, cluster_id: int) -> int:
        """Bitwise OR of the members' stage bitmasks (1 exact, 2 minhash, 4 simhash vectors, 8 simhash text)."""
        docs = self._member_docs(cluster_id)
        return int(np.bitwise_or.reduce(self._arrays["doc/stages"][docs])) if docs.size else 0
