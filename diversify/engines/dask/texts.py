"""The texts the later stages need, kept on the workers from the one read of the corpus.

Under ``verify="auto"`` two stages after sketching read texts: the borderline join (:mod:`.borderline`)
re-shingles the documents of its pairs, and the cut (:mod:`.cut`) checks pairs of members exactly.
Rather than reading the input partitions again, each sketch task hands its partition's texts on
(:func:`split_sketched`), and once the filter of shared band keys exists only the texts of
*candidates* stay (:func:`keep_candidates`): the non-empty documents with a band key that passes the
filter. Every document either stage reads is one: a borderline pair's documents share a bucket, and
a member of a component of two or more is linked to another by a shared bucket or is an exact copy,
whose band keys are all its copies' keys. A kept partition looks like an input partition to those
stages (:class:`KeptTexts`: ``.texts[i]`` by position in the partition).

A kept partition is a future like the sketches: a task that fails, or a worker that is lost,
recomputes it from its lineage (the read of that input partition), so files, DataFrames and Bags
are still read again only then.
"""

from __future__ import annotations

import sys
from typing import Optional

import numpy as np

from ..._arrays import distinct_ascending
from ...config import BuildConfig

__all__ = ["KeptTexts", "needs_texts", "split_sketched", "sketches_of", "texts_of", "keep_candidates", "kept_count"]


class _ByPosition:
    """Texts of some documents of a partition, read by position in the partition."""

    def __init__(self, kept: np.ndarray, texts: list, size: int):
        self.slot = np.full(size, -1, dtype=np.int64)
        self.slot[kept] = np.arange(kept.size, dtype=np.int64)
        self.texts = texts

    def __len__(self) -> int:
        return len(self.texts)

    def __getitem__(self, i: int) -> str:
        j = int(self.slot[i])
        if j < 0:  # a stage asked for a document that cannot be in a bucket: a bug, never the input's fault
            raise LookupError(f"document {i} of this partition is not a candidate; its text was not kept")
        return self.texts[j]

    def take(self, local: np.ndarray) -> list:
        """The texts of documents ``local`` (positions in the partition), in that order."""
        slots = self.slot[np.asarray(local, dtype=np.int64)]
        if slots.size and int(slots.min()) < 0:
            raise LookupError(f"document {int(np.asarray(local)[np.argmin(slots)])} of this partition is not a candidate; "
                              "its text was not kept")
        texts = self.texts
        return [texts[j] for j in slots.tolist()]


def texts_bytes(texts: list) -> int:
    """Bytes a list of str takes in memory (the list and each string)."""
    return sys.getsizeof(texts) + sum(map(sys.getsizeof, texts))


class KeptTexts:
    """The kept texts of one input partition, read as an input partition's (``.texts[i]``)."""

    def __init__(self, texts, size: int, kept: Optional[np.ndarray] = None):
        self.size = size
        self.texts = texts if kept is None else _ByPosition(kept, texts, size)

    def take(self, local: np.ndarray) -> list:
        """The texts of documents ``local`` (positions in the partition), in that order."""
        if isinstance(self.texts, _ByPosition):
            return self.texts.take(local)
        texts = self.texts
        return [texts[j] for j in np.asarray(local, dtype=np.int64).tolist()]

    def __sizeof__(self) -> int:
        """What Dask weighs this partition by when it places tasks (its default, ``sys.getsizeof``,
        would see a few dozen bytes, and move the texts to a task instead of the task to the texts)."""
        texts = self.texts.texts if isinstance(self.texts, _ByPosition) else self.texts
        return object.__sizeof__(self) + texts_bytes(texts)


def needs_texts(cfg: BuildConfig) -> bool:
    """Whether a stage after sketching reads texts: the borderline join and the cut check pairs
    exactly under ``verify="auto"``."""
    return cfg.minhash is not None and cfg.minhash.verify == "auto"


def split_sketched(sketched: dict) -> tuple:
    """(the sketch columns, the partition's texts) of a sketch task that kept its texts."""
    cols = {k: v for k, v in sketched.items() if k != "texts"}
    return cols, sketched["texts"]


def sketches_of(sketched: dict) -> dict:
    return split_sketched(sketched)[0]


def texts_of(sketched: dict) -> KeptTexts:
    texts = split_sketched(sketched)[1]
    return KeptTexts(texts, len(texts))


def keep_candidates(kept: KeptTexts, cand: dict) -> KeptTexts:
    """Only the texts of the partition's candidates: the documents of its candidate rows
    (:func:`.bands.candidate_rows`: non-empty, a band key that may be shared)."""
    local = distinct_ascending(cand["doc"])
    return KeptTexts(kept.take(local), kept.size, local)


def kept_count(kept: KeptTexts) -> int:
    return len(kept.texts)
