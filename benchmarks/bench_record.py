"""What recording costs per ``ct.launch``: the wrapper's time per call, in µs (issue 12).

No GPU needed: the launch being wrapped is a Python function that returns at once, so the figures are the
recorder's own cost (argument description, call-site walk, counting, the occasional count flush). Cases:

* steady: the same launch again and again (the common case: a training or inference loop);
* first sight: a new launch every call (a line written per call: the worst case, bounded per kernel by
  TILEPROBE_RECORD_MAX_DISTINCT);
* torch / ArraySpec: arguments as torch tensors (CPU; the CUDA path reads the same attributes) or DLPack objects.

    python benchmarks/bench_record.py [--calls 20000]
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests", "data", "record"))


def _fake_launch(stream, grid, kernel, args):
    return None


def _deep(fn, depth, *a):
    """Call ``fn`` from ``depth`` nested frames (the call-site walk climbs them)."""
    if depth == 0:
        return fn(*a)
    return _deep(fn, depth - 1, *a)


def _time_per_call(fn, calls: int, make_args, repeats: int = 5) -> float:
    """Median over ``repeats`` of the mean time per call (µs)."""
    per = []
    for _ in range(repeats):
        argsets = [make_args(i) for i in range(calls)]
        t0 = time.perf_counter()
        for a in argsets:
            _deep(fn, 8, *a)
        per.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(per)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=20000)
    opts = p.parse_args()
    from tileprobe.record.hook import load_capture
    import kernels as k
    capture = load_capture()
    try:
        import torch
        tensors = [torch.empty((4096, 512), dtype=torch.bfloat16) for _ in range(3)]
    except ImportError:
        torch = tensors = None
    specs = k.vadd_args(4096)

    cases = {}
    with tempfile.TemporaryDirectory() as tmp:
        rec = capture.Recorder(tmp)
        wrapped = capture.wrap(_fake_launch, rec)
        if tensors is not None:
            steady_torch = lambda i: (None, (132,), k.vadd, (*tensors, 256))
            cases["torch, steady (same launch)"] = steady_torch
            cases["torch, first sight (new grid each call)"] = lambda i: (None, (i + 1,), k.vadd, (*tensors, 256))
        cases["ArraySpec/DLPack, steady"] = lambda i: (None, (132,), k.vadd, specs)
        cases["scalars only, steady"] = lambda i: (None, (132,), k.vadd, (1, 2.0, True, 256))
        base = _time_per_call(_fake_launch, opts.calls, cases["scalars only, steady"])
        rows = []
        for name, make in cases.items():
            t = _time_per_call(wrapped, opts.calls, make)
            rows.append((name, t, t - base))
        lines = os.path.getsize(rec.path) if rec.path else 0
    print(f"bench_record: {platform.node()} ({platform.processor() or platform.machine()}, Python "
          f"{platform.python_version()}), {datetime.date.today()}, {opts.calls} calls x 5 repeats, "
          f"call made 8 frames deep")
    print(f"unwrapped fake launch: {base:.2f} µs per call")
    print(f"{'case':45s} {'µs/call':>9s} {'overhead µs':>12s}")
    for name, t, over in rows:
        print(f"{name:45s} {t:9.2f} {over:12.2f}")
    print(f"log written: {lines:,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
