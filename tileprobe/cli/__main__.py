"""``python -m tileprobe.cli``: the ``tileprobe`` command (as ``python -m tileprobe``)."""
import sys

from . import main

sys.exit(main())
