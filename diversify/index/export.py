"""``Index.export``: the live documents as a normal ClusterMap artifact, through the artifact writer.

The artifact is what a build writes: one entry per live document in order of addition, the
index's clusters and representatives (every member verified similar to its representative: the
same guarantee as a build), the fold similarities, and the incremental state, so the file can be
served by :class:`~diversify.ClusterMap` with hot reload and extended by ``diversify.add``. Cluster
ids follow the artifact's convention (the position of the cluster's first member), not the
index's own numbering; ``build_info["index"]`` records where the file came from.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from ..errors import InputError
from .payload import Layout, decode
from .records import stored_id

__all__ = ["export"]



def export(index, path, *, created_at: Optional[str] = None, metadata: Optional[dict] = None):
    """Write ``index`` to ``path`` (atomically, as ``ClusterMap.save``); return the ClusterMap."""
    from ..artifact import ClusterMap
    from ..config import fingerprint
    from ..hashing import HASH_SCHEME
    from ..stages import STAGE_NAMES
    from ..staging import incremental_extras

    cfg = index.config
    rows = []
    with index.storage.read() as view:  # one snapshot: a consistent state even while writers run
        st = view.state()
        rows.extend(view.rows())
    if not rows:
        raise InputError(f"the index at {index.url} has no documents; an artifact needs at least one. Add documents "
                         "first.")
    layout = Layout.loads(st.layout, index.url)
    assert layout is not None, "an index with documents has a layout"
    docs = decode([r.payload for r in rows], cfg, layout, index.url)
    sk = docs.sketches
    ids = [stored_id(r.id, "int", index.url) for r in rows] if st.id_kind == "int" else [r.id for r in rows]
    clusters = np.array([r.cluster for r in rows], dtype=np.int64)
    uniq, first, inverse = np.unique(clusters, return_index=True, return_inverse=True)
    cluster_ids = first[inverse].astype(np.int64)
    rep = np.array([r.is_rep for r in rows], dtype=bool)
    stages = np.array([r.stages for r in rows], dtype=np.uint8)
    members_or = np.zeros(uniq.size, dtype=np.uint8)
    np.bitwise_or.at(members_or, inverse, stages)
    stages[rep] = members_or[inverse[rep]]  # a representative records the stages that folded its members
    sim = np.array([r.similarity for r in rows], dtype=np.float32)
    sim[rep] = 1.0
    extras = incremental_extras(sk, docs.thresholds) if cfg.incremental else {}
    extras["fold_similarity"] = sim
    build_info = {
        "n_docs": sk.n,
        "n_clusters": int(uniq.size),
        "n_empty": int(sk.empty.sum()) if sk.has_text else 0,
        "candidates": {}, "verified": {}, "merged": {}, "lsh": {}, "exact_checks": {},
        "stages": {str(k): v for k, v in STAGE_NAMES.items()},
        "index": {"url": index.url, "next_seq": st.next_seq, "schema_version": index.meta.schema_version},
    }
    cmap = ClusterMap.from_arrays(ids, cluster_ids, rep, stages, sk.lengths, config=cfg.model_dump(mode="json"),
                                  fingerprint=fingerprint(cfg), seed=cfg.seed, hash_scheme=HASH_SCHEME,
                                  build_info=build_info, metadata=dict(metadata) if metadata else None,
                                  created_at=created_at, extras=extras)
    cmap.save(path)
    return cmap
