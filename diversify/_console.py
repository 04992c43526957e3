"""The ``diversify`` console script and ``python -m diversify``: the environment first, then the
command line (:func:`diversify.cli.run`). Nothing here imports numpy: what it sets must be in the
environment before the libraries that read it load (the settings are in :mod:`diversify._tuning`)."""

from __future__ import annotations

import os
import sys
from typing import NoReturn, Optional

from ._tuning import tune_environment

__all__ = ["run", "shadowed_package"]

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
    tune_environment(sys.argv[1:])
    from .cli import run as run_command_line

    run_command_line()
