"""``python -m labsupport.exercises``: see :mod:`labsupport.exercises.cli`."""

import sys

from labsupport.exercises.cli import main

sys.exit(main())
