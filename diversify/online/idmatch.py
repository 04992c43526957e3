"""How the ids a store returns are matched against the artifact's ids.

Rules (docs/online.md, "Ids that match"):

* An id that cannot be in any artifact (a str with lone surrogates, an int outside int64, a
  bool, a float, bytes, a tuple...) is an **unknown** id: never an error, never matched, passed
  through as its own cluster.
* Against an artifact with str ids, a ``uuid.UUID`` hit id is looked up as a str. The form
  the artifact writes its UUIDs in (canonical ``str(uuid)``, upper case, 32 hex digits,
  ``urn:uuid:``, braces; :data:`diversify.ids.UUID_FORMS`) is read from one of its ids when it
  is loaded; a UUID hit id in another form (Qdrant, for one, always returns the canonical
  form) is looked up again in the artifact's form.
* Against a plain ``{id: cluster_id}`` mapping or another lookup object, ids are opaque
  hashables compared with ``==``.

Everything else is the artifact's own rule (:func:`diversify.ids.query_keys`). When most hits
are unknown, :func:`diagnose` names the likely cause for the warning.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

import numpy as np

from ..ids import format_uuid, id_kind_of, lookup_id, parse_uuid, uuid_form

__all__ = ["id_info", "lookup_ids", "diagnose"]


def id_info(cluster_map: Any) -> tuple[Optional[str], Optional[str]]:
    """``(id_kind, uuid_form)`` of an artifact: ``("str", "hex")``, ``("int", None)``...

    ``(None, None)`` for a lookup that is not a ClusterMap (ids are then opaque). The UUID form
    is read from one id (the representative of the first cluster); never raises.
    """
    kind = getattr(cluster_map, "id_kind", None)
    if kind not in ("str", "int"):
        return None, None
    if kind == "int":
        return kind, None
    try:
        first = cluster_map.cluster_sizes()[0]
        return kind, uuid_form(cluster_map.representative_of(int(first[0]))) if len(first) else None
    except Exception:  # a damaged ids blob shows up (and is handled) when a query needs it
        return kind, None


def _normalized(x: Any, kind: str, form: Optional[str]) -> Any:
    """``x`` as the artifact's lookup takes it, or None when it cannot be one of its ids."""
    if isinstance(x, str) or id_kind_of(x) is not None:
        return lookup_id(x, kind)  # the one id rule (diversify.ids), the live index's too
    u = parse_uuid(x)
    if u is not None and kind == "str":
        return format_uuid(u, form or "canonical")  # the artifact's own UUID form
    return None


def lookup_ids(cluster_map: Any, ids: Sequence[Any], kind: Optional[str], form: Optional[str]) -> np.ndarray:
    """Cluster id of each id (int64, ``-1`` unknown) under the rules of the module docstring."""
    if kind is None:
        return np.asarray(cluster_map.lookup(ids))
    types = set(map(type, ids))
    if types == {str} or types == {int} or not types:
        out = np.asarray(cluster_map.lookup(ids))  # the artifact's own rule: unencodable / out of range = -1
    else:
        norm = [_normalized(x, kind, form) for x in ids]
        at = [j for j, x in enumerate(norm) if x is not None]
        out = np.full(len(ids), -1, dtype=np.int64)
        if at:
            out[at] = np.asarray(cluster_map.lookup([norm[j] for j in at]))
    if form is not None:
        _retry_uuids(cluster_map, ids, out, form)
    return out


def _retry_uuids(cluster_map: Any, ids: Sequence[Any], out: np.ndarray, form: str) -> None:
    """Unknown str ids that are UUIDs in another form than the artifact's: look them up in its form."""
    miss = np.flatnonzero(out == -1)
    if not miss.size:
        return
    at, alt = [], []
    for j in miss.tolist():
        x = ids[j]
        u = parse_uuid(x) if isinstance(x, str) else None
        if u is not None:
            a = format_uuid(u, form)
            if a != x:
                at.append(j)
                alt.append(a)
    if at:
        out[at] = np.asarray(cluster_map.lookup(alt))


def diagnose(sample: Any, kind: Optional[str], form: Optional[str], cluster_field: Optional[str],
             has_artifact: bool) -> str:
    """The likely cause of "most hits are unknown", from one unknown id, and the fix."""
    shown = repr(sample)[:80]
    if not has_artifact:
        return (f"the hits carry no `{cluster_field}` in their payload: write the cluster ids into the store with "
                f"store.write_clusters(cluster_map, cluster_field={cluster_field!r}), or pass cluster_map=")
    if isinstance(sample, str):
        try:
            sample.encode("utf-8")
        except UnicodeEncodeError:
            return (f"the store returns ids that are not valid UTF-8 (lone surrogates, e.g. {shown}), which no "
                    "artifact can hold: fix how the store's ids are decoded")
    k = id_kind_of(sample)
    if kind == "str" and k == "int":
        return (f"the store returns int ids (e.g. {shown}) but the artifact's ids are strings: build the artifact "
                "with the ids the store returns, or return str ids from the search")
    if kind == "int" and k == "str":
        return (f"the store returns str ids (e.g. {shown}) but the artifact's ids are ints: return int ids from the "
                "search (e.g. int(id)), or build the artifact with the store's str ids")
    if k is None and parse_uuid(sample) is None:
        return (f"the store returns ids of type {type(sample).__name__} (e.g. {shown}), which no artifact holds: "
                "return str or int ids from the search")
    if parse_uuid(sample) is not None and kind == "str" and form is None:
        return (f"the store returns UUIDs (e.g. {shown}) but the artifact's ids are not UUIDs: build the artifact "
                "with the ids the store returns (Qdrant point ids), or read the document id from the payload")
    return (f"the store's ids (e.g. {shown}) are not the ones the artifact was built with, or the documents were "
            "added after the build: check which id the search returns (Chroma: id_field; Qdrant: the point id; "
            "LangChain: Document.id) and run `diversify add` for new documents")
