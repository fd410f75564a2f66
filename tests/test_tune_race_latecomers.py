"""Racing while compiling: candidates join the race as their compiles land, with the fake GPU of
test_tune_race.py; a latecomer gets as many samples of its own before elimination as an early one, the race does
not stop while more may come, and the budget leaves the rest ``skipped``."""
from __future__ import annotations

from test_tune_race import FakeGPU

from tileprobe.tune.race import Race, RaceSettings


class Arrivals:
    """Compiles landing: ``schedule`` = [(after this many measure calls, [ids])]; blocking waits for the next."""

    def __init__(self, gpu: FakeGPU, schedule):
        self.gpu, self.schedule, self.blocked = gpu, list(schedule), 0

    def __call__(self, block: bool):
        out = []
        while self.schedule and (len(self.gpu.calls) >= self.schedule[0][0] or (block and not out)):
            if len(self.gpu.calls) < self.schedule[0][0]:
                self.blocked += 1
            out.extend(self.schedule.pop(0)[1])
        return out, bool(self.schedule)


def _race(plan, first, schedule, settings=None, **kw):
    gpu = FakeGPU(plan, **kw)
    arrivals = Arrivals(gpu, schedule)
    out = Race(first, gpu.measure, gpu.check, settings or RaceSettings(), clock=gpu.clock, arrivals=arrivals).run()
    return out, gpu, arrivals


def test_a_fast_latecomer_wins_and_the_race_waited_for_it():
    plan = {"a": (120.0, 0.3), "b": (110.0, 0.3), "late": (100.0, 0.3)}
    out, gpu, arrivals = _race(plan, ["a", "b"], [(50, ["late"])])
    assert out.pick == "late" and out.verdict == "winner"
    late = out.entry("late")
    assert late.joined_round > 1
    assert min(r for c, r in gpu.calls if c == "late") == late.joined_round
    assert out.entry("a").status == "eliminated" and out.entry("b").status in ("eliminated",)
    # b was alone in front of a long before "late" came: the race did not stop at one survivor, it waited
    assert arrivals.blocked == 1
    # b, the leader while the race waited, was checked then (no wall time after the last landing); late at the end
    assert gpu.checked == ["b", "late"]


def test_the_leader_is_checked_while_the_race_waits_and_not_again_after_a_slower_latecomer():
    plan = {"a": (100.0, 0.3), "b": (130.0, 0.3), "late": (160.0, 0.3)}
    gpu = FakeGPU(plan)
    order = []
    real_check = gpu.check
    gpu.check = lambda cid: (order.append((cid, len(gpu.calls))), real_check(cid))[1]
    arrivals = Arrivals(gpu, [(40, ["late"])])
    out = Race(["a", "b"], gpu.measure, gpu.check, RaceSettings(), clock=gpu.clock, arrivals=arrivals).run()
    assert out.pick == "a" and out.entry("late").status == "eliminated"
    assert gpu.checked == ["a"]                 # once: the slower latecomer changed nothing
    (_, calls_then), = order
    assert calls_then < 40                      # before "late" landed (after 40 measure calls)
    assert out.entry("a").check["status"] == "ok"


def test_a_wrong_leader_found_while_waiting_puts_the_eliminated_back():
    plan = {"a": (100.0, 0.3), "b": (130.0, 0.3), "late": (160.0, 0.3)}
    gpu = FakeGPU(plan, wrong={"a"})
    order = []
    real_check = gpu.check
    gpu.check = lambda cid: (order.append((cid, len(gpu.calls))), real_check(cid))[1]
    arrivals = Arrivals(gpu, [(60, ["late"])])
    out = Race(["a", "b"], gpu.measure, gpu.check, RaceSettings(), clock=gpu.clock, arrivals=arrivals).run()
    assert out.entry("a").status == "wrong"
    assert out.pick == "b" and out.verdict == "winner"
    assert out.entry("late").status == "eliminated" and len(out.entry("late").samples) >= 10
    # a was checked (wrong) and b, put back in, checked too, both before "late" landed after 60 measure calls
    assert [c for c, _ in order] == ["a", "b"] and all(n < 60 for _, n in order)


def test_a_latecomer_gets_min_samples_of_its_own_before_elimination():
    plan = {"a": (100.0, 0.3), "slow": (200.0, 0.3)}
    # the interval rule's fairness (the far-behind rule, off here, judges every candidate after its own first batch)
    out, gpu, _ = _race(plan, ["a"], [(3, ["slow"])], RaceSettings(min_samples=30, far_pct=0.0), batch=10)
    slow = out.entry("slow")
    assert slow.status == "eliminated"
    assert len(slow.samples) >= 30        # 3 batches of 10: as an early candidate would need
    assert [r for c, r in gpu.calls if c == "slow"][:3] == list(range(slow.joined_round, slow.joined_round + 3))


def test_many_latecomers_the_result_is_the_one_of_racing_them_all_from_the_start():
    plan = {f"c{i}": (100.0 + 7 * ((i * 5) % 11), 0.4) for i in range(11)}
    ids = list(plan)
    g = FakeGPU(plan)
    together = Race(ids, g.measure, None, RaceSettings(), clock=g.clock).run()
    out, gpu, _ = _race(plan, ids[:2], [(k * 4, ids[k:k + 3]) for k in range(2, 11, 3)])
    assert {e.id for e in out.entries} == set(ids)
    assert out.pick == together.pick == "c0"
    assert all(e.status in ("winner", "eliminated") for e in out.entries)


def test_the_budget_leaves_the_candidates_not_yet_timed_skipped_and_still_waits_for_the_compiles():
    plan = {"a": (100.0, 0.3), "b": (101.0, 0.3), "c": (50.0, 0.3), "d": (50.0, 0.3)}
    out, gpu, arrivals = _race(plan, ["a", "b"], [(2, ["c"]), (10_000, ["d"])], RaceSettings(budget_s=0.12))
    assert out.stop == "budget"
    assert out.entry("d").status == "skipped" and not out.entry("d").samples
    assert out.entry("c").status == "skipped"       # joined, but the budget ran out before its first batch
    assert arrivals.schedule == []            # every compile was waited for
    assert ("d", 1) not in gpu.calls and all(c != "d" for c, _ in gpu.calls)


def test_the_tune_races_while_compiling(tmp_path):
    """A real tune (fake GPU tasks, real compiles one at a time, no store): the race starts before the last compile
    lands, candidates join in several groups, and the pick is the planted fastest."""
    import json

    from test_tune_pipeline import INIT, PLAN_ENV, PROBE, TASKS

    from tileprobe.run.watchdog import Watchdog
    from tileprobe.tune.pipeline import tune
    probe = tmp_path / "vec_tune.py"
    probe.write_text(PROBE)
    plan = {"times": {"256": 120.0, "512": 100.0, "1024": 80.0, "2048": 90.0}}
    events = []
    with Watchdog(timeout_s=10.0, init=INIT, env={PLAN_ENV: json.dumps(plan)}, grace_s=0.5) as wd:
        res = tune([str(probe)], arch="sm_90", watchdog=wd, tasks=TASKS, store=None, timeout_s=10.0, jobs=1,
                   progress=lambda kind, data: events.append((kind, data)))
    (p,) = res.problems
    joined = [d for k, d in events if k == "joined"]
    assert len(joined) >= 2 and sum(len(d["ids"]) for d in joined) == 4      # 5 compiled, 1 duplicate launch
    assert res.times["race_while_compiling_s"] > 0
    assert p.verdict == "winner" and p.pick.label == "TILE=1024 occupancy=1"
    assert p.dropped["duplicate_launch"] == 1
    assert p.coverage == {"configurations": 12, "compiled": 5, "timed": 4}   # 7 rejected by the constraints
    assert [k for k, _ in events].index("race") < max(i for i, (k, _) in enumerate(events) if k == "compile")
