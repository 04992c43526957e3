"""Looking at an artifact: one row per document, one cluster with its members, a notebook summary.

What each document's row says, from what the artifact stores (nothing is estimated here):

* ``representative_id``: the id of its cluster's representative (``cluster/representative``);
* ``similarity``: its similarity to that representative as the build verified it when it cut the
  components into clusters (``extra/fold_similarity``: exact Jaccard where the check was exact,
  else the estimate it decided on; 1.0 for a representative). None where the artifact stores none:
  artifacts built with ``clustering="components"`` (which verifies no member against its
  representative), and documents an ``add`` kept from an artifact that had none;
* ``stages``: the names of the stages that joined it to its cluster (``doc/stages``: ``exact``,
  ``minhash``, ``simhash`` over vectors, ``text_simhash``); empty for a document that is alone.

Used by ``diversify show``, ``diversify export``, :meth:`ClusterMap.to_pandas` and
:meth:`ClusterMap._repr_html_`.
"""

from __future__ import annotations

import html
from typing import Any, Optional

import numpy as np

from ..errors import InputError, require
from ..stages import stage_names
from .schema import EXTRA_PREFIX

__all__ = ["SIMILARITY_NOT_STORED", "document_columns", "doc_similarity", "representative_docs", "cluster_view",
           "to_pandas", "html_summary", "similarity_value"]

#: what ``show`` and the docs say when an artifact keeps no verified similarity
SIMILARITY_NOT_STORED = ("not stored: this artifact keeps no verified similarity (built with --clustering components, "
                         "which verifies no member against its representative, or by an older writer)")

#: decimals a similarity is written with (the stored value is a float32)
_DIGITS = 6


def doc_similarity(cm, docs: Optional[list] = None) -> Optional[np.ndarray]:
    """float64: the verified similarity to its representative of each document (of ``docs``, a list
    of document indices, when given), NaN where none is stored; None when the artifact stores none
    at all."""
    arr = cm._arrays.get(EXTRA_PREFIX + "fold_similarity")
    if arr is None:
        return None
    if np.shape(arr) != (cm.n_docs,):
        raise cm._corrupt(f"`extra/fold_similarity` must hold one value per document ({cm.n_docs}); got shape "
                          f"{np.shape(arr)}.")
    arr = np.asarray(arr)
    return (arr if docs is None else arr[np.asarray(docs, dtype=np.int64)]).astype(np.float64)


def similarity_value(v: float) -> Optional[float]:
    """A stored similarity as written out: rounded to 6 decimals, None for NaN (not stored)."""
    return None if v != v else round(float(v), _DIGITS)


def representative_docs(cm) -> np.ndarray:
    """int64 (n,): the document index of each document's cluster representative."""
    cids = np.asarray(cm._arrays["cluster/id"])
    rows = np.searchsorted(cids, np.asarray(cm.cluster_ids)) if cm.n_docs else np.zeros(0, dtype=np.int64)
    return np.asarray(cm._arrays["cluster/representative"], dtype=np.int64)[rows]


def _stage_table(stages: np.ndarray) -> list:
    """The stage names of each document (one list per distinct bitmask, shared)."""
    names = [stage_names(b) for b in range(256)]
    return [names[b] for b in np.asarray(stages, dtype=np.uint8).tolist()]


def document_columns(cm) -> dict[str, list]:
    """One list per column, one entry per document in document order: ``id``, ``cluster_id``,
    ``is_representative`` (bool), ``representative_id``, ``similarity`` (float or None) and
    ``stages`` (list of stage names)."""
    ids = cm.ids
    ids = ids.tolist() if isinstance(ids, np.ndarray) else list(ids)
    rep = representative_docs(cm).tolist()
    sim = doc_similarity(cm)
    return {
        "id": ids,
        "cluster_id": np.asarray(cm.cluster_ids).tolist(),
        "is_representative": np.asarray(cm.is_representative, dtype=bool).tolist(),
        "representative_id": [ids[r] for r in rep],
        "similarity": [None] * len(ids) if sim is None else [similarity_value(v) for v in sim.tolist()],
        "stages": _stage_table(cm.doc_stages),
    }


def cluster_view(cm, *, cluster_id: Any = None, doc_id: Any = None, limit: Optional[int] = None) -> dict:
    """One cluster: ``cluster_id``, ``size``, ``representative``, ``similarity_stored`` and its
    ``members`` (the representative first, then document order; at most ``limit``), each with
    ``id``, ``is_representative``, ``similarity`` and ``stages``; ``more`` counts the members left
    out. Give ``cluster_id`` (a cluster of this artifact) or ``doc_id`` (a document's id: its
    cluster, with ``"asked_id"`` naming it)."""
    if (cluster_id is None) == (doc_id is None):
        raise InputError("give one of `cluster_id` and `doc_id` (the cluster to show, or a document of it).")
    if doc_id is not None:
        c = cm.cluster_of(doc_id)
        if c is None:
            raise InputError(f"`id` {doc_id!r} is not a document of this artifact ({cm.n_docs:,} documents, "
                             f"{cm.id_kind} ids). Check the id (ids are matched exactly, by kind).")
        cluster_id = c
    if limit is not None and limit < 0:
        raise InputError(f"`limit` must be a number of members >= 0; got {limit}. Use 0 for the cluster alone.")
    c = cm.resolve_cluster(cluster_id)  # an unknown cluster raises, naming it
    docs = np.asarray(cm.member_indices(c), dtype=np.int64)
    rep_doc = int(cm._arrays["cluster/representative"][cm._cluster_row(c)])
    # the representative first, then document order; only the shown members are read
    shown = np.r_[rep_doc, docs[docs != rep_doc]][: docs.size if limit is None else limit].tolist()
    sim = doc_similarity(cm, shown)
    stages = np.asarray(cm.doc_stages)
    members = [{"id": cm._id_at(d), "is_representative": d == rep_doc,
                "similarity": None if sim is None else similarity_value(sim[j]),
                "stages": stage_names(int(stages[d]))} for j, d in enumerate(shown)]
    out = {"cluster_id": c, "size": int(docs.size), "representative": cm._id_at(rep_doc),
           "similarity_stored": sim is not None, "members": members, "more": int(docs.size) - len(shown)}
    if c != cluster_id:
        out["asked_cluster_id"] = cluster_id  # a merged id, followed to the cluster it became
    if doc_id is not None:
        out["asked_id"] = doc_id
    return out


def to_pandas(cm):
    """A pandas DataFrame of :func:`document_columns` (``similarity`` float64 with NaN where not stored)."""
    pd = require("pandas", extra="pandas", purpose="ClusterMap.to_pandas()")
    cols: dict[str, Any] = document_columns(cm)
    cols["similarity"] = np.array([np.nan if v is None else v for v in cols["similarity"]], dtype=np.float64)
    return pd.DataFrame(cols, columns=list(cols))


def html_summary(cm, *, top: int = 5) -> str:
    """A small HTML table: documents, clusters, folded share and the ``top`` largest clusters with
    their representatives (every value HTML-escaped)."""
    esc = html.escape
    cids, sizes = cm.cluster_sizes()
    order: list[int] = np.lexsort((cids, -sizes))[:top].tolist() if cm.n_clusters else []
    folded = cm.n_docs - cm.n_clusters
    rows = [("documents", f"{cm.n_docs:,}"), ("clusters", f"{cm.n_clusters:,}"),
            ("folded", f"{folded:,} ({folded / max(1, cm.n_docs):.1%})"),
            ("clustering", str(cm.config.get("clustering", "components"))), ("created", str(cm.created_at))]
    if cm.path:
        rows.insert(0, ("path", cm.path))
    parts = ["<div class=\"diversify-clustermap\"><table>",
             *(f"<tr><th style=\"text-align:left\">{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in rows),
             "</table>"]
    big = [i for i in order if sizes[i] > 1]
    if big:
        parts.append("<table><tr><th>cluster</th><th>size</th><th>representative</th><th>stages</th></tr>")
        for i in big:
            c = int(cids[i])
            names = ", ".join(stage_names(cm.cluster_stages(c)))
            parts.append(f"<tr><td>{c}</td><td>{int(sizes[i]):,}</td><td>{esc(str(cm.representative_of(c)))}</td>"
                         f"<td>{esc(names)}</td></tr>")
        parts.append("</table>")
    parts.append("</div>")
    return "".join(parts)
