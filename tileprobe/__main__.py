"""``python -m tileprobe``: the ``tileprobe`` command."""
import sys

from tileprobe._entry import main

sys.exit(main())
