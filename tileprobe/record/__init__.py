"""From a real program to probes: record what a program launches, or read cuTile's compile cache.

``record(["python", "app.py"], "out")`` runs the command with every Python process it starts recording its
``cuda.tile.launch`` calls (:mod:`.capture`, :mod:`.hook`), then groups the launches per kernel (:mod:`.group`) and
writes one probe file per kernel (:mod:`.write`) that ``tileprobe audit`` loads unchanged.
``probes_from_cache(path, "out")`` writes probe skeletons from the compile cache (:mod:`.cache`).
No rich, no argparse here: the command line is ``tileprobe/cli/record.py``. See docs/RECORD.md.
"""
from __future__ import annotations

from tileprobe.record.session import RecordResult, probes_from_log, record

# Imports inside functions here are lazy on purpose: at the module head they would add 0.07 s to its import
# (python -X importtime, the 2-core machine, 2026-12-02), paid by every command that imports it.

__all__ = ["RecordResult", "probes_from_cache", "probes_from_log", "record"]


def probes_from_cache(*args, **kwargs):
    """See :func:`tileprobe.record.cache.probes_from_cache`."""
    from tileprobe.record.cache import probes_from_cache as impl
    return impl(*args, **kwargs)
