"""Sketches: MinHash signatures of shingle sets (Jaccard) and SimHash signatures of vectors (cosine).

:mod:`.minhash` and :mod:`.simhash` are the per-document primitives; :mod:`.batch` runs them over a
corpus in chunks and gathers the :class:`~diversify.sketches.batch.Sketches` the linking stages read.
"""
