"""The GPU stage's method, as a pure object: an adaptive race between candidates, driven by injected functions.

:class:`Race` never touches a GPU. It calls ``measure(candidate_id, round) -> Batch`` for samples and
``check(candidate_id) -> CheckOutcome`` for correctness; :mod:`tileprobe.tune.gpu` provides both through the
watchdog'd worker, the tests a fake. The method (``docs/TUNE.md``):

1. **Rounds.** Each round, every candidate still racing gets one batch of samples, in an order shuffled per round
   (seeded), so drift (clocks, temperature, other load) hits every candidate alike instead of the last ones.
2. **Successive elimination** (``strategy="race"``): after a round, each candidate with at least ``min_samples``
   samples whose median's confidence interval lies wholly above the leader's, and whose median is more than
   ``tie_pct`` % above the leader's, is eliminated. Before that, after one batch (at least
   :data:`FAR_MIN_SAMPLES` samples), a candidate whose *fastest* sample is more than ``far_pct`` % (25) above the
   median of the fastest candidate so far is **far behind** and eliminated at once: the bound is on the ratio, not on
   overlapping intervals, so a long kernel (5 samples a batch, ``min_samples`` 10) costs one batch, not two. 25 % is
   twice the most a median was seen to move with the power cap's ramp (12 %, ``final_pct``), so no candidate the
   steady-state final would weigh is cut by it. ``strategy="exhaustive"`` eliminates nothing and samples
   every candidate ``exhaustive_samples`` times.
3. **Stop** at one survivor (after judging the eliminated candidates again against the leader's samples as they
   are then: one its later samples no longer beat is put back in the race, at most :data:`MAX_REJUDGE` times); or when every survivor's interval is narrower than ± ``tie_pct``/2 % and all
   medians are within ``tie_pct`` % of the leader's (a **tie**: no winner by noise); or at ``max_samples`` per
   candidate; or when ``budget_s`` is spent (checked before each batch).
4. **Latecomers** (``arrivals``): candidates compiled while the race runs join before the next round and race
   from then on; elimination needs ``min_samples`` of a candidate's own samples, so a latecomer is judged after as
   many batches as an early one. The race does not stop (one survivor, a tie, max samples) while more may come: it
   checks the finalists (6.) and waits for the next one instead.
5. **Failures** are results: a batch that hangs, crashes or errs takes its candidate out with that status; the
   race goes on (the measure function restarts its worker).
6. **Correctness before a name**: the leader and every candidate within noise of it (the *finalists*) are
   checked; a wrong one is dropped (status ``wrong``), the eliminated candidates are reinstated and judged again
   against the new leader with the samples they have, and the race resumes if it must. Checks run even when
   the budget is spent (one launch each).
7. **Steady-state final** (``final``, the sustained mode's): when any batch came with the clocks set by the GPU's
   power or temperature limit (:data:`~tileprobe.run.clocks.POWER_REASONS`; :mod:`tileprobe.tune.final`), the race's
   batches (a few ms of idle between two, 25 ms of warm-up) caught each candidate at a different point of the power
   cap's ramp: a 4096³ matmul read 204 µs in its first 25 ms of load and 224–229 µs from 50 ms on (docs/LOG.md
   §36), so a leader measured after idle gaps can be 5–10 % behind in do_bench's (and a program's) steady state. The
   leader and the others within ``final_pct`` % of its median (eliminated or not; at most ``final_max``, closest
   first) are then timed again in batches of ``final(id, pass)``, long enough to reach the steady state: two passes
   over all (alternating order), then, up to ``final_passes``, passes over those still close to the best
   (pass-by-pass differences within two standard errors, or within ``tie_pct`` %): the final batches of one
   configuration still moved 0.2–7.5 % between two passes on the H200 (§36). A contender 15 % behind the best after
   the first pass leaves after it, and the passes stop once those left are statistically tied within ``tie_pct``
   % (:meth:`~tileprobe.tune.final.SteadyFinal._tied`; the final's ``stopped`` says so). The lowest mean of the
   passes' medians is the pick, the others within ``tie_pct`` % of it tie; a contender is compared with the pick over the passes both
   ran. A new pick is checked (6.); a wrong one gives way to the next. When no contender is left standing (all failed
   in the final or were wrong), the race's own ranking of the rest stands, checked. Once the power limit has been
   seen and another candidate is within ``final_pct`` % of the leader, a budgeted race keeps two passes' worth for
   the final (``final_batch_s`` per contender and pass, at most ``final_max`` contenders, at most a third of its
   budget); later passes run only in what is left. The race's line also keeps back the longest one finalist's check
   has taken and, while candidates may still land, the longest time taking in those that landed has cost (their
   launches asked of a contained child of the probe): on the H200 these two, after the line, had left budget finals
   0.75–1.22 s of a 2.5-s share (docs/LOG.md §37).

Statuses at the end: ``winner`` (the only finalist), ``tie`` (finalists when several), ``eliminated`` (with the
round and the reason), ``hang`` / ``crash`` / ``error`` / ``wrong`` (with the error), ``skipped`` (the budget
ran out before its first batch).
"""
from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tileprobe.tune.final import SteadyFinal
from tileprobe.tune.race_state import FAILED, Batch, BatchLog, CheckDetail, CheckOutcome, Entry
from tileprobe.tune.stats import median_ci, z_value

STRATEGIES = ("race", "exhaustive")
#: The least a race gets of a budget (s), even a spent one, so that a budget spent by the compiles still times the
#: candidates (a race of a few candidates to ``min_samples`` takes well under a second on the H200: docs/TUNE.md);
#: a budgeted search's race too (:class:`tileprobe.tune.overlap.Overlap`'s ``deadline``).
MIN_RACE_S = 2.0
#: Times a race may put eliminated candidates back (:meth:`Race._rejudge`) before it stops with what it has.
MAX_REJUDGE = 3
#: Samples a candidate (and the leader) needs before the far-behind rule (module doc 2) may judge it: a sustained
#: batch of a long kernel has 5 (:data:`tileprobe.run.timing.MIN_BATCH`).
FAR_MIN_SAMPLES = 5


@dataclass
class RaceSettings:
    """How a race runs (module doc). Times in s; ``tie_pct`` in % of the leader's median.

    The default ``tie_pct`` of 1 % is the reproducibility of one variant's median between two processes on the
    H200 (docs/LOG.md §3: median 0.02 %, max 1.23 %): a smaller difference is not a property of the
    configuration.

    ``far_pct``: the far-behind rule's bound (module doc 2; 0 turns it off).
    ``final_pct``, ``final_max``, ``final_passes`` (at most), ``final_batch_s``: the steady-state final (module
    doc 7). 12 % is about the most a candidate's race median was seen below its steady state (204 vs 228 µs, the
    4096³ matmul, docs/LOG.md §36); ``final_batch_s`` is a little over one final batch's wall time on the H200
    (75 + 50 ms of kernel time, the L2 flushes between, the worker's round trip: about 0.2 s).

    Raises:
        ValueError: an unknown strategy or confidence, or a count below 1.
    """
    strategy: str = "race"
    min_samples: int = 10
    max_samples: int = 300
    exhaustive_samples: int = 100
    tie_pct: float = 1.0
    confidence: float = 0.95
    budget_s: float | None = None
    seed: int = 0
    final_pct: float = 12.0
    final_max: int = 5
    final_passes: int = 4
    final_batch_s: float = 0.25
    far_pct: float = 25.0
    #: Check every candidate once before its first batch (``tune --bit-exact``: one that differs from the default
    #: is dropped before it is timed), not only the finalists after the race.
    check_first: bool = False

    def __post_init__(self):
        if self.strategy not in STRATEGIES:
            raise ValueError(f"strategy {self.strategy!r}: use one of {', '.join(STRATEGIES)}")
        z_value(self.confidence)
        for name in ("min_samples", "max_samples", "exhaustive_samples", "final_passes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)}: give 1 or more")
        if not (0.0 <= self.tie_pct <= 100.0):    # nan fails too: it would make every candidate a tie
            raise ValueError(f"tie_pct={self.tie_pct}: give a percentage from 0 to 100")
        if self.budget_s is not None and not (0.0 <= self.budget_s < float("inf")):
            raise ValueError(f"budget_s={self.budget_s}: give a finite number of seconds ≥ 0, or None")
        if not (0.0 <= self.far_pct < float("inf")):
            raise ValueError(f"far_pct={self.far_pct}: give a percentage ≥ 0 (0: no far-behind rule)")
        if not (0.0 <= self.final_pct <= 100.0) or not (0.0 <= self.final_batch_s < float("inf")):
            raise ValueError(f"final_pct={self.final_pct}, final_batch_s={self.final_batch_s}: give a percentage "
                             "from 0 to 100 and a finite number of seconds ≥ 0")
        if not isinstance(self.final_max, int) or self.final_max < 0 or not isinstance(self.final_passes, int):
            raise ValueError(f"final_max={self.final_max!r}, final_passes={self.final_passes!r}: give whole numbers "
                             "(final_max 0 for no final)")


@dataclass
class RaceOutcome:
    """The race's result: every entry (input order), the verdict (``winner`` | ``tie`` | ``none``), the pick
    (the lowest median among the finalists; None when nothing ran correctly), the tied ids (pick first), why it
    stopped, one dict per round, and the time spent measuring and checking (s). ``final``: the steady-state final
    when one ran (module doc 7): ``reasons`` (the power limits seen), ``contenders`` (ids, closest first),
    ``passes`` (complete ones), ``leader_before`` (the race's pick), ``figures_us`` (id → mean of its passes'
    medians), ``vs_pick`` (id → its figure ÷ the pick's over the passes both ran), ``pick``, ``tie`` (the ids that
    tie, pick first; empty for a winner), ``changed`` (the pick is not the race's), ``cut`` (only when True: the
    budget ended it after ``passes`` while contenders were still close), ``wall_s`` and ``batches`` (its time, s,
    and its batches, a cut one included), ``budget_left_s`` (a budgeted race: what was left when it began); or
    ``{"skipped": why, …}`` when it named none. :func:`tileprobe.tune.assemble.problem_result` renames the ids to
    the labels the table names."""
    entries: list[Entry]
    verdict: str
    pick: str | None
    tie: list[str]
    stop: str
    rounds: list[dict]
    wall_s: float = 0.0
    measure_s: float = 0.0
    check_s: float = 0.0
    final: dict | None = None

    def entry(self, id_: str) -> Entry:
        """The entry of candidate ``id_``. Raises StopIteration when there is none."""
        return next(e for e in self.entries if e.id == id_)

    def ranked(self) -> list[Entry]:
        """Entries with samples by median, then the rest in input order."""
        timed = sorted((e for e in self.entries if e.samples), key=lambda e: e.median)
        return timed + [e for e in self.entries if not e.samples]


class Race(SteadyFinal):
    """An adaptive race (module doc). ``ids``: candidate ids, unique. ``measure(id, round) -> Batch``;
    ``check(id) -> CheckOutcome`` or None (no correctness check). ``clock``: seconds, monotonic (injected by
    tests). ``progress(kind, data)``: called with ``("round", round_dict)`` after each round (and ``("final",
    final_dict)`` after a steady-state final). ``final(id, pass) -> Batch``: one steady-state batch (module doc 7),
    or None for no final."""

    def __init__(self, ids: Sequence[str], measure: Callable[[str, int], Batch],
                 check: Callable[[str], CheckOutcome] | None = None, settings: RaceSettings | None = None,
                 clock: Callable[[], float] = time.monotonic, progress: Callable | None = None,
                 arrivals: Callable[[bool], tuple[list[str], bool]] | None = None,
                 final: Callable[[str, int], Batch] | None = None):
        if len(set(ids)) != len(ids):
            raise ValueError("candidate ids must be unique")
        self.entries = [Entry(i) for i in ids]
        # Candidates that join while the race runs (compiled meanwhile): ``arrivals(block)`` returns (the ids that
        # landed since, whether more may come); with ``block`` it waits for one or for the end.
        self.arrivals, self._more = arrivals, arrivals is not None
        self.measure, self.check, self.clock, self.progress = measure, check, clock, progress
        self.final = final                 # (id, pass) -> Batch in the steady state (module doc 7), or None
        self._final: dict | None = None
        self._final_group: list[Entry] = []
        self._power: list[str] = []
        self._draining = False
        self.s: RaceSettings = settings or RaceSettings()
        self.rng = random.Random(self.s.seed)
        self.rounds: list[dict] = []
        self.stop = ""
        self._t0 = 0.0
        self._measure_s = self._check_s = 0.0
        self._admit_cost_s = 0.0           # the longest intake of landed candidates reported (s): note_intake
        self._check_cost_s = 0.0           # the longest one finalist's check took (s)

    def leaders(self, k: int, eliminated: bool = False) -> list[str]:
        """The ``k`` fastest candidates still racing (or named at the end), and with ``eliminated`` those eliminated
        too (they ran correctly), by median so far, fastest first. Safe to call from another thread while the race
        runs (a budgeted search reads it as compile jobs free up): it reads a snapshot of the entries and of each
        one's samples."""
        statuses = ("racing", "winner", "tie", "eliminated") if eliminated else ("racing", "winner", "tie")
        timed = []
        for e in list(self.entries):
            samples = list(e.samples)
            if samples and e.status in statuses:
                timed.append((statistics.median(samples), e.id))
        return [i for _, i in sorted(timed)[:k]]

    # --- the loop ------------------------------------------------------------------------------------------
    def run(self) -> RaceOutcome:
        """Race to a stop, check the finalists, repeat while a finalist turns out wrong; return the outcome."""
        self._t0 = self.clock()
        if self.s.check_first and self.check is not None:
            self._check(list(self.entries))
        self._race()
        if not self._final_reserve_s():   # the budget stopped it: the rest still land (they are ``skipped``), after
            self._drain()                 # the final when it keeps a share of the budget
        rejudged = 0
        while True:
            if not self._check_finalists():     # none wrong: put back what later samples no longer beat, or stop
                if rejudged >= MAX_REJUDGE or not self._rejudge():
                    break
                rejudged += 1
            self._race()
        self._final_round()
        self._drain()
        return self._outcome()

    def _drain(self) -> None:
        """Wait for the candidates still to land (they are ``skipped``: the race has stopped)."""
        self._draining = True
        while self._more:
            self._admit(True)

    def _rejudge(self) -> bool:
        """Put back in the race every eliminated candidate that the leader's samples taken since no longer beat by the
        elimination rule (clocks drift during a tune: 1,530-1,965 MHz on the H200, docs/LOG.md §13, so a
        leader's later batches can be slower than those it won with). True when one was put back. Not after the
        budget is spent (there is no time to race them), except when every racing candidate has failed: then all the
        eliminated ones, which ran correctly, are put back to be judged by the samples they have."""
        timed = [e for e in self._racing() if e.samples]
        if not timed:       # every racing one failed later: the eliminated ones, which ran correctly, are what is left
            back = [e for e in self.entries if e.status == "eliminated"]
            for e in back:
                e.status, e.eliminated_round, e.reason = "racing", None, ""
            return bool(back)
        if self.s.strategy != "race" or self.stop == "budget":
            return False
        leader = min(timed, key=lambda e: e.median)
        _, leader_hi = self._ci(leader)
        back = [e for e in self.entries if e.status == "eliminated"
                and not (self._ci(e)[0] > leader_hi and not self._within_tie(e, leader)) and not self._far(e, leader)]
        for e in back:
            e.status, e.eliminated_round, e.reason = "racing", None, ""
        if back and self.progress:
            self.progress("rejudge", {"leader": leader.id, "back": [e.id for e in back]})
        return bool(back)

    def _race(self) -> None:
        while True:
            if self._over_budget() and self._more and not self._racing():
                self.stop = "budget"         # nothing taken in past the line: not "no candidate left"
                return
            if not self._over_budget():      # past the line, what lands now is gathered after (``skipped``)
                self._admit(False)
            reason = self._stop_reason()
            if reason and self._more and not self._over_budget():
                if self._check_finalists():
                    continue         # a finalist was wrong: the others are judged again first
                self._admit(True)    # it would stop, but candidates are still compiling: wait for the next one
                continue
            if reason:
                self.stop = reason
                return
            if self._over_budget():
                self.stop = "budget"
                return
            self._round(len(self.rounds) + 1)

    def _check_finalists(self) -> bool:
        """Check the finalists not yet checked: after the race (:meth:`run`), and while it waits for candidates still
        compiling (the checks then cost no wall time after the last one lands). True when one was wrong: the
        eliminated candidates are put back and judged again against the new leader."""
        if self.check is None or not self._check(self._finalists()):
            return False
        for e in self.entries:
            if e.status == "eliminated":
                e.status, e.eliminated_round, e.reason = "racing", None, ""
        self._eliminate(len(self.rounds))
        return True

    def _admit(self, block: bool) -> None:
        """Add the candidates that landed (module doc, "Latecomers"): each starts with no samples and is judged by
        the rules every candidate is judged by (at least ``min_samples`` of its own before elimination)."""
        if not self._more or self.arrivals is None:
            return
        new, self._more = self.arrivals(block)
        known = {e.id for e in self.entries}
        for i in new:
            if i in known:
                raise ValueError(f"candidate {i!r} joined twice")
            known.add(i)
            self.entries.append(Entry(i, joined_round=len(self.rounds) + 1))
        if new and self.s.check_first and self.check is not None:
            self._check(self.entries[-len(new):])
        if new and self.progress:
            self.progress("joined", {"round": len(self.rounds) + 1, "ids": list(new)})

    def note_intake(self, seconds: float) -> None:
        """Told by the owner of ``arrivals`` (the overlap) how long taking in one batch of landed candidates took
        (s: their launches asked of a contained child of the probe), after a wait or not: the longest is held back
        from the race's line (:meth:`_line_s`)."""
        self._admit_cost_s = max(self._admit_cost_s, seconds)

    def _over_budget(self) -> bool:
        """The race's budget is spent: it is past :meth:`_line_s`."""
        return self.s.budget_s is not None and self.clock() - self._t0 >= self._line_s()

    def _line_s(self) -> float:
        """Seconds into the race at which it stops for its budget: ``budget_s`` less the final's share (module doc
        7), the longest one finalist's check has taken (the race ends by checking its finalists) and, while
        candidates may still land, the longest intake of them (:meth:`note_intake`); these two at most a third of
        the budget, as the final's share."""
        budget = self.s.budget_s
        if budget is None:     # no budget: no line
            return float("inf")
        held = self._check_cost_s + (self._admit_cost_s if self._more and not self._draining else 0.0)
        return budget - self._final_reserve_s() - min(held, budget / 3.0)

    def _spent(self) -> bool:
        """The whole budget is spent (the final's share too)."""
        return self.s.budget_s is not None and self.clock() - self._t0 >= self.s.budget_s

    def _racing(self) -> list[Entry]:
        return [e for e in self.entries if e.status == "racing"]

    def _round(self, r: int) -> None:
        t0 = self.clock()
        order = self._racing()
        self.rng.shuffle(order)
        failed, measured = [], 0
        for e in order:
            if self._over_budget():
                break
            self._take(e, r)
            measured += 1
            if e.status in FAILED:
                failed.append(e.id)
        out = self._eliminate(r)
        log = {"round": r, "racing": len(order), "measured": measured, "failed": failed, "eliminated": out,
               "left": len(self._racing()), "wall_s": round(self.clock() - t0, 6)}
        self.rounds.append(log)
        if self.progress:
            self.progress("round", log)

    def _measured(self, e: Entry, fn: Callable[[str, int], Batch], arg: int, r: int,
                  final: int | None = None) -> Batch:
        """One batch of ``e`` by ``fn(e.id, arg)`` (the race's ``measure`` or the final's): its time counted as
        measuring, its power limits noted, its :class:`BatchLog` appended to ``e.batches`` (round ``r``; ``final``:
        the final's pass, 1-based)."""
        t0 = self.clock()
        b = fn(e.id, arg)
        self._measure_s += self.clock() - t0
        self._note_power(b)
        e.batches.append(BatchLog(r, b.status, len(b.samples_us), b.clocks_before, b.clocks_after, b.wall_s,
                                  final))
        return b

    def _take(self, e: Entry, r: int) -> None:
        b = self._measured(e, self.measure, r, r)
        e.info.update(b.info or {})
        if b.status == "ok" and not b.samples_us:
            b.status, b.error = "error", "the batch returned no samples"
        if b.status != "ok":
            e.status, e.reason = (b.status if b.status in FAILED else "error"), b.error or b.status
            return
        e.samples.extend(float(x) for x in b.samples_us)

    # --- judging -------------------------------------------------------------------------------------------
    def _ci(self, e: Entry) -> tuple[float, float]:
        return median_ci(e.samples, self.s.confidence)

    def _within_tie(self, e: Entry, leader: Entry) -> bool:
        return e.median <= leader.median * (1 + self.s.tie_pct / 100.0)

    def _far(self, e: Entry, leader: Entry) -> bool:
        """Whether ``e`` is far behind ``leader`` (module doc 2): every sample of its own above the leader's median
        by more than ``far_pct`` %, with at least :data:`FAR_MIN_SAMPLES` samples each."""
        return (bool(self.s.far_pct) and e is not leader and len(e.samples) >= FAR_MIN_SAMPLES
                and len(leader.samples) >= FAR_MIN_SAMPLES
                and min(e.samples) > leader.median * (1 + self.s.far_pct / 100.0))

    def _eliminate(self, r: int) -> list[str]:
        if self.s.strategy != "race":
            return []
        out = []
        seen = [e for e in self._racing() if len(e.samples) >= FAR_MIN_SAMPLES]
        if len(seen) >= 2:     # one short look is enough for those far behind
            first = min(seen, key=lambda e: e.median)
            for e in seen:
                if self._far(e, first):
                    e.status, e.eliminated_round = "eliminated", r
                    e.reason = (f"far behind {first.id}: its fastest of {len(e.samples)} samples, "
                                f"{min(e.samples):,.2f} µs, is more than {self.s.far_pct:g} % above its median "
                                f"{first.median:,.2f} µs")
                    out.append(e.id)
        ready = [e for e in self._racing() if len(e.samples) >= self.s.min_samples]
        if len(ready) < 2:
            return out
        leader = min(ready, key=lambda e: e.median)
        _, leader_hi = self._ci(leader)
        for e in ready:
            lo, _ = self._ci(e)
            if e is not leader and lo > leader_hi and not self._within_tie(e, leader):
                e.status, e.eliminated_round = "eliminated", r
                e.reason = (f"slower than {leader.id}: median {e.median:,.2f} µs, interval from {lo:,.2f} µs, above "
                            f"its {leader.median:,.2f} µs (to {leader_hi:,.2f} µs)")
                out.append(e.id)
        return out

    def _precise(self, e: Entry) -> bool:
        lo, hi = self._ci(e)
        return (hi - lo) / 2.0 <= e.median * self.s.tie_pct / 200.0

    def _stop_reason(self) -> str | None:
        active = self._racing()
        if not active:
            return "no candidate left"
        if any(not e.samples for e in active):
            return None
        if self.s.strategy == "race":
            if len(active) == 1:
                return "one survivor"
            leader = min(active, key=lambda e: e.median)
            if all(len(e.samples) >= self.s.min_samples and self._precise(e) and self._within_tie(e, leader)
                   for e in active):
                return "within noise"
        elif all(len(e.samples) >= self.s.exhaustive_samples for e in active):
            return "samples complete"
        if all(len(e.samples) >= self.s.max_samples for e in active):
            return "max samples"
        return None

    def _finalists(self) -> list[Entry]:
        """The leader, then every racing candidate within noise of it (interval overlaps, or within tie_pct)."""
        timed = sorted((e for e in self._racing() if e.samples), key=lambda e: e.median)
        if not timed:
            return []
        leader = timed[0]
        _, leader_hi = self._ci(leader)
        return [leader] + [e for e in timed[1:] if self._ci(e)[0] <= leader_hi or self._within_tie(e, leader)]

    def _check(self, finalists: list[Entry]) -> bool:
        """Check the finalists not yet checked; True when one was dropped."""
        dropped, check = False, self.check
        if check is None:      # no check function: every caller tests for it first
            return False
        for e in finalists:
            if e.check is not None:
                continue
            t0 = self.clock()
            res = check(e.id)
            took = self.clock() - t0
            self._check_s += took
            self._check_cost_s = max(self._check_cost_s, took)
            e.check = {"status": res.status, **(res.detail or {})}
            if res.status in FAILED:
                e.status = res.status
                detail = CheckDetail.from_dict(res.detail or {})
                e.reason = detail.message or detail.error or res.status
                dropped = True
        return dropped

    def _outcome(self) -> RaceOutcome:
        for e in self._racing():
            if not e.samples:
                e.status, e.reason = "skipped", "the budget ran out before its first batch"
        finalists = self._final_group or self._finalists()
        verdict = "none" if not finalists else "winner" if len(finalists) == 1 else "tie"
        for e in finalists:
            e.status = "winner" if verdict == "winner" else "tie"
        for e in self._racing():
            e.status, e.eliminated_round = "eliminated", len(self.rounds)
            e.reason = f"slower than {finalists[0].id} when the race stopped ({self.stop})"
        return RaceOutcome(self.entries, verdict, finalists[0].id if finalists else None,
                           [e.id for e in finalists] if verdict == "tie" else [], self.stop, self.rounds,
                           wall_s=self.clock() - self._t0, measure_s=self._measure_s, check_s=self._check_s,
                           final=self._final)
