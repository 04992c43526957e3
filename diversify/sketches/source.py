"""The text source for re-shingling: the texts of a build's documents at hand after sketching,
with what sketching kept to re-shingle them fast (the encodings of non-ASCII chunks, each text's
shingle count). The exact checks of borderline pairs (:mod:`diversify.linking.exact`) and the cut of
components into clusters (:mod:`diversify.clusters.guarantee`) re-shingle documents from it."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..config import BuildConfig
from ..text import encode_batch, sorted_unique_of_buffer

__all__ = ["TextSource", "EncodedTexts", "reshingle", "reshingled", "texts_at"]


@dataclass
class TextSource:
    """The random-access texts of a build's documents ``offset``, ``offset + 1``, ... (an ``add``'s
    new documents follow the artifact's: ``offset`` is the artifact's size)."""

    texts: Sequence
    offset: int = 0
    # the encoded bytes of (some of) those texts, kept from sketching for the exact checks
    encoded: Optional[EncodedTexts] = None
    # uint32 (len(texts),): the shingles (repeats included) sketching found in texts[j], the room
    # re-shingling them for an exact check needs (see diversify.text.sorted_unique_of_buffer)
    shingle_counts: Optional[np.ndarray] = None


#: bytes of encoded non-ASCII chunks kept from sketching for the exact checks (see EncodedTexts)
KEEP_ENCODED = 256 << 20


class EncodedTexts:
    """The encoded chunks of non-ASCII documents (``encode_batch``'s buffer and offsets), kept
    after sketching while they fit in ``budget`` bytes, so that the exact checks of borderline
    pairs and the cut into clusters re-shingle those documents without normalizing them again.

    A document's encoding does not depend on the batch it was encoded in (tests/unit/test_text_batch.py
    checks ``encode_batch`` against the per-document rule), so bytes taken from here are the bytes a
    fresh ``encode_batch`` would give. All-ASCII chunks are not kept: their encoding is a view of
    the joined str, cheap to make again. On a corpus where many non-ASCII documents are
    re-shingled, normalizing them again was a large share of the build (docs/building.md).
    """

    def __init__(self, budget: Optional[int] = None) -> None:
        self.budget = KEEP_ENCODED if budget is None else budget
        self.kept = 0
        self.starts: list[int] = []  # first document (0-based, within the texts) of each kept chunk
        self.ends: list[int] = []
        self.chunks: list[tuple[np.ndarray, np.ndarray]] = []

    def keep(self, start: int, block: Sequence[str], buf: np.ndarray, offsets: np.ndarray) -> None:
        held = buf.base.nbytes if isinstance(buf.base, np.ndarray) else buf.nbytes  # a view keeps all its base
        if all(map(str.isascii, block)) or self.kept + held > self.budget:
            return
        self.kept += held
        self.starts.append(start)
        self.ends.append(start + len(block))
        self.chunks.append((buf, offsets))

    def encode(self, docs: Sequence[int], texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """``encode_batch([texts[d] for d in docs])``, from the kept chunks where they hold ``d``."""
        pieces: list = [None] * len(docs)
        missing: list[int] = []
        for j, d in enumerate(docs):
            c = bisect.bisect_right(self.starts, d) - 1
            if c >= 0 and d < self.ends[c]:
                buf, offsets = self.chunks[c]
                i = d - self.starts[c]
                pieces[j] = buf[offsets[i]: offsets[i + 1]]
            else:
                missing.append(j)
        if len(missing) == len(docs):
            return encode_batch(texts_at(texts, docs))
        if missing:
            buf, offsets = encode_batch(texts_at(texts, [docs[j] for j in missing]))
            for t, j in enumerate(missing):
                pieces[j] = buf[offsets[t]: offsets[t + 1]]
        offsets = np.zeros(len(docs) + 1, dtype=np.int64)
        np.cumsum(np.fromiter((p.size for p in pieces), dtype=np.int64, count=len(docs)), out=offsets[1:])
        out = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.uint8)
        out.flags.writeable = False  # the kernels' one buffer type
        return out, offsets


def reshingle(source: TextSource, docs: Sequence[int], config: BuildConfig
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`diversify.text.sorted_unique_shingles` of documents ``docs`` (build positions, at or
    after ``source.offset``), from the kept encodings where there are some."""
    return _shingle_gathered(_gather(source, docs), config)


def reshingled(source: TextSource, batches: Iterable[Sequence[int]], config: BuildConfig
               ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """:func:`reshingle` of each batch of documents in turn, the texts of the next batch read
    (from the file, decoded and encoded: Python work, under the GIL) in a thread while the kernels
    (which release it) shingle this one, and while the caller uses what this yields: reading the
    texts back is a large part of the exact checks (docs/building.md, "Exact checks at scale")."""
    it = iter(batches)
    first = next(it, None)
    if first is None:
        return
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="diversify-texts") as pool:
        ahead = pool.submit(_gather, source, first)
        for batch in it:
            gathered = ahead.result()
            ahead = pool.submit(_gather, source, batch)
            yield _shingle_gathered(gathered, config)
        yield _shingle_gathered(ahead.result(), config)


def _gather(source: TextSource, docs: Sequence[int]) -> tuple[np.ndarray, np.ndarray, Optional[np.ndarray]]:
    """The encoded texts of ``docs`` (see :func:`reshingle`): (buffer, offsets, room or None)."""
    texts, off = source.texts, source.offset
    local = [int(d) - off for d in docs]
    room = source.shingle_counts[local] if source.shingle_counts is not None else None
    if source.encoded is None or not source.encoded.chunks:
        buf, offsets = encode_batch(texts_at(texts, local))
    else:
        buf, offsets = source.encoded.encode(local, texts)
    return buf, offsets, room


def _shingle_gathered(gathered: tuple[np.ndarray, np.ndarray, Optional[np.ndarray]], config: BuildConfig
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    buf, offsets, room = gathered
    return sorted_unique_of_buffer(buf, offsets, config.text, config.seed, room)


def texts_at(texts: Sequence[str], docs: Sequence[int]) -> list:
    """``[texts[d] for d in docs]``; a sequence that reads its texts from a file
    (:class:`diversify.corpus.filetexts.JsonlTexts`) reads them in one call, in file order."""
    take = getattr(texts, "take", None)
    return take(docs) if take is not None else [texts[d] for d in docs]
