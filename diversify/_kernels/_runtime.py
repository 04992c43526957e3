"""How the kernels meet the process they run in: Numba's on-disk cache and its threading layer.

Cache
-----
Every kernel is compiled with Numba's on-disk cache, and the cache never lives inside the installed
package (files there outlive ``pip uninstall``: a left-over ``diversify/_kernels/__pycache__``
becomes an empty namespace package that hides the next install). The place, decided once per
process by :func:`cache_place`:

1. ``NUMBA_CACHE_DIR`` when set: the user's choice, used as it is; when it cannot be written the
   kernels run uncached (no other place is picked);
2. else the per-user cache directory :func:`user_cache_dir` (``$XDG_CACHE_HOME/diversify/numba``,
   else ``~/.cache/diversify/numba``), used when :func:`private_dir` accepts it;
3. else (no writable home: the usual container) a private per-user directory,
   ``<tempdir>/diversify-numba-<uid>``, used when :func:`private_dir` accepts it;
4. else uncached (compiled in every process).

Inside the chosen place each kernel source state has its own subdirectory (:func:`diversify._kernels._sources.sources_digest`).

:func:`private_dir` creates the directory with mode 0700 and refuses it if it is a symbolic link,
not a directory, owned by another user or open to group or others, or if a directory above it
could let another user replace it (writable by others without the sticky bit, or owned by another
user who is not root). A cache file is pickled code: a directory someone else can write into would
let them run code in this process. Every step down the list logs one warning to the ``diversify``
logger, once per process; nothing raises. Numba's global configuration is left as it was (the
directory is set only while a kernel's cache is created). A user who set
``NUMBA_CACHE_LOCATOR_CLASSES`` gets Numba's own rule instead.

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

#: where the kernels are cached, once decided (:func:`cache_place`): a directory, ``""`` (uncached)
#: or :data:`_NUMBA_RULE`
_place: Optional[str] = None
#: the place when the user set ``NUMBA_CACHE_LOCATOR_CLASSES``: Numba's own locators decide
_NUMBA_RULE = "numba's own locators (NUMBA_CACHE_LOCATOR_CLASSES)"
_warned = False
_UNCACHED = ("diversify's kernels run uncached: they are compiled again in every process (tens of "
             "seconds before the first build)")


def user_cache_dir() -> Optional[str]:
    """``$XDG_CACHE_HOME/diversify/numba`` (an absolute ``XDG_CACHE_HOME``; a relative one is
    ignored, as the XDG rule says), else ``~/.cache/diversify/numba``; None without a home."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        home = os.path.expanduser("~")
        if not os.path.isabs(home):
            return None
        base = os.path.join(home, ".cache")
    return os.path.join(base, "diversify", "numba")


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
    return _writable(path)


def _writable(path: str) -> Optional[str]:
    try:
        tempfile.TemporaryFile(dir=path).close()
    except OSError as exc:
        return f"{path} is not writable: {exc.strerror or exc}"
    return None


def _user_dir(path: str) -> Optional[str]:
    """Make the per-user cache directory ``path`` (``.../diversify/numba``); None if usable, else why not.

    The two directories above it (the user's cache directory and ``diversify``) are created with
    mode 0700 when missing (the home itself never is); ``path`` must then pass :func:`private_dir`.
    Where there are no user ids (Windows) the directory only has to be writable.
    """
    ours = os.path.dirname(path)
    for d in (os.path.dirname(ours), ours):
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:
            pass
        except OSError as exc:
            return f"{d}: {exc.strerror or exc}"
    if hasattr(os, "geteuid"):
        return private_dir(path)
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"
    return _writable(path)


def _warn_once(message: str) -> None:
    global _warned
    if not _warned:
        _warned = True
        log.warning(message)


def _chosen_dir(path: str) -> str:
    """The user's ``NUMBA_CACHE_DIR``: itself when it can be written (created if missing), else "" with a warning."""
    try:
        os.makedirs(path, exist_ok=True)
        why = _writable(path)
    except OSError as exc:
        why = f"{path}: {exc.strerror or exc}"
    if why is None:
        return path
    _warn_once(f"NUMBA_CACHE_DIR={path} is not writable ({why}); {_UNCACHED}. Point NUMBA_CACHE_DIR at a "
               "directory this user can write.")
    return ""


def _decide_place() -> str:
    if getattr(_config, "CACHE_LOCATOR_CLASSES", ""):
        return _NUMBA_RULE
    if _config.CACHE_DIR:
        return _chosen_dir(str(_config.CACHE_DIR))
    default = user_cache_dir()
    why = _user_dir(default) if default else "no home directory"
    if why is None:
        assert default is not None
        return default
    where = f"{default} ({why})" if default else f"a per-user cache directory ({why})"
    path = private_dir_path()
    why_private = private_dir(path) if path else "no writable temporary directory"
    if why_private is None:
        assert path is not None
        _warn_once(f"numba cannot write its cache in {where}; diversify's kernels are cached in {path} (private to "
                   "this user). Set NUMBA_CACHE_DIR to a writable directory to choose the place.")
        return path
    _warn_once(f"numba cannot write its cache in {where}, and the private fallback is not safe to use "
               f"({why_private}); {_UNCACHED}. Set NUMBA_CACHE_DIR to a directory this user can write.")
    return ""


def cache_place() -> Optional[str]:
    """The directory the kernels of this process are cached under (decided on first use, see the
    module docstring), or None when they run uncached or Numba's own locators decide."""
    global _place
    if _place is None:
        _place = _decide_place()
    return _place if _place not in ("", _NUMBA_RULE) else None


#: serializes the moments numba's global cache directory is set (:func:`_cache_in`)
_config_lock = threading.Lock()


def _cache_in(path: str, disp: Any) -> bool:
    """Give ``disp`` a cache under ``path`` (in the subdirectory of today's kernel sources, see
    :func:`~diversify._kernels._sources.sources_digest`); False (and no cache) if numba put it anywhere else."""
    from numba.core.caching import NullCache

    from ._sources import sources_digest

    path = os.path.join(path, "src-" + sources_digest())
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except OSError:
        return False
    with _config_lock:  # numba's global, set for this one call; kernel modules load from two threads at once
        before = _config.CACHE_DIR
        _config.CACHE_DIR = path  # read once, when the function's cache locator is made
        try:
            disp.enable_caching()
        except RuntimeError:
            return False
        finally:
            _config.CACHE_DIR = before
    where = os.path.abspath(str(getattr(disp._cache, "_cache_path", "")))
    if where.startswith(os.path.join(os.path.abspath(path), "")):
        return True
    disp._cache = NullCache()  # numba could not use path and fell back to its own places (the package's __pycache__)
    return False


def enable_cache(disp: Any) -> None:
    """Give one dispatcher Numba's on-disk cache in :func:`cache_place`; never raises."""
    global _place
    if not hasattr(disp, "enable_caching"):  # NUMBA_DISABLE_JIT
        return
    cache_place()
    if _place == "":
        return
    if _place == _NUMBA_RULE:
        try:
            disp.enable_caching()
        except RuntimeError:  # "cannot cache function ...: no locator available"
            _warn_once(f"numba found no cache place with NUMBA_CACHE_LOCATOR_CLASSES="
                       f"{_config.CACHE_LOCATOR_CLASSES}; {_UNCACHED}.")
            _place = ""
        return
    assert _place is not None
    if not _cache_in(_place, disp):  # the directory passed its check, then numba failed in it
        log.warning(f"numba could not use {_place} after all; diversify's kernels run uncached.")
        _place = ""


def cache_unwritable() -> bool:
    """True once kernels were found to run uncached (no writable cache place: see :func:`enable_cache`)."""
    return _place == ""


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

    Why not ``parallel=True``: on a fresh install a parallel kernel compiles markedly longer than the
    same loop serial, and the kernels
    launched this way are compiled by the command itself, on its critical path (the others by the
    helper of :mod:`diversify.engines.ahead`). A batch of one block runs in the calling thread.
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
