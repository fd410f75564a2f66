"""A search's answer as cuda.tile's own result type. Standard library only (see :mod:`tileprobe.record.capture`)."""
from __future__ import annotations

import sys

from .names import TUNE_MODULE


def _tuning_result(config, median_us=None, samples=None, ci_us=None):
    """A real ``cuda.tile.tune.TuningResult`` whose ``best`` is the program's own configuration object, with the
    figures it was picked by (a table row's or a rank's pick): ``median_us`` (µs; None: 0), ``samples`` (None: 0),
    ``ci_us`` ([low, high] µs; its half-width is the error margin, 0 without it)."""
    mod = sys.modules[TUNE_MODULE]
    ci = ci_us or [None, None]
    margin = (ci[1] - ci[0]) / 2 if None not in ci else 0.0
    best = mod.Measurement(config=config, mean_us=float(median_us or 0.0),
                           num_samples=int(samples or 0), error_margin_us=float(margin))
    return mod.TuningResult(best=best, successes=(best,), failures=())
