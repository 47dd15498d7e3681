"""``python -m streams.cli``: the same as the ``loopwatch`` console script."""

import sys

from streams.cli import main

sys.exit(main())
