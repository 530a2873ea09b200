"""``python -m orchestrator.app.cli``: the ``axbgate`` command without the console script
(e.g. on a machine where the package is on PYTHONPATH but not installed)."""

import sys

from orchestrator.app.cli import main

sys.exit(main())
