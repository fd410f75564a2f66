"""Statistics of a candidate's samples: the median and a distribution-free confidence interval for it.

GPU times are skewed and have outliers (a clock step, another process), so the race compares **medians**, with
the order-statistic confidence interval of the median: for n sorted samples x₁ ≤ … ≤ xₙ and confidence 1 − α,
the interval is [x_r, x_s] with r = ⌊n/2 − z·√n/2⌋ and s = ⌈1 + n/2 + z·√n/2⌉ (1-based, clamped to 1 … n), z the
normal quantile (1.96 for 95 %). It is the normal approximation of the binomial(n, ½) interval (e.g. Conover,
*Practical Nonparametric Statistics*, 3rd ed., §3.2), needs no assumption about the distribution's shape, and
widens with drift between rounds (which the race's interleaving spreads over every candidate alike).
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

#: Normal quantiles for the confidence levels the race offers.
_Z = {0.90: 1.6449, 0.95: 1.9600, 0.99: 2.5758}


def z_value(confidence: float) -> float:
    """The two-sided normal quantile for ``confidence`` (0.90, 0.95 or 0.99).

    Raises:
        ValueError: another confidence level.
    """
    for level, z in _Z.items():
        if abs(level - confidence) < 1e-9:
            return z
    raise ValueError(f"confidence {confidence}: use one of {', '.join(str(k) for k in _Z)}")


#: Two-sided 95 % quantiles of Student's t for 1 … 9 degrees of freedom (any table of t, e.g. NIST/SEMATECH
#: e-Handbook of Statistical Methods, §1.3.6.7.2); more degrees of freedom take the last one, a little generous.
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262)


def t95(dof: int) -> float:
    """The two-sided 95 % quantile of Student's t with ``dof`` degrees of freedom (``dof`` ≥ 1; from 9 on, 9's).

    Raises:
        ValueError: ``dof`` below 1.
    """
    if dof < 1:
        raise ValueError(f"degrees of freedom {dof}: give at least 1")
    return _T95[min(dof, len(_T95)) - 1]


def median_ci(samples: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """The order-statistic confidence interval of the median (module doc), in the samples' unit.

    With fewer than 6 samples at 95 % the interval is the whole range (the method cannot do better).

    Raises:
        ValueError: no samples.
    """
    xs = sorted(samples)
    n = len(xs)
    if n == 0:
        raise ValueError("no samples")
    half = z_value(confidence) * math.sqrt(n) / 2.0
    r = max(1, math.floor(n / 2.0 - half))
    s = min(n, math.ceil(1 + n / 2.0 + half))
    return xs[r - 1], xs[s - 1]


def summary(samples: Sequence[float], confidence: float = 0.95) -> dict:
    """``n``, ``median_us``, ``ci_lo_us``, ``ci_hi_us``, ``p25_us``, ``p75_us``, ``min_us``, ``max_us``,
    ``mean_us`` of samples in µs (``{"n": 0}`` when there are none)."""
    xs = sorted(float(x) for x in samples)
    if not xs:
        return {"n": 0}
    lo, hi = median_ci(xs, confidence)
    q = statistics.quantiles(xs, n=4, method="inclusive") if len(xs) > 1 else [xs[0]] * 3
    return {"n": len(xs), "median_us": statistics.median(xs), "ci_lo_us": lo, "ci_hi_us": hi, "p25_us": q[0],
            "p75_us": q[2], "min_us": xs[0], "max_us": xs[-1], "mean_us": statistics.fmean(xs)}
