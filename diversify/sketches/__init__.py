"""Sketches: MinHash signatures of shingle sets (Jaccard) and SimHash signatures of vectors (cosine).

:mod:`.minhash` and :mod:`.simhash` are the per-document primitives; :mod:`.batch` runs them over a
corpus in chunks and gathers the :class:`~diversify.sketches.batch.Sketches` the linking stages read;
:mod:`.source` is the text source the exact checks re-shingle from, :mod:`.memo` the exact Jaccard of
the pairs the linking checked, which it hands to the cut of components into clusters.
"""
