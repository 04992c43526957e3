"""``python -m diversify``: the command line."""

from diversify._console import run

run()
