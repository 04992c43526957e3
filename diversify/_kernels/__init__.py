"""Numba kernels: the only modules of diversify that import numba.

Rules (see STYLE.md): kernels take preallocated arrays, never validate, never raise, and return
nothing or plain scalars. Hash arithmetic stays in ``uint64`` with typed constants. Validation and
errors live in the Python modules that call them. A ``parallel=True`` kernel is called from Python
only: its launcher (:mod:`._runtime`) chooses the threading layer and serializes launches where
the layer needs it. The on-disk cache and the fork rules are in :mod:`._runtime`.
"""

from __future__ import annotations

import os
from typing import Optional

#: the environment variable numba reads its thread count from, at its import
NUM_THREADS_VAR = "NUMBA_NUM_THREADS"


#: the most threads a pool may be asked for, whatever the machine: numba starts every one of them
#: when its threading layer first runs, and a count in the tens of thousands exhausts the process's
#: thread slots and leaves the kernel waiting for workers that never started
MIN_THREAD_CAP = 1024


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def thread_cap(cores: Optional[int] = None) -> int:
    """The largest ``NUMBA_NUM_THREADS`` accepted: :data:`MIN_THREAD_CAP`, or 4 × the cores on a
    machine with more than a quarter of that."""
    return max(MIN_THREAD_CAP, 4 * (_cores() if cores is None else cores))


def num_threads_error(environ: Optional[dict] = None):
    """The :class:`~diversify.errors.ConfigError` for a ``NUMBA_NUM_THREADS`` that is set but not a
    whole number from 1 to :func:`thread_cap`, or None.

    Numba reads it when it is imported: ``0`` or a negative count passes there and fails at the
    first parallel kernel with a bare ValueError; a value that is not a number only gets a warning
    and numba's default; a huge count starts that many threads and can hang the process once the
    system has no more to give. So it is checked here, before this package imports numba, in every
    process that runs kernels (the command line's helper too).
    """
    env = os.environ if environ is None else environ
    raw = env.get(NUM_THREADS_VAR)
    if raw is None:
        return None
    try:
        count: Optional[int] = int(raw)
    except ValueError:
        count = None
    cores = _cores()
    cap = thread_cap(cores)
    if count is not None and 1 <= count <= cap:
        return None
    from ..errors import ConfigError

    return ConfigError(
        f"{NUM_THREADS_VAR} (environment variable): numba's thread count must be a whole number from 1 to {cap:,}; "
        f"got {raw!r:.40}. Unset it (numba then uses the {cores} core{'s' if cores != 1 else ''} this process may "
        f"run on) or set it to a whole number, e.g. {NUM_THREADS_VAR}={cores}.")


_error = num_threads_error()
if _error is not None:
    raise _error
