"""``python -m health``: see ``health.cli``."""

import sys

from health.cli import main

sys.exit(main(sys.argv[1:]))
