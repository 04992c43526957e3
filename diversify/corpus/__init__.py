"""Corpora in and out: readers for JSONL / CSV / Parquet / text folders / .npy vectors
(:mod:`.readers`), the per-document export (:mod:`.export`) and generated corpora with planted
near-duplicates (:mod:`.datagen`)."""
