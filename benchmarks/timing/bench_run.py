"""Benchmark of ``tileprobe run`` on a GPU: what a variant costs beyond its kernel, whether our medians agree with
``triton.testing.do_bench``, and whether a variant timed twice gives the same number. Prints figures, with the GPU,
its clocks and the date; asserts nothing (the aim: medians within 3 % of do_bench on ≥ 5 kernels,
repeat agreement within 1 %, per-variant overhead measured).

    python benchmarks/timing/bench_run.py                      # the large RMSNorm and the sm_90 W4A16 GEMM
    python benchmarks/timing/bench_run.py --probes examples/rms_norm.py --reps 200 --compare 6

Three parts:

1. **Sweep** every variant through the worker and watchdog (what ``tileprobe run`` does) and split each variant's
   wall time (parent side: task sent → result back) into the kernel's own time (``reps × median``) and the rest:
   inputs and reference (``setup``), the checked launch and the check (``check``), the timing loop beyond the timed
   kernels (estimate, warm-up, L2 flushes, events: ``timing − reps × median``), and IPC/pickling.
2. **Repeat**: the compared variants are swept a second time (fresh worker inputs, new seed): median vs median.
3. **do_bench**: in this process, the same cubin launched the same way, timed by our
   :class:`~tileprobe.run.timing.TorchTimer` and by ``triton.testing.do_bench(fn, return_mode="median")``.
"""
from __future__ import annotations

import argparse
import copy
import datetime
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

DEFAULT_PROBES = [os.path.join(ROOT, "examples", "rms_norm_large.py"),
                  os.path.join(ROOT, "examples", "w4a16_gemm_sm90.py")]


def _label(r) -> str:
    return " ".join([r.kernel, *(f"{k}={v}" for k, v in [*r.case.items(), *r.hints.items()])])


def _pct(a, b) -> float:
    return 100.0 * (a - b) / b


def header(gpu: dict) -> None:
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"# tileprobe run benchmark — {now}")
    print(f"GPU: {gpu.get('name')} ({gpu.get('sm')}, {gpu.get('num_sms')} SMs, L2 {gpu.get('l2_bytes', 0) / 2**20:.0f} MiB), "
          f"driver {gpu.get('driver')} (CUDA {gpu.get('cuda_driver_api')}), torch {gpu.get('torch')}, "
          f"cuda-core {gpu.get('cuda_core')}")
    print(f"clocks: SM {gpu.get('clock_sm_mhz')} MHz (max {gpu.get('clock_max_sm_mhz')}, application "
          f"{gpu.get('clock_app_sm_mhz')}), memory {gpu.get('clock_mem_mhz')} MHz (max {gpu.get('clock_max_mem_mhz')}), "
          f"pstate {gpu.get('pstate')}, {gpu.get('temperature_c')} °C, {gpu.get('power_w')} W; "
          f"L2 flush buffer {gpu.get('l2_flush_bytes', 0) / 2**20:.0f} MiB")
    print()


def sweep_table(records) -> list[float]:
    """Print the per-variant time split; return the overheads (s)."""
    print("## 1. per-variant cost (s) beyond the kernel's own time")
    print(f"{'variant':58} {'status':6} {'median µs':>10} {'reps':>5} {'round trip':>10} {'kernel':>8} "
          f"{'setup':>7} {'check':>7} {'timing-kern':>11} {'ipc':>6} {'overhead':>9}")
    overheads = []
    for r in records:
        run = r.run
        if not run:
            continue
        med, reps = run.median_us, run.reps or 0
        kernel_s = (med or 0) * reps / 1e6
        rt = run.roundtrip_s or 0.0
        setup, check, tim, wall = (x or 0.0 for x in (run.setup_s, run.check_s, run.time_s, run.wall_s))
        over = rt - kernel_s
        overheads.append(over)
        print(f"{_label(r)[:58]:58} {run.status:6} {med if med is not None else float('nan'):10.2f} {reps:5d} "
              f"{rt:10.3f} {kernel_s:8.3f} {setup:7.3f} {check:7.3f} {tim - kernel_s:11.3f} {rt - wall:6.3f} "
              f"{over:9.3f}")
    if overheads:
        print(f"overhead per variant: median {statistics.median(overheads):.3f} s, max {max(overheads):.3f} s "
              f"over {len(overheads)} variants")
    print()
    return overheads


def pick(records, n: int) -> list:
    """Up to ``n`` ok variants spread over the kernels and their speeds (fastest, slowest, middle …)."""
    ok = [r for r in records if r.run and r.run.status == "ok" and r.run.median_us]
    by_kernel: dict = {}
    for r in sorted(ok, key=lambda r: r.run.median_us):
        by_kernel.setdefault(r.kernel, []).append(r)
    chosen, i = [], 0
    while len(chosen) < n and any(by_kernel.values()):
        for rows in by_kernel.values():
            if rows and len(chosen) < n:
                chosen.append(rows.pop(0 if i % 2 == 0 else -1))
        i += 1
    return chosen


def repeat_table(first, second) -> None:
    print("## 2. the same variant swept twice (worker, fresh inputs and seed)")
    diffs = []
    for a, b in zip(first, second):
        if a.run.median_us and b.run and b.run.median_us:
            d = _pct(b.run.median_us, a.run.median_us)
            diffs.append(abs(d))
            print(f"{_label(a)[:58]:58} {a.run.median_us:10.2f} {b.run.median_us:10.2f} µs  {d:+6.2f} %")
    if diffs:
        print(f"repeat agreement: max |Δ| {max(diffs):.2f} %, median {statistics.median(diffs):.2f} % "
              f"({len(diffs)} variants; goal < 1 %)")
    print()


def do_bench_table(records, cubins, reps: int) -> None:
    print("## 3. our timer vs triton.testing.do_bench (same process, same cubin, same launch)")
    try:
        import triton.testing
    except ImportError:
        print("triton is not installed here: skipped")
        return
    import torch
    from tileprobe.probe.define import load_probes
    from tileprobe.run import worker
    from tileprobe.run.arrays import TorchArrays
    from tileprobe.run.launch import LoadedKernel, check_packing, grid3, pack_arguments
    worker.init_cuda()
    state = worker._STATE
    diffs, reps_diffs = [], []
    print(f"{'variant':58} {'ours µs':>9} {'again µs':>9} {'do_bench':>9} {'Δ do_bench':>10} {'Δ again':>8}")
    for r in records:
        probe = next(p for p in load_probes(r.probe) if p.label == r.kernel)
        kernel = LoadedKernel(cubins[r.cubin_sha256], r.symbol)
        args = probe.launch_args(r.case, TorchArrays("cuda", seed=11))
        grid = grid3(probe.grid(r.case, worker.grid_hints(r.to_dict()), state.num_sms))
        packed = pack_arguments(r.signature, args, [p.size_bytes for p in kernel.params])
        check_packing(packed, kernel.params)

        def fn(kernel=kernel, grid=grid, packed=packed):
            kernel.launch(state.stream, grid, packed)
        ours, _ = state.timer.measure(fn, reps=reps)
        again, _ = state.timer.measure(fn, reps=reps)
        theirs_us = 1000.0 * triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")
        d, d2 = _pct(ours.median_us, theirs_us), _pct(again.median_us, ours.median_us)
        diffs.append(abs(d))
        reps_diffs.append(abs(d2))
        print(f"{_label(r)[:58]:58} {ours.median_us:9.2f} {again.median_us:9.2f} {theirs_us:9.2f} {d:+9.2f}% "
              f"{d2:+7.2f}%")
        del args, packed
        torch.cuda.empty_cache()
    if diffs:
        print(f"vs do_bench: max |Δ| {max(diffs):.2f} %, median {statistics.median(diffs):.2f} % over {len(diffs)} "
              f"kernels (goal: within 3 % on ≥ 5); in-process repeat: max |Δ| {max(reps_diffs):.2f} %")
    print()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--probes", nargs="+", default=DEFAULT_PROBES, help="probe files (default: %(default)s)")
    ap.add_argument("--reps", type=int, default=100, help="timed repetitions per variant")
    ap.add_argument("--timeout", type=float, default=300.0, help="per-variant timeout (s)")
    ap.add_argument("--compare", type=int, default=6, help="variants compared with do_bench and repeated (≥ 5)")
    args = ap.parse_args(argv)
    from tileprobe.audit.pipeline import audit
    from tileprobe.run.session import run_probes
    from tileprobe.run.watchdog import Watchdog
    with Watchdog(timeout_s=args.timeout) as wd:
        gpu = wd.start()
        header(gpu)
        res = audit(args.probes, [gpu["sm"]])
        for e in res.probe_errors:
            print("probe error:", e)
        print(f"audit: {len(res.records)} variants compiled for {gpu['sm']} in {res.wall_s:.1f} s")
        out = run_probes(res.records, res.cubins, watchdog=wd, timeout_s=args.timeout, reps=args.reps)
        print(f"sweep: {out.ran} variants in {out.wall_s:.1f} s, {out.restarts} worker restarts\n")
        sweep_table(res.records)
        chosen = pick(res.records, args.compare)
        second = [copy.deepcopy(r) for r in chosen]
        run_probes(second, res.cubins, watchdog=wd, timeout_s=args.timeout, reps=args.reps, seed=1000)
        repeat_table(chosen, second)
    do_bench_table(chosen, res.cubins, args.reps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
