"""The budgeted search (``tileprobe.tune.search``) on synthetic spaces: the balanced sample, and
:class:`SearchOrder` asked by fake compile jobs beside a fake race on a fake clock (nothing compiled or timed)."""
from __future__ import annotations

import heapq
import itertools
import math
import re

import pytest

from tileprobe.tune.search import (
    FINISH_S,
    LAST_RACE_S,
    NEIGHBOUR_COMPILE_FACTOR,
    WORKER_OVERHEAD_S,
    SearchOrder,
    SearchSettings,
    axes,
    balanced_sample,
    position,
)
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


def test_settings_default_to_waves_of_the_jobs_and_reject_zero():
    s = SearchSettings(jobs=16)
    assert (s.full_max, s.sample, s.round_cap) == (64, 16, 64)
    with pytest.raises(ValueError, match="jobs=0"):
        SearchSettings(jobs=0)


def test_a_balanced_sample_of_nine_in_a_cube_of_27_is_an_orthogonal_array():
    """3 knobs × 3 values: 9 picks give every value of every knob 3 times and every pair of two knobs' values once
    (an orthogonal array), for any seed."""
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
    taken = balanced_sample(configs, 4, seed=0)
    assert not set(balanced_sample(configs, 9, taken, seed=0)) & set(taken)


def bowl(c: Config) -> float:
    """A cost with one minimum inside the space (TILE 5, occupancy 2, num_ctas 1), rising along each knob."""
    t, o, n = dict(c.tunables)["TILE"], dict(c.hints)["occupancy"], dict(c.hints)["num_ctas"]
    return 100.0 + 3.0 * abs(t - 5) + 2.0 * abs(o - 2) + 1.5 * abs(n - 1)




class Jobs:
    """Fake compile jobs and a fake race on one fake clock: ``jobs`` slots ask the order for their next configuration
    as they free up; a compile takes ``secs(config)`` + WORKER_OVERHEAD_S; the race times each landed candidate
    (its ``cost``) ``race_s`` after it lands; the order's leaders are the fastest timed so far. Failing ones land
    without a time."""

    def __init__(self, configs, cost, jobs=4, secs=lambda c: 1.0, fail=(), race_s=0.1, leaders=2, deadline=40.0,
                 first=(), settings=None):
        self.cost, self.secs, self.fail, self.race_s = cost, secs, set(fail), race_s
        self.timed: dict[Config, float] = {}
        self.settings = settings or SearchSettings(jobs=jobs, leaders=leaders)
        self.order = SearchOrder(configs, list(first), self.settings, deadline,
                                 lambda: sorted(self.timed, key=self.timed.get))
        self.starts: list[tuple[float, Config]] = []
        self.end = 0.0

    def run(self) -> Config | None:
        events = [(0.0, i, "free", None) for i in range(self.settings.jobs)]
        n = len(events)
        while events:
            t, _, kind, c = heapq.heappop(events)
            if kind == "timed":
                if c not in self.fail:
                    self.timed[c] = self.cost(c)
                continue
            if kind == "land":
                self.order.landed(c, self.secs(c))
                heapq.heappush(events, (t + self.race_s, n, "timed", c))
                n += 1
                continue
            nxt = self.order.next(t)
            if nxt is None:
                continue
            self.starts.append((t, nxt))
            done = t + self.secs(nxt) + WORKER_OVERHEAD_S
            self.end = max(self.end, done + self.race_s)
            heapq.heappush(events, (done, n, "land", nxt))
            heapq.heappush(events, (done, n + 1, "free", None))
            n += 2
        return min(self.timed, key=self.timed.get) if self.timed else None


#: Replayed hits of 30 seeds (29 on 2026-12-03 with two-knob neighbours, 27 with one-knob only; a little room for
#: changes that trade a seed for a sounder rule).
HITS = 27
SPACE = dict(TILE=list(range(10)), occupancy=[1, 2, 4, 8], num_ctas=[1, 2, 4])   # 120 configurations


def test_the_search_finds_a_bowls_minimum_compiling_a_part_of_the_space():
    configs = space(**SPACE)
    run = Jobs(configs, bowl, deadline=20.0)
    assert run.run() == min(configs, key=bowl)
    assert 20 <= len(run.order.tried) < len(configs) and len(set(run.order.tried)) == len(run.order.tried)
    assert run.order.by_source["neighbours"] >= 5            # the leaders steered the compiles after the first wave
    assert run.end <= 20.0                                    # every compile landed and was timed by the deadline


def test_the_first_wave_starts_whatever_the_clock_says_then_nothing_starts():
    configs = space(**SPACE)
    run = Jobs(configs, bowl, deadline=0.001, first=[configs[7]])
    run.run()
    assert len(run.starts) == 4 and all(t == 0.0 for t, _ in run.starts)
    assert run.starts[0][1] == configs[7]                    # the first guesses (default, stored picks) come first


def test_after_the_first_wave_the_leaders_neighbours_come_first_one_knob_then_two_fastest_leader_first():
    configs = space(TILE=[64, 128, 256], occupancy=[1, 2, 4], num_ctas=[1, 2])
    by = {(dict(c.tunables)["TILE"], dict(c.hints)["occupancy"], dict(c.hints)["num_ctas"]): c for c in configs}
    leaders = [by[(128, 2, 1)], by[(64, 1, 2)]]
    order = SearchOrder(configs, [by[(256, 4, 2)]], SearchSettings(jobs=1, leaders=2), 1e9, lambda: leaders)
    assert order.next(0.0) == by[(256, 4, 2)]                 # the first wave (1 job): the first guess
    got = [order.next(0.0) for _ in range(8)]
    # one step on one knob, knob by knob (the next value, then the previous), the fastest leader's first
    assert got == [by[k] for k in ((256, 2, 1), (64, 2, 1), (128, 4, 1), (128, 1, 1), (128, 2, 2),
                                   (128, 1, 2), (64, 2, 2), (64, 1, 1))]
    assert order.by_source == {"sample": 1, "neighbours": 8}
    # then two knobs at once, pair by pair (TILE+occupancy, TILE+num_ctas, occupancy+num_ctas), those taken skipped
    two = [order.next(0.0) for _ in range(5)]
    assert two == [by[k] for k in ((256, 4, 1), (256, 1, 1), (64, 4, 1), (256, 2, 2), (128, 4, 2))]
    assert order.by_source == {"sample": 1, "neighbours": 13}
    # the second leader's (64, 1, 2) are all taken ((128, 2, 2), (128, 1, 1), (64, 2, 1)): the balanced sample
    assert order.next(0.0) not in got + two
    assert order.by_source == {"sample": 2, "neighbours": 13}


def test_no_compile_starts_that_could_not_land_and_be_raced_by_the_deadline_but_a_cheaper_one_may():
    """TILE 9 compiles in 8 s, the others in 1 s (one of them in the first wave: a value never compiled is priced
    like the dearest value of its knob seen): near the deadline the order passes over TILE 9's configurations (their
    modelled compile does not fit) and starts the cheap ones while they fit."""
    configs = space(**SPACE)
    secs = lambda c: 8.0 if dict(c.tunables)["TILE"] == 9 else 1.0
    run = Jobs(configs, bowl, secs=secs, deadline=15.0, first=[configs[-1]])
    run.run()
    keep = WORKER_OVERHEAD_S + LAST_RACE_S + FINISH_S
    for t, c in run.starts[4:]:
        assert t + secs(c) <= 15.0 - keep + 1e-9, (t, c.label)    # the model (× its margin) was never too low here
    assert run.end <= 15.0
    late = [c for t, c in run.starts if t > 15.0 - keep - 8.0]
    assert late and all(dict(c.tunables)["TILE"] != 9 for c in late)


def test_the_compile_time_model_multiplies_knob_effects_with_a_margin_of_at_least_one_and_a_half():
    configs = space(**SPACE)
    secs = lambda c: 0.1 * (1 + dict(c.tunables)["TILE"]) * (2.0 if dict(c.hints)["num_ctas"] == 4 else 1.0)
    order = SearchOrder(configs, [], SearchSettings(jobs=4), 1e9)
    assert order.expected_s(configs[0]) == 0.0                 # nothing landed: the first wave goes anyway
    for c in balanced_sample(configs, 60, seed=1):
        order.landed(c, secs(c))
    for c in configs:
        assert order.expected_s(c) >= NEIGHBOUR_COMPILE_FACTOR * secs(c) * 0.7, c.label
        assert order.expected_s(c) <= 4.0 * secs(c), c.label
    big, small = (Config((("TILE", 9),), (("occupancy", 2), ("num_ctas", 4))),
                  Config((("TILE", 0),), (("occupancy", 2), ("num_ctas", 1))))
    assert order.expected_s(big) / order.expected_s(small) == pytest.approx(20.0, rel=0.3)


def test_a_record_from_the_store_is_not_chosen_and_every_configuration_is_tried_once():
    configs = space(TILE=[1, 2, 3], occupancy=[1, 2])
    order = SearchOrder(configs, [], SearchSettings(jobs=2), 1e9)
    order.landed(configs[3], 0.5)                              # the store held it
    got = []
    while (c := order.next(0.0)) is not None:
        got.append(c)
    assert sorted(got, key=configs.index) == [c for c in configs if c != configs[3]]
    assert order.landed_stored == [configs[3]] and order.next(0.0) is None


def test_failed_compiles_are_not_leaders_and_the_search_goes_on():
    configs = space(**SPACE)
    best = min(configs, key=bowl)
    run = Jobs(configs, bowl, fail={best}, deadline=60.0)
    pick = run.run()
    assert best in run.order.tried and pick != best and pick == min((c for c in configs if c != best), key=bowl)


def test_the_search_needs_no_more_than_one_look_at_the_clock_per_start():
    configs = space(**SPACE)
    order = SearchOrder(configs, [], SearchSettings(jobs=2), 10.0)
    assert order.next(0.0) and order.next(100.0)              # the first wave
    assert order.next(100.0) is None and order.next(10.0 - FINISH_S) is None
    assert math.isclose(len(order.tried), 2)


def test_steps_the_compiler_ignored_come_after_the_other_neighbours():
    """opt_level 2 and 3 compiled to the same machine code for a leader (its step landed with the same code): the
    leader's other steps come first, then the steps on opt_level; a knob whose steps gave new code stays in place.
    The H100's 648-configuration matmul is 217 launches (opt_level 2 = 3 in 324 of 324 pairs, 2026-12-05)."""
    configs = space(TILE=[64, 128, 256], occupancy=[1, 2], opt_level=[2, 3])
    by = {(dict(c.tunables)["TILE"], dict(c.hints)["occupancy"], dict(c.hints)["opt_level"]): c for c in configs}
    lead = by[(128, 1, 2)]
    order = SearchOrder(configs, [lead], SearchSettings(jobs=1, leaders=1), 1e9, lambda: [lead])
    assert order.next(0.0) == lead
    order.landed(lead, 1.0, "code-A")
    order.landed(by[(128, 1, 3)], 1.0, "code-A")          # the opt_level step: the same code (from the store)
    order.landed(by[(128, 2, 2)], 1.0, "code-B")          # the occupancy step: new code
    assert order.inert(2, 0, 1) and not order.inert(1, 0, 1) and not order.inert(0, 0, 1)
    got = [order.next(0.0) for _ in range(4)]
    # one knob: TILE up and down (occupancy's step is taken); two knobs: TILE with occupancy, none on opt_level
    assert got == [by[k] for k in ((256, 1, 2), (64, 1, 2), (256, 2, 2), (64, 2, 2))]
    # then the steps that move opt_level: one knob's is taken, two knobs' TILE + opt_level first
    assert [order.next(0.0) for _ in range(2)] == [by[(256, 1, 3)], by[(64, 1, 3)]]


def test_a_step_is_taken_for_ignored_only_while_most_of_its_pairs_shared_their_code():
    configs = space(TILE=[1, 2, 3, 4], occupancy=[1, 2])
    by = {(dict(c.tunables)["TILE"], dict(c.hints)["occupancy"]): c for c in configs}
    order = SearchOrder(configs, [], SearchSettings(jobs=1), 1e9)
    order.landed(by[(1, 1)], 1.0, "a")
    order.landed(by[(1, 2)], 1.0, "a")
    assert order.inert(1, 0, 1) and order.inert(1, 1, 0)
    order.landed(by[(2, 1)], 1.0, "b")
    order.landed(by[(2, 2)], 1.0, "c")                     # 1 of 2 pairs the same: below INERT_SHARE
    assert not order.inert(1, 0, 1)
    order.landed(by[(3, 1)], 1.0, None)                    # no code: not counted
    order.landed(by[(3, 2)], 1.0, "d")
    # pairs on one knob between any two of its values (TILE 1-3 and 2-3 through (3, 2)); (3, 1) counts for none
    assert order.pairs == {(1, 0, 1): 2, (0, 0, 1): 2, (0, 0, 2): 1, (0, 1, 2): 1}
    assert order.same == {(1, 0, 1): 1, (0, 0, 1): 0, (0, 0, 2): 0, (0, 1, 2): 0}
    assert not order.inert(0, 2, 3)                        # no pair seen: not ignored


def test_the_replay_of_the_h100s_648_configuration_run_follows_the_fastest_timed_and_skips_ignored_steps():
    """benchmarks/tune/sim_budget.py --race intake replays the search as the H100 ran it (2026-12-05: the race takes
    landed candidates in at 2.3 s an intake, its line ~6 s before the budget's end) on that day's full tune of
    648 TileGym matmul configurations. The search as it was (the racing leaders only, no machine-code identity:
    --racing-leaders --no-codes) hit 6 of 20 seeds there, as the GPU's 4 of 10; this one must hit HITS_648."""
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, os.path.join(root, "benchmarks", "tune", "sim_budget.py"),
                          os.path.join(root, "docs", "gpu", "2026-12-05c", "s15-full-648.json.gz"), "--race", "intake",
                          "--plan", "10.5", "--overhead", "1.6", "--within", "1.01", "--seeds", "20"],
                         capture_output=True, text=True, timeout=600, check=True)
    last = out.stdout.strip().splitlines()[-1]
    hits = int(last.split("within 1.01: ")[1].split(" of ")[0])
    assert hits >= HITS_648, last


HITS_648 = 14


def test_the_search_replayed_on_the_h200s_full_486_configuration_tune_keeps_its_hit_rate():
    """benchmarks/tune/sim_budget.py replays the budgeted search on the H200's full tune of TileGym's 486-configuration
    matmul (every configuration's tileiras time and race median, docs/gpu/2026-12-03/s7a-full-486.json.gz): with a
    30-s budget and a 10-s plan, HITS of 30 seeds pick a configuration within 1.02 of the best (the search in rounds
    it replaced: 14), each ending within 1 s of the budget. A change to the search that finds it less often, or
    overruns, fails here."""
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, os.path.join(root, "benchmarks", "tune", "sim_budget.py"),
                          os.path.join(root, "docs", "gpu", "2026-12-03", "s7a-full-486.json.gz"),
                          "--plan", "10", "--seeds", "30"], capture_output=True, text=True, timeout=600, check=True)
    last = out.stdout.strip().splitlines()[-1]
    hits = int(last.split("within 1.02: ")[1].split(" of ")[0])
    assert hits >= HITS, last
    ends = [float(m) for m in re.findall(r"end +([\d.]+) s", out.stdout)]
    assert len(ends) == 30 and max(ends) <= 31.0, out.stdout




def test_a_store_holding_part_of_the_space_does_not_make_the_order_spin():
    """Session 8's new user: the first 14 of 64 configurations stored before the search (an earlier audit); the
    refill of the balanced sample did not count them as taken, offered only them, and ``next`` never returned."""
    import threading
    configs = space(TILE=[256, 512, 1024, 2048], ALLOW=[True, False], occupancy=[1, 2, 4, 8], opt_level=[2, 3])
    order = SearchOrder(configs, [], SearchSettings(jobs=2), 1e9)
    stored = configs[:14]
    for c in stored:
        order.landed(c, 0.5)
    got: list = []

    def drain():
        while (c := order.next(0.0)) is not None:
            got.append(c)
            order.landed(c, 0.5)
    t = threading.Thread(target=drain, daemon=True)
    t.start()
    t.join(30)
    assert not t.is_alive(), f"next() spun: {len(got)} chosen, {order.refills} refills"
    assert len(got) == 64 - 14 and not set(got) & set(stored) and order.landed_stored == stored


def test_the_order_ends_when_the_stored_configurations_outrank_the_untried_ones():
    """Session 8's hostile test, the smallest case of the spin above: one wave of one job, one configuration stored."""
    configs = space(A=[0, 1], B=[0, 1], C=[0, 1])
    order = SearchOrder(configs, [configs[0]], SearchSettings(jobs=1, full_max=1), 1e9)
    order.landed(configs[-1], 1.0)
    got = [order.next(0.0) for _ in range(7)]
    assert None not in got and order.next(0.0) is None and set(got) == set(configs) - {configs[-1]}


@pytest.mark.parametrize("bad", [-1.0, 0.0, float("nan"), float("inf"), None])
def test_a_compile_time_that_is_no_positive_finite_number_is_not_modelled(bad):
    """Session 8's hostile test: -1 made ``next`` raise (math.log), NaN or inf made every later choice refused."""
    configs = space(**SPACE)
    order = SearchOrder(configs, [], SearchSettings(jobs=2), 100.0)
    first = [order.next(0.0), order.next(0.0)]
    order.landed(first[0], 1.0)
    order.landed(first[1], bad)
    assert order.seconds == {first[0]: 1.0}
    assert order.next(0.0) is not None and order.expected_s(first[1]) == pytest.approx(1.5)
