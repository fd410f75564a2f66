"""The race's steady-state final (``tileprobe/tune/race.py``, module doc 7) driven by a fake power-capped GPU: the
race's short batches read each candidate's "cool" time, the final's long batches its steady-state time, as the H200
did for the 4096³ matmul (docs/LOG.md §36). No GPU: a fake clock, planted times."""
from __future__ import annotations

import random

import pytest

from tileprobe.report.tune import final_line
from tileprobe.tune.gpu import TimingSettings, WorkerBench
from tileprobe.tune.race import Batch, CheckOutcome, Race, RaceSettings
from tileprobe.tune.result import CandidateRow, ProblemResult

CAPPED = {"sm_mhz": 1650.0, "mem_mhz": 3201.0, "reasons": ["sw_power_cap"]}
FREE = {"sm_mhz": 1980.0, "mem_mhz": 3201.0, "reasons": []}


class PowerCappedGPU:
    """``plan[id] = (race_us, steady_us)`` or ``"hang"`` for the final; samples 0.3 % Gaussian noise (seeded).
    ``reasons``: the clock readings every batch returns. Each batch advances the fake clock by ``race_s`` or
    ``final_s``; ``wrong``: ids whose check fails. Records the final's calls in order."""

    def __init__(self, plan, *, clocks=CAPPED, wrong=(), race_s=0.05, final_s=0.2, seed=3):
        self.plan, self.clocks, self.wrong = plan, clocks, set(wrong)
        self.race_s, self.final_s = race_s, final_s
        self.rng, self.now = random.Random(seed), 0.0
        self.final_calls: list[tuple[str, int]] = []
        self.checked: list[str] = []

    def clock(self) -> float:
        return self.now

    def _batch(self, us: float, n: int = 20) -> Batch:
        return Batch("ok", [self.rng.gauss(us, us * 0.003) for _ in range(n)], dict(self.clocks), dict(self.clocks))

    def measure(self, cid: str, rnd: int) -> Batch:
        self.now += self.race_s
        return self._batch(self.plan[cid][0])

    def final(self, cid: str, p: int) -> Batch:
        self.final_calls.append((cid, p))
        self.now += self.final_s
        if self.plan[cid] == "hang" or self.plan[cid][1] == "hang":
            return Batch("hang", error="no result within 60 s: the worker was killed")
        return self._batch(self.plan[cid][1])

    def check(self, cid: str) -> CheckOutcome:
        self.checked.append(cid)
        if cid in self.wrong:
            return CheckOutcome("wrong", {"message": "relative error 0.5 > tolerance 0.02"})
        return CheckOutcome("ok", {"rel_err": 1e-4, "tolerance": 0.02, "against": "reference"})


def run(plan, settings=None, final=True, **kw):
    gpu = PowerCappedGPU(plan, **kw)
    out = Race(list(plan), gpu.measure, gpu.check, settings or RaceSettings(), clock=gpu.clock,
               final=gpu.final if final else None).run()
    return out, gpu


# The s10a matmul: the race's leader (cool 203.6 µs) is 228 µs in the steady state, where the 2-CTA 256-wide tile
# (214.4 µs in the race) is 222 µs.
MATMUL = {"128x128 occ2": (203.6, 228.0), "256x128 c2": (214.4, 222.0), "256x128 occ1 c2": (213.9, 231.0),
          "128x128 occ1": (217.8, 233.0), "64x128": (260.0, 262.0)}


def test_the_final_names_the_steady_state_best_that_the_race_eliminated():
    out, gpu = run(MATMUL)
    assert out.pick == "256x128 c2" and out.verdict == "winner"
    assert out.final["batches"] == len(gpu.final_calls) and "budget_left_s" not in out.final     # no --budget
    assert out.final["wall_s"] == pytest.approx(len(gpu.final_calls) * gpu.final_s)
    status = {e.id: e.status for e in out.entries}
    assert status == {"128x128 occ2": "eliminated", "256x128 c2": "winner", "256x128 occ1 c2": "eliminated",
                      "128x128 occ1": "eliminated", "64x128": "eliminated"}
    # four contenders within 12 % of 203.6 µs (≤ 228.0), closest first, two passes in alternating order; 64x128 is
    # not among them
    order = ["128x128 occ2", "256x128 occ1 c2", "256x128 c2", "128x128 occ1"]
    assert gpu.final_calls == [(c, 0) for c in order] + [(c, 1) for c in reversed(order)]
    f = out.final
    assert f["reasons"] == ["sw_power_cap"] and f["passes"] == 2 and f["contenders"] == order
    assert f["leader_before"] == "128x128 occ2" and f["pick"] == "256x128 c2" and f["changed"] is True
    assert f["figures_us"]["256x128 c2"] == pytest.approx(222.0, rel=0.003)
    assert f["figures_us"]["128x128 occ2"] == pytest.approx(228.0, rel=0.003)
    old = out.entry("128x128 occ2")
    assert old.reason.startswith("slower in the steady-state final: 1.02") and "256x128 c2's figure" in old.reason
    assert "over the 2 pass(es) both ran (228." in old.reason
    assert len(old.final) == 2 and old.final_us == pytest.approx(228.0, rel=0.003)
    assert "256x128 c2" in gpu.checked          # the new pick was checked before it was named
    assert out.entry("64x128").final == [] and out.entry("64x128").final_us is None


def test_no_final_without_a_power_limit_or_without_a_final_measure():
    out, gpu = run(MATMUL, clocks=FREE)
    assert out.pick == "128x128 occ2" and out.final is None and gpu.final_calls == []
    out, gpu = run(MATMUL, final=False)
    assert out.pick == "128x128 occ2" and out.final is None and gpu.final_calls == []


@pytest.mark.parametrize("reason", ["hw_slowdown", "sw_thermal_slowdown", "hw_power_brake_slowdown"])
def test_every_power_or_thermal_limit_starts_the_final(reason):
    out, _ = run(MATMUL, clocks={"sm_mhz": 1500.0, "reasons": ["gpu_idle", reason]})
    assert out.final["reasons"] == [reason] and out.pick == "256x128 c2"


def test_no_final_when_no_other_candidate_is_close():
    out, gpu = run({"a": (100.0, 110.0), "b": (130.0, 105.0)})
    assert out.pick == "a" and out.final is None and gpu.final_calls == []


def test_final_max_takes_the_closest_and_final_pct_bounds_them():
    out, _ = run(MATMUL, RaceSettings(final_max=2))
    assert out.final["contenders"] == ["128x128 occ2", "256x128 occ1 c2"]      # 213.9 is closer than 214.4
    assert out.pick == "128x128 occ2" and out.final["changed"] is False         # 228 µs steady beats its 231
    out, _ = run(MATMUL, RaceSettings(final_pct=5.0))
    assert out.final is None or out.final["contenders"] == ["128x128 occ2"]   # nothing within 5 %: no final
    assert out.pick == "128x128 occ2"
    out, gpu = run(MATMUL, RaceSettings(final_max=0))
    assert out.final is None and gpu.final_calls == []


def test_a_close_final_is_a_tie_named_by_the_rounds_median_among_the_tied():
    """The final cannot tell a (220 µs) and b (219 µs) apart (tie_pct 1 %): the rounds' medians (200 vs 205 µs)
    name the pick, as do_bench would; seed 0 of the H100's 648-configuration matmul (2026-12-05)."""
    out, _ = run({"a": (200.0, 220.0), "b": (205.0, 219.0), "c": (300.0, 300.0)}, RaceSettings(tie_pct=1.0))
    assert out.verdict == "tie" and out.tie == ["a", "b"] and out.pick == "a"
    assert {e.id: e.status for e in out.entries} == {"a": "tie", "b": "tie", "c": "eliminated"}
    assert out.final is not None and out.final["pick"] == "a" and out.final["tie"] == ["a", "b"]


def test_the_rounds_median_does_not_overrule_a_final_that_tells_them_apart():
    """The rounds' lower median (200 µs) names nothing when the final separates the two by more than tie_pct: the
    final's job (the power cap's steady state) stays done."""
    out, _ = run({"a": (200.0, 230.0), "b": (205.0, 219.0), "c": (300.0, 300.0)}, RaceSettings(tie_pct=1.0))
    assert out.verdict == "winner" and out.pick == "b"
    assert {e.id: e.status for e in out.entries}["a"] == "eliminated"


def test_a_wrong_final_pick_gives_way_to_the_next():
    out, gpu = run(MATMUL, wrong={"256x128 c2"})
    assert out.entry("256x128 c2").status == "wrong"
    assert out.pick == "128x128 occ2" and out.final["pick"] == "128x128 occ2" and out.final["changed"] is False
    assert "256x128 c2" in gpu.checked and "128x128 occ1" not in gpu.checked     # only the final's best is checked


def test_a_contender_that_hangs_in_the_final_is_out_and_the_rest_decide():
    plan = dict(MATMUL, **{"256x128 c2": (214.4, "hang")})
    out, _ = run(plan)
    assert out.entry("256x128 c2").status == "hang" and "killed" in out.entry("256x128 c2").reason
    assert out.pick == "128x128 occ2" and "256x128 c2" not in out.final["figures_us"]


def test_a_budgeted_race_keeps_time_for_the_final_and_stays_within_it():
    settings = RaceSettings(budget_s=6.0, max_samples=10_000, tie_pct=0.0)
    plan = {"a": (200.0, 220.0), "b": (200.0, 210.0)}      # the same in the race: it runs to its budget
    out, gpu = run(plan, settings)
    assert out.stop == "budget" and out.final["passes"] == 2 and out.pick == "b"
    assert "cut" not in out.final          # 5 % apart: a clear loser leaves after two passes, the budget cut nothing
    assert gpu.now <= 6.0 + gpu.final_s       # the final's share: 2 contenders × 2 passes × 0.25 s = 1 s
    reserve = 2 * 2 * 0.25
    race_end = gpu.now - 4 * gpu.final_s
    assert 6.0 - reserve - gpu.race_s <= race_end <= 6.0 - reserve + gpu.race_s


def test_a_budget_spent_in_the_final_keeps_the_whole_passes_only():
    settings = RaceSettings(budget_s=6.0, max_samples=10_000, tie_pct=0.0)
    plan = {"a": (200.0, 220.0), "b": (200.0, 210.0)}
    out, gpu = run(plan, settings, final_s=0.7)       # the 1-s share holds one pass of two 0.7-s batches at most
    assert out.final["passes"] == 1 and out.pick == "b"
    assert [len(e.final) for e in out.entries] == [1, 1]
    assert len(gpu.final_calls) == 2 and gpu.now <= 6.0 + 0.7
    assert out.final["batches"] == 2 and out.final["wall_s"] == pytest.approx(2 * 0.7)     # the fake's clock
    assert 0.0 < out.final["budget_left_s"] <= 1.0 + gpu.race_s                            # its share: 2 × 2 × 0.25 s
    assert out.final["cut"] is True and ", cut short by --budget)" in final_line(out.final)
    out, gpu = run(dict(plan, z=(300.0, 300.0)), settings, final_s=2.5)   # not one pass fits: the race stands
    assert out.final["passes"] == 0 and out.final["skipped"] == "the budget ran out before a whole pass"
    assert out.verdict in ("winner", "tie") and out.pick in ("a", "b") and "figures_us" not in out.final
    assert out.entry("z").status == "eliminated"          # nothing failed: nothing is put back


@pytest.mark.parametrize("bad", [{"final_pct": -1.0}, {"final_pct": float("nan")}, {"final_max": -1},
                                 {"final_passes": 0}, {"final_batch_s": float("inf")}])
def test_bad_final_settings_are_refused(bad):
    with pytest.raises(ValueError, match="final"):
        RaceSettings(**bad)


def test_the_final_in_the_result_the_json_and_the_line():
    out, _ = run(MATMUL)
    line = final_line(out.final)
    assert line.startswith("steady-state final (the clocks were set by sw_power_cap; 2 pass(es)): 256x128 c2 22")
    assert "128x128 occ2 228." in line and "(1.02" in line and line.endswith("the race had led with 128x128 occ2")
    assert final_line({"reasons": ["sw_power_cap"], "passes": 0, "skipped": "the budget ran out before a whole "
                       "pass"}).endswith("skipped: the budget ran out before a whole pass; the race's own ranking of the rest decides")
    row = CandidateRow({"case": {}, "hints": {}}, "x", "winner", raced=True, n=20, median_us=214.0,
                       final_us=222.0, final_passes_us=[221.0, 223.0])
    d = row.to_dict()
    assert d["final_us"] == 222.0 and d["final_passes_us"] == [221.0, 223.0]
    assert "final_us" not in CandidateRow({"case": {}, "hints": {}}, "y", "eliminated", raced=True, n=5).to_dict()
    res = ProblemResult("k", "p.py", {}, "sm_90", [])
    assert "final" not in res.to_dict()
    res.final = out.final
    assert res.to_dict()["final"]["pick"] == "256x128 c2"


def test_the_sustained_mode_alone_has_a_final_and_its_settings():
    t = TimingSettings()
    kw = t.final_kwargs()
    assert kw == {"mode": "sustained", "warmup_ms": 75.0, "batch_ms": 50.0, "min_n": 5, "max_n": 1000,
                  "max_warmup": 20000}
    assert {"final_warmup_ms", "final_batch_ms", "final_max_n"} <= set(t.to_dict())
    for mode in ("burst", "eager", "graph"):
        assert not any(k.startswith("final_") for k in TimingSettings(mode=mode).to_dict())
    bench = WorkerBench(object(), {}, lambda sha: None)
    assert bench.final == bench.measure_final
    sent = []
    bench.measure = lambda cid, rnd, mode_kw=None: sent.append((cid, rnd, mode_kw))
    bench.measure_final("x", 1)
    assert sent == [("x", 1, kw)]
    assert WorkerBench(object(), {}, lambda sha: None, timing=TimingSettings(mode="burst")).final is None


def test_close_contenders_get_more_passes_and_clear_losers_leave_after_two():
    plan = {"a": (200.0, 222.0), "b": (203.0, 224.0), "c": (205.0, 240.0)}
    out, gpu = run(plan, RaceSettings(final_passes=4))
    calls = [c for c, _ in gpu.final_calls]
    assert calls.count("c") == 2 and calls.count("a") == calls.count("b") == 4     # c left after two passes
    assert out.final["passes"] == 4 and out.final["figures_us"].keys() == {"a", "b", "c"}
    assert "stopped" not in out.final       # b 0.9 % behind: within the tie, but not surely so after 2 or 3 passes
    assert "over the 2 pass(es) both ran" in out.entry("c").reason and "over its 2)" in out.entry("c").reason
    assert out.verdict == "tie" and set(out.tie) == {"a", "b"}           # 0.9 % apart: within tie_pct
    out, gpu = run(plan, RaceSettings(final_passes=2))
    assert len(gpu.final_calls) == 6 and out.final["passes"] == 2


def test_contenders_surely_within_the_tie_stop_the_final_early_and_it_says_so():
    plan = {"a": (200.0, 222.0), "b": (203.0, 222.6), "c": (205.0, 240.0)}    # a and b 0.27 % apart
    out, gpu = run(plan, RaceSettings(final_passes=4))
    calls = [c for c, _ in gpu.final_calls]
    assert calls.count("a") == calls.count("b") == 3 and calls.count("c") == 2    # no fourth pass
    assert out.final["passes"] == 3 and out.final["stopped"].startswith("tied after 3 passes")
    assert out.verdict == "tie" and out.pick == "a" and set(out.tie) == {"a", "b"}   # the lowest figure picks
    assert "tied after 3 passes" in final_line(out.final)


def test_a_contender_far_behind_after_the_first_final_pass_leaves_after_it():
    plan = {"a": (200.0, 222.0), "b": (203.0, 230.0), "c": (205.0, 262.0)}    # c 18 % behind in the steady state
    out, gpu = run(plan, RaceSettings(final_passes=4))
    calls = [c for c, _ in gpu.final_calls]
    assert calls.count("c") == 1 and calls.count("b") == 2 and out.pick == "a"
    assert out.entry("c").status == "eliminated" and "over its 1)" in out.entry("c").reason
    assert out.final["figures_us"]["c"] == pytest.approx(262.0, rel=0.01)


class Drifting(PowerCappedGPU):
    """The steady state drifts slower by ``drift_us`` per final batch (the GPU heating over the final), as on the
    H200, where every contender's second pass read 2.5–7 % slower than its first (docs/LOG.md §36)."""

    def __init__(self, plan, drift_us, **kw):
        super().__init__(plan, **kw)
        self.drift_us, self.k = drift_us, 0

    def final(self, cid, p):
        b = super().final(cid, p)
        self.k += 1
        b.samples_us = [x + self.k * self.drift_us for x in b.samples_us]
        return b


def test_pass_by_pass_differences_see_through_a_drift_that_hits_everyone():
    plan = {"a": (200.0, 220.0), "b": (203.0, 226.0)}      # b 2.7 % slower, under a drift of 2 µs per batch
    gpu = Drifting(plan, 2.0)
    out = Race(list(plan), gpu.measure, gpu.check, RaceSettings(), clock=gpu.clock, final=gpu.final).run()
    # a b | b a: a's passes read 222 and 228, b's 230 and 232: each pass alone spreads 6 µs, but b's pass-by-pass
    # differences are 8 and 4 µs (mean 6, standard error 2): b is out after two passes
    assert out.pick == "a" and out.final["passes"] == 2
    assert gpu.final_calls == [("a", 0), ("b", 0), ("b", 1), ("a", 1)]
    assert out.final["figures_us"]["a"] == pytest.approx(225.0, rel=0.005)
    assert out.final["figures_us"]["b"] == pytest.approx(231.0, rel=0.005)


class Feed:
    """A budgeted search's arrivals on the fake clock: ``(t, id)`` land at t; the search ends at ``end_s``. A
    blocking call waits for the next one, the end, or the race's ``time_left_s()``, as the overlap's does."""

    def __init__(self, gpu, arrivals, end_s):
        self.gpu, self.pending, self.end_s, self.race = gpu, sorted(arrivals), end_s, None

    def __call__(self, block):
        if block and not any(t <= self.gpu.now for t, _ in self.pending):
            nxt = min([t for t, _ in self.pending] + [self.end_s])
            left = self.race.time_left_s()
            self.gpu.now = max(self.gpu.now, nxt if left is None else min(nxt, self.gpu.now + max(0.0, left)))
        new = [i for t, i in self.pending if t <= self.gpu.now]
        self.pending = [(t, i) for t, i in self.pending if t > self.gpu.now]
        return new, bool(self.pending) or self.gpu.now < self.end_s


def test_a_budgeted_race_waiting_for_compiles_stops_at_the_final_s_share_and_gathers_the_rest_after():
    plan = {"a": (200.0, 220.0), "b": (203.0, 212.0), "late": (300.0, 300.0), "later": (300.0, 300.0)}
    gpu = PowerCappedGPU(plan)
    feed = Feed(gpu, [(0.0, "a"), (0.0, "b"), (1.0, "late"), (8.0, "later")], end_s=9.0)
    race = Race([], gpu.measure, gpu.check, RaceSettings(budget_s=6.0), clock=gpu.clock, arrivals=feed,
                final=gpu.final)
    feed.race = race
    out = race.run()
    assert out.pick == "b" and out.final["passes"] >= 2 and out.final["changed"] is True
    assert gpu.now == 9.0                            # then it waited for the search's end
    assert out.entry("later").status == "skipped"    # landed after the race: not timed
    assert out.entry("late").status == "eliminated"
    assert race.time_left_s() is None                # gathering the rest: no limit on the wait


def test_time_left_keeps_the_final_s_share_once_a_power_limit_was_seen_and_a_contender_is_close():
    gpu = PowerCappedGPU({"a": (200.0, 220.0), "b": (210.0, 215.0), "c": (300.0, 300.0)})
    race = Race(["a", "b", "c"], gpu.measure, settings=RaceSettings(budget_s=9.0), clock=gpu.clock, final=gpu.final)
    assert Race(["a"], gpu.measure, clock=gpu.clock).time_left_s() is None       # no budget
    race._t0 = 0.0
    assert race.time_left_s() == pytest.approx(9.0)                  # nothing seen yet: the whole budget
    race._take(race.entries[0], 1)                                   # a batch under the power cap, nobody close
    race._take(race.entries[2], 1)
    assert race.time_left_s() == pytest.approx(9.0 - gpu.now)
    race._take(race.entries[1], 1)                                   # b within 12 % of a: 2 × 2 passes × 0.25 s
    assert race.time_left_s() == pytest.approx(9.0 - 1.0 - gpu.now)


def test_no_share_is_kept_when_nothing_is_close_so_a_better_latecomer_is_still_timed():
    plan = {"a": (200.0, 220.0), "b": (300.0, 300.0), "late": (150.0, 150.0)}
    gpu = PowerCappedGPU(plan)
    feed = Feed(gpu, [(0.0, "a"), (0.0, "b"), (4.5, "late")], end_s=9.0)
    race = Race([], gpu.measure, gpu.check, RaceSettings(budget_s=6.0), clock=gpu.clock, arrivals=feed,
                final=gpu.final)
    feed.race = race
    out = race.run()
    assert out.pick == "late" and out.final is None


def test_the_overlap_waits_for_compiles_no_longer_than_the_race_s_budget_line():
    import queue
    import threading
    import time

    from tileprobe.tune.overlap import Overlap

    class Left:
        def __init__(self, left):
            self.left = left

        def time_left_s(self):
            return self.left

    ov = object.__new__(Overlap)                 # the race thread's side only: feed, race, landing, _timed
    ov.feed, ov.ended, ov._timed = queue.Queue(), False, lambda landed: [c.id for c in landed]
    ov.race = Left(0.05)
    t0 = time.perf_counter()
    assert ov._arrivals(True) == ([], True)      # nothing landed before the line: back to the race, more to come
    assert 0.04 <= time.perf_counter() - t0 < 2.0
    ov.race = Left(None)                         # no budget (or gathering the rest): wait for the search's end
    threading.Timer(0.1, ov.feed.put, (None,)).start()
    t0 = time.perf_counter()
    assert ov._arrivals(True) == ([], False) and time.perf_counter() - t0 >= 0.09


def test_power_window_takes_medians_per_window_of_kernel_time():
    from tests.support import load_script
    pw = load_script("benchmarks/tune/power_window.py")
    # 10 µs samples: 2,500 per 25 ms; the first window's are 100 µs, the rest 10
    times = [100.0] * 250 + [10.0] * 2500 + [12.0] * 5000 + [20.0] * 1000
    w = pw.windows(times, ends_ms=(25, 50, 100))
    assert w == {"0-25": 100.0, "25-50": 10.0, "50-100": 12.0, "100-": 20.0}
    assert pw.windows([], ends_ms=(25,)) == {}


@pytest.mark.parametrize("passes", [2, 3, 4])
def test_every_contender_failing_in_the_final_leaves_the_race_s_ranking_checked(passes):
    # the hostile tester's case: every contender hangs in the final (a crash in _still_close at passes ≥ 3 before)
    plan = {"a": (200.0, "hang"), "b": (214.0, "hang"), "z": (300.0, 300.0)}
    gpu = PowerCappedGPU(plan)
    seen = []
    out = Race(list(plan), gpu.measure, gpu.check, RaceSettings(final_passes=passes), clock=gpu.clock,
               final=gpu.final, progress=lambda kind, data: seen.append(kind)).run()
    assert out.final["skipped"] == "no contender ran correctly" and "final" in seen
    assert out.pick == "z" and out.verdict == "winner" and "z" in gpu.checked
    assert out.entry("a").status == out.entry("b").status == "hang"
    assert out.entry("a").reason.startswith("in the steady-state final: no result within 60 s")


def test_a_hung_leader_and_a_wrong_runner_up_leave_the_next_correct_one():
    out, gpu = run({"a": (200.0, "hang"), "b": (214.0, 222.0), "z": (300.0, 300.0)}, wrong={"b"})
    assert out.pick == "z" and out.entry("b").status == "wrong" and out.entry("a").status == "hang"


@pytest.mark.parametrize("bad", [[float("inf")] * 5, [float("nan")] * 5, [-5.0] * 5, [0.0] * 5, [220.0, float("nan")]])
def test_a_final_batch_with_times_that_are_no_times_is_an_error_of_its_candidate(bad):
    plan = {"a": (200.0, 220.0), "b": (214.0, 222.0), "z": (300.0, 300.0)}
    gpu = PowerCappedGPU(plan)
    real = gpu.final

    def final(cid, p):
        b = real(cid, p)
        if cid == "a":
            b.samples_us = list(bad)
        return b

    out = Race(list(plan), gpu.measure, gpu.check, RaceSettings(), clock=gpu.clock, final=final).run()
    assert out.entry("a").status == "error" and "not a finite number of µs above 0" in out.entry("a").reason
    assert out.pick == "b"


def test_a_contender_dropped_after_two_passes_is_compared_over_the_passes_it_shares_with_the_pick():
    # the hostile tester's case: every reading drifts up over the final, so a contender dropped after two passes
    # had a lower mean than the pick's four-pass mean, and the line named it before the pick
    plan = {"a": (200.0, 220.0), "b": (201.0, 222.0), "c": (203.0, 224.4)}   # b not surely tied: four passes
    gpu = PowerCappedGPU(plan)
    real = gpu.final

    def final(cid, p):                    # every reading of pass p is 5·p µs slower
        b = real(cid, p)
        b.samples_us = [x + 5.0 * p for x in b.samples_us]
        return b

    out = Race(list(plan), gpu.measure, gpu.check, RaceSettings(), clock=gpu.clock, final=final).run()
    assert out.entry("c").final_us < out.entry(out.final["pick"]).final_us     # its own mean looks better …
    f = out.final
    assert f["passes"] == 4 and len(out.entry("c").final) == 2
    assert f["vs_pick"]["c"] == pytest.approx(1.02, abs=0.004) and f["vs_pick"][f["pick"]] == 1.0   # … it is not
    line = final_line(f)
    assert line.index(f["pick"] + " ") < line.index("c ")          # the pick first, then by the fair ratio
    assert out.entry("c").reason.startswith("slower in the steady-state final: 1.0")


def test_racing_candidates_the_final_did_not_take_say_so():
    plan = {"a": (200.0, 221.0), "b": (200.1, 220.0), "c": (200.2, 222.0), "d": (200.3, 223.0)}
    out, _ = run(plan, RaceSettings(final_max=2, max_samples=40))
    left = [e for e in out.entries if e.id not in out.final["contenders"]]
    assert left and all(e.status == "eliminated" and e.reason.startswith("not among the 2 closest") for e in left)


def test_a_tie_after_the_final_says_what_picked_it():
    from tileprobe.report.tune import verdict_lines
    row = CandidateRow({"case": {}, "hints": {}}, "x", "tie", raced=True, n=20, median_us=214.0, final_us=222.0,
                       final_passes_us=[221.0, 223.0])
    other = CandidateRow({"case": {}, "hints": {}}, "y", "tie", raced=True, n=20, median_us=210.0, final_us=222.5,
                         final_passes_us=[222.0, 223.0])
    res = ProblemResult("k", "p.py", {}, "sm_90", [row, other], verdict="tie", pick=row, tie=[row, other],
                        final={"figures_us": {"x": 222.0, "y": 222.5}, "pick": "x", "tie": ["x", "y"],
                               "leader_before": "y", "changed": True, "passes": 2, "reasons": ["sw_power_cap"]})
    line = verdict_lines(res)[0]
    assert line.startswith("tie (within noise, 2 candidates; pick = lowest race median of those the final tied): "
                           "x 214.0 µs")
    assert ", steady-state final 222.0 µs" in line
    assert final_line(res.final).endswith("it ties with the race's leader, y")


@pytest.mark.parametrize("final", [
    {"figures_us": {"a": 0.0, "b": 1.0}, "pick": "a", "vs_pick": {"a": 1.0}},
    {"figures_us": {"a": None, "b": "x", "c": 5.0}, "pick": "c"},
    {"reasons": "sw_power_cap", "figures_us": {}},
    {"reasons": ["[bold]x[/bold]"], "figures_us": {"[red]a[/red]": 1.0}, "pick": "[red]a[/red]"},
    {}])
def test_the_final_line_takes_odd_dicts(final):
    line = final_line(final)
    assert line.startswith("steady-state final (the clocks were set by ")
    assert "[red]a[/red] 1.0 µs" in line or "[red]" not in str(final)


@pytest.mark.parametrize("bad", [{"final_max": 2.5}, {"final_passes": 2.0}])
def test_final_counts_must_be_whole_numbers(bad):
    with pytest.raises(ValueError, match="whole numbers"):
        RaceSettings(**bad)


def test_a_latecomer_landing_after_the_budget_line_is_skipped_not_eliminated():
    # the second hostile tester's case: the race stops at its budget line (the final's share kept), a faster
    # candidate lands before the final and is never timed
    plan = {"a": (200.0, 220.0), "b": (200.0, 210.0), "late": (100.0, 100.0)}
    gpu = PowerCappedGPU(plan)
    feed = Feed(gpu, [(0.0, "a"), (0.0, "b"), (5.5, "late")], end_s=9.0)
    race = Race([], gpu.measure, gpu.check, RaceSettings(budget_s=6.0, tie_pct=0.0, max_samples=10_000),
                clock=gpu.clock, arrivals=feed, final=gpu.final)
    feed.race = race
    out = race.run()
    late = out.entry("late")
    assert late.status == "skipped" and late.samples == [] and out.pick == "b"


def test_when_every_racing_candidate_fails_later_the_eliminated_ones_are_put_back_and_named():
    class Later(PowerCappedGPU):
        def measure(self, cid, rnd):
            if cid in ("a", "c") and rnd >= 3:
                return Batch("crash", error="the worker died: killed by SIGSEGV")
            return super().measure(cid, rnd)

    gpu = Later({"a": (100.0, 100.0), "c": (100.2, 100.2), "b": (150.0, 150.0)}, clocks=FREE)
    out = Race(["a", "b", "c"], gpu.measure, gpu.check, RaceSettings(tie_pct=0.0), clock=gpu.clock).run()
    assert out.entry("a").status == out.entry("c").status == "crash"
    assert out.pick == "b" and out.verdict == "winner" and "b" in gpu.checked


def test_a_contender_dropped_after_two_passes_that_the_pick_does_not_beat_over_them_ties():
    medians = {"a": [200, 200, 230, 230], "b": [190, 230, 200, 200], "c": [204, 204, 204, 204]}
    plan = {"a": (200.0, 0), "b": (200.5, 0), "c": (201.0, 0)}
    gpu = PowerCappedGPU(plan)

    def final(cid, p):
        gpu.final_calls.append((cid, p))
        gpu.now += gpu.final_s
        return Batch("ok", [float(medians[cid][p])] * 5, dict(CAPPED), dict(CAPPED))

    out = Race(list(plan), gpu.measure, gpu.check, RaceSettings(tie_pct=1.0), clock=gpu.clock, final=final).run()
    assert out.pick == "b" and len(out.entry("c").final) == 2
    assert out.verdict == "tie" and "c" in out.tie and out.entry("c").status == "tie"
    assert out.final["vs_pick"]["c"] == pytest.approx(408 / 420)


def test_a_final_nobody_completed_counts_no_pass():
    out, _ = run({"a": (200.0, "hang"), "b": (214.0, "hang")})
    assert out.final["passes"] == 0 and out.final["skipped"] == "no contender ran correctly"
    assert out.verdict == "none"


def test_the_loss_of_keeping_the_old_pick_is_the_final_s_when_it_timed_both():
    from tileprobe.tune.assemble import compare_previous
    old = CandidateRow({"case": {"T": 1}, "hints": {}}, "T=1", "eliminated", raced=True, n=20, median_us=100.0,
                       final_us=112.0, final_passes_us=[112.0])
    new = CandidateRow({"case": {"T": 2}, "hints": {}}, "T=2", "winner", raced=True, n=20, median_us=104.0,
                       final_us=108.0, final_passes_us=[108.0])
    res = ProblemResult("k", "p.py", {}, "sm_90", [old, new], verdict="winner", pick=new,
                        final={"vs_pick": {"T=1": 112.0 / 108.0, "T=2": 1.0}, "figures_us": {}})
    prev = compare_previous(res, {"pick": {"config": old.config, "median_us": 99.0}, "tileiras": "13.3"})
    assert prev["changed"] and prev["loss_pct"] == pytest.approx(100 * (112 / 108 - 1))   # not −3.8 %
    assert res.vs_pick(old) == pytest.approx(112 / 108) and res.vs_pick(new) == 1.0
    res.final = None
    assert res.vs_pick(old) == pytest.approx(100 / 104)                                  # the race's, without one


def test_the_median_cache_cannot_be_planted_and_budgets_must_be_numbers():
    from tileprobe.tune.race_state import Entry
    with pytest.raises(TypeError):
        Entry("a", _median=(1, 99.0))
    e = Entry("a", samples=[1.0, 2.0, 3.0])
    assert e.median == 2.0
    e.samples.append(10.0)
    assert e.median == 2.5
    for bad in (float("nan"), -1.0, float("inf")):
        with pytest.raises(ValueError, match="budget_s"):
            RaceSettings(budget_s=bad)


def test_the_result_names_the_final_by_the_first_of_each_launch():
    """Racing while compiling times whichever of identical launches landed first (s11b: occupancy=4 timed for the
    group of occupancy=2 and 4); the table names the first in the space's order, and the final's line, its JSON and
    the rows must say the same."""
    import types

    from test_tune_search import space

    from tileprobe.tune.assemble import problem_result
    from tileprobe.tune.static import Candidate, Plan
    configs = space(TILE=[1, 2, 3, 4])                     # TILE=1 and TILE=3: one launch, TILE=3 landed first
    prob = types.SimpleNamespace(probe=types.SimpleNamespace(label="p", source="p.py"), values={}, rejected={},
                                 label="SIZE=1")
    c1, c2, c3, c4 = (Candidate(prob, cfg) for cfg in configs)
    c3.members, c1.same_as = [c3, c1], c3
    c2.members, c4.members = [c2], [c4]
    plan = {"TILE=3": (200.0, 215.0), "TILE=2": (201.0, 216.0), "TILE=4": (230.0, 260.0)}
    out, _ = run(plan, RaceSettings(tie_pct=1.0))
    assert out.pick == "TILE=3" and out.final["contenders"][0] == "TILE=3" and set(out.tie) == {"TILE=3", "TILE=2"}
    plan_ = Plan(prob, [c1, c2, c3, c4])
    res = problem_result(plan_, out, "sm_90")
    assert res.pick.label == "TILE=1" and [r.label for r in res.tie] == ["TILE=1", "TILE=2"]
    f = res.final
    assert f["pick"] == f["leader_before"] == "TILE=1" and f["contenders"][0] == "TILE=1"
    assert set(f["figures_us"]) == set(f["vs_pick"]) == {"TILE=1", "TILE=2"} and f["tie"] == ["TILE=1", "TILE=2"]
    rows = {r.label: r for r in res.candidates}
    assert rows["TILE=3"].status == "duplicate_launch" and rows["TILE=3"].same_launch_as == "TILE=1"
    assert rows["TILE=1"].group == ["TILE=3", "TILE=1"] and rows["TILE=3"].group == []
    assert rows["TILE=1"].status == "tie" and rows["TILE=1"].final_us == pytest.approx(f["figures_us"]["TILE=1"])
    assert res.vs_pick(rows["TILE=1"]) == 1.0 and res.vs_pick(rows["TILE=2"]) == pytest.approx(216.0 / 215.0, 3e-3)
    assert "TILE=3" not in final_line(f) and final_line(f).split(": ", 1)[1].startswith("TILE=1 21")
    assert out.final["pick"] == "TILE=3"                  # the race's own record is left as it was
    # the live line (the race's progress event) names them as the result does
    import io

    from rich.console import Console

    from tileprobe.cli.tune import _progress
    console = Console(file=io.StringIO(), width=400)
    cb = _progress(console, ticker=types.SimpleNamespace(start=lambda n: None))
    cb("race", plan_)
    cb("final", out.final)
    live = console.file.getvalue().splitlines()[-1].strip()
    assert live == final_line(f) and "TILE=3" not in live


class CostlyFeed(Feed):
    """A :class:`Feed` whose taking-in of landed candidates costs ``cost_s`` on the clock (the overlap asks their
    launches of a contained child of the probe: on the H200 this left budget finals 0.75–1.22 s of a 2.5-s share)."""

    def __init__(self, gpu, arrivals, end_s, cost_s):
        super().__init__(gpu, arrivals, end_s)
        self.cost_s = cost_s

    def __call__(self, block):
        new, more = super().__call__(block)
        if new:
            self.gpu.now += self.cost_s
            self.race.note_intake(self.cost_s)       # as the overlap reports its intake, after a wait or not
        return new, more


def test_the_race_holds_back_what_taking_in_latecomers_costs_so_the_final_keeps_its_share():
    plan = {"a": (200.0, 220.0), "b": (203.0, 212.0)}
    plan.update({f"x{i}": (300.0, 300.0) for i in range(40)})
    gpu = PowerCappedGPU(plan)
    feed = CostlyFeed(gpu, [(0.0, "a"), (0.0, "b")] + [(0.25 * i, f"x{i}") for i in range(40)], end_s=12.0,
                      cost_s=0.8)
    race = Race([], gpu.measure, gpu.check, RaceSettings(budget_s=6.0), clock=gpu.clock, arrivals=feed,
                final=gpu.final)
    feed.race = race
    out = race.run()
    assert race._admit_cost_s == pytest.approx(0.8)
    share = 2 * 2 * 0.25                              # two contenders, two passes, 0.25 s each
    assert out.final["budget_left_s"] >= share - 1e-9 and "cut" not in out.final
    assert out.final["passes"] >= 2 and out.pick == "b"
    assert any(e.status == "skipped" for e in out.entries)      # those that landed past the line: gathered after


def test_a_contender_timed_for_a_later_launch_keeps_the_final_s_ratio_in_its_row():
    """Session 11's hostile test: a contender (neither pick nor tie) timed for a group whose first row is another
    fell back to the race medians' ratio (1.014×) while the final's line said 1.047×."""
    import types

    from test_tune_search import space

    from tileprobe.tune.assemble import problem_result
    from tileprobe.tune.static import Candidate, Plan
    prob = types.SimpleNamespace(probe=types.SimpleNamespace(label="p", source="p.py"), values={}, rejected={},
                                 label="SIZE=1")
    c1, c2, c3, c4, c5 = (Candidate(prob, cfg) for cfg in space(TILE=[1, 2, 3, 4, 5]))
    c3.members, c1.same_as = [c3, c1], c3
    c4.members, c2.same_as = [c4, c2], c4
    c5.members = [c5]
    out, _ = run({"TILE=3": (200.0, 215.0), "TILE=4": (203.0, 225.0), "TILE=5": (260.0, 262.0)}, RaceSettings())
    res = problem_result(Plan(prob, [c1, c2, c3, c4, c5]), out, "sm_90")
    rows = {r.label: r for r in res.candidates}
    assert rows["TILE=2"].status == "eliminated" and rows["TILE=4"].same_launch_as == "TILE=2"
    want = res.final["vs_pick"]["TILE=2"]
    assert want == pytest.approx(225.0 / 215.0, rel=0.01)
    assert res.vs_pick(rows["TILE=2"]) == res.vs_pick(rows["TILE=4"]) == want


def test_a_final_whose_other_contender_failed_is_not_called_cut():
    """Session 11's hostile test: b hung in pass 2 and the budget ended a's batch: nothing was left to compare."""
    class Hangs(PowerCappedGPU):
        def final(self, cid, p):
            if cid == "b" and p == 1:
                self.final_calls.append((cid, p))
                self.now += 0.45
                return Batch("hang", error="no result within 60 s: the worker was killed")
            return super().final(cid, p)
    gpu = Hangs({"a": (200.0, 220.0), "b": (200.0, 220.5)}, final_s=0.45)
    out = Race(["a", "b"], gpu.measure, gpu.check, RaceSettings(budget_s=6.0, max_samples=10_000, tie_pct=0.0),
               clock=gpu.clock, final=gpu.final).run()
    assert out.entry("b").status == "hang" and out.final["passes"] == 1 and "cut" not in out.final
    assert "cut short" not in final_line(out.final)


def test_the_race_line_holds_back_the_longest_check_and_intake_at_most_a_third_of_the_budget():
    """The race ends by checking its finalists (0.26–0.51 s on the H200, s11e) and takes in what lands while
    candidates may still land: its line keeps back the longest of each seen, together at most a third of the
    budget (as the final's share), the intake only while more may land."""
    class SlowCheck(PowerCappedGPU):
        def check(self, cid):
            self.now += 0.6
            return super().check(cid)
    gpu = SlowCheck({"a": (200.0, 220.0), "b": (300.0, 300.0)})
    feed = CostlyFeed(gpu, [(0.0, "a"), (0.0, "b")], end_s=100.0, cost_s=0.0)
    race = Race([], gpu.measure, gpu.check, RaceSettings(budget_s=9.0), clock=gpu.clock, arrivals=feed,
                final=gpu.final)
    feed.race, race._t0 = race, 0.0
    race._admit(False)
    race._check([race.entries[0]])                   # a: 0.6 s on the clock
    assert race._check_cost_s == pytest.approx(0.6) and race._admit_cost_s == 0.0
    assert race.time_left_s() == pytest.approx(9.0 - 0.6 - gpu.now)       # nobody close: no final share
    race.note_intake(1.5)
    assert race.time_left_s() == pytest.approx(9.0 - 2.1 - gpu.now)
    race.note_intake(10.0)
    assert race.time_left_s() == pytest.approx(9.0 - 3.0 - gpu.now)       # at most a third of the budget
    race._more = False                                                    # nothing more to land: no intake
    assert race.time_left_s() == pytest.approx(9.0 - 0.6 - gpu.now)


def test_an_intake_after_a_wait_is_reported_to_the_race_too():
    """Session 11's second hostile test: when the race is quicker than the compiles every candidate comes in after
    a blocking wait, and the race timed only non-blocking intakes, so it held nothing back (the final began with
    0.3 s of its 1-s share). The overlap now reports each intake's time itself."""
    import queue
    import time
    import types

    from tileprobe.tune.overlap import Overlap
    plan = object()
    told, feed = [], queue.Queue()
    feed.put(("rec-a", None))

    def timed(landed):
        time.sleep(0.05)                 # the contained child asked for their launches
        return [c for c in landed]
    fake = types.SimpleNamespace(ended=False, feed=feed, plan=plan, _keep=lambda *a: None, _timed=timed, intakes=[],
                                 landing=types.SimpleNamespace(land=lambda rec: (plan, rec[-1])),
                                 race=types.SimpleNamespace(time_left_s=lambda: 5.0, note_intake=told.append))
    new, more = Overlap._arrivals(fake, True)
    assert new == ["a"] and more is True and len(told) == 1 and told[0] >= 0.05
    assert [(i.candidates, i.seconds) for i in fake.intakes] == [(1, told[0])]     # kept for the search's note
    fake.feed.put(None)                  # the search ended, nothing landed: no intake to report
    assert Overlap._arrivals(fake, True) == ([], False) and len(told) == 1
    # the race side, on the fake clock: a and b land during the race's first wait, x later
    gpu = PowerCappedGPU({"a": (200.0, 220.0), "b": (203.0, 212.0), "x": (300.0, 300.0)})
    feed = CostlyFeed(gpu, [(0.01, "a"), (0.01, "b"), (4.9, "x")], end_s=12.0, cost_s=0.8)
    race = Race([], gpu.measure, gpu.check, RaceSettings(budget_s=6.0), clock=gpu.clock, arrivals=feed,
                final=gpu.final)
    feed.race = race
    out = race.run()
    assert race._admit_cost_s == pytest.approx(0.8) and out.final["budget_left_s"] >= 1.0 - 1e-9
    assert out.final["passes"] >= 2 and "cut" not in out.final


def test_a_race_past_its_line_before_anything_was_taken_in_stops_for_the_budget():
    """Session 11's second hostile test: with the intake skipped past the line, a zero budget said "no candidate
    left" while every candidate was skipped for the budget."""
    gpu = PowerCappedGPU({"a": (200.0, 220.0), "b": (203.0, 212.0)})
    feed = Feed(gpu, [(0.0, "a"), (0.0, "b")], end_s=1.0)
    race = Race([], gpu.measure, gpu.check, RaceSettings(budget_s=0.0), clock=gpu.clock, arrivals=feed,
                final=gpu.final)
    feed.race = race
    out = race.run()
    assert out.stop == "budget" and {e.id: e.status for e in out.entries} == {"a": "skipped", "b": "skipped"}


def test_student_s_t_quantiles_the_tie_stop_uses():
    from tileprobe.tune.stats import t95
    assert (t95(1), t95(2), t95(3), t95(9), t95(50)) == (12.706, 4.303, 3.182, 2.262, 2.262)
    with pytest.raises(ValueError, match="degrees of freedom 0"):
        t95(0)
