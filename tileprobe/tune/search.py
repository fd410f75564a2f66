"""A budgeted search over a space too large to compile whole: ``tileprobe tune --budget S``.

Compiling every configuration of a space of several hundred costs minutes (486 matmul configurations: 39 s of
compiling on the H200 host's 16 cores, 2026-12-01), linear in the space. With a budget, a problem whose space is
larger than :attr:`SearchSettings.full_max` configurations is searched instead: the compile jobs never wait for a
race and the GPU never waits for a wave. Each time a compile job frees up it asks :class:`SearchOrder` for the next
configuration, and the race of what has landed runs beside the compiles (:mod:`tileprobe.tune.overlap`: latecomers
join it and are judged by the same rules), so the order can read the race's leaders at that moment:

1. **A balanced sample first**: the default configuration, the stored picks of the same kernel on other problems
   (the store's tunes: a neighbouring problem's winner is often this one's), then :func:`balanced_sample`: each
   next configuration the one that adds most unseen pairs of two knobs' values (any first part of that order has
   every value of every knob about equally often). Its first wave (:attr:`SearchSettings.sample`) is started
   whatever the clock says (and spared at the cut until one of its compiles lands).
2. **Then around the leaders**: each next compile is the first untried neighbour of the race's fastest candidates
   so far — one step away (the next or the previous value in its list) on one knob, then on two knobs at once —
   and the balanced sample where they have none left.
3. **Stop starting compiles** when a compile started now, priced by a model of the compile times seen so far
   (:meth:`SearchOrder.expected_s`), would not land and be raced by the deadline; near it a cheaper choice may still
   start. The race ends by the deadline (:mod:`tileprobe.tune.overlap`'s ``deadline``).

The result says how much of the space was compiled and timed (``coverage``) and how the search went (a note);
configurations never compiled are rows of status :data:`NOT_SEARCHED`. The search is the method of successive
halving's "sample, then refine around the leaders", made continuous for a compile-bound tune: a candidate costs a
compile (seconds) before its first sample, and the local step follows that tile sizes and hints act mostly on their
own axis (a configuration next to a fast one is faster on average than one far away). Replayed on the H200's full
tune of the 486-configuration matmul (``benchmarks/tune/sim_budget.py``, 60 seeds, a 30-s budget, a 10-s plan,
2026-12-03), a configuration within 1.02 of the best was found in 58 seeds (47 with neighbours on one knob only);
the search in rounds it replaced (each round compiled, then raced, then chose the next round) in 26.

:class:`SearchOrder` never compiles or times anything itself: the tune asks it (:mod:`tileprobe.tune.budgeted`), the
tests and the replay drive it with fakes.
"""
from __future__ import annotations

import itertools
import math
import random
import statistics
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from tileprobe.schema import value_key
from tileprobe.tune.race import MIN_RACE_S
from tileprobe.tune.space import Config

#: The status of a configuration the budgeted search never compiled.
NOT_SEARCHED = "not_searched"
#: A compile's margin over the model of compile times (:meth:`SearchOrder.expected_s`) at the least: a neighbour
#: of a leader differs from it in one knob, and knobs interact.
NEIGHBOUR_COMPILE_FACTOR = 1.5
#: Seconds kept after the race's end by the deadline: the finalists' checks (run even when the budget is spent),
#: the store, the export and the process's exit. On the H200 host (``bench_budget.py`` seeds 0-5, 2026-12-03, the
#: race ending at the deadline less 0.5 s) the checks took 0.32-0.47 s, the store 0.03-0.05 s, and the exit after
#: the tune 0.25-0.35 s: the command's wall ended 0.4-0.8 s past the budget.
FINISH_S = 1.5
#: Compiles still running this long before :data:`FINISH_S` (s) are cut — killed, no record — so that one late and
#: slower than modelled cannot carry the tune past its budget (a 7-s compile started 10 s before a 30-s budget's end
#: made that wall 31.9 s, seed 2 of the same run); a compile landing just before the cut still gets a batch.
CUT_S = 1.0
#: What a compile job costs beyond tileiras' own time (s): cuTile's front end, nvdisasm and the register-pool walk,
#: the result's trip back. The H200 host's full tune of the 486-configuration matmul kept 16 jobs busy for 62.8 s
#: (1,005 job-seconds) for 480 s of tileiras: 1.08 s per compile (``benchmarks/tune/bench_budget.py``, 2026-12-03).
WORKER_OVERHEAD_S = 1.0


@dataclass(init=False)
class SearchSettings:
    """How a budgeted search runs (module doc).

    jobs: compiles that run at once (a wave). full_max: spaces up to this many configurations are compiled whole
    (default 4 waves). sample: the first wave, compiled whatever the clock says (default 1 wave). round_cap: how
    many configurations of the balanced sample are chosen at a time (default ``full_max``). leaders: how many of
    the race's fastest candidates the next compiles are neighbours of. seed: the sample's tie-breaks.

    ``full_max``, ``sample`` and ``round_cap`` may be given as None (their defaults above); once built, each is an
    int.

    Raises:
        ValueError: a count below 1.
    """
    jobs: int
    full_max: int
    sample: int
    leaders: int
    seed: int
    round_cap: int

    def __init__(self, jobs: int = 1, full_max: int | None = None, sample: int | None = None, leaders: int = 2,
                 seed: int = 0, round_cap: int | None = None):
        for name, n in (("jobs", jobs), ("leaders", leaders)):
            if n < 1:
                raise ValueError(f"search {name}={n}: give 1 or more")
        self.jobs, self.leaders, self.seed = jobs, leaders, seed
        self.full_max = 4 * jobs if full_max is None else full_max
        self.sample = max(1, jobs if sample is None else sample)
        self.round_cap = max(self.sample, self.full_max if round_cap is None else round_cap)


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


#: How many of the configurations not yet taken :func:`balanced_sample` weighs for each pick (in a seeded shuffle):
#: all of them in spaces up to this size. Weighing all of a 4,096-configuration space cost 2.0-2.5 s per 64 picks on
#: the 2-core machine, 16,384 configurations 14 s (session 8's hostile test), out of the budget. Each
#: configuration's keys are now made once per call rather than per weighing: 64 picks of 4,096 configurations of 12
#: two-valued knobs 0.69-0.89 s instead of 1.23-1.65 s (the same picks; this machine under a test run, 2026-12-03).
BALANCE_WINDOW = 512


def balanced_sample(configs: Sequence[Config], n: int, taken: Sequence[Config] = (), seed: int = 0,
                    pos: dict[Config, tuple[int, ...]] | None = None) -> list[Config]:
    """Up to ``n`` configurations of ``configs`` not in ``taken``, each the one that adds most to what the sample
    (``taken`` and those chosen before) covers: every pair of two knobs' values (:func:`position`) it has not yet
    seen counts ``1 / (1 + times seen)``, and so does each of its own values; ties broken by a ``seed``-ed shuffle.
    The search's sample uses it: unlike a max-min distance spread, which picks the space's corners first (2^k of
    them before any middle value), every value of every knob, and every pair of values, comes up about equally
    often. Replayed on the 486-configuration matmul's full tune (``benchmarks/tune/sim_budget.py``, 20 seeds, a 30-s
    budget, the search in rounds of 2026-12-02), round 1 from this sample found a configuration within 1.02 of the
    best in 9 seeds, from such a spread in 3. Each pick weighs at most :data:`BALANCE_WINDOW` configurations:
    O(n × min(len(configs), BALANCE_WINDOW) × knobs²). ``pos``: each configuration's :func:`position`, when the
    caller has them (:class:`SearchOrder` does: working them out is O(configurations × knobs × values), 0.6 s for
    4,096 configurations of 12 knobs on the 2-core machine, and a refill did it again each time)."""
    if pos is None:
        ax = axes(configs)
        pos = {c: position(c, ax) for c in configs}
    k = len(next(iter(pos.values()), ()))
    pairs = [(i, j) for i in range(k) for j in range(i + 1, k)]
    seen: dict[tuple, int] = {}
    keys: dict[Config, tuple] = {}     # each configuration's pair keys, then value keys: made once, not per weighing

    def keys_of(c: Config) -> tuple:
        if c not in keys:
            p = pos[c]
            keys[c] = (tuple((i, j, p[i], p[j]) for i, j in pairs), tuple((i, p[i]) for i in range(k)))
        return keys[c]

    def add(c: Config) -> None:
        two, one = keys_of(c)
        for key in one + two:
            seen[key] = seen.get(key, 0) + 1

    def gain(c: Config) -> float:      # the same sums in the same order as before: the same picks, ties included
        two, one = keys_of(c)
        get = seen.get
        return sum(1.0 / (1 + get(key, 0)) for key in two) + sum(1.0 / (1 + get(key, 0)) for key in one)
    for c in taken:
        if c in pos:
            add(c)
    taken_set = set(taken)
    left = [c for c in configs if c not in taken_set]
    random.Random(seed).shuffle(left)
    chosen: list[Config] = []
    while left and len(chosen) < n:     # the best of a shuffled window: O(n × window × knobs²) however large the space
        pick = max(left[:BALANCE_WINDOW], key=gain)
        chosen.append(pick)
        left.remove(pick)
        add(pick)
    return chosen


def round_one(configs: Sequence[Config], first: Sequence[Config], cap: int, seed: int = 0,
              pos: dict[Config, tuple[int, ...]] | None = None) -> list[Config]:
    """The search's first sample (module doc, 1.): ``first`` (those of ``configs``, once each, in order), then the
    :func:`balanced_sample`, ``cap`` in all (``pos``: as there). The budgeted search and a dry run with
    ``--budget`` both take it."""
    known = set(configs)
    head = [c for c in dict.fromkeys(first) if c in known][:cap]
    return head + balanced_sample(configs, cap - len(head), head, seed, pos)


#: The share of landed pairs one knob apart with the same machine code above which the search takes that knob for
#: one the compiler ignores (:meth:`SearchOrder.inert`) and steps on it last.
INERT_SHARE = 0.75
#: How many of its next choices :meth:`SearchOrder.next` looks through for one whose compile fits the time left.
LOOK_AHEAD = 64
#: Seconds kept after the last compile lands for its race (a batch or two of the last arrivals, the leaders again,
#: the finalists' checks) — :data:`~tileprobe.tune.race.MIN_RACE_S`, what a race gets even of a spent budget.
LAST_RACE_S = MIN_RACE_S


class SearchOrder:
    """Which configuration a budgeted search compiles next, asked each time a compile job frees up, while the race
    of what landed runs beside the compiles: the continuous form of "sample, then refine
    around the leaders".

    1. The first :attr:`SearchSettings.sample` (a wave) are the first sample (:func:`round_one`: the default, the
       stored picks, then the balanced sample), started whatever the clock says.
    2. After them, each next one is the first untried neighbour (:func:`neighbours`) of the race's current leaders
       (``leaders()``, fastest first, read when the job frees up), else the next of the balanced sample (refilled
       :attr:`SearchSettings.round_cap` at a time, around what was tried).
    3. No compile starts unless it can land and be raced before ``deadline``: now + its expected compile
       (:meth:`expected_s`) + :data:`WORKER_OVERHEAD_S` + :data:`LAST_RACE_S` + :data:`FINISH_S` ≤ ``deadline``;
       near the end a choice whose compile would not fit gives way to the next that does. A compile still running
       at :attr:`cut_at` is cut (the tune kills it: no record).

    Args:
        configs: the problem's configurations (after the constraints), in declared order.
        first: configurations taken first (the default, stored picks). settings: :class:`SearchSettings`
            (``jobs``, ``sample``, ``round_cap``, ``leaders``, ``seed``). deadline: the clock's value by which the
            search ends (s). leaders: () -> the race's fastest correct configurations so far, fastest first.

    Not thread-safe by itself: the tune asks :meth:`next` and :meth:`landed` from its compiling thread only;
    ``leaders`` reads the race's state from that thread.
    """

    def __init__(self, configs: Sequence[Config], first: Sequence[Config], settings: SearchSettings,
                 deadline: float, leaders: Callable[[], Sequence[Config]] = lambda: ()):
        self.configs, self.s, self.deadline, self.leaders = list(configs), settings, deadline, leaders
        self.ax = axes(self.configs)
        self.pos = {c: position(c, self.ax) for c in self.configs}
        self.at = {p: c for c, p in self.pos.items()}
        self.pending = list(round_one(self.configs, first, self.s.round_cap, self.s.seed, self.pos))
        self.tried: list[Config] = []
        self._tried: set[Config] = set()
        self.seconds: dict[Config, float] = {}    # tileiras' time of each compile that landed (s)
        self._model: tuple | None = None
        self.by_source = {"sample": 0, "neighbours": 0}
        self.landed_stored: list[Config] = []    # landed from the store before the order chose them
        self.code: dict[Config, str] = {}         # the machine code's identity of each landed compile
        # per (knob, value index, other value index), the lower first: landed pairs that differ on that knob alone,
        # between those two values, and how many of them compiled to the same machine code
        self.pairs: dict[tuple[int, int, int], int] = {}
        self.same: dict[tuple[int, int, int], int] = {}
        #: When the compiles still running are cut (s, the deadline's clock): :data:`CUT_S` + :data:`FINISH_S` before it.
        self.cut_at = deadline - CUT_S - FINISH_S
        self.refills = 0

    # --- asked by the compile schedule -------------------------------------------------------------------------
    def next(self, now: float) -> Config | None:
        """The next configuration to compile at ``now`` (s, the deadline's clock), or None: stop starting (no room
        left for any of the next :data:`LOOK_AHEAD` choices of each source — the leaders' neighbours, the sample —
        or every configuration tried). Each source is looked through on its own: two leaders' two-knob neighbours
        alone can be 4 × knobs² choices, all of them dear, ahead of a cheap one of the sample (session 9's hostile
        test: None with 79 untried 0.1-s configurations and 3 s left)."""
        first_wave = len(self.tried) < self.s.sample
        left = self.deadline - now - WORKER_OVERHEAD_S - LAST_RACE_S - FINISH_S
        if not first_wave and left <= 0:
            return None
        seen = {"sample": 0, "neighbours": 0}
        for pick, source in self._choices():
            if seen[source] >= LOOK_AHEAD:
                if source == "sample":      # the sample comes last: nothing further to look at
                    break
                continue
            seen[source] += 1
            if first_wave or self.expected_s(pick) <= left:
                self.tried.append(pick)
                self._tried.add(pick)
                self.by_source[source] += 1
                return pick
        return None

    def landed(self, config: Config, compile_s: float | None, code: str | None = None) -> None:
        """``config``'s record landed, its compile having taken ``compile_s`` s of tileiras (None: unknown), its
        machine code ``code`` (the record's ``code_sha256``: machine code and resources; None: unknown, or no code).
        One the order did not choose came from the store: it is not chosen again (:attr:`landed_stored`). The codes
        tell which knobs the compiler ignores (:meth:`inert`)."""
        if config not in self.pos:
            return
        if config not in self._tried:
            self._tried.add(config)
            self.landed_stored.append(config)
        if code is not None and config not in self.code:
            self._pair_codes(config, code)
        if compile_s is not None and math.isfinite(compile_s) and compile_s > 0:   # a stored record's may be anything
            self.seconds[config] = compile_s
            self._model = None

    def _pair_codes(self, config: Config, code: str) -> None:
        """Count ``config``'s landed partners that differ from it on one knob alone, per pair of that knob's values,
        and how many of them compiled to the same machine code (:meth:`inert`). O(knobs × values)."""
        here = self.pos[config]
        for i, values in enumerate(self.ax):
            for v in range(len(values)):
                if v == here[i]:
                    continue
                other = self.at.get((*here[:i], v, *here[i + 1:]))
                if other is not None and other in self.code:
                    key = (i, min(v, here[i]), max(v, here[i]))
                    self.pairs[key] = self.pairs.get(key, 0) + 1
                    self.same[key] = self.same.get(key, 0) + (self.code[other] == code)
        self.code[config] = code

    def inert(self, knob: int, a: int, b: int) -> bool:
        """Whether the compiler has ignored the step between values ``a`` and ``b`` (indices into :func:`axes`) of
        knob ``knob`` so far: of the landed pairs of configurations that differ only there, at least
        :data:`INERT_SHARE` compiled to the same machine code. Such a step mostly gives a launch the race has timed
        already: the TileGym matmul's 648 configurations on the H100 (2026-12-05) are 217 launches; ``opt_level`` 2
        and 3 gave the same code in 324 of 324 pairs; ``occupancy`` in 192 of 486, most of them between 2, 3 and
        4 (1 and 2 mostly differ)."""
        key = (knob, min(a, b), max(a, b))
        n = self.pairs.get(key, 0)
        return n > 0 and self.same.get(key, 0) >= INERT_SHARE * n

    def expected_s(self, config: Config) -> float:
        """What compiling ``config`` may cost (s of tileiras), with margin: the log of a compile's time modelled as
        the mean log of those landed plus, for each knob, how far the mean log of those with this configuration's
        value sits from it (tile sizes multiply a compile's time: the 486-configuration matmul's compiles took
        0.3 s at 64 × 64 × 32 and 7-9 s at 256 × 256 × 128 on the H200 host, 2026-12-03), times the model's own
        largest error on the compiles landed (their largest time ÷ model, at least :data:`NEIGHBOUR_COMPILE_FACTOR`:
        knobs interact, and a model of a few compiles misses the extremes; the 90th percentile let a 7.9-s compile
        start as a 3.5-s one in the replay).
        0 before any compile landed (the first wave starts whatever the clock says)."""
        if not self.seconds:
            return 0.0
        if self._model is None:
            mu, effects = _log_marginals(self.seconds, self.pos)
            ratios = sorted(t / math.exp(_modelled(mu, effects, self.pos[c])) for c, t in self.seconds.items())
            margin = max(NEIGHBOUR_COMPILE_FACTOR, ratios[-1])
            self._model = (mu, effects, margin)
        mu, effects, margin = self._model
        return margin * math.exp(_modelled(mu, effects, self.pos[config]))

    # --- choosing ------------------------------------------------------------------------------------------------
    def _choices(self) -> Iterator[tuple[Config, str]]:
        """Untried configurations in the order of preference (class doc, 1.-2.), each with where it came from."""
        offered: set[Config] = set()
        if len(self.tried) >= self.s.sample:
            leaders = list(self.leaders())[:self.s.leaders]
            # one knob away from each leader, then two knobs away; steps the compiler has ignored come last
            for moves_inert, knobs in ((False, 1), (False, 2), (True, 1), (True, 2)):
                for lead in leaders:
                    for c in self._neighbours(lead, knobs, moves_inert):
                        if c not in self._tried and c not in offered:
                            offered.add(c)
                            yield c, "neighbours"
        head = 0           # those tried at the head of the sample's order go (each call would scan them again)
        while head < len(self.pending) and self.pending[head] in self._tried:
            head += 1
        del self.pending[:head]
        i = 0
        while True:
            while i < len(self.pending):
                c = self.pending[i]
                i += 1
                if c not in self._tried and c not in offered:
                    offered.add(c)
                    yield c, "sample"
            if len(self._tried) + len(offered) >= len(self.configs):
                return
            self.refills += 1
            # everything tried counts as taken, those the store gave too (else the refill would offer them again
            # and again: a tune whose store held some of the space spun here for ever, session 8's new user)
            more = [c for c in balanced_sample(self.configs, self.s.round_cap,
                                               [*self.tried, *self.landed_stored, *offered], self.s.seed + self.refills,
                                               self.pos)
                    if c not in self._tried and c not in offered]
            if not more:
                return
            self.pending += more

    def _neighbours(self, config: Config, knobs: int = 1, moves_inert: bool | None = None) -> list[Config]:
        """The configurations one step from ``config`` (the next or previous value in the knob's declared list) on
        exactly ``knobs`` knobs (1 or 2), knob by knob (pairs of knobs in declared order); O(knobs²).
        ``moves_inert``: True, only those with at least one step the compiler has ignored so far (:meth:`inert`);
        False, only those with none; None, all.

        Two knobs away: the best of a space often needs two knobs moved together (the 486-configuration matmul's
        TILE_M 256 with 2 CTAs per cluster, where 256 with one CTA and 128 with two are both slow); one step on
        one knob at a time stalls there. Replayed (``benchmarks/tune/sim_budget.py``, 60 seeds, 30-s budget, 10-s plan,
        this 2-core machine, 2026-12-03): 58 of 60 within 1.02 with these, 47 of 60 with one knob only."""
        here = self.pos.get(config)
        if here is None:
            return []
        out = []
        for idx in itertools.combinations(range(len(here)), knobs):
            for steps in itertools.product((1, -1), repeat=knobs):
                p = list(here)
                for i, step in zip(idx, steps):
                    p[i] += step
                c = self.at.get(tuple(p))
                if c is None:
                    continue
                if moves_inert is None or moves_inert == any(self.inert(i, here[i], p[i]) for i in idx):
                    out.append(c)
        return out


def _log_marginals(seconds: dict[Config, float], pos: dict[Config, tuple[int, ...]]) -> tuple[float, list[dict]]:
    """(mean log compile time, per knob {value index: mean log time of the configurations with it − that mean})
    over the compiles in ``seconds`` (:meth:`SearchOrder.expected_s`)."""
    logs = {c: math.log(t) for c, t in seconds.items()}
    mu = statistics.fmean(logs.values())
    k = len(next(iter(pos.values()), ()))
    sums: list[dict] = [{} for _ in range(k)]
    for c, lt in logs.items():
        for i, v in enumerate(pos[c]):
            n, tot = sums[i].get(v, (0, 0.0))
            sums[i][v] = (n + 1, tot + lt - mu)
    return mu, [{v: tot / n for v, (n, tot) in d.items()} for d in sums]


def _modelled(mu: float, effects: list[dict], pos: tuple[int, ...]) -> float:
    """The log compile time :func:`_log_marginals` gives a configuration at ``pos``; a knob value no landed compile
    had counts as the dearest value of that knob seen (a deadline overrun costs more than a compile not started)."""
    return mu + sum(effects[i].get(v, max(effects[i].values(), default=0.0)) for i, v in enumerate(pos))
