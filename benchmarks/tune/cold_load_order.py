"""The cold tune's path before the first compile, on any machine (no GPU): when the plan ends, when the audit's
load of the probe file starts (beside the plan, or after it), and when the compiles start.

Cold tunes of a small cuTile vec_add probe that imports torch (cuTile's compile side imports it too), alternating
``TILEPROBE_LOAD_AHEAD=0`` and ``1``, each in a fresh process with a fresh store and plan cache, a fake GPU worker
(bench_warm_facts.py's). Prints per tune, in seconds since the process started: each loader job (new or kept child,
``plan`` / ``load`` / ``facts``), the plan's end, the compiles' start (the audit's ``total``), and the time split.

    python benchmarks/tune/cold_load_order.py [--repeats 2]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time

HERE = os.path.abspath(__file__)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))


def one(folder: str) -> None:
    """One cold tune in this process (the child's side), its timeline on stdout."""
    t0 = time.perf_counter()
    sys.path.insert(0, ROOT)
    sys.path.insert(0, os.path.dirname(HERE))
    import bench_warm_facts as b

    from tileprobe.probe import loader
    from tileprobe.run.watchdog import Watchdog
    from tileprobe.store import Store
    from tileprobe.tune import pipeline, tune

    def log(*a) -> None:
        print(f"  {time.perf_counter() - t0:6.2f}", *a, flush=True)
    kernel = os.path.join(folder, "kernels.py")
    with open(kernel, "w") as f:
        f.write(textwrap.dedent(b.KERNEL))
    probe = os.path.join(folder, "probe_torch.py")
    with open(probe, "w") as f:
        f.write("import torch\n" + b.PROBE.format(sleep=0, kernel=kernel + ":vec_add"))
    names = {"space_task": "plan", "launch_task": "facts"}

    def kind(task) -> str:
        if not task:
            return "load"
        name = str(task if isinstance(task, str) else task[0])
        return names.get(name.rsplit(":", 1)[-1], name)
    real_init, real_again = loader._Loader.__init__, loader._Loader.again

    def init(self, path, targets, max_variants, timeout_s, tmp_root, overrides=(None, None), task=None, *a, **k):
        log("new child:", kind(task))
        real_init(self, path, targets, max_variants, timeout_s, tmp_root, overrides, task, *a, **k)

    def again(self, job, *a, **k):
        log("kept child:", kind(job.task))
        return real_again(self, job, *a, **k)
    loader._Loader.__init__, loader._Loader.again = init, again
    real_load = pipeline.load_space

    def load_space(*a, **k):
        out = real_load(*a, **k)
        log("plan done")
        return out
    pipeline.load_space = load_space

    def progress(what, data) -> None:
        if what == "compile" and data[0] == "total":
            log("compiles start")
    with Watchdog(timeout_s=10.0, init=f"{b.HERE}:fake_init", grace_s=0.5) as wd, \
            Store.open(os.path.join(folder, "results.sqlite")) as s:
        res = tune([probe], arch="sm_90", watchdog=wd, tasks=(f"{b.HERE}:fake_time", f"{b.HERE}:fake_check"),
                   store=s, timeout_s=10.0, jobs=2, progress=progress)
    print("  times", json.dumps({k: round(v, 2) for k, v in res.times.items() if v}), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--one", help=argparse.SUPPRESS)      # the child's folder
    a = ap.parse_args()
    if a.one:
        one(a.one)
        return
    for _ in range(a.repeats):
        for ahead in ("0", "1"):
            folder = tempfile.mkdtemp(prefix="tileprobe-bench-cold-")
            env = {**os.environ, "TILEPROBE_LOAD_AHEAD": ahead, "TILEPROBE_PLAN_CACHE": "1",
                   "XDG_CACHE_HOME": os.path.join(folder, "cache")}
            print(f"TILEPROBE_LOAD_AHEAD={ahead}", flush=True)
            subprocess.run([sys.executable, HERE, "--one", folder], env=env, check=False)


if __name__ == "__main__":
    main()
