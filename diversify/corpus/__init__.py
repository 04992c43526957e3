"""Corpora in and out: readers for JSONL / CSV / Parquet / text folders (:mod:`.readers`, over
:mod:`.inputs` and :mod:`.jsonl`), .npy vectors and label tables (:mod:`.tables`), the per-document export (:mod:`.export`) and generated corpora with planted
near-duplicates (:mod:`.datagen`)."""
