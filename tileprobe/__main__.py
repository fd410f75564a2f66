"""``python -m tileprobe``: the ``tileprobe`` command."""
import sys

from ._entry import main

sys.exit(main())
