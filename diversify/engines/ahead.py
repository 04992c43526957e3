"""Compile the linking kernels in a second process while this one reads and sketches (cold caches only).

On a fresh install every kernel compiles on its first call, one after another, under Numba's one
global lock: most of the first ``diversify demo``'s time, a large part of it in the kernels that
run after sketching (bucket scan, exact pair check, component roots, the cut into clusters;
docs/building.md has the figures). Their inputs do not depend on the texts, so a second process can compile them
from small made-up signatures while the command reads its input and compiles the sketch kernel:
each process writes its kernels to Numba's on-disk cache, and this process loads them from there
when it reaches them.

Only the console script does this (:func:`compile_ahead` in ``build`` and ``demo``), and only when
it can pay: a kernel is missing from the cache, the cache can be written, the MinHash stage runs
(its kernels are the ones compiled here), the machine has a second core, and
``DIVERSIFY_COMPILE_AHEAD`` is not ``0`` (``1`` starts the helper whenever the cache can be written,
even if every kernel is in it already). Nothing depends on the helper: if it is late, fails or is
absent, the command compiles what it needs itself (the same code, so the same bytes); a helper still
running when the command ends is stopped (Numba writes each cache file under a temporary name and
renames it, so a stopped helper leaves no half-written entry). One kernel is left to the helper
instead: when the cut's kernel is not ready and the helper still runs, the cut of up to a
bound of components takes its numpy path (same clusters) rather than compile the kernel a
second time on the same cores (:func:`diversify._kernels.ahead.defer_to_helper`); the command then
waits for the helper at its end, so that the next command finds the kernel in the cache.

``python -m diversify.engines.ahead CONFIG_JSON`` is the helper's entry point. It lives with the engines
because it runs a build's stages; the kernels it compiles and the record of a running helper that
the cut into clusters reads are :mod:`diversify._kernels.ahead`, below the stages.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Optional

import numpy as np

from .._kernels import ahead as running
from .._kernels.ahead import ahead_kernels

if TYPE_CHECKING:
    from ..config import BuildConfig

#: the environment switch (``0`` turns the helper off)
ENV = "DIVERSIFY_COMPILE_AHEAD"
#: pairs of made-up documents: more components than the cut's kernel threshold
_PAIRS = 1100


def worth_starting(cfg: BuildConfig) -> bool:
    """Whether a helper would compile something this command needs and could not load (see the module docstring)."""
    from .._kernels import _runtime

    switch = os.environ.get(ENV, "").strip()
    if switch == "0" or cfg.minhash is None:
        return False
    if switch == "1":  # always (a warm cache too: the helper then only loads what it finds)
        ahead_kernels(cfg.clustering)
        return not _runtime.cache_unwritable()
    if _cores() < 2:
        return False
    kernels = ahead_kernels(cfg.clustering)  # importing them decides where (and whether) the cache is written
    if _runtime.cache_unwritable():
        return False
    return not all(_runtime.kernel_ready(k) for k in kernels)


#: how the last helper of this process ended: None (none started), "finished" or "stopped"
last_helper: Optional[str] = None
#: seconds the command waits at its end for a helper it left a kernel to (then stops it)
_WAIT_SECONDS = 300


@contextlib.contextmanager
def compile_ahead(cfg: BuildConfig) -> Iterator[Optional[subprocess.Popen]]:
    """Run the body with a helper compiling :func:`ahead_kernels` when :func:`worth_starting`;
    the helper is stopped when the body ends, if it has not finished by then, unless the body
    left a kernel to it (:func:`diversify._kernels.ahead.defer_to_helper`): then it is waited for."""
    proc = None
    loader = None
    if worth_starting(cfg):
        try:
            proc = subprocess.Popen([sys.executable, "-m", __name__, cfg.model_dump_json()], stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=True)
        except OSError:  # no process could be started (limits): compile here, as without the helper
            proc = None
    elif _load_beside(cfg):
        import threading

        loader = threading.Thread(target=_load, args=(cfg,), name="diversify-kernel-load", daemon=True)
        loader.start()
    running.track(proc)
    try:
        yield proc
    finally:
        wait = running.awaited()
        running.track(None)
        if proc is not None:
            _end(proc, wait=wait)
        if loader is not None:
            loader.join()


def _load_beside(cfg: BuildConfig) -> bool:
    """Whether to load the cached kernels in a thread beside the input's reading: a warm cache
    (nothing for a helper to compile), the MinHash stage on, a second core, the switch not ``0``."""
    return os.environ.get(ENV, "").strip() != "0" and cfg.minhash is not None and _cores() >= 2


def _cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def _load(cfg: BuildConfig) -> None:
    """Load (or compile) the kernels of a build: the sketch kernel on two short texts, then :func:`warm`.
    Numba's loading is mostly LLVM work through ctypes, which releases the GIL, so it overlaps the
    main thread's reading. Any failure is left for the build itself to meet."""
    with contextlib.suppress(Exception):
        from ..sketches.batch import sketch_texts

        sketch_texts(["kernel warm up text one two three", "kernel warm up text four five six"], None, cfg,
                     timings={})
        warm(cfg)


def _end(proc: subprocess.Popen, *, wait: bool = False) -> None:
    global last_helper
    try:
        if wait:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=_WAIT_SECONDS)
    finally:  # Ctrl-C while waiting stops the helper too
        last_helper = "finished" if proc.poll() is not None else "stopped"
        if last_helper == "stopped":
            proc.terminate()
        try:
            proc.wait(timeout=10)  # waited for: its CPU time counts in this process's children's
        except subprocess.TimeoutExpired:  # pragma: no cover - a helper that ignores SIGTERM
            proc.kill()
            proc.wait()


def made_up_sketches(cfg: BuildConfig):
    """Sketches of ``2 * _PAIRS`` documents in pairs whose signatures differ in one slot, as the
    sketcher makes them (same dtypes and shapes), without texts."""
    from ..ids import normalize_ids
    from ..sketches.batch import Sketches

    assert cfg.minhash is not None
    rng = np.random.default_rng(0)
    n = 2 * _PAIRS
    sig = np.repeat(rng.integers(0, 2**32, size=(_PAIRS, cfg.minhash.num_perm), dtype=np.uint32), 2, axis=0)
    sig[1::2, 0] ^= np.uint32(1)
    sk = Sketches(ids=normalize_ids(list(range(n))), lengths=np.full(n, 100, dtype=np.uint32),
                  exact=rng.integers(0, 2**63, size=n, dtype=np.uint64), empty=np.zeros(n, dtype=bool),
                  minhash=np.ascontiguousarray(sig))
    if cfg.text.shingle == "auto":
        sk.char_docs = np.zeros(n, dtype=bool)
    return sk


def warm(cfg: BuildConfig) -> None:
    """Run the build's path after sketching on :func:`made_up_sketches`, with one exact pair check
    before the cut into clusters (the order a build needs the kernels in)."""
    from .._kernels.linking import ShingleRows
    from ..linking.exact import link_exact
    from ..linking.link import link, make_forest
    from ..stages import STAGE_MINHASH
    from ..staging import linking_config
    from .finish import finish

    sk = made_up_sketches(cfg)
    timings: dict = {}
    linked = link(sk, linking_config(cfg), timings=timings)
    # the exact pair check runs before the cut into clusters in a build: compiled here in that order
    rows = ShingleRows(np.zeros(2, dtype=np.int64)[:-1], np.ones(1, dtype=np.int64), np.zeros(1, dtype=np.uint64))
    pairs = np.zeros((1, 2), dtype=np.int64)
    link_exact(pairs, pairs, rows, cfg, make_forest(np.arange(2, dtype=np.int64), np.zeros(2, np.uint8), STAGE_MINHASH))
    finish(sk, cfg, linked, timings, aliases=np.zeros((0, 2), np.int64), raw_cluster=None,
           metadata=None, created_at="2000-01-01T00:00:00Z")


def main(argv: list[str]) -> int:
    from ..config import BuildConfig

    if len(argv) != 1:
        print("usage: python -m diversify.engines.ahead CONFIG_JSON", file=sys.stderr)
        return 2
    warm(BuildConfig.model_validate_json(argv[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
