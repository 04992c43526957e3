"""Command line: ``diversify build | add | stats | export | eval | tune | demo``.

Run ``diversify CMD --help``. Clustering flags and their defaults come from the config models
(:mod:`.options`), so the command line builds what ``diversify.build()`` builds.
"""

from .main import main, make_parser, run

__all__ = ["main", "make_parser", "run"]
