"""The JSON parts of a tune's result that ``tileprobe tune``'s output reads, as records: the steady-state final
(:class:`FinalFacts`), the comparison with the tune under the previous compiler (:class:`PreviousTune`), a
candidate's result check (:class:`CheckFacts`) and the time split (:class:`TuneTimes`).

:class:`tileprobe.tune.result.ProblemResult` and :class:`~tileprobe.tune.result.CandidateRow` carry these as the
dicts their JSON and the store hold (``final``, ``previous``, ``check``, ``times``); :mod:`tileprobe.report.tune`
reads each once here (:func:`tileprobe.jsonrecord.from_dict`: a value of the wrong type is named with its field)
and uses attributes. Keys the records have no field for are ignored; a missing key reads the field's default.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tileprobe.jsonrecord import from_dict

__all__ = ["CheckFacts", "FinalFacts", "OldPickNow", "PickConfig", "PreviousTune", "TuneTimes"]


@dataclass
class FinalFacts:
    """The steady-state final (:class:`tileprobe.tune.race.RaceOutcome`'s ``final``, its ids renamed to the
    table's labels): the power limits that called it (``reasons``), complete ``passes``, the race's pick
    (``leader_before``), each contender's figure (µs: mean of its passes' medians) and its figure ÷ the pick's over
    the passes both ran (``vs_pick``), the final's ``pick`` and the labels that ``tie`` with it, whether it
    ``changed`` the race's pick, whether the budget ``cut`` it, or why it was ``skipped``; ``stopped``: why its
    passes ended before ``final_passes`` (the contenders statistically tied), when they did."""
    reasons: Any = None
    passes: Any = 0
    cut: Any = None
    skipped: Any = None
    figures_us: dict | None = None
    vs_pick: dict | None = None
    pick: Any = None
    tie: list | None = None
    changed: Any = None
    leader_before: Any = None
    stopped: Any = None

    @classmethod
    def of(cls, final: dict) -> FinalFacts:
        """From the tune's ``final`` JSON object. Raises :class:`tileprobe.jsonrecord.FieldError` (a ValueError)
        for a figure table that is no object or a tie that is no list."""
        return from_dict(cls, final, where="the tune's steady-state final")


@dataclass
class PickConfig:
    """A candidate's configuration (``case`` constants and ``hints``, ``{name: value}``)."""
    case: dict | None = None
    hints: dict | None = None


@dataclass
class OldPickNow:
    """The previous tune's pick as this tune timed it (µs)."""
    status: str | None = None
    median_us: float | None = None
    ci_lo_us: float | None = None
    ci_hi_us: float | None = None


@dataclass
class PreviousTune:
    """What changed since the tune with the previous compiler (:func:`tileprobe.tune.assemble.compare_previous`):
    that compiler's build, its pick and median (µs), whether the pick ``changed``, the old pick's time now, what
    keeping it loses against the new pick (%), and how its own time moved between the compilers (%)."""
    tileiras_before: str | None = None
    pick_before: PickConfig | None = None
    median_us_before: float | None = None
    changed: Any = None
    old_pick_now: OldPickNow | None = None
    loss_pct: float | None = None
    old_pick_change_pct: float | None = None

    @classmethod
    def of(cls, previous: dict) -> PreviousTune:
        """From the problem's ``previous`` JSON object. Raises :class:`tileprobe.jsonrecord.FieldError`."""
        return from_dict(cls, previous, where="the comparison with the previous tune")


@dataclass
class CheckFacts:
    """A candidate's result check (``CandidateRow.check``): ``status`` (``ok``, ``wrong``, ``unchecked`` …), the
    relative error and the tolerance it was held to, what it was checked ``against``, and a ``message``."""
    status: Any = None
    rel_err: float | None = None
    tolerance: float | None = None
    against: Any = None
    message: Any = None

    @classmethod
    def of(cls, check: dict) -> CheckFacts:
        """From a row's ``check`` JSON object. Raises :class:`tileprobe.jsonrecord.FieldError`."""
        return from_dict(cls, check, where="a candidate's check")


@dataclass
class TuneTimes:
    """The tune's time split (``TuneResult.times``, s; None: the stage did not run): start-up, plan, compile (or
    reading the store), the GPU worker's start and the wait for it after compiling, the race and its checks, the
    kernel time the race timed, the store, the total."""
    startup_s: float | None = None
    plan_s: float | None = None
    compile_s: float | None = None
    worker_start_s: float | None = None
    worker_wait_s: float | None = None
    race_s: float | None = None
    check_s: float | None = None
    race_kernel_s: float | None = None
    store_s: float | None = None
    total_s: float | None = None

    @classmethod
    def of(cls, times: dict) -> TuneTimes:
        """From ``TuneResult.times``. Raises :class:`tileprobe.jsonrecord.FieldError` for a time that is no number."""
        return from_dict(cls, times, where="the tune's times")
