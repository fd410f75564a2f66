"""The CPU side of ``benchmarks/tune/bench_tune_tools.py``'s do_bench passes (the judge of ``bench_tune.py`` and
``bench_budget.py``), with fakes for do_bench and the launch: session 9's hostile test found a later pass that raised
lost every row, and ``--passes 0`` accepted."""
from __future__ import annotations

import os
import statistics
import types

import pytest
from support import load_script
from test_tune_search import space

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def btt():
    return load_script(os.path.join(ROOT, "benchmarks", "tune", "bench_tune_tools.py"))


CONFIGS = space(TILE=[1, 2, 3])


class Kernel:
    def replace_hints(self, **_):
        return self


class Probe:
    def grid(self, case, hints, num_sms):
        return (1,)


def _rows():
    return [{"label": c.label, "status": s} for c, s in zip(CONFIGS, ["ok", "wrong", "ok"])]


def _launch_of(btt, launched=None):
    ns = types.SimpleNamespace
    ct = ns(launch=lambda *a: launched.append(a) if launched is not None else None)
    return btt.launcher(ct, Kernel(), Probe(), ns(values={}), ns(get=lambda cfg: ()), "stream", 132)


def _passes(btt, do_bench, rows, passes):
    ns = types.SimpleNamespace
    return btt._timed_passes(do_bench, _launch_of(btt), CONFIGS, rows, ns(read=lambda: {"sm_mhz": 1980.0}), None,
                             passes)


def test_passes_alternate_their_order_and_keep_the_median_of_the_medians(btt):
    seen = []
    # ms: pass 1 TILE=1, TILE=2 (wrong: this pass only), TILE=3; pass 2 TILE=3, TILE=1; pass 3 TILE=1, TILE=3
    times = iter([0.010, 0.030, 0.010, 0.012, 0.020, 0.014, 0.022])

    def do_bench(fn, return_mode):
        seen.append(return_mode)
        return next(times)
    rows = _rows()
    assert _passes(btt, do_bench, rows, 3) == 3
    assert rows[2]["median_us_passes"] == pytest.approx([10.0, 12.0, 22.0])
    assert rows[0]["median_us_passes"] == pytest.approx([10.0, 20.0, 14.0])
    assert rows[0]["median_us"] == pytest.approx(14.0) and rows[2]["median_us"] == pytest.approx(12.0)
    assert rows[1]["median_us_passes"] == pytest.approx([30.0])       # wrong: timed once
    assert rows[0]["clocks_before"] == {"sm_mhz": 1980.0} and "clocks_after_last" in rows[0]
    assert seen == ["median"] * 7


def test_one_pass_off_the_steady_clock_does_not_move_the_figure(btt):
    # the s11b case: a configuration's first pass on a cool GPU read 196.9 µs, its five others 215.5–218.3 µs
    times = iter(x / 1000.0 for pair in zip([196.9, 218.2, 216.8, 216.1, 215.5, 218.3],
                                            [216.1, 218.8, 220.6, 217.1, 220.1, 219.9]) for x in pair)
    def do_bench(fn, return_mode):
        return next(times)
    rows = [{"label": CONFIGS[0].label, "status": "ok"}, {"label": CONFIGS[2].label, "status": "ok"}]
    ns = types.SimpleNamespace
    n = btt._timed_passes(do_bench, _launch_of(btt), [CONFIGS[0], CONFIGS[2]], rows, ns(read=lambda: {}), None, 6)
    assert n == 6
    # the alternating order takes the figures as a, b, then b, a, …
    a, b = rows[0]["median_us_passes"], rows[1]["median_us_passes"]
    assert sorted(a + b) == sorted([196.9, 218.2, 216.8, 216.1, 215.5, 218.3, 216.1, 218.8, 220.6, 217.1, 220.1,
                                     219.9])
    assert rows[0]["median_us"] == pytest.approx(statistics.median(a))
    assert 196.9 in a and rows[0]["median_us"] > 210.0          # the mean would be pulled 3 µs down


def test_a_pass_that_raises_keeps_the_rows_timed_so_far(btt):
    calls = []

    def do_bench(fn, return_mode):
        calls.append(1)
        if len(calls) == 4:      # pass 2's first (TILE=3) fails, as a kernel that faults only sometimes would
            raise RuntimeError("out of memory")
        return 0.011
    rows = _rows()
    assert _passes(btt, do_bench, rows, 3) == 3
    assert "out of memory" in rows[2]["pass_error"] and rows[2]["median_us_passes"] == pytest.approx([11.0])
    assert rows[2]["status"] == "ok" and rows[2]["median_us"] == pytest.approx(11.0)      # its first pass kept
    assert rows[0]["median_us_passes"] == pytest.approx([11.0, 11.0, 11.0])


def test_a_first_pass_that_raises_makes_the_row_an_error(btt):
    def do_bench(fn, return_mode):
        raise RuntimeError("out of memory")
    rows = _rows()
    assert _passes(btt, do_bench, rows, 2) == 2
    assert all(r["status"] == "error" and "out of memory" in r["error"] for r in rows)
    assert not any(r.get("median_us") for r in rows)


def test_a_broken_context_ends_the_passes_and_says_how_many_ran(btt):
    calls = []

    def do_bench(fn, return_mode):
        calls.append(1)
        if len(calls) == 5:      # pass 2's second
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return 0.010
    rows = _rows()
    assert _passes(btt, do_bench, rows, 4) == 1
    assert "illegal memory access" in rows[0]["pass_error"] and rows[0]["median_us_passes"] == [10.0]
    assert len(calls) == 5


def test_the_heat_up_runs_the_first_configuration_untimed_and_reports_an_error(btt):
    seen = []

    def do_bench(fn, warmup, rep, return_mode):
        seen.append((warmup, rep))
        fn()
        return 0.2
    ns = types.SimpleNamespace
    launched = []
    args = (_launch_of(btt, launched), CONFIGS[0], ns(read=lambda: {"sm_mhz": 1590.0}))
    out = btt._heat_up(do_bench, *args)
    assert seen == [(25, btt.HEAT_UP_MS)] and out["median_us"] == pytest.approx(200.0)
    assert [(a[0], a[1], type(a[2]), a[3]) for a in launched] == [("stream", (1, 1, 1), Kernel, ())]   # ct.launch's
    assert out["label"] == CONFIGS[0].label and out["clocks_after"] == {"sm_mhz": 1590.0}

    def failing(fn, warmup, rep, return_mode):
        raise RuntimeError("CUDA error: unspecified launch failure")
    out = btt._heat_up(failing, *args)
    assert "launch failure" in out["error"] and btt._breaks_context(Exception(out["error"]))


@pytest.mark.parametrize("bad", ["0", "-2", "two"])
def test_passes_below_one_is_refused_by_the_cli(btt, bad, capsys):
    with pytest.raises(SystemExit) as e:
        btt.main(["dobench", "--probe", "x.py", "--json", os.devnull, "--passes", bad])
    assert e.value.code == 2 and "is not a number of passes" in capsys.readouterr().err


def test_bench_budget_prints_the_final_s_time_per_batch_and_what_it_was_left():
    bb = load_script(os.path.join(ROOT, "benchmarks", "tune", "bench_budget.py"))
    final = {"contenders": ["a", "b", "c", "d", "e"], "passes": 1, "cut": True, "batches": 7, "wall_s": 2.1,
             "budget_left_s": 2.2}
    assert bb._final_lines(final) == ["  final: 5 contenders, 1 pass(es), cut by the budget; 7 batches in 2.1 s, "
                                      "300 ms per batch; 2.20 s of the budget left when it began"]
    skipped = {"contenders": ["a", "b"], "passes": 0, "skipped": "the budget ran out before a whole pass",
               "batches": 0, "wall_s": 0.0}
    assert bb._final_lines(skipped) == ["  final: 2 contenders, 0 pass(es), skipped: the budget ran out before a "
                                        "whole pass; 0 batches in 0.0 s"]
    assert bb._final_lines(None) == []


def test_rows_a_broken_context_left_untimed_are_skipped_not_ok(btt):
    """Session 11's hostile test: a break in pass 1 left the rows after it "ok" with no figure, and bench_budget's
    report then crashed on min() over None."""
    calls = []

    def do_bench(fn, return_mode):
        calls.append(1)
        if len(calls) == 2:      # pass 1's second (TILE=2, wrong: timed once) breaks the context
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return 0.2
    rows = _rows()
    assert _passes(btt, do_bench, rows, 3) == 0
    btt._untimed(rows, None)
    assert rows[0]["status"] == "ok" and rows[0]["median_us"] == pytest.approx(200.0)
    assert rows[1]["status"] == "error" and "illegal memory access" in rows[1]["error"]
    assert rows[2]["status"] == "skipped" and "not timed: the passes ended before its turn" in rows[2]["error"]
    assert btt._timed_passes(do_bench, None, [], [], None, None, 3) == 0                      # nothing to time


def test_bench_budget_report_ignores_rows_without_a_figure(btt, tmp_path):
    import json
    bb = load_script(os.path.join(ROOT, "benchmarks", "tune", "bench_budget.py"))
    rows = [{"label": "A", "status": "ok", "median_us": 210.0}, {"label": "B", "status": "ok"},
            {"label": "C", "status": "skipped", "error": "checked (ok) but not timed"}]
    (tmp_path / "dobench.json").write_text(json.dumps({"rows": rows}))
    text = bb.report(str(tmp_path))
    assert "fastest by do_bench among those timed: A 210.0 µs" in text
