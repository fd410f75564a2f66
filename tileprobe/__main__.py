"""``python -m tileprobe``: the ``tileprobe`` command."""
import sys

from .cli import main

sys.exit(main())
