"""``python -m tileprobe.cli``: the ``tileprobe`` command (as ``python -m tileprobe``)."""
import sys

from tileprobe.cli import main

sys.exit(main())
