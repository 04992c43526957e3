"""``diversify serve``: the filter as an HTTP service, and a page to look at clusters (:mod:`.page`)."""
