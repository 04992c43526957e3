"""``python -m diversify``: the command line."""

from diversify.cli import run

run()
