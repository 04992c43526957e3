"""The encoded batch as the kernels take it: read-only buffers, subsets of documents, and the
segments a large buffer is scanned in, one thread each."""

from __future__ import annotations

import numpy as np

__all__ = ["SEGMENT_FROM", "segments", "in_threads", "readonly", "subset"]


# The byte scans of non-ASCII batches (NFKC pieces, case folds) are serial kernels that release the
# GIL; a large batch is cut into segments at ASCII bytes (a code point boundary that starts no NFKC
# piece and sits inside no fold) and the segments are scanned in threads, one per numba thread.
# The results are put together in segment order: the same bytes as one scan.
SEGMENT_FROM = 1 << 20  # bytes: smaller buffers are scanned in one piece


def segments(raw: np.ndarray) -> list[tuple[int, int]]:
    """``(start, end)`` byte ranges covering ``raw`` in order, each inner cut at an ASCII byte."""
    from .._kernels._runtime import thread_count

    n = raw.size
    parts = min(thread_count(), max(1, n // SEGMENT_FROM))
    cuts = [0]
    for k in range(1, parts):
        at = n * k // parts
        ascii_at = np.flatnonzero(raw[at: at + (1 << 16)] < 0x80)  # a document's NUL separator at least
        if ascii_at.size and at + int(ascii_at[0]) > cuts[-1]:
            cuts.append(at + int(ascii_at[0]))
    cuts.append(n)
    return list(zip(cuts[:-1], cuts[1:]))


def in_threads(fn, jobs: list) -> list:
    """``[fn(*job) for job in jobs]``, the jobs after the first in threads (``fn`` releases the GIL)."""
    if len(jobs) == 1:
        return [fn(*jobs[0])]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=len(jobs) - 1, thread_name_prefix="diversify-scan") as pool:
        rest = [pool.submit(fn, *job) for job in jobs[1:]]
        first = fn(*jobs[0])
        return [first] + [f.result() for f in rest]


def readonly(buf: np.ndarray) -> np.ndarray:
    """``buf`` marked read-only: every buffer the kernels get has the one type Numba compiles
    them for (a writable buffer would be a second specialization, seconds on a fresh install)."""
    buf.flags.writeable = False
    return buf


def subset(buf: np.ndarray, offsets: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The encoded batch of documents ``idx`` only."""
    lens = offsets[idx + 1] - offsets[idx]
    sub = np.zeros(idx.size + 1, dtype=np.int64)
    np.cumsum(lens, out=sub[1:])
    parts = [buf[a:b] for a, b in zip(offsets[idx].tolist(), offsets[idx + 1].tolist())]
    return readonly(np.concatenate(parts) if parts else buf[:0].copy()), sub
