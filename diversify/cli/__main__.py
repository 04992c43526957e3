"""``python -m diversify.cli``."""

import sys

from .main import main

sys.exit(main())
