"""The race's steady-state final (:mod:`tileprobe.tune.race`, module doc 7), a part of
:class:`~tileprobe.tune.race.Race`: when the GPU's power or temperature limit set the clocks, the race's pick and
the candidates close to it are timed again in batches long enough to reach the steady state, and the lowest mean
of the passes' medians is the pick.

:class:`SteadyFinal` holds the final's methods; :class:`~tileprobe.tune.race.Race` inherits them and provides what
they use: ``entries``, ``s`` (its :class:`~tileprobe.tune.race.RaceSettings`), ``final`` (the measure of one final
batch, or None), ``clock``, ``progress``, ``check``, ``rounds``, ``_t0``, ``_measure_s``, ``_power``, ``_final``,
``_final_group``, ``_draining``, and the methods ``_finalists``, ``_racing``, ``_check``, ``_spent`` and
``_measured``.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from tileprobe.run.clocks import POWER_REASONS
from tileprobe.tune.race_state import FAILED, Batch, CheckOutcome, ClockReading, Entry
from tileprobe.tune.stats import t95

#: Passes of the steady-state final over every contender before the clearly slower ones leave it (race module doc 7;
#: one 15 % behind leaves after the first: :data:`FINAL_FAR_PCT`).
FINAL_MIN_PASSES = 2
#: A contender whose first final figure is more than this many % above the best first figure leaves after that one
#: pass: twice the most one configuration's final figure moved between two passes on the H200 (7.5 %, docs/LOG.md
#: §36), so a contender the second pass could bring back is never cut by it.
FINAL_FAR_PCT = 15.0


class FinalSettings(Protocol):
    """The settings the final reads, of :class:`~tileprobe.tune.race.RaceSettings` (race.py imports this module, so
    this one names what it needs rather than importing that class)."""
    budget_s: float | None
    tie_pct: float
    final_pct: float
    final_max: int
    final_passes: int
    final_batch_s: float


def _figure(e: Entry) -> float:
    """``e``'s final figure (µs, :attr:`~tileprobe.tune.race_state.Entry.final_us`), asked only of a contender with
    at least one final pass: never None there."""
    us = e.final_us
    assert us is not None      # by construction: every caller passes contenders whose ``final`` is not empty
    return us


def _tie_order(e: Entry) -> tuple[float, float]:
    """The order of a group the final cannot tell apart (its figures within ``tie_pct`` %): the lowest median of
    the race's rounds first (short sustained batches, as do_bench's, which judges the pick), then the final figure.
    On the H100 (``bench_budget_seeds.py``, 648 matmul configurations, 2026-12-05, seed 0) the final read
    TILE 256 × 128 × 64 with 2 CTAs and 128 × 128 × 64 with 1 CTA both at 229.8 µs (0.02 % apart), the rounds at
    211.2 and 231.2 µs, do_bench at 214.8 and 219.1 µs: the lower final figure had named the slower one. The
    rule acts only among those the final tied; of the 10 seeds' finals only seeds 0 and 1 ended in a tie, and it
    names the faster one in both."""
    return (e.median if e.samples else math.inf, _figure(e))


class SteadyFinal:
    """The steady-state final's methods of :class:`~tileprobe.tune.race.Race` (module doc)."""

    # What :class:`~tileprobe.tune.race.Race` provides (module doc), declared for the type checker: annotations
    # only, no values, so that Race's own attributes and methods are the ones used.
    entries: list[Entry]
    s: FinalSettings
    final: Callable[[str, int], Batch] | None
    clock: Callable[[], float]
    progress: Callable | None
    check: Callable[[str], CheckOutcome] | None
    rounds: list[dict]
    _t0: float
    _power: list[str]
    _final: dict | None
    _final_group: list[Entry]
    _draining: bool

    if TYPE_CHECKING:
        def _line_s(self) -> float: ...
        def _spent(self) -> bool: ...
        def _racing(self) -> list[Entry]: ...
        def _finalists(self) -> list[Entry]: ...
        def _check(self, finalists: list[Entry]) -> bool: ...
        def _measured(self, e: Entry, fn: Callable[[str, int], Batch], arg: int, r: int,
                      final: int | None = None) -> Batch: ...

    def _note_power(self, b: Batch) -> None:
        """Add the power or temperature limits (:data:`~tileprobe.run.clocks.POWER_REASONS`) of batch ``b``'s clock
        readings to those seen (``_power``, sorted)."""
        seen = {x for c in (b.clocks_before, b.clocks_after) if isinstance(c, dict)
                for x in (ClockReading.from_dict(c).reasons or ()) if isinstance(x, str)}
        if not seen.intersection(POWER_REASONS).issubset(self._power):
            self._power = sorted(set(self._power) | seen.intersection(POWER_REASONS))

    def _final_reserve_s(self) -> float:
        """Seconds a budgeted race keeps for its final (race module doc 7): two passes over the candidates within
        ``final_pct`` % of the leader so far (at most ``final_max``); none without a final, a power limit seen or
        another candidate that close."""
        if self.final is None or self.s.budget_s is None or self.s.final_max < 2 or not self._power:
            return 0.0
        near = len(self._contenders())
        if near < 2:
            return 0.0
        passes = min(FINAL_MIN_PASSES, self.s.final_passes)
        return min(near * passes * self.s.final_batch_s, self.s.budget_s / 3.0)

    def time_left_s(self) -> float | None:
        """Seconds until the race stops for its budget (the final's share kept back), for a caller that waits for
        latecomers on the race's behalf; None without a budget, and once the race only gathers the candidates that
        land after it (they wait as long as they must)."""
        if self.s.budget_s is None or self._draining:
            return None
        return self._line_s() - (self.clock() - self._t0)

    def _contenders(self) -> list[Entry]:
        """The racing leader (the lowest median: the race's pick, :meth:`_finalists`' first), then the timed
        candidates (racing or eliminated) within ``final_pct`` % of its median, closest first: ``final_max`` in all
        at most. Asked before each batch of a budgeted race once a power limit was seen (the final's share), so it
        works out no interval."""
        timed = [e for e in self.entries if e.samples and e.status in ("racing", "eliminated")]
        racing = [e for e in timed if e.status == "racing"]
        if not racing:
            return []
        leader = min(racing, key=lambda e: e.median)
        limit = leader.median * (1 + self.s.final_pct / 100.0)
        others = sorted((e for e in timed if e is not leader and e.median <= limit), key=lambda e: e.median)
        return [leader] + others[:max(0, self.s.final_max - 1)]

    def _final_round(self) -> None:
        """The steady-state final (race module doc 7), when a power limit was seen and another candidate is close."""
        if self.final is None or self.s.final_max < 2:
            return
        why = list(self._power)
        contenders = self._contenders() if why else []
        if len(contenders) < 2:
            return
        leader, t0 = contenders[0], self.clock()
        left = None if self.s.budget_s is None else max(0.0, self.s.budget_s - (t0 - self._t0))
        alive, passes, stopped = self._final_passes(contenders)
        for e in alive:
            del e.final[passes:]         # a pass the budget cut short does not count
        self._final = {"reasons": why, "contenders": [e.id for e in contenders], "passes": passes,
                       "leader_before": leader.id, "wall_s": round(self.clock() - t0, 6),
                       "batches": sum(1 for e in contenders for b in e.batches if b.final)}
        if stopped:
            self._final.update(stopped=stopped)
        if left is not None:
            self._final["budget_left_s"] = round(left, 6)
        if 0 < passes < self.s.final_passes and sum(e.status not in FAILED for e in alive) > 1 and self._spent():
            self._final["cut"] = True     # the budget ended it while contenders were still close
        ranked = [e for e in alive if e.status not in FAILED and len(e.final) == passes > 0]
        dropped = [e for e in contenders if e not in alive and e.status not in FAILED and e.final]
        group = self._final_pick(ranked) or self._final_pick(dropped)    # all close ones wrong: the next ones
        if group:
            group += self._close_after_all(dropped, group)
            self._name_final(contenders, group)
        else:
            self._final["skipped"] = ("the budget ran out before a whole pass" if passes == 0 and self._spent()
                                      else "no contender ran correctly")
            if not self._finalists():     # the race's own finalists failed in the final: the rest, checked
                self._fall_back()
        if self.progress:
            self.progress("final", dict(self._final))

    def _name_final(self, contenders: list[Entry], group: list[Entry]) -> None:
        """The final's statuses: ``group`` (best first) racing to be named, the other contenders eliminated by their
        figure over the passes they share with the pick, the racing ones the final did not take eliminated."""
        top = group[0]
        timed = [e for e in contenders if e.status not in FAILED and e.final]
        for e in timed:
            if e in group:
                e.status, e.eliminated_round, e.reason = "racing", None, ""
            else:
                k = min(len(e.final), len(top.final))
                e.status, e.eliminated_round = "eliminated", len(self.rounds)
                e.reason = (f"slower in the steady-state final: {e.final_vs(top):.3f}× {top.id}'s figure over the "
                            f"{k} pass(es) both ran ({e.final_us:,.2f} µs over its {len(e.final)})")
        for e in self._racing():
            if e not in group and e.samples:       # an untimed latecomer stays racing: it ends "skipped"
                e.status, e.eliminated_round = "eliminated", len(self.rounds)
                e.reason = (f"not among the {len(contenders)} closest to the race's leader that the steady-state "
                            "final timed")
        self._final_group = group
        assert self._final is not None     # by construction: _final_round, the only caller, has just set it
        self._final.update(figures_us={e.id: e.final_us for e in timed},
                           vs_pick={e.id: e.final_vs(top) for e in timed}, pick=top.id,
                           tie=[e.id for e in group] if len(group) > 1 else [], changed=top.id != contenders[0].id)

    def _close_after_all(self, dropped: list[Entry], group: list[Entry]) -> list[Entry]:
        """The contenders that left after two passes yet are within ``tie_pct`` % of the pick over the passes both ran
        (passes 3–4 moved the pick's figure), checked: they tie with it."""
        limit = 1 + self.s.tie_pct / 100.0
        best = min(group, key=_figure)      # the pick may be another of the tie (_tie_order)
        near = [e for e in dropped if e not in group and e.final_vs(best) <= limit]
        if near and self.check is not None:
            self._check(near)
        return [e for e in near if e.status not in FAILED]

    def _fall_back(self) -> None:
        """After a final that left no contender standing (all failed in it, or wrong): the race's own ranking of the
        rest, the eliminated ones put back and the finalists checked (6.)."""
        for e in self.entries:
            if e.status == "eliminated":
                e.status, e.eliminated_round, e.reason = "racing", None, ""
        while self.check is not None and self._check(self._finalists()):
            pass

    def _final_passes(self, contenders: list[Entry]) -> tuple[list[Entry], int, str]:
        """The final's passes, in alternating order: one over every contender, after which those more than
        :data:`FINAL_FAR_PCT` % behind the best leave; then up to :data:`FINAL_MIN_PASSES` over every one left;
        then, up to ``final_passes``, over those still close to the best (:meth:`_still_close`), until one is left,
        those left are statistically tied (:meth:`_tied`), or the whole budget is spent. Returns the contenders of
        the last pass, how many passes they all completed, and why the passes stopped early ("" when they did
        not, or when one contender was left)."""
        alive = list(contenders)
        for p in range(self.s.final_passes):
            if p == 1 and len(alive) > 1:
                alive = self._not_far(alive)
            if p >= FINAL_MIN_PASSES:
                alive = self._still_close(alive, p) if len(alive) > 1 else alive
                if len(alive) < 2:
                    return alive, p, ""
                tied = self._tied(alive, p)
                if tied:
                    return alive, p, tied
            for e in (alive if p % 2 == 0 else alive[::-1]):
                if e.status in FAILED:
                    continue
                if self._spent():
                    return alive, p, ""
                self._take_final(e, p)
            alive = [e for e in alive if e.status not in FAILED]
            if not alive:
                return alive, p, ""        # nobody completed this pass
        return alive, self.s.final_passes, ""

    def _not_far(self, alive: list[Entry]) -> list[Entry]:
        """The contenders whose first final figure is within :data:`FINAL_FAR_PCT` % of the best first figure (those
        without one, failed, are left to the caller)."""
        firsts = [e.final[0] for e in alive if e.final]
        if not firsts:
            return alive
        limit = min(firsts) * (1 + FINAL_FAR_PCT / 100.0)
        return [e for e in alive if not e.final or e.final[0] <= limit]

    def _tied(self, alive: list[Entry], k: int) -> str:
        """Why the final may stop after ``k`` passes with every contender in ``alive`` tied with the best, or "":
        each one's mean pass-by-pass difference to the best, plus Student's t (95 %, k − 1 degrees of freedom) times
        its standard error, is within ``tie_pct`` % of the best's figure — more passes could reorder them but not
        take the pick more than ``tie_pct`` % from the best of them (the pick stays the lowest figure)."""
        best = min(alive, key=lambda e: statistics.fmean(e.final[:k]))
        figure = statistics.fmean(best.final[:k])
        limit, worst = figure * self.s.tie_pct / 100.0, 0.0
        for e in alive:
            if e is best:
                continue
            d = [a - b for a, b in zip(e.final[:k], best.final[:k])]
            if len(d) < 2:
                return ""
            bound = abs(statistics.fmean(d)) + t95(len(d) - 1) * statistics.stdev(d) / len(d) ** 0.5
            if bound > limit:
                return ""
            worst = max(worst, bound)
        return (f"tied after {k} passes, every contender within {100.0 * worst / figure:.2f} % of the best at 95 % "
                f"confidence, under the {self.s.tie_pct:g} % tie")

    def _still_close(self, alive: list[Entry], k: int) -> list[Entry]:
        """The contenders whose first ``k`` final figures do not clearly lose to the best's: the mean of their
        differences to the best's, pass by pass (the alternating order puts a drift on both alike), is within
        ``tie_pct`` % of the best or within two standard errors of those differences."""
        best = min(alive, key=lambda e: statistics.fmean(e.final[:k]))
        keep = []
        for e in alive:
            d = [a - b for a, b in zip(e.final[:k], best.final[:k])]
            se = statistics.stdev(d) / k ** 0.5 if len(d) > 1 else float("inf")
            if e is best or statistics.fmean(d) <= max(_figure(best) * self.s.tie_pct / 100.0, 2.0 * se):
                keep.append(e)
        return keep

    def _take_final(self, e: Entry, p: int) -> None:
        assert self.final is not None      # by construction: _final_round returns before any pass without it
        b = self._measured(e, self.final, p, len(self.rounds), final=p + 1)
        xs = [float(x) for x in b.samples_us] if b.status == "ok" else []
        if xs and all(math.isfinite(x) and x > 0 for x in xs):
            e.final.append(statistics.median(xs))
            return
        e.status = b.status if b.status in FAILED else "error"
        why = b.error or (b.status if b.status != "ok" else "its batch returned no samples" if not xs
                          else "its batch returned a time that is not a finite number of µs above 0")
        e.reason = f"in the steady-state final: {why}"

    def _final_pick(self, ranked: list[Entry]) -> list[Entry]:
        """The final's best and those within ``tie_pct`` % of it (a group the final cannot tell apart), the pick
        first, once checked (6.); a wrong one gives way to the next. Empty when none is left.

        Within the group the pick is the one with the lowest median in the race's rounds (:func:`_tie_order`)."""
        while ranked:
            ranked.sort(key=_figure)
            best = _figure(ranked[0])
            group = [e for e in ranked if _figure(e) <= best * (1 + self.s.tie_pct / 100.0)]
            if self.check is None or not self._check(group):
                return sorted(group, key=_tie_order)
            ranked = [e for e in ranked if e.status not in FAILED]
        return []
