"""What a second process compiles ahead of a command, and whether one is compiling now.

The process itself (when it pays, starting and stopping it, the made-up build it runs) is
:mod:`diversify.engines.ahead`, above the stages it runs: this module holds only what the layers
below it read, the kernels it compiles (:func:`ahead_kernels`) and the record of a running one
that the cut of components into clusters asks (:func:`defer_to_helper`).
"""

from __future__ import annotations

from typing import Any, Optional

__all__ = ["ahead_kernels", "defer_to_helper", "wait_for_helper", "track", "awaited"]

#: the helper of the running :func:`diversify.engines.ahead.compile_ahead`, if one was started
#: (its ``Popen``; set and cleared there with :func:`track`)
_running: Optional[Any] = None
#: set when the command took a path that left a kernel to the helper: the helper is then waited for
_awaited = False


def ahead_kernels(clustering: str = "clique") -> list:
    """The dispatchers the helper compiles: those of the MinHash build after sketching, with the
    cut that ``clustering`` runs."""
    from . import hashsort as hs
    from . import linking as kl
    from .union import roots

    out = [kl.link_scan, kl.link_pairs_exact, hs._scatter_top, hs._sort_buckets, roots]
    if clustering == "clique":
        from .clique import clique_groups

        out.append(clique_groups)
    elif clustering == "star":
        from .fold import fold_groups

        out.append(fold_groups)
    return out


def track(proc: Optional[Any]) -> None:
    """Record the helper the running command started (None: none was, or the command ended)."""
    global _running, _awaited
    _running, _awaited = proc, False


def awaited() -> bool:
    """Whether the running command left a kernel to its helper (:func:`defer_to_helper`)."""
    return _awaited


def wait_for_helper(seconds: float) -> None:
    """Wait (up to ``seconds``) for a helper of this process that is still compiling: the caller
    needs a kernel the helper compiles and has no path without it, so it loads the helper's cache
    entry instead of compiling the same kernel a second time on the same cores."""
    import time

    deadline = time.monotonic() + seconds
    while _running is not None and _running.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)


def defer_to_helper() -> bool:
    """True while a helper of this process is still compiling. The caller then takes a path that
    needs no kernel the helper compiles (rather than compile the same kernel a second time on the
    same cores), and the command waits for the helper when it ends, so that the kernel is in the
    cache for the next one."""
    global _awaited
    if _running is None or _running.poll() is not None:
        return False
    _awaited = True
    return True
