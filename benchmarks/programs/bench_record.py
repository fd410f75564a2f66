"""What recording costs per ``ct.launch``: the wrapper's time per call, in µs.

No GPU needed: the launch being wrapped is a Python function that returns at once, so the figures are the
recorder's own cost (argument description, call-site walk, counting, the occasional count flush). Cases:

* steady: the same launch again and again (the common case: a training or inference loop);
* first sight: a new launch every call (a line written per call: the worst case, bounded per kernel by
  TILEPROBE_RECORD_MAX_DISTINCT);
* torch / ArraySpec: arguments as torch tensors (CPU, and CUDA tensors when a GPU is there: the recorder reads the
  same attributes, ``data_ptr()`` of a CUDA tensor included) or DLPack objects;
* real ``ct.launch`` (only with a GPU and tileiras on PATH, or ``--no-real``): a 4096-element vadd launched with and
  without the wrapper, the figure a program sees (cuTile's argument packing and the driver launch included).

Needs cuda-tile and tileprobe importable (torch optional); no tileiras unless the real-launch case runs. The first
line names the machine (host, CPU model and count, load average, GPU and driver when ``nvidia-smi`` answers,
Python, torch, cuda-tile) and the date.

    python benchmarks/programs/bench_record.py [--calls 20000] [--no-real]
"""
from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
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


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(pkg: str) -> str:
    try:
        return importlib.metadata.version(pkg)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def machine() -> str:
    """One line naming this machine: host, CPU model and logical CPUs, load average, GPU and driver, software."""
    gpu = "no GPU"
    if shutil.which("nvidia-smi"):
        q = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                           capture_output=True, text=True)
        gpu = q.stdout.strip().splitlines()[0] if q.returncode == 0 and q.stdout.strip() else "nvidia-smi failed"
    load = "/".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    return (f"host {platform.node()}: {_cpu_model()} x {os.cpu_count()} logical CPUs, load {load}; GPU {gpu}; "
            f"Python {platform.python_version()}, torch {_version('torch')}, cuda-tile {_version('cuda-tile')}")


def _real_launch_case(capture, k, calls: int):
    """(unwrapped, wrapped) µs per real ``ct.launch`` of vadd on 4096 float32 CUDA tensors, or None when this
    machine cannot launch (no GPU, no tileiras for the one JIT compile)."""
    try:
        import torch
        if not torch.cuda.is_available() or not shutil.which("tileiras"):
            return None
    except ImportError:
        return None
    import cuda.tile._cext as cext
    x, y, z = (torch.randn(4096, device="cuda") for _ in range(3))
    stream = torch.cuda.current_stream()
    launch = cext.launch
    launch(stream, (16,), k.vadd, (x, y, z, 256))        # JIT compile once
    torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        wrapped = capture.wrap(launch, capture.Recorder(tmp))
        out = []
        for fn in (launch, wrapped):
            per = []
            for _ in range(5):
                t0 = time.perf_counter()
                for _ in range(calls):
                    _deep(fn, 8, stream, (16,), k.vadd, (x, y, z, 256))
                torch.cuda.synchronize()
                per.append((time.perf_counter() - t0) / calls * 1e6)
            out.append(statistics.median(per))
    return tuple(out)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=20000)
    p.add_argument("--no-real", action="store_true", help="skip the real ct.launch case even on a GPU")
    opts = p.parse_args()
    from tileprobe.record.hook import load_capture
    import kernels as k
    capture = load_capture()
    try:
        import torch
        tensors = [torch.empty((4096, 512), dtype=torch.bfloat16) for _ in range(3)]
        gpu_tensors = ([torch.empty((4096, 512), dtype=torch.bfloat16, device="cuda") for _ in range(3)]
                       if torch.cuda.is_available() else None)
    except ImportError:
        torch = tensors = gpu_tensors = None
    specs = k.vadd_args(4096)

    cases = {}
    with tempfile.TemporaryDirectory() as tmp:
        rec = capture.Recorder(tmp)
        wrapped = capture.wrap(_fake_launch, rec)
        if tensors is not None:
            cases["torch CPU, steady (same launch)"] = lambda i: (None, (132,), k.vadd, (*tensors, 256))
            cases["torch CPU, first sight (new grid each call)"] = lambda i: (None, (i + 1,), k.vadd, (*tensors, 256))
        if gpu_tensors is not None:
            cases["torch CUDA, steady (same launch)"] = lambda i: (None, (132,), k.vadd, (*gpu_tensors, 256))
        cases["ArraySpec/DLPack, steady"] = lambda i: (None, (132,), k.vadd, specs)
        cases["scalars only, steady"] = lambda i: (None, (132,), k.vadd, (1, 2.0, True, 256))
        base = _time_per_call(_fake_launch, opts.calls, cases["scalars only, steady"])
        rows = []
        for name, make in cases.items():
            t = _time_per_call(wrapped, opts.calls, make)
            rows.append((name, t, t - base))
        lines = os.path.getsize(rec.path) if rec.path else 0
    real = None if opts.no_real else _real_launch_case(capture, k, max(opts.calls // 4, 1000))
    print(f"bench_record: {datetime.date.today()}, {machine()}")
    print(f"command: python {' '.join(sys.argv)}; {opts.calls} calls x 5 repeats, call made 8 frames deep")
    print(f"unwrapped fake launch: {base:.2f} µs per call")
    print(f"{'case':45s} {'µs/call':>9s} {'overhead µs':>12s}")
    for name, t, over in rows:
        print(f"{name:45s} {t:9.2f} {over:12.2f}")
    if real is not None:
        print(f"{'real ct.launch, vadd 4096 fp32 CUDA, unwrapped':45s} {real[0]:9.2f} {'':>12s}")
        print(f"{'real ct.launch, vadd 4096 fp32 CUDA, recorded':45s} {real[1]:9.2f} {real[1] - real[0]:12.2f}")
    else:
        print("real ct.launch: not measured (needs a GPU and tileiras on PATH; --no-real skips it)")
    print(f"log written: {lines:,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
