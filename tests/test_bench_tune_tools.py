"""The CPU side of ``benchmarks/bench_tune_tools.py``'s do_bench passes (the judge of ``bench_tune.py`` and
``bench_budget.py``), with fakes for do_bench and the launch: session 9's hostile test found a later pass that raised
lost every row, and ``--passes 0`` accepted."""
from __future__ import annotations

import os
import types

import pytest

from support import load_script
from test_tune_search import space

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def btt():
    return load_script(os.path.join(ROOT, "benchmarks", "bench_tune_tools.py"))


CONFIGS = space(TILE=[1, 2, 3])


class Kernel:
    def replace_hints(self, **_):
        return self


class Probe:
    def grid(self, case, hints, num_sms):
        return (1,)


def _rows():
    return [{"label": c.label, "status": s, "median_us": 10.0} for c, s in zip(CONFIGS, ["ok", "wrong", "ok"])]


def _passes(btt, do_bench, rows, passes):
    ns = types.SimpleNamespace
    return btt._more_passes(do_bench, ns(launch=lambda *a: None), Kernel(), Probe(), ns(values={}), CONFIGS,
                            ns(get=lambda cfg: ()), None, 132, rows, ns(read=lambda: {}), None, passes)


def test_more_passes_alternate_their_order_and_average_the_medians(btt):
    seen = []
    times = iter([0.012, 0.020, 0.014, 0.022])        # ms: pass 2 goes TILE=3, TILE=1; pass 3 TILE=1, TILE=3

    def do_bench(fn, return_mode):
        seen.append(return_mode)
        return next(times)
    rows = _rows()
    assert _passes(btt, do_bench, rows, 3) == 2
    assert rows[2]["median_us_passes"] == pytest.approx([10.0, 12.0, 22.0])
    assert rows[0]["median_us_passes"] == pytest.approx([10.0, 20.0, 14.0])
    assert rows[0]["median_us"] == pytest.approx(44.0 / 3) and "median_us_passes" not in rows[1]   # not ok: once
    assert seen == ["median"] * 4


def test_a_later_pass_that_raises_keeps_the_rows_timed_so_far(btt):
    calls = []

    def do_bench(fn, return_mode):
        calls.append(1)
        if len(calls) == 1:      # pass 2's first (TILE=3) fails, as a kernel that faults only sometimes would
            raise RuntimeError("out of memory")
        return 0.011
    rows = _rows()
    assert _passes(btt, do_bench, rows, 3) == 2
    assert "out of memory" in rows[2]["pass_error"] and "median_us_passes" not in rows[2]
    assert rows[2]["median_us"] == 10.0                            # its first pass kept
    assert rows[0]["median_us_passes"] == pytest.approx([10.0, 11.0, 11.0])


def test_a_broken_context_ends_the_passes_and_says_how_many_ran(btt):
    def do_bench(fn, return_mode):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
    rows = _rows()
    assert _passes(btt, do_bench, rows, 4) == 0
    assert "illegal memory access" in rows[2]["pass_error"] and rows[0].get("median_us_passes") is None


@pytest.mark.parametrize("bad", ["0", "-2", "two"])
def test_passes_below_one_is_refused_by_the_cli(btt, bad, capsys):
    with pytest.raises(SystemExit) as e:
        btt.main(["dobench", "--probe", "x.py", "--json", os.devnull, "--passes", bad])
    assert e.value.code == 2 and "is not a number of passes" in capsys.readouterr().err
