"""``python -m diversify``: the command line."""

import sys

from diversify.cli import main

sys.exit(main())
