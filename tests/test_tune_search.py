"""The budgeted search (``tileprobe.tune.search``) on synthetic spaces: the spread sample, the neighbours, and the
rounds of :class:`BudgetedSearch` with a fake compile and a fake race on a fake clock (nothing compiled or timed)."""
from __future__ import annotations

import itertools
import statistics

import pytest

from tileprobe.tune.race import Entry, RaceOutcome
from tileprobe.tune.search import (Compiled, BudgetedSearch, SearchSettings, axes, balanced_sample, neighbours,
                                   position, spread)
from tileprobe.tune.space import Config


def space(**knobs) -> list[Config]:
    """Every combination of the knobs (the first is a tunable, the rest hints), in declared order."""
    names = list(knobs)
    out = []
    for combo in itertools.product(*knobs.values()):
        pairs = list(zip(names, combo))
        out.append(Config(tuple(pairs[:1]), tuple(pairs[1:])))
    return out


def test_axes_and_positions_follow_the_declared_order():
    configs = space(TILE=[64, 128, 256], occupancy=[1, 2])
    ax = axes(configs)
    assert ax == [["64", "128", "256"], ["1", "2"]]
    assert position(configs[-1], ax) == (2, 1) and position(configs[0], ax) == (0, 0)


def test_spread_starts_at_the_centre_then_goes_to_the_ends():
    configs = space(TILE=list(range(9)))
    picks = [dict(c.tunables)["TILE"] for c in spread(configs, 3)]
    assert picks[0] == 4 and sorted(picks[1:]) == [0, 8]


def test_spread_keeps_away_from_what_is_taken_and_never_repeats():
    configs = space(TILE=list(range(9)), occupancy=[1, 2, 4])
    taken = [c for c in configs if dict(c.tunables)["TILE"] == 0 and dict(c.hints)["occupancy"] == 1]
    picks = spread(configs, 10, taken)
    assert len(picks) == len(set(picks)) == 10 and not set(picks) & set(taken)
    first = picks[0]
    assert dict(first.tunables)["TILE"] == 8 and dict(first.hints)["occupancy"] == 4   # the far corner
    assert spread(configs, 100) == spread(configs, 100) and len(spread(configs, 100)) == 27


def test_neighbours_are_one_step_on_one_knob():
    configs = space(TILE=[64, 128, 256], occupancy=[1, 2, 4], num_ctas=[1, 2])
    here = Config((("TILE", 128),), (("occupancy", 2), ("num_ctas", 1)))
    got = {(dict(c.tunables)["TILE"], dict(c.hints)["occupancy"], dict(c.hints)["num_ctas"])
           for c in neighbours(here, configs)}
    assert got == {(64, 2, 1), (256, 2, 1), (128, 1, 1), (128, 4, 1), (128, 2, 2)}


def test_settings_default_to_waves_of_the_jobs_and_reject_zero():
    s = SearchSettings(jobs=16)
    assert (s.full_max, s.sample, s.round_cap) == (64, 16, 64)
    with pytest.raises(ValueError, match="jobs=0"):
        SearchSettings(jobs=0)


class Fake:
    """A fake compile pool (``jobs`` slots, 1 s of the fake clock per configuration, some failing; a configuration
    starts when a slot frees, unless the round's cut-off has passed and its first ``at_least`` have started) and a
    fake race (2 s; each candidate's samples are its cost with a little spread; the fastest wins) over ``cost``."""

    def __init__(self, cost, jobs, fail=(), secs=lambda c: 1.0):
        self.cost, self.jobs, self.fail, self.secs = cost, jobs, set(fail), secs
        self.stops: list[float | None] = []
        self.now = 0.0
        self.compiled: list[Config] = []
        self.starts: list[tuple[float, float | None, bool]] = []    # (start, cut-off, within at_least)
        self.races: list[list[str]] = []
        self.by_label: dict[str, Config] = {}

    def clock(self) -> float:
        return self.now

    def compile(self, batch, stop_at=None, at_least=0, room=None):
        free = [self.now] * self.jobs
        reached = []
        self.stops.append(stop_at)
        for i, c in enumerate(batch):
            slot = min(range(self.jobs), key=lambda j: free[j])
            t = free[slot]
            if i >= at_least and stop_at is not None and t >= stop_at:
                break
            if i >= at_least and room is not None and not room(i, t):
                break
            self.starts.append((t, stop_at, i < at_least))
            free[slot] = t + self.secs(c)
            reached.append(c)
            self.by_label[c.label] = c
        self.now = max(free) if reached else self.now
        self.compiled += reached
        seconds = {c.label: self.secs(c) for c in reached}
        return Compiled([c.label for c in reached if c.label not in self.fail], reached,
                        max(seconds.values(), default=0.0), seconds=seconds)

    def race(self, ids, budget_s):
        self.now += 2.0
        self.races.append(list(ids))
        entries = [Entry(i, samples=[self.cost(self.by_label[i]) * f for f in (0.99, 1.0, 1.01)]) for i in ids]
        best = min(entries, key=lambda e: statistics.median(e.samples))
        for e in entries:
            e.status = "winner" if e is best else "eliminated"
        return RaceOutcome(entries, "winner", best.id, [best.id], "one survivor", [{"round": 1}], 2.0, 1.5, 0.1)


def bowl(c: Config) -> float:
    """A cost with one minimum inside the space (TILE 5, occupancy 2, num_ctas 1), rising along each knob."""
    t, o, n = dict(c.tunables)["TILE"], dict(c.hints)["occupancy"], dict(c.hints)["num_ctas"]
    return 100.0 + 3.0 * abs(t - 5) + 2.0 * abs(o - 2) + 1.5 * abs(n - 1)


def test_the_search_finds_a_bowls_minimum_compiling_a_part_of_the_space():
    configs = space(TILE=list(range(10)), occupancy=[1, 2, 4, 8], num_ctas=[1, 2, 4])   # 120 configurations
    fake = Fake(bowl, jobs=4)
    first = [configs[0]]
    out = BudgetedSearch(configs, fake.compile, fake.race, lambda c: c.label, SearchSettings(jobs=4), 25.0, first,
                         clock=fake.clock).run()
    best = min(configs, key=bowl)
    assert out.outcome.pick == best.label
    assert fake.compiled[0] == configs[0]                      # round 1 takes the first ones first
    assert len(fake.compiled) == len(set(fake.compiled)) == out.tried < len(configs)
    # round 1 offered full_max (16: 4 waves), all started before its cut-off, (25 - 2 s of race) / 2 = 11.5 s
    assert out.rounds[0].kind == "sample" and out.rounds[0].compiled == 16
    assert all(r.kind == "neighbours" for r in out.rounds[1:]) and len(out.rounds) >= 2
    # no compile started after its round's cut-off, but round 1's first wave
    assert all(t < cut or forced for t, cut, forced in fake.starts)
    # leaders race again in the next round, beside the new candidates
    assert out.rounds[0].leader in fake.races[0] and out.rounds[0].leader in fake.races[1]
    # the merged outcome keeps every timed candidate once; the ones not raced again are eliminated
    ids = [e.id for e in out.outcome.entries]
    assert len(ids) == len(set(ids)) == len(fake.compiled)
    assert {e.status for e in out.outcome.entries} == {"winner", "eliminated"}
    assert fake.now <= 25.0                  # the last compiles ended a race and the longest compile before it


def test_a_cut_off_round_leaves_the_rest_untried_and_a_spent_budget_compiles_one_wave():
    configs = space(TILE=list(range(10)), occupancy=[1, 2, 4, 8], num_ctas=[1, 2, 4])
    fake = Fake(bowl, jobs=4)
    out = BudgetedSearch(configs, fake.compile, fake.race, lambda c: c.label, SearchSettings(jobs=4), 7.0,
                         clock=fake.clock).run()
    # round 1: cut-off (7 - 2) × ROUND1_SHARE (0.3) = 1.5 s: waves at 0 and 1 s start (8); round 2: 7 - 2 - 1 = 4 s
    # is before the clock (2 s of compiles, 2 s of race): none
    assert [r.compiled for r in out.rounds] == [8] and out.tried == 8 == len(fake.compiled)


def test_the_budget_stops_the_search_after_the_first_round():
    configs = space(TILE=list(range(10)), occupancy=[1, 2, 4, 8], num_ctas=[1, 2, 4])
    fake = Fake(bowl, jobs=4)
    out = BudgetedSearch(configs, fake.compile, fake.race, lambda c: c.label, SearchSettings(jobs=4), 1.0,
                         clock=fake.clock).run()
    assert len(out.rounds) == 1 and out.tried == 4 and len(fake.compiled) == 4
    assert out.outcome.pick == min(fake.compiled, key=bowl).label


def test_a_generous_budget_tries_every_configuration_once():
    configs = space(TILE=list(range(5)), occupancy=[1, 2], num_ctas=[1])
    fake = Fake(bowl, jobs=2)
    out = BudgetedSearch(configs, fake.compile, fake.race, lambda c: c.label, SearchSettings(jobs=2), 1e9,
                         clock=fake.clock).run()
    assert sorted(c.label for c in fake.compiled) == sorted(c.label for c in configs)
    assert out.outcome.pick == min(configs, key=bowl).label


def test_failed_compiles_are_not_raced_and_the_search_goes_on():
    configs = space(TILE=list(range(10)), occupancy=[1, 2], num_ctas=[1])
    best = min(configs, key=bowl)
    fake = Fake(bowl, jobs=2, fail={best.label})
    out = BudgetedSearch(configs, fake.compile, fake.race, lambda c: c.label, SearchSettings(jobs=2), 1e9,
                         clock=fake.clock).run()
    assert all(best.label not in r for r in fake.races)
    assert out.outcome.pick == min((c for c in configs if c != best), key=bowl).label


def test_a_round_note_counts_failed_compiles_and_a_round_without_leaders_is_a_sample():
    configs = space(TILE=list(range(10)), occupancy=[1, 2], num_ctas=[1])
    fake = Fake(bowl, jobs=2, fail={c.label for c in configs})            # every compile fails
    real = fake.compile
    fake.compile = lambda b, s=None, a=0, room=None: (lambda got: Compiled(got.ids, got.reached, got.longest_s,
                                                                            len(got.reached)))(real(b, s, a, room))
    out = BudgetedSearch(configs, fake.compile, fake.race, lambda c: c.label, SearchSettings(jobs=2, full_max=4),
                         12.0, clock=fake.clock).run()
    assert out.outcome is None and len(out.rounds) >= 2
    assert all(r.kind == "sample" and r.leader is None for r in out.rounds)
    assert out.rounds[0].note().startswith("budgeted search round 1: 4 compiled (a balanced sample, 4 of them "
                                           "failed), 0 raced; no leader")


def test_compile_room_keeps_a_race_of_every_candidate_and_the_longest_compile_before_the_deadline():
    from tileprobe.tune.search import CompileRoom
    room = CompileRoom(deadline=30.0, jobs=4, per_candidate_s=0.2, t0=10.0, racing=2)
    assert room(4, 12.0) and room.longest_s == 2.0          # the first first-wave compile ended after 2 s
    assert room(5, 16.0) and room.longest_s == 6.0          # another after 6 s: the longest so far
    assert room(9, 20.0) and room.longest_s == 6.0          # past the first wave: no first-wave ends any more
    # 20 + 6 + 0.2 × (17 + 1 + 2) = 30.0 fits; 20 + 6 + 0.2 × (18 + 1 + 2) = 30.2 does not
    assert room(17, 20.0) and not room(18, 20.0)


def test_a_round_starts_no_compile_whose_race_would_not_fit_and_its_race_gets_the_rest():
    """Fake compiles of 1 s on 4 slots, a race cost of 0.5 s per candidate, a deadline of 9 s: the cut-off alone
    ((9 - 2) / 2 = 3.5 s) would start 16; the room stops at 12 (at 3 s, 3 + 1 + 0.5 × 13 > 9). Half of the 6 s
    left (3 s) is not more than the longest compile and a race (1 + 2 s), so no later round could start compiles:
    the race gets all of it but FINISH_S, instead of half."""
    from tileprobe.tune.search import FINISH_S
    configs = space(TILE=list(range(10)), occupancy=[1, 2, 4, 8], num_ctas=[1, 2, 4])
    fake = Fake(bowl, jobs=4)
    budgets = []
    real_race = fake.race
    fake.race = lambda ids, budget_s: (budgets.append(budget_s), real_race(ids, budget_s))[1]
    out = BudgetedSearch(configs, fake.compile, fake.race, lambda c: c.label,
                         SearchSettings(jobs=4, round_cap=64, race_per_candidate_s=0.5), 9.0,
                         clock=fake.clock).run()
    assert out.rounds[0].compiled == 12
    assert budgets[0] == pytest.approx(9.0 - 3.0 - FINISH_S)


def test_a_balanced_sample_of_nine_in_a_cube_of_27_is_an_orthogonal_array():
    """3 knobs × 3 values: 9 picks give every value of every knob 3 times and every pair of two knobs' values once
    (an orthogonal array), for any seed; max-min spread (seed 0) gives the corners first: the middle values once."""
    configs = space(A=[1, 2, 3], B=[1, 2, 3], C=[1, 2, 3])
    ax = axes(configs)

    def cover(picks):
        pos = [position(c, ax) for c in picks]
        values = sorted(sum(1 for p in pos if p[i] == v) for i in range(3) for v in range(3))
        pairs = {(i, j, p[i], p[j]) for p in pos for i in range(3) for j in range(i + 1, 3)}
        return values, len(pairs)
    for seed in range(3):
        picks = balanced_sample(configs, 9, seed=seed)
        assert len(set(picks)) == 9 and cover(picks) == ([3] * 9, 27)
    assert cover(spread(configs, 9, seed=0)) == ([1, 1, 1, 4, 4, 4, 4, 4, 4], 15)
    taken = balanced_sample(configs, 4, seed=0)
    assert not set(balanced_sample(configs, 9, taken, seed=0)) & set(taken)


def test_a_later_rounds_cut_off_keeps_room_for_a_leaders_neighbour_not_for_the_slowest_compile():
    """The default configuration (TILE=0) compiles in 8 s, every other in 1 s; the leaders sit around TILE=5. A
    neighbour differs from its leader in one knob, so round 2 stops starting compiles NEIGHBOUR_COMPILE_FACTOR ×
    the leaders' longest compile (1.5 s) and the worker's overhead beyond tileiras, plus a race (2 s) and the finish,
    before the deadline, not 8 s + 2 s before it."""
    from tileprobe.tune.search import FINISH_S, NEIGHBOUR_COMPILE_FACTOR, WORKER_OVERHEAD_S
    configs = space(TILE=list(range(10)), occupancy=[1, 2, 4, 8], num_ctas=[1, 2, 4])
    fake = Fake(bowl, jobs=4, secs=lambda c: 8.0 if dict(c.tunables)["TILE"] == 0 else 1.0)
    out = BudgetedSearch(configs, fake.compile, fake.race, lambda c: c.label, SearchSettings(jobs=4), 40.0,
                         [configs[0]], clock=fake.clock).run()
    assert fake.compiled[0] == configs[0] and len(out.rounds) >= 2
    assert configs[0].label not in out.rounds[0].leader                 # TILE=0 is far from the bowl's minimum
    assert fake.stops[1] == pytest.approx(40.0 - 2.0 - NEIGHBOUR_COMPILE_FACTOR * 1.0 - WORKER_OVERHEAD_S - FINISH_S)
    assert out.outcome.pick == min(configs, key=bowl).label


def test_a_later_rounds_cut_off_keeps_a_race_of_its_leaders_and_a_wave_not_the_whole_last_race():
    """A race that costs 0.1 s per candidate: round 1 races its many candidates for several seconds, but a later
    round races its leaders and about a wave of newcomers, so its cut-off keeps max(MIN_RACE_S, 0.1 s × (leaders +
    jobs)) before the deadline (and the neighbour's compile), not the whole of round 1's race."""
    from tileprobe.tune.race import MIN_RACE_S
    from tileprobe.tune.search import FINISH_S, WORKER_OVERHEAD_S
    configs = space(TILE=list(range(10)), occupancy=[1, 2, 4, 8], num_ctas=[1, 2, 4])
    fake = Fake(bowl, jobs=4)
    real_race = fake.race

    def race(ids, budget_s):
        out = real_race(ids, budget_s)
        fake.now += 0.1 * len(ids) - 2.0
        return out
    fake.race = race
    out = BudgetedSearch(configs, fake.compile, fake.race, lambda c: c.label, SearchSettings(jobs=4, round_cap=64),
                         60.0, clock=fake.clock).run()
    first = len(fake.races[0])
    assert first * 0.1 > MIN_RACE_S + 1.0                       # round 1's race was long
    assert len(out.rounds) >= 2
    # the tail: min(the longest compile, NEIGHBOUR_COMPILE_FACTOR × the leaders') = 1 s (every compile takes 1 s)
    keep = 1.0 + WORKER_OVERHEAD_S + FINISH_S
    assert fake.stops[1] == pytest.approx(60.0 - max(MIN_RACE_S, 0.1 * (2 + 4)) - keep)
    assert fake.stops[1] > 60.0 - 0.1 * first - keep    # later than keeping the whole of round 1's race


def test_the_search_replayed_on_the_h200s_full_486_configuration_tune_keeps_its_hit_rate():
    """benchmarks/sim_budget.py replays the budgeted search on the H200's full tune of TileGym's 486-configuration
    matmul (every configuration's tileiras time and race median, docs/gpu/2026-12-03/s7a-full-486.json.gz): with a
    30-s budget and a 10-s plan, 14 of 30 seeds pick a configuration within 1.02 of the best (the search before
    2026-12-03: 13). A change to the search that finds it less often fails here."""
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, os.path.join(root, "benchmarks", "sim_budget.py"),
                          os.path.join(root, "docs", "gpu", "2026-12-03", "s7a-full-486.json.gz"),
                          "--plan", "10", "--seeds", "30"], capture_output=True, text=True, timeout=600, check=True)
    last = out.stdout.strip().splitlines()[-1]
    hits = int(last.split("within 1.02: ")[1].split(" of ")[0])
    assert hits >= 14, last


def test_round_ones_race_leaves_half_for_later_rounds_judged_on_a_typical_compile_not_the_slowest():
    """The default configuration compiles in 8 s, every other in 1 s. Whether round 1's race leaves half of what
    is left for a later round is judged on what a later round's last compile may cost: before any leader is known,
    1.5 × the round's median compile (1.5 s), not the slowest one (8 s), so round 1's race gets half, and a
    second round runs."""
    configs = space(TILE=list(range(10)), occupancy=[1, 2, 4, 8], num_ctas=[1, 2, 4])
    fake = Fake(bowl, jobs=4, secs=lambda c: 8.0 if dict(c.tunables)["TILE"] == 0 else 1.0)
    budgets, clocks = [], []
    real_race = fake.race
    fake.race = lambda ids, budget_s: (budgets.append(budget_s), clocks.append(fake.now), real_race(ids, budget_s))[2]
    out = BudgetedSearch(configs, fake.compile, fake.race, lambda c: c.label, SearchSettings(jobs=4), 24.0,
                         [configs[0]], clock=fake.clock).run()
    left = 24.0 - clocks[0]
    assert 8.0 + 2.0 > left / 2 > 1.5 + 2.0              # the slowest compile would have said "no later round"
    assert budgets[0] == pytest.approx(left / 2)
    assert len(out.rounds) >= 2
