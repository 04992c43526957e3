"""What :meth:`Index.add <diversify.index.core.Index.add>` did with each document, or what
:meth:`~diversify.index.core.Index.query` says it would do: a :class:`Match` per document."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

__all__ = ["Match"]


@dataclass(frozen=True)
class Match:
    """What ``add`` did with one document, or what it would do (``query``)."""

    #: the document's id (for ``query``: the id given, or its position in the batch)
    id: Any
    #: its cluster; None for a queried document that matches nothing (it would start a cluster)
    cluster: Optional[int]
    #: True when it is (would be) folded under an existing representative
    joined: bool
    #: id of that representative (the document itself when it starts a cluster; None in ``query``)
    representative: Any
    #: verified similarity to the representative (1.0 for a representative)
    similarity: float
    #: the representatives it was verified similar to, ``(id, similarity)``, in priority order
    matched: tuple = field(default_factory=tuple)

    def as_dict(self) -> dict:
        return {"id": self.id, "cluster": self.cluster, "joined": self.joined, "representative": self.representative,
                "similarity": round(self.similarity, 6),
                "matched": [{"id": i, "similarity": round(s, 6)} for i, s in self.matched]}
