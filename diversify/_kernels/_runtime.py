"""How the kernels meet the process they run in: Numba's on-disk cache and its threading layer.

Cache
-----
Every kernel is compiled with Numba's on-disk cache, found by Numba's own rule: ``NUMBA_CACHE_DIR``
if set, else ``__pycache__`` next to these modules, else the user cache directory
(``$XDG_CACHE_HOME/numba`` or ``~/.cache/numba``). When none of them can be written (a read-only
install run by a user without a writable home: the usual container), Numba refuses to define a
cached function. Then, unless ``NUMBA_CACHE_DIR`` is set (the user chose the place; we do not pick
another), the kernels are cached in a private per-user directory, ``<tempdir>/diversify-numba-<uid>``,
used only when :func:`private_dir` accepts it: created with mode 0700, and refused if it is a
symbolic link, not a directory, owned by another user or open to group or others, or if a directory
above it could let another user replace it (writable by others without the sticky bit, or owned by
another user who is not root). A cache file is pickled code: a directory someone else can write into
would let them run code in this process. Otherwise the kernels run uncached (compiled in every
process). Either way one warning goes to the ``diversify`` logger, once per process; nothing raises.
Numba's global configuration is left as it was (the directory is set only while a kernel's cache is
created).

Threading layer
---------------
Numba picks ``tbb``, then ``omp``, then ``workqueue`` by default. GNU OpenMP (what Numba's Linux
wheels carry) cannot run in a forked child: a process that built and then forks (``multiprocessing``
with the fork start method, a preloading server) would have every child that builds killed. So
unless the user chose (``NUMBA_THREADING_LAYER`` or ``NUMBA_THREADING_LAYER_PRIORITY``, in the
environment or in numba.config) or Numba's threads were already started, the first parallel kernel
selects Numba's ``forksafe`` layer: ``tbb`` when installed, else ``workqueue`` on Linux (OpenMP
too elsewhere). ``workqueue`` aborts the process when two threads launch parallel work at once, so
parallel kernels are launched under one lock while that layer (or any but ``tbb``/``omp``) runs.
A forked child gets a fresh lock (a fork may happen while another thread holds it: Numba's
workqueue restarts its own threads in the child). A child forked after GNU OpenMP started in its
parent gets a :class:`~diversify.errors.ConfigError` from its first parallel kernel instead of being
killed.
"""

from __future__ import annotations

import functools
import logging
import os
import stat
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any, Optional

import numba

log = logging.getLogger("diversify")
#: numba's settings module; its attributes are set from the environment at run time, so the type
#: checker does not know them
_config: Any = numba.config

# --------------------------------------------------------------------------- cache

#: the fallback once decided: None = Numba's own locators work; a path = our private directory;
#: "" = uncached
_fallback: Optional[str] = None
_warned = False


def private_dir_path() -> Optional[str]:
    """``<tempdir>/diversify-numba-<uid>``, or None where there is no uid or no writable temp dir.

    The temp dir is the first writable one of ``$TMPDIR``, ``$TEMP``, ``$TMP``, ``/tmp``,
    ``/var/tmp``, ``/usr/tmp`` (:func:`tempfile.gettempdir`'s list without its last resort, the
    current directory: a cache never lands in whatever directory the process was started from).
    """
    if not hasattr(os, "geteuid"):
        return None
    names = [os.environ.get(v) for v in ("TMPDIR", "TEMP", "TMP")] + ["/tmp", "/var/tmp", "/usr/tmp"]
    effective = os.access in os.supports_effective_ids
    for base in names:
        if base and os.path.isdir(base) and os.access(base, os.W_OK | os.X_OK, effective_ids=effective):
            return os.path.join(os.path.abspath(base), f"diversify-numba-{os.geteuid()}")
    return None


def _held_by_others(path: str, uid: int) -> Optional[str]:
    """Why another user could replace entries of directory ``path`` (and so ours), or None."""
    st = os.stat(path)
    if st.st_uid not in (0, uid):
        return f"{path} is owned by uid {st.st_uid}"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX:
        return f"{path} is writable by other users and not sticky (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def private_dir(path: str) -> Optional[str]:
    """Make ``path`` a cache directory private to this user; None if it is, else why it is not.

    Rules: every directory above it is owned by root or this user and, if others can write it, has
    the sticky bit (so nobody else can rename ``path`` away and put their own in its place); ``path``
    is created with mode 0700 if missing; it must then be a real directory (not a symbolic link),
    owned by this user, with no permission bit for group or others, and writable. Its contents are
    never inspected: a directory that fails a rule is not used at all.
    """
    uid = os.geteuid()
    try:
        parent = os.path.realpath(os.path.dirname(os.path.abspath(path)))
        probe = parent
        while True:
            why = _held_by_others(probe, uid)
            if why:
                return why
            up = os.path.dirname(probe)
            if up == probe:
                break
            probe = up
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
        st = os.lstat(path)
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"
    if stat.S_ISLNK(st.st_mode):
        return f"{path} is a symbolic link"
    if not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a directory"
    if st.st_uid != uid:
        return f"{path} is owned by uid {st.st_uid}, not {uid}"
    if st.st_mode & 0o077:
        return f"{path} has mode {stat.S_IMODE(st.st_mode):04o}, not 0700"
    try:
        tempfile.TemporaryFile(dir=path).close()
    except OSError as exc:
        return f"{path} is not writable: {exc.strerror or exc}"
    return None


def _warn_once(message: str) -> None:
    global _warned
    if not _warned:
        _warned = True
        log.warning(message)


def _user_places() -> str:
    home = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return f"{os.path.join(os.path.dirname(os.path.abspath(__file__)), '__pycache__')} or {os.path.join(home, 'numba')}"


def _decide_fallback() -> str:
    """Called when Numba found no writable cache place: our private directory, or "" (uncached)."""
    uncached = ("diversify's kernels run uncached: they are compiled again in every process (tens of "
                "seconds before the first build)")
    user_dir = _config.CACHE_DIR
    if user_dir:
        _warn_once(f"NUMBA_CACHE_DIR={user_dir} is not writable (nor {_user_places()}); {uncached}. "
                   "Point NUMBA_CACHE_DIR at a directory this user can write.")
        return ""
    path = private_dir_path()
    why = private_dir(path) if path else "no writable temporary directory"
    if why is None:
        assert path is not None
        _warn_once(f"numba cannot write its cache in {_user_places()}; diversify's kernels are cached "
                   f"in {path} (private to this user). Set NUMBA_CACHE_DIR to a writable directory to "
                   "choose the place.")
        return path
    _warn_once(f"numba cannot write its cache in {_user_places()}, and the private fallback is not "
               f"safe to use ({why}); {uncached}. Set NUMBA_CACHE_DIR to a directory this user can write.")
    return ""


def _cache_in(path: str, disp: Any) -> bool:
    before = _config.CACHE_DIR
    _config.CACHE_DIR = path  # read once, when the function's cache locator is made
    try:
        disp.enable_caching()
        return True
    except RuntimeError:
        return False
    finally:
        _config.CACHE_DIR = before


def enable_cache(disp: Any) -> None:
    """Give one dispatcher Numba's on-disk cache where one can be written; never raises."""
    global _fallback
    if not hasattr(disp, "enable_caching") or _fallback == "":  # NUMBA_DISABLE_JIT, or uncached
        return
    if _fallback is None:
        try:
            disp.enable_caching()
            return
        except RuntimeError:  # "cannot cache function ...: no locator available"
            _fallback = _decide_fallback()
            if not _fallback:
                return
    if not _cache_in(_fallback, disp):  # the directory passed its check, then numba failed in it
        log.warning(f"numba could not use {_fallback} after all; diversify's kernels run uncached.")
        _fallback = ""


def cache_unwritable() -> bool:
    """True once kernels were found to run uncached (no writable cache place: see :func:`enable_cache`)."""
    return _fallback == ""


# --------------------------------------------------------------------------- threading layer

_DEFAULT_PRIORITY = ["tbb", "omp", "workqueue"]
_launch_lock = threading.Lock()
#: True once the running layer is known to take concurrent launches (tbb, omp): no lock then
_concurrent = False
#: set in a child forked after GNU OpenMP started in its parent
_forked_from_gnu_omp = False


def started_layer() -> Optional[str]:
    """The threading layer Numba started in this process, or None before its first parallel launch."""
    try:
        return str(numba.threading_layer())
    except ValueError:
        return None


def thread_count() -> int:
    """Numba's thread count, without starting its threads: ``numba.get_num_threads()`` launches the
    threading layer, which must wait for :func:`choose_threading_layer` (the first parallel kernel)."""
    if started_layer() is not None:
        return int(numba.get_num_threads())
    return int(_config.NUMBA_NUM_THREADS)


def choose_threading_layer() -> None:
    """Select Numba's ``forksafe`` layer unless the user chose a layer or the layer already started."""
    if started_layer() is not None:
        return
    if "NUMBA_THREADING_LAYER" in os.environ or "NUMBA_THREADING_LAYER_PRIORITY" in os.environ:
        return
    if str(_config.THREADING_LAYER).lower() != "default" or list(_config.THREADING_LAYER_PRIORITY) != _DEFAULT_PRIORITY:
        return  # set in code or in .numba_config.yaml
    _config.THREADING_LAYER = "forksafe"


def _gnu_omp() -> bool:
    if started_layer() != "omp":
        return False
    try:
        from numba.np.ufunc import omppool  # type: ignore[attr-defined]  # a compiled module
    except ImportError:  # pragma: no cover - omp started, so the module loaded
        return False
    return str(getattr(omppool, "openmp_vendor", "GNU")) == "GNU"


def _forked_gnu_omp_error():
    from ..errors import ConfigError

    return ConfigError(
        "this process was forked from one in which numba's GNU OpenMP threading layer had started "
        f"(NUMBA_THREADING_LAYER={os.environ.get('NUMBA_THREADING_LAYER', _config.THREADING_LAYER)}); "
        "GNU OpenMP cannot run in a forked child (numba would kill it). Build with "
        "NUMBA_THREADING_LAYER=workqueue or tbb (or leave it unset: diversify then picks a fork-safe "
        "layer), or start the children with the 'spawn' or 'forkserver' method.")


def _launch_serialized(disp: Callable, args: tuple):
    global _concurrent
    with _launch_lock:
        if _forked_from_gnu_omp:
            raise _forked_gnu_omp_error()
        choose_threading_layer()
        out = disp(*args)
        _concurrent = started_layer() in ("tbb", "omp")
    return out


def parallel_launcher(fn: Callable, disp: Callable) -> Callable:
    """A plain Python function that launches the parallel kernel ``disp`` (compiled from ``fn``).

    The first launch selects the threading layer (:func:`choose_threading_layer`); launches are
    serialized unless the layer takes concurrent ones. The kernel stays reachable as ``.dispatcher``.
    Parallel kernels are called from Python only, never from other kernels.
    """

    @functools.wraps(fn)
    def launch(*args):
        if _concurrent:
            return disp(*args)
        return _launch_serialized(disp, args)

    launch.dispatcher = disp  # type: ignore[attr-defined]
    return launch


def in_blocks(disp: Callable, args: tuple, n: int, block: int) -> None:
    """Run the serial kernel ``disp(*args, lo, hi)`` over the documents ``0 .. n`` in blocks of at
    least ``block``, the blocks taken in turn by up to :func:`thread_count` threads (``disp``
    releases the GIL). Each document's outputs depend on that document alone, so the result is the
    same for any number of threads.

    Why not ``parallel=True``: on a fresh install a parallel kernel compiles ~2 s longer than the
    same loop serial (measured on the sketch kernel: 6.4-7.1 s against 4.3 s), and the kernels
    launched this way are compiled by the command itself, on its critical path (the others by the
    helper of :mod:`diversify._kernels.ahead`). A batch of one block runs in the calling thread.
    """
    threads = 1 if _config.DISABLE_JIT else thread_count()  # kernels run as Python: threads only contend for the GIL
    size = max(block, -(-n // (threads * 8)))  # ~8 blocks a thread: balanced, few calls
    nblocks = -(-n // size)
    if nblocks <= 1 or threads <= 1:
        disp(*args, 0, n)
        return
    import itertools
    from concurrent.futures import ThreadPoolExecutor

    taken = itertools.count()  # next() on it is atomic under the GIL
    workers = min(threads, nblocks)

    def work() -> None:
        for b in taken:
            if b >= nblocks:
                return
            disp(*args, b * size, min(n, (b + 1) * size))

    with ThreadPoolExecutor(max_workers=workers - 1, thread_name_prefix="diversify-kernel") as pool:
        rest = [pool.submit(work) for _ in range(workers - 1)]
        work()
        for f in rest:
            f.result()


def _after_fork_in_child() -> None:
    global _launch_lock, _concurrent, _forked_from_gnu_omp
    _launch_lock = threading.Lock()  # the parent's may be held by a thread the child does not have
    if _gnu_omp():
        _forked_from_gnu_omp = True
        _concurrent = False  # every launch takes the checked path


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


# --------------------------------------------------------------------------- compile clock


class CompileClock:
    """Seconds this process spent getting kernels ready, from Numba's events: ``numba:compile``
    (a real compilation; nested ones count once, under the outermost) and ``numba:compiler_lock``
    (held to compile and to load a compiled kernel from the on-disk cache). Numba compiles under
    its one global lock, so the events of two threads never interleave."""

    def __init__(self) -> None:
        self.compiled = 0  # outermost compilations (a kernel and the kernels it calls count once)
        self.compile_seconds = 0.0
        self.jit_seconds = 0.0  # compiling plus loading from the cache
        self._depth = {"numba:compile": 0, "numba:compiler_lock": 0}
        self._t0 = {"numba:compile": 0.0, "numba:compiler_lock": 0.0}

    def start(self, kind: str) -> None:
        self._depth[kind] += 1
        if self._depth[kind] == 1:
            self._t0[kind] = time.perf_counter()

    def end(self, kind: str) -> None:
        self._depth[kind] -= 1
        if self._depth[kind] == 0:
            dt = time.perf_counter() - self._t0[kind]
            if kind == "numba:compile":
                self.compiled += 1
                self.compile_seconds += dt
            else:
                self.jit_seconds += dt

    def snapshot(self) -> dict:
        """``compiled`` (count), ``compile_s`` and ``load_s`` (from the cache) so far."""
        return dict(compiled=self.compiled, compile_s=self.compile_seconds,
                    load_s=max(0.0, self.jit_seconds - self.compile_seconds))


compile_clock = CompileClock()


def _install_compile_clock() -> None:
    from numba.core import event

    class _Clock(event.Listener):
        def on_start(self, ev):
            compile_clock.start(ev.kind)

        def on_end(self, ev):
            compile_clock.end(ev.kind)

    for kind in ("numba:compile", "numba:compiler_lock"):
        event.register(kind, _Clock())


_install_compile_clock()


def kernel_ready(disp: Any) -> bool:
    """Whether calling the kernel ``disp`` costs no compilation: it ran in this process, or numba's
    on-disk cache holds an index for it (an index of stale entries would still compile: a guess
    that errs toward using the kernel), or the kernels run as Python (``NUMBA_DISABLE_JIT``)."""
    if not hasattr(disp, "signatures"):
        return True
    if disp.signatures:
        return True
    index = getattr(getattr(getattr(disp, "_cache", None), "_cache_file", None), "_index_path", None)
    return isinstance(index, str) and os.path.exists(index)
