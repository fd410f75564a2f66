"""The ``tileprobe use`` extension of the hook: coverage counts and per-kernel control (``--off``/``--pin``), in
:mod:`tileprobe.record.usehook`, loaded by path from the record folder beside this package. Standard library only
(see :mod:`tileprobe.record.capture`).
"""
from __future__ import annotations

import os
import sys

from .describe import _plain


def usehook():
    """The ``tileprobe use`` side of the hook (:mod:`tileprobe.record.usehook`, loaded by path from the record folder
    beside this package, standard library only), or None when it cannot be loaded (said once)."""
    if "_tileprobe_use_hook" in sys.modules:
        return sys.modules["_tileprobe_use_hook"]
    try:
        import importlib.util
        spec = importlib.util.spec_from_file_location(
            "_tileprobe_use_hook",
            os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "usehook.py"))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    except Exception as e:
        sys.stderr.write(f"tileprobe use: coverage and per-kernel control are off in process {os.getpid()}: "
                         f"{type(e).__name__}: {_plain(e)}\n")
        mod = None
    sys.modules["_tileprobe_use_hook"] = mod
    return mod
