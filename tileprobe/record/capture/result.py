"""A search's answer as cuda.tile's own result type. Standard library only (see :mod:`tileprobe.record.capture`)."""
from __future__ import annotations

import sys

from .names import TUNE_MODULE


def _tuning_result(config, row: dict):
    """A real ``cuda.tile.tune.TuningResult`` whose ``best`` is the program's own configuration object."""
    mod = sys.modules[TUNE_MODULE]
    ci = row.get("ci_us") or [None, None]
    margin = (ci[1] - ci[0]) / 2 if None not in ci else 0.0
    best = mod.Measurement(config=config, mean_us=float(row.get("median_us") or 0.0),
                           num_samples=int(row.get("samples") or 0), error_margin_us=float(margin))
    return mod.TuningResult(best=best, successes=(best,), failures=())
