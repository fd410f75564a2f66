"""The reduce benchmark's comparison with a generic reducer: its cap and its line (lower bounds when cut off)."""
import importlib.util
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def bench():
    spec = importlib.util.spec_from_file_location("bench_reduce", f"{ROOT}/benchmarks/reduce/bench_reduce.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_reduce", mod)      # its dataclass looks its module up there
    spec.loader.exec_module(mod)
    return mod


def test_the_generic_reducer_is_capped_at_four_times_ours_plus_a_minute():
    assert bench().generic_cap_s(600.0) == 2460.0
    assert bench().generic_cap_s(0.0) == 60.0


def test_a_generic_run_cut_off_is_reported_as_lower_bounds():
    b = bench()
    ours = {"wall_s": 600.0, "candidates": 95}
    cut = b.generic_line({"wall_s": 2461.0, "checks": 400, "compiled": 380, "final": "x", "cut_off": True}, ours,
                         2460.0)
    assert "≥ 2461 s wall, ≥ 400 checks" in cut and "≤ 0.24 of its wall, ≤ 0.24 of its checks" in cut
    assert "lower bounds" in cut
    done = b.generic_line({"wall_s": 2000.0, "checks": 1575, "compiled": 900, "final": "x", "cut_off": False},
                          ours, 2460.0)
    assert "≥" not in done and "2000 s wall, 1575 checks" in done and "0.30 of its wall, 0.06 of its checks" in done
