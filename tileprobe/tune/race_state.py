"""A race's records: what the measure and check functions return (:class:`Batch`, :class:`CheckOutcome`) and
each candidate's state (:class:`Entry`), shared by the race (:mod:`tileprobe.tune.race`) and its steady-state final
(:mod:`tileprobe.tune.final`)."""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from tileprobe.records import Key, KeyedRecord
from tileprobe.tune.stats import summary

#: Statuses that take a candidate out of the race for good.
FAILED = ("hang", "crash", "error", "wrong")


@dataclass
class Batch:
    """One batch of samples of one candidate, as the measure function returns it.

    status: ``ok`` | ``hang`` | ``crash`` | ``error``. samples_us: per-launch times (µs). clocks_before/after:
    ``{"sm_mhz", "mem_mhz", ...}`` read just before and after the samples (None when unknown). info: anything
    else the worker said (grid, warm-up launches, driver facts).
    """
    status: str = "ok"
    samples_us: list = field(default_factory=list)
    clocks_before: dict | None = None
    clocks_after: dict | None = None
    error: str = ""
    wall_s: float = 0.0
    info: dict = field(default_factory=dict)


class ClockReading(KeyedRecord):
    """One reading of the GPU's clocks (MHz) and throttle reasons, as the GPU worker sends it
    (:mod:`tileprobe.run.clocks`)."""
    __slots__ = ()
    sm_mhz = Key[float | None]()
    mem_mhz = Key[float | None]()
    reasons = Key[list | None]()


class CheckDetail(KeyedRecord):
    """A check task's answer (:func:`tileprobe.run.batch.check_candidate`): its status and detail (``rel_err``,
    ``tolerance``, ``against``: reference | default, ``message``, ``error`` …), every key kept for
    :attr:`CheckOutcome.detail`."""
    __slots__ = ()
    status = Key[str | None]()
    against = Key[str | None]()
    message = Key[str | None]()
    error = Key[str | None]()


@dataclass
class BatchLog:
    """What the race keeps of one batch of a candidate (``Entry.batches``): its round (the race's, or the round
    the steady-state final ran after), status, number of samples, the GPU's clock readings before and after
    (``{"sm_mhz", "mem_mhz", "reasons", ...}`` as the worker read them; None when unknown), its wall time (s) and,
    for a batch of the final, its pass (1-based; None for a race batch)."""
    round: int
    status: str
    n: int
    clocks_before: dict | None = None
    clocks_after: dict | None = None
    wall_s: float = 0.0
    final: int | None = None

    def clock_readings(self) -> list[dict]:
        """The clock readings it has (before, then after)."""
        return [r for r in (self.clocks_before, self.clocks_after) if r]


@dataclass
class CheckOutcome:
    """A correctness check: status ``ok`` | ``wrong`` | ``unchecked`` (nothing to compare with) | ``hang`` |
    ``crash`` | ``error``; detail: rel_err, tolerance, against (``reference`` | ``default``), message …"""
    status: str
    detail: dict = field(default_factory=dict)


@dataclass
class Entry:
    """One candidate's state: status, samples (µs), batches (clock readings, round, size), check, reason; ``final``:
    the median (µs) of each of its batches in the steady-state final (module doc 7), empty when it had none."""
    id: str
    status: str = "racing"
    samples: list = field(default_factory=list)
    batches: list[BatchLog] = field(default_factory=list)
    reason: str = ""
    eliminated_round: int | None = None
    check: dict | None = None
    info: dict = field(default_factory=dict)
    joined_round: int = 1     # the first round it could take part in (later: it was compiled during the race)
    final: list = field(default_factory=list)
    _median: tuple = field(default=(0, 0.0), init=False, repr=False, compare=False)   # (samples counted, median)

    @property
    def final_us(self) -> float | None:
        """The mean of its final batches' medians (µs), None without any."""
        return statistics.fmean(self.final) if self.final else None

    @property
    def median(self) -> float:
        """Median of the samples taken so far (µs), worked out again only when samples came. Raises
        StatisticsError when there are none."""
        n = len(self.samples)
        if self._median[0] != n or not n:
            self._median = (n, statistics.median(self.samples))
        return self._median[1]

    def final_vs(self, other: Entry) -> float:
        """Its final figure ÷ ``other``'s over the passes both ran (a drift over the final hits both alike)."""
        k = min(len(self.final), len(other.final))
        return statistics.fmean(self.final[:k]) / statistics.fmean(other.final[:k])

    def summary(self, confidence: float = 0.95) -> dict:
        """Median and its ``confidence`` interval (µs) over the samples: :func:`tileprobe.tune.stats.summary`."""
        return summary(self.samples, confidence)
