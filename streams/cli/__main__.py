"""``python -m streams.cli``: the same as the ``loopwatch`` console script (:mod:`streams.console`)."""

import sys

from streams.console import main

sys.exit(main())
