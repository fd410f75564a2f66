"""Is a time change real? The one significance rule of ``compare``, ``bisect`` and ``gate``.

A change between two runs of one variant (A, B) counts when BOTH hold:

1. **significant**: Welch's two-sided t-test (unequal variances) rejects "same mean" at ``alpha`` = 0.05, as
   pyperf's ``is_significant`` does (pyperf uses Student's pooled test with a t table; Welch's form is the same test
   without assuming the two releases' spreads are equal). It is run on the samples when both runs kept them
   (``run.samples_us``), else on the summary statistics (``reps``, ``mean_us``,
   ``stdev_us``), else, for runs recorded before ``stdev_us`` existed, with the standard deviation estimated from
   the interquartile range (σ ≈ IQR / 1.349, exact for a normal distribution) and the median for the mean.
2. **large enough**: the medians differ by at least ``min_effect`` (default 2 %): with 100 samples a 0.3 %
   difference can be significant and still not matter (or be clock drift between two interleaved runs).

The noise printed beside a time (``± x``) is the 95 % confidence half-width of the mean, t(0.975, n-1)·s/√n.
The t distribution is computed here (regularized incomplete beta by Lentz's continued fraction, Numerical Recipes
§6.4) so the GPU host needs no SciPy; ``tests/test_noise.py`` checks it against ``scipy.stats.t``.

Python API: :func:`time_change` → :class:`TimeChange` or None; :func:`TimeStats.of` reads a run record.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from tileprobe.schema import VariantRun, p_text

#: Smallest relative change of the median that counts (2 %): below it a significant change is "within noise".
MIN_EFFECT = 0.02
#: Two-sided significance level of the t-test.
ALPHA = 0.05
#: σ ≈ IQR / 1.349 for a normal distribution (the IQR of N(0, 1) is 1.349).
_IQR_PER_SIGMA = 1.349


@dataclass(frozen=True)
class TimeStats:
    """One run's times (µs): sample count, mean, standard deviation, median, quartiles, and the samples when kept.
    ``source``: ``samples`` | ``summary`` | ``iqr`` (how ``stdev_us`` was obtained)."""
    n: int
    mean_us: float
    stdev_us: float
    median_us: float
    p25_us: float | None = None
    p75_us: float | None = None
    samples_us: tuple[float, ...] | None = None
    source: str = "summary"

    @classmethod
    def of(cls, run: VariantRun | None) -> TimeStats | None:
        """The statistics of a run record (``VariantRecord.run``), or None when it has no usable time (not ok,
        no median, fewer than 2 samples)."""
        run = run or VariantRun()
        if run.status not in (None, "ok") or not isinstance(run.median_us, (int, float)):
            return None
        samples = run.samples_us
        if isinstance(samples, Sequence) and len(samples) >= 2:
            xs = [float(x) for x in samples]
            return cls(len(xs), statistics.fmean(xs), statistics.stdev(xs), float(run.median_us),
                       run.p25_us, run.p75_us, tuple(xs), "samples")
        n = int(run.reps or 0)
        if n < 2:
            return None
        med = float(run.median_us)
        if isinstance(run.stdev_us, (int, float)):
            return cls(n, float(run.mean_us or med), float(run.stdev_us), med, run.p25_us,
                       run.p75_us, None, "summary")
        p25, p75 = run.p25_us, run.p75_us
        if p25 is None or p75 is None:
            return None
        return cls(n, med, (float(p75) - float(p25)) / _IQR_PER_SIGMA, med, p25, p75, None, "iqr")

    def ci95_us(self) -> float:
        """95 % confidence half-width of the mean (µs): t(0.975, n-1) · s / √n."""
        return t_quantile(0.975, self.n - 1) * self.stdev_us / math.sqrt(self.n)


@dataclass(frozen=True)
class TimeChange:
    """A compared pair: ``ratio`` = B median / A median, Welch's ``t``, ``df`` and two-sided ``p``, whether the
    change is ``significant`` (p < alpha) and ``large`` (|ratio - 1| ≥ min_effect), and the ``method`` words."""
    a: TimeStats
    b: TimeStats
    ratio: float
    t: float
    df: float
    p: float
    significant: bool
    large: bool
    method: str
    min_effect: float = MIN_EFFECT

    @property
    def changed(self) -> bool:
        """True when the change is beyond noise: significant and at least ``min_effect``."""
        return self.significant and self.large

    @property
    def direction(self) -> str:
        """``slower`` | ``faster`` (B against A, by the medians)."""
        return "slower" if self.ratio > 1 else "faster"

    def ratio_text(self) -> str:
        """``1.65× slower`` / ``1.20× faster`` (always ≥ 1×)."""
        r = self.ratio if self.ratio >= 1 else 1 / self.ratio
        return f"{r:.2f}× {self.direction}"

    def text(self) -> str:
        """One line: ``time 13,360.0 → 22,090.0 µs (1.65× slower, p 1e-12, Welch t-test on samples)``; a change
        within noise says why it does not count."""
        head = f"time {self.a.median_us:,.1f} → {self.b.median_us:,.1f} µs ({self.ratio_text()}"
        if self.changed:
            return f"{head}, {p_text(self.p)}, {self.method})"
        why = (f"under the {self.min_effect:.0%} minimum effect" if self.significant
               else f"not significant, {p_text(self.p)}")
        return f"{head}: within noise, {why}; {self.method})"


def time_change(run_a: VariantRun | None, run_b: VariantRun | None, *, min_effect: float = MIN_EFFECT,
                alpha: float = ALPHA) -> TimeChange | None:
    """Compare two run records' times by the rule of the module doc; None when either has no usable time."""
    a, b = TimeStats.of(run_a), TimeStats.of(run_b)
    if a is None or b is None or a.median_us <= 0:
        return None
    t, df, p = welch(a, b)
    src = {"samples": "samples", "summary": "n, mean, stdev", "iqr": "stdev estimated from the IQR"}
    how = a.source if a.source == b.source else ("summary" if "iqr" not in (a.source, b.source) else "iqr")
    method = f"Welch t-test on {src[how]}, n {a.n}+{b.n}"
    ratio = b.median_us / a.median_us
    return TimeChange(a, b, ratio, t, df, p, p < alpha, abs(ratio - 1) >= min_effect, method, min_effect)


def welch(a: TimeStats, b: TimeStats) -> tuple[float, float, float]:
    """Welch's t statistic (B − A), its Welch–Satterthwaite degrees of freedom and the two-sided p-value.
    Two runs without spread: p 0 when the means differ, 1 when equal."""
    va, vb = a.stdev_us ** 2 / a.n, b.stdev_us ** 2 / b.n
    diff = b.mean_us - a.mean_us
    if va + vb == 0:
        return (math.copysign(math.inf, diff) if diff else 0.0), float(a.n + b.n - 2), (0.0 if diff else 1.0)
    t = diff / math.sqrt(va + vb)
    df = (va + vb) ** 2 / ((va ** 2 / (a.n - 1) if va else 0.0) + (vb ** 2 / (b.n - 1) if vb else 0.0))
    return t, df, 2 * t_sf(abs(t), df)


def t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with ``df`` degrees of freedom (t ≥ 0)."""
    if math.isinf(t):
        return 0.0
    return 0.5 * betainc(df / 2, 0.5, df / (df + t * t))


def t_quantile(q: float, df: float) -> float:
    """The ``q``-quantile (0.5 < q < 1) of Student's t with ``df`` degrees of freedom, by bisection of
    :func:`t_sf` (to 1e-10)."""
    lo, hi = 0.0, 1e3
    for _ in range(200):
        mid = (lo + hi) / 2
        if t_sf(mid, df) > 1 - q:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-10:
            break
    return (lo + hi) / 2


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b) (Numerical Recipes §6.4: continued fraction)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1 - x) / b


def _betacf(a: float, b: float, x: float) -> float:
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h
