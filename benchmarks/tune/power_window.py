"""How a kernel's sustained time depends on how long it has run (the GPU's power cap), on the GPU host.

For the configurations named (labels as ``tileprobe tune`` prints them) of a one-problem probe, JIT through
``ct.launch`` as ``bench_tune_tools.py dobench`` does, it takes, in ``--passes`` passes of alternating order:

- ``race``: one sustained batch as the race takes it (:func:`tileprobe.run.timing.sustained_batch`: 25 ms warm-up,
  about 25 ms of samples, at most 100);
- ``long``: then 25 ms warm-up and ``--long-ms`` of samples back to back (each after the 256-MB L2 flush), whose
  medians per window of GPU time since the warm-up's end show how the figure moves as the power cap bites;
- ``do_bench``: ``triton.testing.do_bench`` (25 ms warm-up, 100 ms of samples, median);

with the SM clock (NVML) before and after each. It prints one line per configuration and pass and writes the
JSON to ``--json``.

    python benchmarks/tune/power_window.py --probe examples/tilegym_matmul_tune.py --json /tmp/pw.json \
        --labels "TILE_M=128 TILE_N=128 TILE_K=64 occupancy=2 num_ctas=1" "TILE_M=256 …"
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks", "tune"))

#: Ends of the windows (ms of GPU time after the warm-up) the long run's medians are taken over.
WINDOWS_MS = (25, 50, 100, 200, 400, 800)


def windows(times_us: list[float], ends_ms=WINDOWS_MS) -> dict:
    """Median (µs) of the samples in each window of cumulated kernel time: ``{"0-25": m, "25-50": m, …}``."""
    out, start, elapsed, cur = {}, 0, 0.0, []
    bounds = list(ends_ms)
    for t in times_us:
        elapsed += t / 1000.0
        cur.append(t)
        if bounds and elapsed >= bounds[0]:
            out[f"{start}-{bounds[0]}"] = statistics.median(cur)
            start, cur = bounds.pop(0), []
    if cur:
        out[f"{start}-"] = statistics.median(cur)
    return out


def long_run(launch, timer, long_ms: float) -> list[float]:
    """25 ms warm-up (after an estimate), then samples back to back until ``long_ms`` of kernel time."""
    from tileprobe.run.timing import _estimate_and_warm, _timed
    est_us, _ = _estimate_and_warm(launch, timer.flush, timer.event, timer.synchronize, 1, 25.0, 100000, None)
    n = max(10, int(long_ms * 1000.0 / max(est_us, 1e-3)))
    return _timed(launch, timer.flush, timer.event, timer.synchronize, n)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--probe", required=True)
    ap.add_argument("--labels", nargs="+", required=True)
    ap.add_argument("--json", required=True)
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--long-ms", type=float, default=800.0)
    a = ap.parse_args(argv)
    import cuda.tile as ct
    import torch
    from triton.testing import do_bench
    from bench_tune_tools import Inputs, launcher, space
    from tileprobe.run.clocks import ClockReader
    from tileprobe.run.timing import TorchTimer, sustained_batch
    probe, prob, configs = space(a.probe)
    by_label = {c.label: c for c in configs}
    missing = [lb for lb in a.labels if lb not in by_label]
    if missing:
        raise SystemExit(f"not in the space: {missing}")
    kernel, num_sms = probe.resolve_kernel(), torch.cuda.get_device_properties(0).multi_processor_count
    inputs, stream, reader = Inputs(probe, prob), torch.cuda.current_stream(), ClockReader()
    timer = TorchTimer(torch.cuda.get_device_properties(0).L2_cache_size)
    launch_of = launcher(ct, kernel, probe, prob, inputs, stream, num_sms)
    launches = {}
    for lb in a.labels:
        launches[lb] = launch_of(by_label[lb])
        launches[lb]()
    torch.cuda.synchronize()
    rows = []
    for p in range(a.passes):
        for lb in (a.labels if p % 2 == 0 else list(reversed(a.labels))):
            launch, row = launches[lb], {"label": lb, "pass": p}
            row["clock0"] = reader.read()
            times, _ = sustained_batch(launch, event_factory=timer.event, synchronize=timer.synchronize,
                                       flush=timer.flush)
            row["race_us"], row["clock1"] = statistics.median(times), reader.read()
            lt = long_run(launch, timer, a.long_ms)
            row["long_us"], row["long_windows"], row["clock2"] = statistics.median(lt), windows(lt), reader.read()
            row["do_bench_us"] = 1000.0 * do_bench(launch, return_mode="median")
            row["clock3"] = reader.read()
            rows.append(row)
            mhz = "/".join(f"{(row[c] or {}).get('sm_mhz', 0):.0f}" for c in ("clock0", "clock1", "clock2", "clock3"))
            win = " ".join(f"{k}:{v:.1f}" for k, v in row["long_windows"].items())
            print(f"p{p} {lb}: race {row['race_us']:.1f} · long {row['long_us']:.1f} [{win}] · "
                  f"do_bench {row['do_bench_us']:.1f} µs · SM MHz {mhz}", flush=True)
    with open(a.json, "w", encoding="utf-8") as f:
        json.dump({"probe": a.probe, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
