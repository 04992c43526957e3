"""The ``diversify`` console script and ``python -m diversify``: the environment first, then the
command line (:func:`diversify.cli.run`). Nothing here imports numpy: what it sets must be in the
environment before the libraries that read it load."""

from __future__ import annotations

import os
import sys
from typing import NoReturn

__all__ = ["BUILD_PAGES", "QUIET_LIBRARIES", "run"]

#: set for the process unless the user set them. OpenBLAS (numpy's, and scipy's, which numba loads
#: to check for BLAS) starts a thread per core when it loads, and they spin 2**28 cycles before they
#: sleep: ~0.2 CPU-s of every command on two cores, spent waiting for nothing. With 2**4 they sleep
#: at once; the threads stay, so a matrix product still runs on every core. Paired runs (6 each) of
#: `build` on 100,000 documents: 0.965x the CPU-seconds. Not for a command given --vectors: the
#: vectors' SimHash makes many products one after another, and waking the threads for each one made
#: a build of 200,000 vectors 1.05x slower.
QUIET_LIBRARIES = {"OPENBLAS_THREAD_TIMEOUT": "4"}

#: set for `build` and `add` of texts unless the user set it. numpy asks the kernel for huge pages
#: (madvise) on every array of 4 MB or more, and a huge page is zeroed whole at its first touch:
#: the buffers that hold re-shingled documents leave room for every byte's shingle and are touched
#: in a third of it, and with huge pages all of it was zeroed. Paired runs (6 each) of `build` on
#: 100,000 documents: 0.943x the CPU-seconds, 0.949x the wall time, system time 0.77 -> 0.55 s,
#: 38 MiB less peak; at 1M documents two runs each showed no difference beyond the noise.
BUILD_PAGES = {"NUMPY_MADVISE_HUGEPAGE": "0"}


def run() -> NoReturn:
    if not any(arg == "--vectors" or arg.startswith("--vectors=") for arg in sys.argv[1:]):
        for name, value in QUIET_LIBRARIES.items():
            os.environ.setdefault(name, value)
        if sys.argv[1:2] in (["build"], ["add"]):
            for name, value in BUILD_PAGES.items():
                os.environ.setdefault(name, value)
    from .cli import run as run_command_line

    run_command_line()
