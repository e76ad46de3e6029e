"""``python -m labkit.exercises``: see :mod:`labkit.exercises.cli`."""

import sys

from labkit.exercises.cli import main

sys.exit(main())
