"""``python -m diversify.cli``."""

from .main import run

run()
