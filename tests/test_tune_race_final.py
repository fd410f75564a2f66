"""The race's steady-state final (``tileprobe/tune/race.py``, module doc 7) driven by a fake power-capped GPU: the
race's short batches read each candidate's "cool" time, the final's long batches its steady-state time, as the H200
did for the 4096³ matmul (docs/NOTES.md §29). No GPU: a fake clock, planted times."""
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
    assert old.reason.startswith("slower in the steady-state final: 22") and "against 256x128 c2's 22" in old.reason
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


def test_a_close_final_is_a_tie_with_the_lowest_figure_first():
    out, _ = run({"a": (200.0, 220.0), "b": (205.0, 219.0), "c": (300.0, 300.0)}, RaceSettings(tie_pct=1.0))
    assert out.verdict == "tie" and out.tie == ["b", "a"] and out.pick == "b"
    assert {e.id: e.status for e in out.entries} == {"a": "tie", "b": "tie", "c": "eliminated"}


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
    assert gpu.now <= 6.0 + gpu.final_s       # the final's share: 5 × 2 × 0.2 s = 2 s, at most a third of 6 s
    reserve = min(5 * 2 * 0.2, 6.0 / 3)
    race_end = gpu.now - 4 * gpu.final_s
    assert 6.0 - reserve - gpu.race_s <= race_end <= 6.0 - reserve + gpu.race_s


def test_a_budget_spent_in_the_final_keeps_the_whole_passes_only():
    settings = RaceSettings(budget_s=6.0, max_samples=10_000, tie_pct=0.0)
    plan = {"a": (200.0, 220.0), "b": (200.0, 210.0)}
    out, gpu = run(plan, settings, final_s=0.7)       # the 2-s share holds 2 of the 4 batches of 0.7 s
    assert out.final["passes"] == 1 and out.pick == "b"
    assert [len(e.final) for e in out.entries] == [1, 1]     # the second pass's first batch is not kept
    assert len(gpu.final_calls) == 3 and gpu.now <= 6.0 + 0.7
    out, gpu = run(plan, settings, final_s=2.5)       # not one pass fits: the race's pick stands
    assert out.final["passes"] == 0 and out.final["skipped"] == "the budget ran out before a whole pass"
    assert out.verdict in ("winner", "tie") and out.pick in ("a", "b") and "figures_us" not in out.final


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
                       "pass"}).endswith("skipped: the budget ran out before a whole pass")
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
