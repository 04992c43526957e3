"""The exclusion budgets: how many ids a refetch may ask the store to leave out.

Two quantities, owned here by the online layer and passed down to the store adapters:

- :data:`MAX_EXCLUDE_MEMBERS` bounds what the :class:`~diversify.Diversifier` *asks* for: the
  not-yet-seen members of full clusters (and of clusters shown on earlier pages) it adds to a
  refetch's exclusion, on top of the ids already seen. It limits the online layer's own work
  (members listed per query) and is a per-Diversifier setting (``max_exclude_members=``).
- :data:`MAX_EXCLUDE_PER_CALL` bounds what one store call *carries*: the ids an adapter pushes
  down as a filter in one search; the ids beyond it are answered by a larger k and dropped by the
  adapter. It limits the size of the filter a vector store must evaluate, so it is a per-adapter
  setting (``max_exclude=``), and the default every adapter takes unless given another.

They are different quantities (one counts members the Diversifier lists, the other ids a single
store call may carry) and a request may hold more ids than one call carries; both defaults live
here so that neither layer sets its own.
"""

from __future__ import annotations

__all__ = ["MAX_EXCLUDE_MEMBERS", "MAX_EXCLUDE_PER_CALL"]

#: default ``max_exclude_members`` of the Diversifier and of every framework plugin
MAX_EXCLUDE_MEMBERS = 1000
#: default ``max_exclude`` of every store adapter (ids pushed down per store call)
MAX_EXCLUDE_PER_CALL = 256
