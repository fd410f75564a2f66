"""Warm re-tunes and the probe's loader, on any machine (no GPU): does a re-tune whose candidates are all stored
import the probe file again for their launch facts (grids and arguments)?

A cold tune, then ``--warm`` re-tunes of a small cuTile vec_add probe whose import sleeps ``--sleep`` seconds
(standing in for torch's and TileGym's 5–7 s import), each in this process through ``tileprobe.tune.tune`` with a
fake GPU worker (instant batches, planted in this file), the plan cache on in a folder of the run's own and a fresh
store. Prints per tune: its wall time, the seconds of each ``launch_facts`` call (the race waits for them) and how
many processes imported the probe file during it. docs/LOG.md (tune's pace on the CPU) has figures.

    python benchmarks/tune/bench_warm_facts.py [--sleep 2] [--warm 3] [--jobs 2]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import textwrap
import time

HERE = os.path.abspath(__file__)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(HERE))))

KERNEL = '''
import cuda.tile as ct


@ct.kernel
def vec_add(a, b, c, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    x = ct.load(a, index=(bid,), shape=(TILE,))
    y = ct.load(b, index=(bid,), shape=(TILE,))
    ct.store(c, index=(bid,), tile=x + y)
'''

PROBE = '''
import os, time
open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "imports.log"), "a").write(f"{{os.getpid()}}\\n")
time.sleep({sleep})
from tileprobe import Probe
N = 1 << 16
probe = Probe(
    kernel={kernel!r},
    args=lambda case, arrays: (arrays.randn((N,), "float32"), arrays.randn((N,), "float32"),
                               arrays.empty((N,), "float32"), case["TILE"]),
    cases={{"TILE": [256, 512, 1024, 2048]}},
    tunable=("TILE",),
    grid=lambda case, hints, num_sms: (N // case["TILE"],),
    name="vec_add_facts",
)
'''


def fake_init() -> dict:
    """The fake GPU worker's init (no CUDA)."""
    return {"name": "Fake GPU", "sm": "sm_90", "num_sms": 132, "driver": "0", "pid": os.getpid()}


def fake_time(record, cubin, probe_path, seed=0, mode="sustained", **kw) -> dict:
    """An instant batch: 10 samples of a time set by the tile size."""
    us = 100.0 - record["case"]["TILE"] / 100.0
    clocks = {"sm_mhz": 1980.0, "mem_mhz": 3201.0, "reasons": []}
    return {"status": "ok", "samples_us": [us + 0.01 * i for i in range(10)], "clocks_before": clocks,
            "clocks_after": clocks, "grid": [1, 1, 1], "n": 10, "mode": mode, "warmup_launches": 3}


def fake_check(record, cubin, probe_path, seed=0, default=None, default_cubin=None) -> dict:
    """Every output right."""
    return {"status": "ok", "against": "reference", "rel_err": 0.0, "tolerance": 1e-4}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sleep", type=float, default=2.0, help="seconds the probe's import sleeps")
    ap.add_argument("--warm", type=int, default=3, help="warm re-tunes after the cold one")
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args()
    folder = tempfile.mkdtemp(prefix="tileprobe-bench-facts-")
    os.environ["XDG_CACHE_HOME"] = os.path.join(folder, "cache")
    os.environ["TILEPROBE_PLAN_CACHE"] = "1"
    kernel = os.path.join(folder, "kernels.py")
    with open(kernel, "w") as f:
        f.write(textwrap.dedent(KERNEL))
    probe = os.path.join(folder, "probe_facts.py")
    with open(probe, "w") as f:
        f.write(PROBE.format(sleep=a.sleep, kernel=kernel + ":vec_add"))
    from tileprobe.run.watchdog import Watchdog
    from tileprobe.store import Store
    from tileprobe.tune import pipeline, tune
    calls: list[float] = []
    real = pipeline.launch_facts

    def timed(*args, **kw):
        t = time.perf_counter()
        try:
            return real(*args, **kw)
        finally:
            calls.append(time.perf_counter() - t)
    pipeline.launch_facts = timed
    log = os.path.join(folder, "imports.log")
    store = os.path.join(folder, "results.sqlite")
    for i in range(1 + a.warm):
        calls.clear()
        before = len(open(log).read().splitlines()) if os.path.exists(log) else 0
        t = time.perf_counter()
        with Watchdog(timeout_s=10.0, init=f"{HERE}:fake_init", grace_s=0.5) as wd, Store.open(store) as s:
            res = tune([probe], arch="sm_90", watchdog=wd, tasks=(f"{HERE}:fake_time", f"{HERE}:fake_check"),
                       store=s, timeout_s=10.0, jobs=a.jobs)
        wall = time.perf_counter() - t
        imports = len(open(log).read().splitlines()) - before
        pick = res.problems[0].pick.label if res.problems and res.problems[0].pick else None
        print(json.dumps({"tune": "cold" if i == 0 else f"warm {i}", "wall_s": round(wall, 2),
                          "launch_facts_s": [round(c, 2) for c in calls], "probe_imports": imports,
                          "compile_s": round(res.times.get("compile_s") or 0.0, 2), "pick": pick}), flush=True)


if __name__ == "__main__":
    main()
