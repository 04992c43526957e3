"""Giving the C heap's free pages back to the system between the stages of a large build.

Sketching a corpus turns every document into a Python ``str`` for a moment (~3 KB each, from two
threads: the reader and the sketch worker), and the reader's blocks and the chunks' buffers come
and go with them. glibc keeps what they freed in its heap for reuse (the console script asks it
to: see ``diversify.cli.main.keep_freed_memory``), and the linking stage that follows allocates
its large arrays elsewhere (mapped on their own), so the freed sketching memory stayed resident
under the linking stage's peak. ``malloc_trim(0)`` returns every free page of the heap to the
system once sketching is over: at 1M documents (3.3 GB of JSONL, 2 cores) the peak of a whole
build fell from 1,520-1,581 MiB (five runs) to 1,361-1,423 MiB (three runs), at ~10 ms a call.

Elsewhere than glibc (musl, macOS, Windows) this does nothing: those allocators give memory back
in their own ways, and nothing here is needed for a correct result.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator

__all__ = ["allocator_tuned", "mark_allocator_tuned", "release_free_heap", "small_pages"]

_TRIM: list = []
_TUNED = [False]


def mark_allocator_tuned() -> None:
    """Record that glibc was asked to keep freed memory in its heap (the console script does:
    ``diversify.cli.main.keep_freed_memory``)."""
    _TUNED[0] = True


def allocator_tuned() -> bool:
    """Whether :func:`mark_allocator_tuned` was called in this process: large short-lived buffers
    are then served from reused heap memory; otherwise glibc maps each one afresh."""
    return _TUNED[0]


def _malloc_trim():
    if not _TRIM:
        fn = None
        if sys.platform.startswith("linux"):
            import ctypes
            import ctypes.util

            try:
                fn = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim  # glibc only
                fn.argtypes, fn.restype = [ctypes.c_size_t], ctypes.c_int
            except (OSError, AttributeError):  # musl has no malloc_trim
                fn = None
        _TRIM.append(fn)
    return _TRIM[0]


def release_free_heap() -> bool:
    """Return the C heap's free pages to the system (glibc's ``malloc_trim(0)``); False where there
    is no such call. Between stages of a large build, not per batch."""
    fn = _malloc_trim()
    if fn is None:
        return False
    fn(0)
    return True


_PAGES_LOCK = threading.Lock()


class _PagesState:
    depth = 0  # builds inside small_pages() now
    before = True  # numpy's setting when the first of them entered


_PAGES = _PagesState()


def _hugepage_setter():
    try:
        from numpy._core import multiarray
    except ImportError:  # numpy 1.x
        from numpy.core import multiarray  # type: ignore[no-redef]
    return getattr(multiarray, "_set_madvise_hugepage", None)


@contextlib.contextmanager
def small_pages() -> Iterator[None]:
    """numpy's huge-page advice off while a text build runs in this process, as the console script
    has it (``NUMPY_MADVISE_HUGEPAGE=0``, see :mod:`diversify._console`), then as it was.

    numpy advises the kernel to back every array of 4 MB or more with 2 MB pages, each zeroed whole
    at its first touch; a build's buffers are many and short-lived, and on this project's 2-core VM
    ``diversify.build(texts)`` of 100,000 documents took 2.74-3.11 s with the advice and 2.24-2.27 s
    without (1.35 -> 0.35 s of system time, the same clusters). Nested and concurrent builds share
    one setting: the first to enter turns it off, the last to leave restores it. Left alone when the
    user set ``NUMPY_MADVISE_HUGEPAGE`` or numpy has no such switch. Only the advice for arrays
    allocated meanwhile changes, never a value.
    """
    setter = None if "NUMPY_MADVISE_HUGEPAGE" in os.environ else _hugepage_setter()
    if setter is None:
        yield
        return
    with _PAGES_LOCK:
        if _PAGES.depth == 0:
            _PAGES.before = bool(setter(False))
        _PAGES.depth += 1
    try:
        yield
    finally:
        with _PAGES_LOCK:
            _PAGES.depth -= 1
            if _PAGES.depth == 0:
                setter(_PAGES.before)
