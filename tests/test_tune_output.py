"""The tune's terminal output for hundreds of candidates: the finalists, the counts per fate, one
line per duplicate group by default; every row with --all; small spaces print every row as before."""
from __future__ import annotations

import io

from rich.console import Console

from tileprobe.report.tune import ROWS_SHOWN, duplicate_lines, fate_counts, render, time_line
from tileprobe.tune.result import CandidateRow, ProblemResult, TuneResult


def _row(i: int, status: str, median: float | None, same: str | None = None, reason: str = "") -> CandidateRow:
    return CandidateRow({"case": {"TILE": i}, "hints": {}}, f"TILE={i}", status, reason, same_launch_as=same,
                        raced=median is not None, median_us=median, ci_lo_us=median and median * 0.99,
                        ci_hi_us=median and median * 1.01, n=20 if median else None)


def _result(n: int) -> TuneResult:
    rows = [_row(0, "winner", 100.0), _row(1, "tie", 100.5)]
    rows += [_row(i, "eliminated", 100.0 + 10 * i) for i in range(2, n - 4)]
    rows += [_row(n - 4, "duplicate_launch", None, same="TILE=2"), _row(n - 3, "duplicate_launch", None, same="TILE=2")]
    rows += [_row(n - 2, "error", None, reason="out of memory\nmore"), _row(n - 1, "error", None, reason="out of memory")]
    p = ProblemResult("k", "k.py", {"M": 4}, "sm_90", rows, verdict="tie", pick=rows[0], tie=rows[:2], stop="within noise",
                      rounds=[{"round": 1}], dropped={"duplicate_launch": 2})
    return TuneResult(problems=[p], environment={"timing": "sustained", "strategy": "race", "arch": "sm_90"},
                      times={"total_s": 1.0})


def _text(result, **kw) -> str:
    buf = io.StringIO()
    render(result, Console(file=buf, width=200, force_terminal=False), **kw)
    return buf.getvalue()


def _rows(text: str) -> list[str]:
    """The candidates table's rows (cells after the table's left rule), those of a TILE= configuration."""
    out = [ln.strip().lstrip("│").strip() for ln in text.splitlines()]
    return [ln for ln in out if ln.startswith("TILE=")]


def test_hundreds_of_candidates_print_the_finalists_counts_and_one_line_per_duplicate_group():
    res = _result(300)
    text = _text(res)
    table_rows = _rows(text)
    assert [ln.split()[0] for ln in table_rows] == ["TILE=0", "TILE=1"]
    assert "2 of 300 rows shown" in text
    assert "winner 1, tie 1, eliminated 294, error 2, duplicate_launch 2" in text
    assert text.count("duplicate launches: TILE=2 = TILE=296, TILE=297 (timed once, as TILE=2)") == 1
    assert "error: 2 candidates (TILE=298, …): out of memory" in text
    assert "TILE=150" not in text


def test_all_prints_every_row():
    text = _text(_result(300), all_rows=True)
    assert len(_rows(text)) == 300
    assert "rows shown" not in text
    assert "error: TILE=298: out of memory" in text and "error: TILE=299: out of memory" in text


def test_a_small_space_prints_every_row():
    n = ROWS_SHOWN
    text = _text(_result(n))
    assert len(_rows(text)) == n
    assert "rows shown" not in text


def test_counts_and_groups():
    rows = _result(12).problems[0].candidates
    assert fate_counts(rows) == {"winner": 1, "tie": 1, "eliminated": 6, "error": 2, "duplicate_launch": 2}
    assert duplicate_lines(rows) == ["TILE=2 = TILE=8, TILE=9 (timed once, as TILE=2)"]
    for r in rows[3:6]:            # three more members of TILE=2's group: five in all, three named
        r.same_launch_as = "TILE=2"
    assert duplicate_lines(rows) == ["TILE=2 = TILE=3, TILE=4, TILE=5 and 2 more (timed once, as TILE=2)"]


def test_the_output_says_how_much_of_the_space_was_searched():
    res = _result(30)
    res.problems[0].coverage = {"configurations": 40, "compiled": 28, "timed": 26}
    assert "searched: 28 of 40 configurations compiled, 26 timed" in _text(res)


def test_the_time_split_names_the_compile_part_for_what_it_was():
    times = {"startup_s": 1.0, "plan_s": 0.2, "compile_s": 4.8, "store_s": 0.1, "total_s": 6.1}
    assert time_line(times, 0) == ("time: start-up 1.0 s · plan 0.2 s · reading the store 4.8 s (nothing compiled) · "
                                   "store 0.1 s · total 6.1 s")
    for compiled in (3, None):        # some compiled, or not counted (a bundle, no progress callback)
        assert time_line(times, compiled) == ("time: start-up 1.0 s · plan 0.2 s · compile 4.8 s · store 0.1 s · "
                                              "total 6.1 s")


def test_the_time_split_gives_the_race_s_efficiency_and_graph_timing_counts_each_launch_of_a_replay():
    import pytest

    from tileprobe.tune.pipeline import race_kernel_s
    times = {"startup_s": 1.0, "plan_s": 0.2, "compile_s": 4.8, "race_s": 4.0, "check_s": 0.5,
             "race_kernel_s": 0.25, "store_s": 0.1, "total_s": 10.6}
    assert "race 4.0 s (checks 0.5 s; kernel time 0.25 s = 6.2 % of the race)" in time_line(times, 3)
    assert "race 4.0 s (checks 0.5 s) ·" in time_line({**times, "race_kernel_s": None}, 3)   # not known: not said
    res = _result(4)
    res.problems[0].kernel_s = 0.02
    res.environment = {"timing": "graph", "timing_settings": {"graph_launches": 20}}
    assert race_kernel_s(res) == pytest.approx(0.4)
    res.environment = {"timing": "sustained", "timing_settings": {}}
    assert race_kernel_s(res) == pytest.approx(0.02)


def test_a_row_whose_sass_was_not_read_shows_its_stack_and_the_table_says_why_there_is_no_stl():
    """The tune reads the SASS only for kernels whose setmaxnreg may grow past the launch allocation; the others' rows have stack bytes
    and no STL count, and one line under the table says why and where to get it."""
    res = _result(4)
    rows = res.problems[0].candidates
    rows[0].stack_bytes, rows[0].spills = 24, None
    rows[1].stack_bytes, rows[1].spills = 256, {"spill_stores": 91}
    text = _text(res)
    cells = {ln.split()[0]: ln for ln in _rows(text)}
    assert " 24 " in cells["TILE=0"] and "256/91" in cells["TILE=1"]
    assert text.count("stack B / STL: no STL count where the SASS was not read") == 1
    rows[0].spills = {"spill_stores": 0}
    assert "no STL count" not in _text(res)


def test_a_narrow_terminal_drops_the_least_needed_columns_and_says_which():
    """Session 8's new user: at 120 columns the table cut the configuration and squeezed n and regs to nothing.
    Now it keeps every configuration whole, drops columns in a set order and names them under the table."""
    res = _result(4)
    buf = io.StringIO()
    render(res, Console(file=buf, width=80, force_terminal=False))
    text = buf.getvalue()
    want = sorted(r.label for r in res.problems[0].candidates if r.config is not None)
    assert sorted(ln.split()[0] for ln in _rows(text)) == want and len(want) == 6     # every row, whole
    assert all(len(ln) <= 80 for ln in text.splitlines() if "│" in ln or "━" in ln)
    dropped = next(ln for ln in text.splitlines() if ln.startswith("not shown at 80 columns: "))
    assert dropped.startswith("not shown at 80 columns: SM MHz, grid") and dropped.endswith("(--json keeps every column)")
    assert "not shown at" not in _text(res)       # 200 columns: all of it
