"""The race (``tileprobe/tune/race.py``) driven by a fake GPU worker: planted timings, a tie, a hang, a crash, a
wrong output, the budget. No GPU: ``measure`` and ``check`` are fakes and the clock is a fake clock that each batch
advances, so the budget tests are exact."""
from __future__ import annotations

import random

import pytest

from tileprobe.tune.race import Batch, CheckOutcome, Race, RaceSettings
from tileprobe.tune.stats import median_ci, summary


class FakeGPU:
    """Planted per-candidate times: ``plan[id] = (median_us, noise_pct)`` or a fault (``"hang"``, ``"crash"``).

    Each batch draws ``batch`` samples around the median (Gaussian, seeded) and advances the fake clock by the
    samples' time plus ``overhead_s``; ``wrong`` ids fail the check. Records every call, in order."""

    def __init__(self, plan, *, batch=10, wrong=(), seed=1, overhead_s=0.05, fail_round=None):
        self.plan, self.batch, self.wrong = plan, batch, set(wrong)
        self.rng = random.Random(seed)
        self.now = 0.0
        self.overhead_s = overhead_s
        self.fail_round = fail_round or {}
        self.calls: list[tuple[str, int]] = []
        self.checked: list[str] = []

    def clock(self) -> float:
        return self.now

    def measure(self, cid: str, rnd: int) -> Batch:
        self.calls.append((cid, rnd))
        self.now += self.overhead_s
        fault = self.plan[cid] if isinstance(self.plan[cid], str) else self.fail_round.get(cid, (None, None))[1] \
            if self.fail_round.get(cid, (None,))[0] == rnd else None
        if fault == "hang":
            self.now += 10.0
            return Batch("hang", error="no result within 10 s: the worker was killed")
        if fault == "crash":
            return Batch("crash", error="the worker died: killed by SIGABRT")
        median, noise = self.plan[cid]
        xs = [self.rng.gauss(median, median * noise / 100.0) for _ in range(self.batch)]
        self.now += sum(xs) / 1e6
        return Batch("ok", xs, clocks_before={"sm_mhz": 1980.0}, clocks_after={"sm_mhz": 1980.0})

    def check(self, cid: str) -> CheckOutcome:
        self.checked.append(cid)
        if cid in self.wrong:
            return CheckOutcome("wrong", {"rel_err": 0.5, "tolerance": 0.02, "against": "reference",
                                          "message": "argument 1: relative error 0.5 > tolerance 0.02"})
        return CheckOutcome("ok", {"rel_err": 1e-4, "tolerance": 0.02, "against": "reference"})


def race(plan, settings=None, **kw):
    gpu = FakeGPU(plan, **kw)
    out = Race(list(plan), gpu.measure, gpu.check, settings or RaceSettings(), clock=gpu.clock).run()
    return out, gpu


def test_planted_timings_pick_the_fastest_and_eliminate_the_rest():
    plan = {"occ1": (1550.0, 1.0), "occ2": (288.5, 1.0), "occ4": (288.5 * 1.025, 1.0), "occ8": (296.1 * 1.05, 0.5),
            "occ16": (365.8, 0.5)}
    out, gpu = race(plan)
    assert out.verdict == "winner" and out.pick == "occ2" and out.tie == []
    assert out.stop == "one survivor"
    status = {e.id: e.status for e in out.entries}
    assert status == {"occ1": "eliminated", "occ2": "winner", "occ4": "eliminated", "occ8": "eliminated",
                      "occ16": "eliminated"}
    # the clearly slow ones went after the first round, the close one (2.5 % slower, 1 % noise) later; only the
    # winner was checked
    assert out.entry("occ1").eliminated_round == 1 and gpu.checked == ["occ2"]
    assert out.entry("occ4").eliminated_round > 1
    assert len(out.entry("occ1").samples) == 10 < len(out.entry("occ4").samples) <= len(out.entry("occ2").samples)
    assert "slower than occ2" in out.entry("occ8").reason
    assert out.entry("occ16").reason.startswith("far behind occ2: its fastest of 10 samples")   # 27 % slower


def test_far_behind_candidates_of_a_long_kernel_cost_one_batch():
    """Batches of 5 samples (a long kernel's sustained batch) and min_samples 10: candidates 30 % and more behind
    the fastest go after their first batch (the far-behind rule); one 10 % behind needs the interval rule, after
    two; with the rule off every candidate has a second batch."""
    plan = {"fast": (1000.0, 1.0), "close": (1100.0, 1.0), "slow": (1300.0, 1.0), "slowest": (4000.0, 1.0)}
    out, gpu = race(plan, batch=5)
    assert out.pick == "fast"
    batches = {c: sum(1 for x, _ in gpu.calls if x == c) for c in plan}
    assert batches["slow"] == batches["slowest"] == 1 and batches["close"] >= 2
    assert out.entry("slow").reason.startswith("far behind fast") and out.entry("slow").eliminated_round == 1
    assert out.entry("close").reason.startswith("slower than fast")
    off, gpu_off = race(plan, RaceSettings(far_pct=0.0), batch=5)
    assert off.pick == "fast" and all(sum(1 for x, _ in gpu_off.calls if x == c) >= 2 for c in plan)
    assert len(gpu.calls) < len(gpu_off.calls)


def test_the_far_behind_rule_spares_what_the_power_ramp_can_move():
    """A candidate 12 % behind (the most a median moved with the power cap's ramp, docs/LOG.md §36) is not far
    behind: it is judged by its interval, with min_samples of its own."""
    out, gpu = race({"a": (200.0, 0.5), "b": (224.0, 0.5)}, batch=5)
    assert out.pick == "a" and out.entry("b").reason.startswith("slower than a")
    assert len(out.entry("b").samples) >= 10


def test_rounds_are_interleaved_in_a_shuffled_seeded_order():
    plan = {f"c{i}": (100.0, 3.0) for i in range(6)}
    out, gpu = race(plan, RaceSettings(max_samples=30, seed=7))
    first = [c for c, r in gpu.calls if r == 1]
    second = [c for c, r in gpu.calls if r == 2]
    assert sorted(first) == sorted(plan) and sorted(second) == sorted(plan)   # everyone once per round
    assert first != second                                                     # reshuffled
    again, gpu2 = race(plan, RaceSettings(max_samples=30, seed=7))
    assert gpu2.calls == gpu.calls                                             # same seed, same order


def test_a_tie_is_reported_as_a_tie_with_intervals():
    plan = {"a": (500.0, 0.3), "b": (500.0 * 1.002, 0.3), "slow": (560.0, 0.3)}
    out, gpu = race(plan)
    assert out.verdict == "tie" and out.stop == "within noise"
    assert set(out.tie) == {"a", "b"} and out.pick == out.tie[0]
    assert {e.id: e.status for e in out.entries} == {"a": "tie", "b": "tie", "slow": "eliminated"}
    for cid in ("a", "b"):
        s = out.entry(cid).summary()
        assert s["ci_lo_us"] <= s["median_us"] <= s["ci_hi_us"]
        assert (s["ci_hi_us"] - s["ci_lo_us"]) / 2 <= s["median_us"] * 0.005   # resolved to ±0.5 %
    assert sorted(gpu.checked) == ["a", "b"]                                     # every tied candidate checked


def test_a_hang_and_a_crash_are_recorded_and_the_race_goes_on():
    plan = {"hangs": "hang", "good": (200.0, 0.5), "crashes": "crash", "slower": (260.0, 0.5)}
    out, gpu = race(plan)
    e = {x.id: x for x in out.entries}
    assert e["hangs"].status == "hang" and "no result within 10 s" in e["hangs"].reason
    assert e["crashes"].status == "crash" and "SIGABRT" in e["crashes"].reason
    assert out.pick == "good" and out.verdict == "winner" and e["slower"].status == "eliminated"
    assert sum(1 for c, _ in gpu.calls if c == "hangs") == 1                   # never asked again
    assert out.rounds[0]["failed"] and set(out.rounds[0]["failed"]) == {"hangs", "crashes"}


def test_a_candidate_that_hangs_in_a_later_round_keeps_its_samples_and_leaves():
    plan = {"a": (100.0, 0.5), "b": (100.3, 0.5)}
    out, _ = race(plan, fail_round={"a": (2, "crash")})
    assert out.entry("a").status == "crash" and len(out.entry("a").samples) == 10
    assert out.pick == "b" and out.verdict == "winner"


def test_a_wrong_winner_is_dropped_and_the_next_is_taken():
    plan = {"fast_wrong": (150.0, 0.5), "right": (200.0, 0.5), "slow": (300.0, 0.5)}
    out, gpu = race(plan, wrong={"fast_wrong"})
    e = {x.id: x for x in out.entries}
    assert e["fast_wrong"].status == "wrong" and "relative error 0.5" in e["fast_wrong"].reason
    assert e["fast_wrong"].check["rel_err"] == 0.5
    # "right" had been eliminated by the wrong leader: reinstated, raced again, checked, named
    assert out.pick == "right" and out.verdict == "winner" and e["right"].check["status"] == "ok"
    assert gpu.checked == ["fast_wrong", "right"] and e["slow"].status == "eliminated"


def test_every_finalist_wrong_leaves_no_winner():
    out, _ = race({"a": (10.0, 0.5), "b": (11.0, 0.5)}, wrong={"a", "b"})
    assert out.verdict == "none" and out.pick is None
    assert {e.status for e in out.entries} == {"wrong"}


def test_budget_stops_the_race_and_reports_survivors_with_intervals():
    plan = {f"c{i}": (1000.0 * (1 + i * 0.001), 2.0) for i in range(8)}
    out, gpu = race(plan, RaceSettings(budget_s=1.0), overhead_s=0.15)
    assert out.stop == "budget"
    assert gpu.now < 1.0 + 0.15 + 10 * 1e-3 * 1.1                # at most one batch past the budget
    measured = [e for e in out.entries if e.samples]
    skipped = [e for e in out.entries if e.status == "skipped"]
    assert len(measured) + len(skipped) == 8 and len(skipped) == 8 - len(measured) > 0
    assert all("budget ran out" in e.reason for e in skipped)
    assert out.verdict == "tie" and len(out.tie) >= 2             # not separated within the budget: no winner


def test_exhaustive_samples_everyone_and_eliminates_nobody():
    plan = {"a": (100.0, 1.0), "b": (150.0, 1.0), "c": (101.0, 1.0)}
    out, _ = race(plan, RaceSettings(strategy="exhaustive", exhaustive_samples=40))
    assert out.stop == "samples complete"
    assert all(len(e.samples) == 40 for e in out.entries)
    assert out.entry("b").status == "eliminated" and out.entry("b").eliminated_round == 4
    assert out.pick == "a"


def test_single_candidate_is_measured_checked_and_named():
    out, gpu = race({"only": (42.0, 1.0)})
    assert out.verdict == "winner" and out.stop == "one survivor" and gpu.checked == ["only"]
    assert len(out.entry("only").samples) == 10


def test_settings_are_validated():
    with pytest.raises(ValueError, match="strategy 'fastest'"):
        RaceSettings(strategy="fastest")
    with pytest.raises(ValueError, match="confidence 0.8"):
        RaceSettings(confidence=0.8)
    with pytest.raises(ValueError, match="min_samples=0"):
        RaceSettings(min_samples=0)


def test_median_ci_order_statistics():
    xs = list(range(1, 101))               # n = 100: r = floor(50 - 9.8) = 40, s = ceil(1 + 50 + 9.8) = 61
    assert median_ci(xs) == (40, 61)
    assert median_ci([5.0, 1.0, 3.0]) == (1.0, 5.0)     # too few samples: the whole range
    s = summary([3.0, 1.0, 2.0, 4.0])
    assert s["n"] == 4 and s["median_us"] == 2.5 and s["min_us"] == 1.0 and s["p25_us"] == 1.75
    assert summary([]) == {"n": 0}


class DriftingGPU(FakeGPU):
    """``plan[id] = (median_us per round...)``: a candidate's time moves from round to round (clock drift)."""

    def measure(self, cid, rnd):
        medians = self.plan[cid]
        saved = self.plan[cid]
        self.plan[cid] = (medians[min(rnd, len(medians)) - 1], 1.5)
        try:
            return super().measure(cid, rnd)
        finally:
            self.plan[cid] = saved


def test_an_eliminated_candidate_the_leader_no_longer_beats_is_put_back():
    """A wins round 1 and B is eliminated; C keeps the race going; A's later batches are slower (the clock fell),
    so B's round-1 samples now beat A's: B is put back, raced again, and the race ends with B named (or a tie),
    never A alone."""
    plan = {"A": (100.0,) + (112.0,) * 30, "B": (104.0,) * 31, "C": (100.5,) + (118.0,) * 30}
    gpu = DriftingGPU(plan)
    progress = []
    settings = RaceSettings(min_samples=10, max_samples=60)
    out = Race(list(plan), gpu.measure, gpu.check, settings, clock=gpu.clock,
               progress=lambda k, d: progress.append((k, d))).run()
    assert any(k == "rejudge" and d["back"] == ["B"] for k, d in progress), progress
    status = {e.id: e.status for e in out.entries}
    assert status["B"] in ("winner", "tie") and status["A"] != "winner", status


def test_leaders_with_the_eliminated_ones_name_the_fastest_timed_wrong_ones_never():
    """A budgeted search reads the fastest timed candidates, eliminated or not: a race that leaves one survivor
    would give it one leader only, and the runner-up it eliminated is often two knobs from the best (the H100's
    648-configuration matmul, 2026-12-05). A wrong candidate is never a leader."""
    plan = {"a": (100.0, 0.5), "b": (104.0, 0.5), "c": (110.0, 0.5), "d": (90.0, 0.5)}
    out, _ = race(plan, wrong={"d"})
    r = Race([], lambda i, n: Batch("ok", []), None, RaceSettings())
    r.entries = out.entries
    assert out.pick == "a" and out.entry("d").status == "wrong"
    assert r.leaders(3) == ["a"]                              # the survivor only
    assert r.leaders(3, eliminated=True) == ["a", "b", "c"]   # then the eliminated ones, fastest first
    assert r.leaders(2, eliminated=True) == ["a", "b"]
