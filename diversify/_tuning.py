"""Process tuning: every setting diversify makes to its own process, in one place.

Nothing here changes a result; each setting trades memory, system time or idle threads, and each
stands aside where the user set it themselves:

- the environment the console script sets before numpy loads (:func:`tune_environment`):
  OpenBLAS threads that sleep at once, numpy's huge-page advice off for text builds;
- glibc's allocator: keep freed memory for reuse during a command (:func:`keep_freed_memory`),
  give the heap's free pages back between the stages of a large build (:func:`release_free_heap`,
  :func:`trim_after_sketching`);
- numpy's huge-page advice off while a text build runs in a library process (:func:`small_pages`);
- Python's cycle collector off for the commands that make no cycles (:func:`tune_command`).

The console script (:mod:`diversify._console`, :mod:`diversify.cli.main`) applies the process-wide
ones; library callers get only :func:`small_pages` and the trims, which restore or touch nothing of
theirs. This module imports only the standard library (numpy is read lazily): the console script
imports it before numpy loads.

Giving the C heap's free pages back between the stages of a large build: sketching a corpus turns
every document into a Python ``str`` for a moment (~3 KB each, from two threads: the reader and the
sketch worker), and the reader's blocks and the chunks' buffers come and go with them. glibc keeps
what they freed in its heap for reuse (the console script asks it to: :func:`keep_freed_memory`),
and the linking stage that follows allocates its large arrays elsewhere (mapped on their own), so
the freed sketching memory stayed resident under the linking stage's peak. ``malloc_trim(0)``
returns every free page of the heap to the system once sketching is over, which lowers the peak of
a large build (docs/building.md has the figures).

Elsewhere than glibc (musl, macOS, Windows) the allocator settings do nothing: those allocators
give memory back in their own ways, and nothing here is needed for a correct result.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import threading
from collections.abc import Iterator, Sequence

__all__ = ["QUIET_LIBRARIES", "BUILD_PAGES", "NO_CYCLE_COLLECTOR", "TRIM_FROM", "tune_environment", "tune_command",
           "keep_freed_memory", "allocator_tuned", "mark_allocator_tuned", "release_free_heap", "trim_after_sketching",
           "small_pages", "build_pages"]

#: set for the process unless the user set them (:func:`tune_environment`). OpenBLAS (numpy's, and
#: scipy's, which numba loads to check for BLAS) starts a thread per core when it loads, and they spin 2**28 cycles before they
#: sleep: CPU time of every command spent waiting for nothing. With 2**4 they sleep at once; the
#: threads stay, so a matrix product still runs on every core. Not for a command given --vectors: the
#: vectors' SimHash makes many products one after another, and waking the threads for each one costs
#: more than it saves (docs/building.md).
QUIET_LIBRARIES = {"OPENBLAS_THREAD_TIMEOUT": "4"}

#: set for `build` and `add` of texts unless the user set it. numpy asks the kernel for huge pages
#: (madvise) on every array of 4 MB or more, and a huge page is zeroed whole at its first touch:
#: the buffers that hold re-shingled documents leave room for every byte's shingle and are touched
#: in a third of it, and with huge pages all of it was zeroed (docs/building.md).
BUILD_PAGES = {"NUMPY_MADVISE_HUGEPAGE": "0"}


def tune_environment(args: Sequence[str], environ: dict | None = None) -> None:
    """Set the console script's environment for the command line ``args`` (without the program
    name), before numpy and numba load: :data:`QUIET_LIBRARIES` unless the command is given
    ``--vectors``, and :data:`BUILD_PAGES` too for ``build`` and ``add`` of texts. A variable the
    user set is left as it is."""
    env = os.environ if environ is None else environ
    if any(arg == "--vectors" or arg.startswith("--vectors=") for arg in args):
        return
    for name, value in QUIET_LIBRARIES.items():
        env.setdefault(name, value)
    if list(args[:1]) in (["build"], ["add"]):
        for name, value in BUILD_PAGES.items():
            env.setdefault(name, value)


#: commands the console script runs without Python's cycle collector. Reading a corpus makes a
#: container per document (msgspec's record dicts, the lists of ids and texts), and every 700 new
#: containers start a collection, every tenth of those a deeper one, each walking the containers
#: alive. A build makes no cycles per document, and the process ends with the command
#: (docs/building.md).
NO_CYCLE_COLLECTOR = frozenset({"build", "add"})


def tune_command(command: str, *, stream: bool = False) -> None:
    """The console script's settings for one command: the allocator keeps freed memory
    (:func:`keep_freed_memory`; not under ``--stream``, whose point is memory), and the commands
    of :data:`NO_CYCLE_COLLECTOR` run without the cycle collector."""
    if not stream:
        keep_freed_memory()
    if command in NO_CYCLE_COLLECTOR:
        gc.disable()


#: glibc ``mallopt`` parameters (malloc.h): M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3
#: allocations from this size on are mapped afresh and unmapped on free (see keep_freed_memory)
_MMAP_FROM = 1 << 26


def keep_freed_memory() -> bool:
    """Ask glibc's allocator to keep freed memory for reuse instead of giving it back to the kernel.

    A command allocates and frees buffers of tens to hundreds of MB one stage after another (the
    file's blocks, the joined texts, the sketches, the candidate pairs). By default glibc maps each
    one above 128 KB-32 MB afresh and unmaps it on free, so every stage faults its pages in again
    from zeroed memory. Served from the heap, which is not trimmed, they fault far less, for a
    little more peak memory; a command's process exits when it is done, so nothing is held for
    long. Allocations of 64 MiB and more (at 1M documents: the signatures, the band keys and their
    sort, the exact checks' buffers) are still mapped afresh and given back when freed: kept in the
    heap too, they raised the peak of a large build for no gain in time. ``build --stream`` is left
    alone: there the never-trimmed heap raised the peak for the same time (docs/building.md has the
    figures). Only the console script does this (library callers keep their allocator as it is), only under glibc, and not
    when the user has tuned malloc themselves (``MALLOC_*`` or ``GLIBC_TUNABLES`` set). Returns
    whether the allocator was tuned.
    """
    try:  # what glibc says of itself (platform.libc_ver() reads the interpreter's whole binary)
        libc = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (AttributeError, ValueError, OSError):  # no confstr, or a C library without that name
        libc = ""
    if not sys.platform.startswith("linux") or not libc.startswith("glibc"):
        return False
    if "GLIBC_TUNABLES" in os.environ or any(k.startswith("MALLOC_") for k in os.environ):
        return False
    try:
        import ctypes

        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):  # pragma: no cover - glibc without the usual soname
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    settings = ((_M_MMAP_THRESHOLD, _MMAP_FROM), (_M_TOP_PAD, 1 << 28), (_M_TRIM_THRESHOLD, (1 << 31) - 1))
    tuned = all([mallopt(param, value) == 1 for param, value in settings])  # a list: every one is set
    if tuned:
        mark_allocator_tuned()
    return tuned


_TRIM: list = []
_TUNED = [False]


def mark_allocator_tuned() -> None:
    """Record that glibc was asked to keep freed memory in its heap (:func:`keep_freed_memory`)."""
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


#: documents from which a build gives the sketching's freed heap back before linking: a large build's
#: peak falls; a small one's does not move, and the pages the linking stage then faults in again
#: cost CPU time, so smaller builds keep them
TRIM_FROM = 262_144


def trim_after_sketching(n_docs: int) -> bool:
    """:func:`release_free_heap` once a build of ``n_docs`` documents has sketched them, when it is
    large enough for the freed pages to matter (:data:`TRIM_FROM`); whether it was called."""
    if n_docs < TRIM_FROM:
        return False
    release_free_heap()
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
    has it (``NUMPY_MADVISE_HUGEPAGE=0``, see :data:`BUILD_PAGES`), then as it was.

    numpy advises the kernel to back every array of 4 MB or more with 2 MB pages, each zeroed whole
    at its first touch; a build's buffers are many and short-lived, so the advice costs a library
    build system time for nothing (docs/building.md). Nested and concurrent builds share
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


def build_pages(vectors) -> contextlib.AbstractContextManager:
    """:func:`small_pages` for a build of texts; a build given vectors keeps numpy's huge pages
    (the console script leaves them on for ``--vectors`` too)."""
    return small_pages() if vectors is None else contextlib.nullcontext()
