"""What ``tileprobe use --coverage`` costs per ``ct.launch``: the launch counter's time per call, in ns.

No GPU needed: the launch being wrapped is a Python function that returns at once, so the figure is the counter's
own cost (``tileprobe/record/usehook.py``: the kernel's ``_pyfunc``, one dict read for how its configuration was
chosen, one dict update). Cases: one kernel launched again and again; 50 kernels in turn. Each case is timed
``--repeats`` times (the median of the per-call differences, wrapped minus bare, is printed with the spread).
The first line names the machine (host, CPU model and count, load average, Python) and the date.

    python benchmarks/programs/bench_coverage.py [--calls 200000] [--repeats 7]
"""
from __future__ import annotations

import argparse
import datetime
import importlib.util
import os
import platform
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _usehook():
    spec = importlib.util.spec_from_file_location("_bench_use_hook", os.path.join(ROOT, "tileprobe", "record",
                                                                                   "usehook.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class _Kernel:
    def __init__(self, fn):
        self._pyfunc = fn


def _bare(stream, grid, kernel, args):
    return None


def _per_call_ns(launch, kernels, calls: int) -> float:
    n = len(kernels)
    t0 = time.perf_counter_ns()
    for i in range(calls):
        launch(None, (1, 1, 1), kernels[i % n], ())
    return (time.perf_counter_ns() - t0) / calls


def _machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (f"{platform.node()}: {cpu} × {os.cpu_count()}, load {load}; Python {sys.version.split()[0]}; "
            f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=200_000)
    p.add_argument("--repeats", type=int, default=7)
    args = p.parse_args(argv)
    print(_machine())
    mod = _usehook()
    with tempfile.TemporaryDirectory() as tmp:
        hook = mod.UseHook({mod.ENV_COVERAGE: tmp})
        wrapped = mod.wrap_launch(_bare, hook)
        for label, n in (("one kernel", 1), ("50 kernels in turn", 50)):
            kernels = [_Kernel(lambda: None) for _ in range(n)]
            for k in kernels[::2]:
                hook.state[k._pyfunc] = mod.TABLE
            diffs, bare = [], []
            for _ in range(args.repeats):
                b = _per_call_ns(_bare, kernels, args.calls)
                w = _per_call_ns(wrapped, kernels, args.calls)
                bare.append(b)
                diffs.append(w - b)
            print(f"{label}: bare call {statistics.median(bare):.0f} ns; the counter adds "
                  f"{statistics.median(diffs):.0f} ns per launch (min {min(diffs):.0f}, max {max(diffs):.0f}; "
                  f"{args.repeats} × {args.calls:,} calls)")
        hook.flush()
        print(f"counts written: {sum(hook.counts.values()):,} launches in {len(os.listdir(tmp))} file(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
