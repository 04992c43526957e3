"""The ``diversify`` console script and ``python -m diversify``: the environment first, then the
command line (:func:`diversify.cli.run`). Nothing here imports numpy: what it sets must be in the
environment before the libraries that read it load."""

from __future__ import annotations

import os
import sys
from typing import NoReturn, Optional

__all__ = ["BUILD_PAGES", "QUIET_LIBRARIES", "run", "shadowed_package"]

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


def shadowed_package() -> Optional[str]:
    """The one-line error when ``diversify`` was imported as a namespace package, else None.

    A folder named ``diversify`` without ``__init__.py`` earlier on ``sys.path`` than the real
    package (what ``pip uninstall`` leaves when the folder holds files it did not install, e.g. a
    cache written into the package by an older version) hides it: ``import diversify`` then gives
    an empty namespace and ``diversify/__init__.py`` never runs, so nothing in it can say so. An
    editable install still finds the submodules (this one included), so the console script can.
    """
    pkg = sys.modules.get("diversify")
    if pkg is None or getattr(pkg, "__file__", None) is not None:
        return None
    import shlex

    here = os.path.dirname(os.path.abspath(__file__))
    found = [os.path.abspath(p) for p in getattr(pkg, "__path__", [])]
    left = [p for p in found if p != here] or found
    return (f"the package 'diversify' resolves to a left-over folder without __init__.py ({', '.join(left)}), "
            f"which hides the installed package ({here}); it is what an earlier install left behind. Remove it "
            f"(rm -rf {' '.join(shlex.quote(p) for p in left)}) and run the command again; if it still fails, "
            "reinstall (pip install --force-reinstall diversify-retrieval, or pip install -e . from a checkout).")


def run() -> NoReturn:
    problem = shadowed_package()
    if problem is not None:
        sys.stderr.write("diversify: error: " + problem.replace("\n", "\\n") + "\n")
        sys.exit(2)
    if not any(arg == "--vectors" or arg.startswith("--vectors=") for arg in sys.argv[1:]):
        for name, value in QUIET_LIBRARIES.items():
            os.environ.setdefault(name, value)
        if sys.argv[1:2] in (["build"], ["add"]):
            for name, value in BUILD_PAGES.items():
                os.environ.setdefault(name, value)
    from .cli import run as run_command_line

    run_command_line()
