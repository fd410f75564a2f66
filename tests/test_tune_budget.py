"""``tune(budget_s=…)`` over a space larger than ``search_full_max``: the budgeted search end to end on CPU — real
compiles of a small vec_add probe (sm_90), the real watchdog and worker, the fake GPU tasks of
``tests/test_tune_pipeline.py`` (a time per tile size). Also the CLI's ``--budget`` line of the search."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tileprobe.run.watchdog import Watchdog
from tileprobe.store import Store
from tileprobe.tune import tune

HERE = Path(__file__).resolve().parent
PIPELINE = HERE / "test_tune_pipeline.py"
KERNELS = HERE / "data" / "kernels.py"
TASKS = (f"{PIPELINE}:fake_time", f"{PIPELINE}:fake_check")
INIT = f"{PIPELINE}:init_fake_gpu"
PLAN_ENV = "TP_FAKE_TUNE_PLAN"
#: TILE → µs: the fastest is 1024, one step from the space's centre.
TIMES = {"256": 140.0, "512": 110.0, "1024": 90.0, "2048": 100.0, "4096": 120.0, "8192": 150.0}

PROBE = f"""
from tileprobe import Probe
N = 1 << 16
probe = Probe(
    kernel={str(KERNELS) + ':vec_add'!r},
    args=lambda case, arrays: (arrays.randn((N,), "float32"), arrays.randn((N,), "float32"),
                               arrays.empty((N,), "float32"), case["TILE"]),
    cases={{"TILE": [256, 512, 1024, 2048, 4096, 8192]}},
    tunable=("TILE",),
    hints={{"occupancy": [1, 2]}},
    grid=lambda case, hints, num_sms: (N // case["TILE"],),
    reference=lambda case, a: {{2: a[0] + a[1]}},
    name="vec_add_budget",
)
"""


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    d = tmp_path_factory.mktemp("budget")
    path = d / "vec_budget.py"
    path.write_text(PROBE)
    return {"probe": str(path), "store": str(d / "results.sqlite")}


def run(probe, budget_s, **kw):
    with Watchdog(timeout_s=5.0, init=INIT, env={PLAN_ENV: json.dumps({"times": TIMES})}, grace_s=0.5) as wd:
        with Store.open(probe["store"]) as s:
            return tune([probe["probe"]], arch="sm_90", watchdog=wd, tasks=TASKS, store=s, timeout_s=5.0, jobs=2,
                        budget_s=budget_s, search_full_max=4, **kw)


def test_a_spent_budget_stops_after_the_spread_sample_and_says_what_was_searched(probe):
    res = run(probe, 0.01)
    (p,) = res.problems
    rows = {r.label: r for r in p.candidates if r.config}
    from tileprobe.tune.result import CUT_REASON
    searched = [r for r in rows.values() if r.status != "not_searched" or r.reason == CUT_REASON]
    assert len(rows) == 12 and len(searched) == 2                      # the first wave: 2 jobs
    assert "TILE=256 occupancy=1" in {r.label for r in searched}        # the default configuration comes first
    # the first wave is spared at the cut only until one of its compiles lands: the other is cut unless it landed
    # at once too (the same wait)
    compiled = p.coverage["compiled"]
    assert compiled in (1, 2) and p.dropped["not_searched"] == 12 - compiled and p.coverage["configurations"] == 12
    assert p.pick is not None and p.pick.label in {r.label for r in searched if r.raced}
    assert p.pick.median_us == pytest.approx(min(TIMES[str(r.config["case"]["TILE"])] for r in searched
                                                 if r.raced), rel=0.05)
    cut = "" if compiled == 2 else "; 1 cut at the budget's end or without a record"
    assert any(n.startswith(f"budgeted search: {compiled} of 12 configurations compiled (of 2 started: 2 from a "
                            f"balanced sample, 0 neighbours of the race's leaders{cut}), {compiled} timed; compiling ")
               for n in p.notes), p.notes
    if compiled == 1:      # the cut one: left out by the budget, not a failure
        from tileprobe.tune.result import CUT_REASON
        (gone,) = [r for r in rows.values() if r.reason == CUT_REASON]
        assert gone.status == "not_searched" and "not_compiled" not in p.dropped
    assert all(r.reason.startswith("not compiled: the budgeted search did not reach it") for r in rows.values()
               if r.status == "not_searched" and r.reason != CUT_REASON)
    assert res.environment["search"] == {"full_max": 4, "sample": 2, "jobs": 2, "round_cap": 4, "leaders": 2}


def test_a_budget_that_suffices_searches_around_the_leaders_and_finds_the_fastest(probe):
    res = run(probe, 600.0)
    (p,) = res.problems
    assert p.pick.label == "TILE=1024 occupancy=1" and p.pick.median_us == pytest.approx(90.0, rel=0.05)
    (note,) = [n for n in p.notes if n.startswith("budgeted search:")]
    compiled = int(re.match(r"budgeted search: (\d+) of 12 configurations compiled \(", note).group(1))
    stored = re.search(r", (\d+) taken from the store", note)           # the module's store holds the test above's
    sample, neighbours = (int(x) for x in re.findall(r"(\d+) (?:from a balanced sample|neighbours)", note))
    assert compiled + (int(stored.group(1)) if stored else 0) == 12 and sample + neighbours == compiled
    assert neighbours >= 1                                         # the race's leaders steered some of the compiles
    # what the race waited for to take in what landed: the landed candidates and the intakes' seconds
    took = re.search(r"; (\d+) landed candidates taken into the race in (\d+) intakes? \(([\d.]+) s each on "
                     r"average, the longest ([\d.]+) s\)$", note)
    assert took is not None, note
    landed, intakes, mean_s, longest_s = int(took.group(1)), int(took.group(2)), *map(float, took.groups()[2:])
    assert 1 <= intakes <= landed <= 12 and 0.0 <= mean_s <= longest_s < 60.0
    assert p.coverage["compiled"] == 12 and "not_searched" not in p.dropped   # time for everything: all tried
    assert res.times["compile_s"] > 0 and res.times["race_s"] > 0
    # the JSON keeps every row and the search's notes
    d = json.loads(json.dumps(res.to_dict(), default=str))
    assert len([r for r in d["problems"][0]["candidates"] if r.get("config")]) == 12


def test_the_budget_counts_the_processs_start_up(probe, tmp_path):
    """--budget bounds the command's wall time: a start-up that took all of it leaves the search its first
    wave only, and of that wave the compiles that landed with the first (the same 600-s budget without it tries
    every configuration, the test above)."""
    (p,) = run(dict(probe, store=str(tmp_path / "s.sqlite")), 600.0, startup_s=600.0).problems
    assert p.coverage["compiled"] in (1, 2) and p.dropped["not_searched"] == 12 - p.coverage["compiled"]


def test_a_small_space_with_a_budget_is_compiled_whole_as_before(probe):
    with Watchdog(timeout_s=5.0, init=INIT, env={PLAN_ENV: json.dumps({"times": TIMES})}, grace_s=0.5) as wd:
        with Store.open(probe["store"]) as s:
            res = tune([probe["probe"]], arch="sm_90", watchdog=wd, tasks=TASKS, store=s, timeout_s=5.0, jobs=2,
                       budget_s=600.0, search_full_max=20)
    (p,) = res.problems
    assert not any(n.startswith("budgeted search") for n in p.notes) and "search" not in res.environment
    assert p.pick.label == "TILE=1024 occupancy=1"


def test_stored_picks_of_the_kernel_on_other_problems_come_first(tmp_path):
    from tileprobe.tune.budgeted import stored_picks
    from tileprobe.tune.space import Config, ProbeInfo, Problem
    configs = [Config((("TILE", t),), (("occupancy", o),)) for t in (256, 512, 1024) for o in (1, 2)]
    problem = Problem(ProbeInfo("p.py", 0, "vec_add_budget"), {"N": 4096}, configs)
    env = {"gpu": {"name": "NVIDIA H200"}, "timing": "sustained", "strategy": "race"}
    with Store.open(str(tmp_path / "s.sqlite")) as s:
        assert stored_picks(s, problem) == []
        for n, (tile, occ) in ((1024, (512, 2)), (2048, (1024, 1)), (8192, (4096, 1))):   # the last: not in space
            pick = {"config": {"case": {"TILE": tile}, "hints": {"occupancy": occ}}, "label": "x", "median_us": 1.0}
            s.save_tune({"kernel": "vec_add_budget", "problem": {"N": n}, "pick": pick, "candidates": []}, env)
        s.save_tune({"kernel": "other", "problem": {"N": 1}, "candidates": [],
                     "pick": {"config": {"case": {"TILE": 256}, "hints": {"occupancy": 1}}}}, env)
        got = stored_picks(s, problem)
    assert [c.label for c in got] == ["TILE=1024 occupancy=1", "TILE=512 occupancy=2"]   # newest first
    assert stored_picks(None, problem) == []


def test_the_summary_counts_unreached_configurations_apart_from_failures(probe, tmp_path):
    from tileprobe.report.tune import summary_line
    (p,) = run(dict(probe, store=str(tmp_path / "empty.sqlite")), 0.01).problems   # nothing stored: 2 started
    line = summary_line(p)
    n = p.coverage["compiled"]        # 1 when the first wave's second compile was cut once the first landed
    assert "0 failed" in line and f"{12 - n} not searched (the budget)" in line and line.endswith(f"→ {n} to time"), \
        line                          # a cut compile is left out by the budget, not a failure


def test_a_spent_budget_still_races_a_space_compiled_whole_for_the_least_race_time(probe, monkeypatch):
    """Below the search's threshold the space is compiled whole; a budget the compiles spent still gives its race
    MIN_RACE_S (as the search's rounds get), so the candidates are timed and a winner named (hostile test 6: they
    were all 'skipped' and the table said no candidate ran correctly). The least race time is raised from 2 s to
    10 s here, so that a machine loaded by other tests (four workers on two cores) still times the six fake
    candidates within it; the race ends as soon as it names a winner, so an idle run takes no longer."""
    from tileprobe.report.tune import verdict_lines
    from tileprobe.tune import overlap, pipeline
    monkeypatch.setattr(overlap, "MIN_RACE_S", 10.0)
    monkeypatch.setattr(pipeline, "MIN_RACE_S", 10.0)
    with Watchdog(timeout_s=5.0, init=INIT, env={PLAN_ENV: json.dumps({"times": TIMES})}, grace_s=0.5) as wd:
        with Store.open(probe["store"]) as s:
            res = tune([probe["probe"]], arch="sm_90", watchdog=wd, tasks=TASKS, store=s, timeout_s=5.0, jobs=2,
                       budget_s=1e-9, search_full_max=20)
    (p,) = res.problems
    assert p.verdict in ("winner", "tie") and p.pick.label == "TILE=1024 occupancy=1"
    assert not any(r.status == "skipped" for r in p.candidates)
    assert not any("no winner" in line for line in verdict_lines(p))


def test_a_race_the_budget_never_reached_says_so_not_that_nothing_ran_correctly():
    from tileprobe.report.tune import verdict_lines
    from tileprobe.tune.result import CandidateRow, ProblemResult
    rows = [CandidateRow(label=f"TILE={t}", config={"case": {"TILE": t}, "hints": {}}, status=s)
            for t, s in ((256, "skipped"), (512, "skipped"), (1024, "duplicate_launch"))]
    skipped = ProblemResult(kernel="k", probe="p.py", problem={}, arch="sm_90", verdict="none", candidates=rows)
    assert verdict_lines(skipped)[0] == ("no winner: the budget ran out before any candidate was timed "
                                         "(give a larger --budget)")
    rows[0].status = "crash"
    assert verdict_lines(skipped)[0] == "no winner: no candidate ran correctly"


def test_a_round_takes_every_stored_configuration_beside_the_ones_it_compiles(probe, tmp_path):
    """Stored variants cost nothing: a round lands all of them, not only those of its batch (hostile test 6: with
    every compile stored a spent budget left 4 configurations 'not reached')."""
    store = str(tmp_path / "full.sqlite")
    whole = run(dict(probe, store=store), 600.0)                    # every configuration compiled and stored
    assert whole.problems[0].coverage["compiled"] == 12
    (p,) = run(dict(probe, store=store), 1e-9).problems
    assert "not_searched" not in p.dropped and p.coverage["compiled"] == 12
    assert p.pick.label == "TILE=1024 occupancy=1"


def test_a_dry_run_with_a_budget_compiles_the_first_sample_and_lists_the_rest(probe, tmp_path):
    """Before: a dry run ignored --budget and compiled all 486 configurations of the matmul space (837 s on the
    2-core machine, a new user, 2026-12-02). Now it compiles the search's first sample (round_cap 4 here: the default
    configuration first, then the balanced sample) and lists the others as not_searched, saying why."""
    with Store.open(str(tmp_path / "dry.sqlite")) as s:
        res = tune([probe["probe"]], arch="sm_90", store=s, jobs=2, budget_s=30.0, search_full_max=4, dry_run=True,
                   num_sms=132)
    (p,) = res.problems
    rows = [r for r in p.candidates if r.config]
    compiled = [r for r in rows if r.status != "not_searched"]
    assert len(rows) == 12 and len(compiled) == 4 and p.coverage["compiled"] == 4
    assert "TILE=256 occupancy=1" in {r.label for r in compiled}
    assert p.dropped["not_searched"] == 8 and p.coverage["timed"] == 0
    assert all(r.reason.startswith("not compiled: a dry run with --budget compiles the search's first sample")
               for r in rows if r.status == "not_searched")
    assert any(n.startswith("a dry run with --budget: the search's first sample, 4 of 12 configurations (at most "
                            "4 × --jobs; compiled, or taken from the store)") for n in p.notes)
    from tileprobe.report.tune import summary_line
    assert "8 not searched (not in the dry run's sample)" in summary_line(p)      # the budget decided nothing here


def test_the_search_order_gets_the_tileiras_time_of_every_configuration_it_chose(probe, tmp_path, monkeypatch):
    """The order's compile-time model (SearchOrder.expected_s) reads what ``landed`` tells it: the tune must call it
    with a positive time for each configuration it compiled (a real tileiras compile of vec_add takes well over
    1 ms), and with nothing the order did not choose when the store is empty."""
    from tileprobe.tune import search
    got, orders = {}, []
    real_landed, real_init = search.SearchOrder.landed, search.SearchOrder.__init__

    def init(self, *a, **kw):
        real_init(self, *a, **kw)
        orders.append(self)

    codes = {}

    def landed(self, config, compile_s, code=None):
        got[config], codes[config] = compile_s, code
        return real_landed(self, config, compile_s, code)
    monkeypatch.setattr(search.SearchOrder, "__init__", init)
    monkeypatch.setattr(search.SearchOrder, "landed", landed)
    run(dict(probe, store=str(tmp_path / "fresh.sqlite")), 600.0)
    (order,) = orders
    assert set(got) == set(order.tried) and len(got) == 12 and not order.landed_stored
    assert all(s > 0.001 for s in got.values()) and order.expected_s(order.tried[0]) > 0
    # each record's machine-code hash too (which knob values the compiler ignored: SearchOrder.inert)
    assert all(isinstance(c, str) and len(c) == 64 for c in codes.values()) and order.code == codes


@pytest.mark.parametrize("kw", [{"budget_s": float("nan")}, {"budget_s": -5.0}, {"budget_s": 0.0},
                                {"budget_s": 30.0, "startup_s": float("nan")},
                                {"budget_s": 30.0, "startup_s": -1000.0}],
                         ids=["nan", "negative", "zero", "startup-nan", "startup-negative"])
def test_the_api_refuses_a_budget_or_start_up_that_is_no_number_of_seconds(probe, kw):
    """Hostile test (session 7): these ran silently as a spent budget, or added 1000 s to it."""
    from tileprobe.errors import TileprobeError
    name = "startup_s" if "startup_s" in kw else "budget_s"
    with pytest.raises(TileprobeError, match=rf"tune settings: {name}=.*: give a finite number of seconds"):
        tune([probe["probe"]], arch="sm_90", dry_run=True, num_sms=132, **kw)
