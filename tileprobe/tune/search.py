"""A budgeted search over a space too large to compile whole (issue 22, item 3): ``tileprobe tune --budget S``.

Compiling every configuration of a space of several hundred costs minutes (486 matmul configurations: 39 s of
compiling on the H200 host's 16 cores, 2026-12-01), linear in the space. With a budget, a problem whose space is
larger than :attr:`SearchSettings.full_max` configurations is searched in rounds instead. A round offers the
compile jobs its configurations in order, and stops *starting* compiles at its cut-off (the ones running finish:
:class:`~tileprobe.compile.schedule.CompileSchedule`), so the jobs stay busy up to it rather than waiting at the end
of each wave for its slowest compile; then it races what it compiled:

1. **Round 1, a balanced sample**: the default configuration, the stored picks of the same kernel on other problems
   (the store's tunes: a neighbouring problem's winner is often this one's), then :func:`balanced_sample`: each
   next configuration the one that adds most unseen pairs of two knobs' values (any first part of that order has
   every value of every knob about equally often). Its first wave (:attr:`SearchSettings.sample`) is compiled
   whatever the clock says; it stops starting compiles after :data:`ROUND1_SHARE` of what is left of the budget
   after a race. Then the race of :class:`~tileprobe.tune.race.Race` (successive elimination, checks of the
   finalists).
2. **Later rounds, around the leaders**: the neighbours of the ``leaders`` fastest candidates so far — the
   configurations one step away on one knob (the next or the previous value in its list) — nearest the fastest
   leader first, then the spread order. A later round stops starting compiles when what is left is a race and the
   longest compile seen so far. They race against the leaders, which are timed again in the same rounds (samples
   of one race are comparable; samples of two races minutes apart are not: clocks drift, docs/NOTES.md §13).
3. **Stop** when every configuration has been tried, when a round reached none, or when no later round's cut-off
   lies ahead.

The result says how much of the space was compiled and timed (``coverage``) and how the search went (one note per
round); configurations never compiled are rows of status :data:`NOT_SEARCHED`. The search is the method of
successive halving's "sample, then refine around the leaders", narrowed to what a compile-bound tune can afford:
a candidate costs a compile (seconds) before its first sample, and the local step follows that tile sizes and
hints act mostly on their own axis (a configuration next to a fast one is faster on average than one far away).

:class:`BudgetedSearch` never compiles or times anything itself: the tune gives it ``compile`` and ``race``
functions (:mod:`tileprobe.tune.pipeline`), the tests fakes.
"""
from __future__ import annotations

import math
import random
import statistics
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

from tileprobe.schema import value_key
from tileprobe.tune.race import FAILED, MIN_RACE_S, Entry, RaceOutcome
from tileprobe.tune.space import Config

#: The status of a configuration the budgeted search never compiled.
NOT_SEARCHED = "not_searched"
#: Round 1 starts compiles during this share of what is left after its race (the rest: later rounds). Replayed on the
#: H200's full tune of the 486-configuration matmul (``benchmarks/sim_budget.py``, 60 seeds, 30-s budget, a 10-s
#: plan, 1.08 s per compile beyond tileiras, 2026-12-03): 0.3 found a configuration within 1.02 of the best in 26
#: seeds, 0.5 in 25; the search before this session's changes (later rounds' cut-offs, 3 leaders, 0.5) in 23.
ROUND1_SHARE = 0.3
#: What a round's race is expected to cost per candidate (s): its first batch and about as much again in the later
#: rounds of successive elimination. On the H200 host a first batch of the TileGym matmul took 0.06-0.12 s
#: (``benchmarks/trace_tune.py``), and a 2.4-s race of 58 candidates timed only 25 of them (``bench_budget.py``
#: seed 3, 2026-12-02): the rest were skipped, and the pick was 1.24x the full tune's.
RACE_PER_CANDIDATE_S = 0.2
#: A leader's neighbour's compile, as a multiple of the leader's own (a later round's tail, :meth:`BudgetedSearch._tail_s`).
NEIGHBOUR_COMPILE_FACTOR = 1.5
#: Seconds kept after the last race for the finalists' store and export (0.05-0.06 s measured, with margin).
FINISH_S = 0.5
#: What a compile job costs beyond tileiras' own time (s): cuTile's front end, nvdisasm and the register-pool walk,
#: the result's trip back. The H200 host's full tune of the 486-configuration matmul kept 16 jobs busy for 62.8 s
#: (1,005 job-seconds) for 480 s of tileiras: 1.08 s per compile (``benchmarks/bench_budget.py``, 2026-12-03).
#: A later round's last compile is its tail (:meth:`BudgetedSearch._tail_s`) plus this.
WORKER_OVERHEAD_S = 1.0
#: Race statuses of candidates that ran correctly (a leader is chosen among them).
_TIMED_OK = ("winner", "tie", "eliminated", "racing")


@dataclass
class SearchSettings:
    """How a budgeted search runs (module doc).

    jobs: compiles that run at once (a wave). full_max: spaces up to this many configurations are compiled whole
    (default 4 waves). sample: round 1's first wave, compiled whatever the clock says (default 1 wave). round_cap:
    the most configurations a round offers the compile jobs, in its order (default ``full_max``; its cut-off
    decides how many start). leaders: how many of the fastest candidates seed the next round's neighbours
    and race again. seed: the spread order's tie-breaks. min_race_s: the least a round's race gets (s), even past
    the deadline, so that a spent budget still times round 1 (a race of a few candidates to ``min_samples`` takes
    well under a second on the H200: docs/TUNE.md). race_per_candidate_s: the race time a round keeps per
    candidate it starts compiling (:class:`CompileRoom`).

    Raises:
        ValueError: a count below 1.
    """
    jobs: int = 1
    full_max: int | None = None
    sample: int | None = None
    leaders: int = 2
    seed: int = 0
    min_race_s: float = MIN_RACE_S
    round_cap: int | None = None
    race_per_candidate_s: float = RACE_PER_CANDIDATE_S

    def __post_init__(self):
        for name in ("jobs", "leaders"):
            if getattr(self, name) < 1:
                raise ValueError(f"search {name}={getattr(self, name)}: give 1 or more")
        self.full_max = 4 * self.jobs if self.full_max is None else self.full_max
        self.sample = max(1, self.jobs if self.sample is None else self.sample)
        self.round_cap = max(self.sample, self.full_max if self.round_cap is None else self.round_cap)


def axes(configs: Sequence[Config]) -> list[list[str]]:
    """Each knob's values (tunable case names, then hints, as in a :class:`Config`) in declared order, as value
    keys: the order of first appearance in the space's configurations (the space is a product in declared order,
    constraints only remove configurations)."""
    if not configs:
        return []
    names = [k for k, _ in (*configs[0].tunables, *configs[0].hints)]
    out: list[list[str]] = [[] for _ in names]
    for c in configs:
        for i, (_, v) in enumerate((*c.tunables, *c.hints)):
            k = value_key(v)
            if k not in out[i]:
                out[i].append(k)
    return out


def position(config: Config, ax: list[list[str]]) -> tuple[int, ...]:
    """The configuration's index on each knob (:func:`axes`)."""
    return tuple(ax[i].index(value_key(v)) for i, (_, v) in enumerate((*config.tunables, *config.hints)))


def _distance(a: tuple[int, ...], b: tuple[int, ...], ax: list[list[str]]) -> float:
    """Manhattan distance of two positions, each knob scaled to 0…1 (a knob of 2 values weighs as one of 5)."""
    return sum(abs(x - y) / max(1, len(vals) - 1) for x, y, vals in zip(a, b, ax))


def spread(configs: Sequence[Config], n: int, taken: Sequence[Config] = (), seed: int = 0) -> list[Config]:
    """Up to ``n`` configurations of ``configs`` not in ``taken``, each the farthest (max-min :func:`_distance`) from
    those taken and chosen before it; ties broken by a ``seed``-ed shuffle. With nothing taken, the first is the
    configuration nearest the space's centre. O(n × len(configs)) distance computations."""
    ax = axes(configs)
    pos = {c: position(c, ax) for c in configs}
    left = [c for c in configs if c not in set(taken)]
    random.Random(seed).shuffle(left)
    chosen: list[Config] = []
    near = {c: min((_distance(pos[c], pos[t], ax) for t in taken if t in pos), default=math.inf) for c in left}
    while left and len(chosen) < n:
        if all(math.isinf(d) for d in near.values()):
            centre = tuple((len(v) - 1) / 2 for v in ax)
            pick = min(left, key=lambda c: _distance(pos[c], centre, ax))
        else:
            pick = max(left, key=lambda c: near[c])
        chosen.append(pick)
        left.remove(pick)
        del near[pick]
        for c in left:
            near[c] = min(near[c], _distance(pos[c], pos[pick], ax))
    return chosen


def balanced_sample(configs: Sequence[Config], n: int, taken: Sequence[Config] = (), seed: int = 0) -> list[Config]:
    """Up to ``n`` configurations of ``configs`` not in ``taken``, each the one that adds most to what the sample
    (``taken`` and those chosen before) covers: every pair of two knobs' values (:func:`position`) it has not yet
    seen counts ``1 / (1 + times seen)``, and so does each of its own values; ties broken by a ``seed``-ed shuffle.
    Round 1 of the search uses it: unlike :func:`spread`, whose max-min distance picks the space's corners first
    (2^k of them before any middle value), every value of every knob, and every pair of values, comes up about
    equally often. Replayed on the 486-configuration matmul's full tune (``benchmarks/sim_budget.py``, 20 seeds,
    a 30-s budget), round 1 from this sample found a configuration within 1.02 of the best in 9 seeds, from
    :func:`spread` in 3 (2026-12-02). O(n × len(configs) × knobs²)."""
    ax = axes(configs)
    pos = {c: position(c, ax) for c in configs}
    k = len(ax)
    pairs = [(i, j) for i in range(k) for j in range(i + 1, k)]
    seen: dict[tuple, int] = {}

    def add(p: tuple[int, ...]) -> None:
        for i in range(k):
            seen[(i, p[i])] = seen.get((i, p[i]), 0) + 1
        for i, j in pairs:
            seen[(i, j, p[i], p[j])] = seen.get((i, j, p[i], p[j]), 0) + 1

    def gain(p: tuple[int, ...]) -> float:
        return (sum(1.0 / (1 + seen.get((i, j, p[i], p[j]), 0)) for i, j in pairs)
                + sum(1.0 / (1 + seen.get((i, p[i]), 0)) for i in range(k)))
    for c in taken:
        if c in pos:
            add(pos[c])
    taken_set = set(taken)
    left = [c for c in configs if c not in taken_set]
    random.Random(seed).shuffle(left)
    chosen: list[Config] = []
    while left and len(chosen) < n:
        pick = max(left, key=lambda c: gain(pos[c]))
        chosen.append(pick)
        left.remove(pick)
        add(pos[pick])
    return chosen


def round_one(configs: Sequence[Config], first: Sequence[Config], cap: int, seed: int = 0) -> list[Config]:
    """Round 1's offer (module doc): ``first`` (those of ``configs``, once each, in order), then the
    :func:`balanced_sample`, ``cap`` in all. The budgeted search and a dry run with ``--budget`` both take it."""
    known = set(configs)
    head = [c for c in dict.fromkeys(first) if c in known][:cap]
    return head + balanced_sample(configs, cap - len(head), head, seed)


def neighbours(config: Config, configs: Sequence[Config]) -> list[Config]:
    """The configurations of ``configs`` one step from ``config`` on exactly one knob (the next or previous value
    in its declared list), in knob order."""
    ax = axes(configs)
    here = position(config, ax)
    out = []
    for c in configs:
        d = [abs(x - y) for x, y in zip(position(c, ax), here)]
        if sum(d) == 1:
            out.append(c)
    return out


@dataclass
class SearchRound:
    """One round of the search: how many configurations it compiled and raced, its leader, its times (s)."""
    index: int
    compiled: int
    raced: int
    leader: str | None
    leader_us: float | None
    compile_s: float
    race_s: float
    kind: str          # "sample" or "neighbours"
    failed: int = 0    # of ``compiled``: compiles that failed (not raced)

    def note(self) -> str:
        """One line for the problem's notes."""
        lead = f"leader {self.leader} {self.leader_us:,.1f} µs" if self.leader and self.leader_us else "no leader"
        what = "a balanced sample" if self.kind == "sample" else "the leaders' neighbours"
        failed = f", {self.failed} of them failed" if self.failed else ""
        return (f"budgeted search round {self.index}: {self.compiled} compiled ({what}{failed}), {self.raced} raced; "
                f"{lead} "
                f"(compile {self.compile_s:.1f} s, race {self.race_s:.1f} s)")


@dataclass
class SearchOutcome:
    """The search's result: the merged race outcome (None when nothing was raced), the rounds, and the ids timed."""
    outcome: RaceOutcome | None
    rounds: list[SearchRound] = field(default_factory=list)
    tried: int = 0


@dataclass
class Compiled:
    """What a round's ``compile`` did: the ids to time (compiled, deduplicated), the configurations it reached
    (compiled or failed: the others were not started before the cut-off and stay untried), and its longest single
    compile (s, tileiras' time) — what a compile started just before a cut-off may still cost; ``seconds``: each
    id's compile time, from which a later round estimates the compiles of the leaders' neighbours."""
    ids: list[str]
    reached: list[Config]
    longest_s: float = 0.0
    failed: int = 0
    seconds: dict = field(default_factory=dict)   # id -> its compile's time (s, tileiras'), where known


@dataclass
class CompileRoom:
    """Whether a round may start one more compile (``room(started, now)``, asked by the compile schedule as each
    worker frees up): only if, after it, the compiles in flight (each as long as the longest seen: ``longest_s``
    from earlier rounds, and this round's first-wave compiles as they end) and a race of every candidate
    (``per_candidate_s`` each, with the ``racing`` leaders) still end by ``deadline``. ``t0``: the round's start
    (its first wave starts then), ``jobs``: compiles at once. Times in seconds of the search's clock."""
    deadline: float
    jobs: int
    per_candidate_s: float
    t0: float
    racing: int = 0
    longest_s: float = 0.0

    def __call__(self, started: int, now: float) -> bool:
        if self.jobs <= started < 2 * self.jobs:   # a first-wave compile (started at t0) ended: its slot asks
            self.longest_s = max(self.longest_s, now - self.t0)
        return now + self.longest_s + self.per_candidate_s * (started + 1 + self.racing) <= self.deadline


class BudgetedSearch:
    """The search of one problem's ``configs`` within ``deadline`` (module doc).

    Args:
        configs: the problem's configurations (after the constraints), in declared order.
        compile: (configs, stop_at, at_least, room=) -> :class:`Compiled`: compile them in that order, starting
            none after ``stop_at`` (a ``clock()`` value) or when ``room`` (a :class:`CompileRoom`) says no, except
            the first ``at_least`` (the tune lands the records in its plan).
        race: (ids, budget_s) -> the :class:`~tileprobe.tune.race.RaceOutcome` of racing those candidates.
        label: config -> its candidate id. settings: :class:`SearchSettings`. deadline: the clock's value by
            which the search ends. first: configurations round 1 takes first (the default, stored picks).
        clock: seconds, monotonic (tests inject one). progress: ``progress("search", SearchRound)``.
    """

    def __init__(self, configs: Sequence[Config], compile: Callable[..., Compiled],
                 race: Callable[[list[str], float | None], RaceOutcome], label: Callable[[Config], str],
                 settings: SearchSettings, deadline: float, first: Sequence[Config] = (),
                 clock: Callable[[], float] = time.monotonic, progress: Callable | None = None):
        self.configs, self.compile, self.race, self.label = list(configs), compile, race, label
        self.s, self.deadline, self.clock, self.progress = settings, deadline, clock, progress
        self.first = list(first)
        self.tried: list[Config] = []
        self.by_id = {label(c): c for c in self.configs}
        self.entries: dict[str, Entry] = {}
        self.rounds: list[SearchRound] = []
        self.outcomes: list[RaceOutcome] = []
        self.leaders: list[str] = []
        self.longest_s = 0.0        # the longest single compile seen (s)
        self.seconds: dict[str, float] = {}   # id -> compile time (s)
        self.race_s = 0.0           # the last round's race (s)
        self.race_per_s: float | None = None   # the last round's race per candidate raced (s)

    def run(self) -> SearchOutcome:
        """Round after round until the space is tried or the budget is spent; the merged outcome."""
        while True:
            batch = self._batch()
            if not batch:
                break
            stop_at = self._cut_off()
            if stop_at is None:
                break
            if not self._round(batch, stop_at):
                break
        return SearchOutcome(self._merged(), self.rounds, len(self.tried))

    # --- choosing ---------------------------------------------------------------------------------------------
    def _batch(self) -> list[Config]:
        """Round 1: the first ones, then the balanced sample; later: the leaders' neighbours, then the spread order.
        Up to :attr:`SearchSettings.round_cap` each; the round's cut-off decides how many are compiled."""
        cap = self.s.round_cap
        if not self.rounds:
            return round_one(self.configs, self.first, cap, self.s.seed)
        tried = set(self.tried)
        near: list[Config] = []
        for lead in self.leaders:
            near += [c for c in neighbours(self.by_id[lead], self.configs) if c not in tried and c not in near]
        near = near[:cap]
        return near + spread(self.configs, cap - len(near), self.tried + near, self.s.seed + len(self.rounds))

    def _cut_off(self) -> float | None:
        """When the next round stops starting compiles (module doc, "Rounds"), or None: no time for one. Round 1
        gets :data:`ROUND1_SHARE` of what is left after a race; a later round what is left after a race of its leaders
        and a wave (the last race's time per candidate), its tail (one compile started just before the cut-off still
        has to finish: :meth:`_tail_s` plus :data:`WORKER_OVERHEAD_S`) and :data:`FINISH_S`."""
        now = self.clock()
        race = max(self.s.min_race_s, self.race_s)
        if not self.rounds:
            return now + max(0.0, self.deadline - now - race) * ROUND1_SHARE
        if self.race_per_s is not None:   # a later round races its leaders and about a wave of newcomers
            race = max(self.s.min_race_s, min(race, self.race_per_s * (len(self.leaders) + self.s.jobs)))
        stop = self.deadline - race - self._tail_s() - WORKER_OVERHEAD_S - FINISH_S
        return stop if stop > now else None

    def _tail_s(self) -> float:
        """What a later round's last compile may cost (s): a neighbour differs from its leader in one knob, so
        :data:`NEIGHBOUR_COMPILE_FACTOR` × the leaders' longest compile, where their times are known; else the
        longest compile seen (the 486-configuration matmul's longest, 9 s, is a 256×256×128 tile's; its leaders'
        compiled in 1-3 s on the H200 host, 2026-12-02)."""
        known = [self.seconds[i] for i in self.leaders if i in self.seconds]
        if not known and self.seconds:    # no leaders yet (round 1's race not run): a typical compile's
            known = [statistics.median(self.seconds.values())]
        if not known:
            return self.longest_s
        return min(self.longest_s, NEIGHBOUR_COMPILE_FACTOR * max(known))

    # --- one round --------------------------------------------------------------------------------------------
    def _round(self, batch: list[Config], stop_at: float) -> bool:
        """Compile what of ``batch`` the cut-off allows, race it with the leaders; False when nothing was reached."""
        t0 = self.clock()
        had_leaders = bool(self.leaders)        # a later round without leaders offered the spread order only
        room = CompileRoom(self.deadline, self.s.jobs, self.s.race_per_candidate_s, t0, len(self.leaders),
                           self._tail_s())
        got = self.compile(batch, stop_at, self.s.sample if not self.rounds else 0, room=room)
        if not got.reached:
            return False
        seen = set(self.tried)
        self.tried += [c for c in got.reached if c not in seen]
        self.longest_s = max(self.longest_s, got.longest_s)
        self.seconds.update(got.seconds)
        t1 = self.clock()
        ids = list(dict.fromkeys(self.leaders + got.ids))
        left = max(0.0, self.deadline - t1)
        # a round that may not be the last leaves half for the next ones, when half would still start compiles
        # (after the last compile a later round may cost, the same estimate as its cut-off's: _tail_s)
        later = len(self.tried) < len(self.configs) and left / 2 > self._tail_s() + self.s.min_race_s
        share = max(self.s.min_race_s, left / 2 if later else left - FINISH_S)
        outcome = self.race(ids, share) if ids else None
        t2 = self.clock()
        self.race_s = t2 - t1
        self.race_per_s = self.race_s / len(ids) if ids else None
        if outcome is not None:
            self.outcomes.append(outcome)
            for e in outcome.entries:
                if e.samples or e.id not in self.entries:
                    self.entries[e.id] = e
            self.leaders = self._leaders(outcome)
        lead = self.leaders[0] if self.leaders else None
        rnd = SearchRound(len(self.rounds) + 1, len(got.reached), len(ids), lead,
                          self.entries[lead].median if lead else None, t1 - t0, t2 - t1,
                          "neighbours" if self.rounds and had_leaders else "sample", got.failed)
        self.rounds.append(rnd)
        if self.progress:
            self.progress("search", rnd)
        return True

    def _leaders(self, outcome: RaceOutcome) -> list[str]:
        """The fastest correct candidates so far (this round's ranking first: its samples are the freshest)."""
        ok = [e for e in outcome.ranked() if e.samples and e.status in _TIMED_OK]
        return [e.id for e in ok[:self.s.leaders]]

    # --- the result -------------------------------------------------------------------------------------------
    def _merged(self) -> RaceOutcome | None:
        """The last round's outcome with every earlier entry not raced again (eliminated in its round, or failed)."""
        if not self.outcomes:
            return None
        last = self.outcomes[-1]
        seen = {e.id for e in last.entries}
        earlier = []
        for rnd, out in enumerate(self.outcomes[:-1], start=1):
            for e in out.entries:
                if e.id in seen:
                    continue
                seen.add(e.id)
                if e.status not in FAILED and e.status != "skipped":
                    e.status = "eliminated"
                    e.reason = e.reason or f"slower than the leaders in round {rnd} of the budgeted search"
                earlier.append(e)
        rounds = [dict(r, search_round=i) for i, out in enumerate(self.outcomes, start=1) for r in out.rounds]
        return RaceOutcome(last.entries + earlier, last.verdict, last.pick, last.tie, last.stop, rounds,
                           sum(o.wall_s for o in self.outcomes), sum(o.measure_s for o in self.outcomes),
                           sum(o.check_s for o in self.outcomes))
