"""The Ray executor's per-task overhead against the local pool, for 100 compiles (printed, no asserts).

100 variants of a vector-add probe (2 tiles × 50 array sizes) are compiled with a tileiras that fails at once
(``exit 1``: a ``compile_error`` in milliseconds), so what is timed is everything around the compiler: probe code
and cuTile's front end in the worker, dispatch, result transfer and record building. Runs, with the same width:

* the local pool (``--jobs N``; its workers start in each call),
* Ray, first sweep (its worker processes start and import cuTile) and later sweeps (warm workers).

Each executor runs 100 and then 200 compiles; the marginal cost of a task, (t200 − t100) / 100, leaves out what a
sweep pays once (worker start-up, the first import of cuTile). Ray's own start-up (``ray.init``) is printed apart.
The per-task difference is Ray's marginal cost minus the local pool's.

    python benchmarks/audit/bench_executor.py [--jobs 2] [--n-sizes 50]
"""
import argparse
import datetime
import os
import platform
import stat
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from tileprobe._cutile import which_tool  # noqa: E402
from tileprobe.audit.pipeline import audit  # noqa: E402

PROBE = """import os
from tileprobe import Probe
probe = Probe(kernel={kernel!r}, name="vadd",
              args=lambda case, arrays: (arrays.randn((case["N"],), "float32"), arrays.randn((case["N"],), "float32"),
                                         arrays.empty((case["N"],), "float32"), case["TILE"]),
              cases={{"TILE": [256, 1024], "N": {sizes!r}}}, hints={{"occupancy": [1]}},
              grid=lambda case, hints, num_sms: (case["N"] // case["TILE"],))
"""


def failing_tileiras(folder: str) -> str:
    """The real tileiras for version probes; ``exit 1`` for a kernel compile."""
    path = os.path.join(folder, "tileiras")
    with open(path, "w") as f:
        f.write(f"""#!/bin/bash
case "$*" in
  *--version*|*--help*|*/probe1[0-9]*) exec {which_tool('tileiras')} "$@";;
esac
echo "bench: no compile" >&2; exit 1
""")
    os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)
    return path


def timed(label: str, n: int, **kw) -> float:
    t = time.perf_counter()
    res = audit(**kw)
    wall = time.perf_counter() - t
    statuses = sorted({r.status for r in res.records})
    print(f"{label:<28} {wall:7.2f} s  {1000 * wall / n:7.1f} ms/task  ({len(res.records)} records: {statuses})")
    return wall


def probe_file(tmp: str, n_sizes: int) -> str:
    path = os.path.join(tmp, f"bench_probe_{n_sizes}.py")
    with open(path, "w") as f:
        f.write(PROBE.format(kernel=os.path.join(ROOT, "tests", "data", "simple_kernels.py") + ":vadd",
                             sizes=[4096 * (i + 1) for i in range(n_sizes)]))
    return path


def marginal(label: str, n: int, **kw) -> float:
    """Seconds per task beyond a sweep's fixed costs: (t(2n) − t(n)) / n."""
    p_n, p_2n = kw.pop("probe_n"), kw.pop("probe_2n")
    one = timed(f"{label}, {n}", n, probe_paths=[p_n], **kw)
    two = timed(f"{label}, {2 * n}", 2 * n, probe_paths=[p_2n], **kw)
    per = (two - one) / n
    print(f"{label:<28} marginal {1000 * per:7.1f} ms/task")
    return per


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--n-sizes", type=int, default=50, help="array sizes per tile: 2 × this many compiles")
    a = ap.parse_args()
    import ray
    from tileprobe.exec.ray_exec import RayExecutor
    n = 2 * a.n_sizes
    with tempfile.TemporaryDirectory() as tmp:
        common = dict(archs=["sm_90"], toolchains=[{"tileiras": failing_tileiras(tmp)}])
        probes = dict(probe_n=probe_file(tmp, a.n_sizes), probe_2n=probe_file(tmp, 2 * a.n_sizes))
        print(f"machine: {platform.node()} ({os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}), "
              f"{datetime.date.today()}, ray {ray.__version__}, width {a.jobs}")
        local = marginal("local pool", n, jobs=a.jobs, **probes, **common)
        t = time.perf_counter()
        ray.init(num_cpus=a.jobs, include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": {"PYTHONPATH": ROOT}})
        print(f"{'ray.init':<28} {time.perf_counter() - t:7.2f} s  (apart)")
        ex = RayExecutor(jobs=a.jobs)
        timed("ray, cold workers, 100", n, executor=ex, probe_paths=[probes["probe_n"]], **common)
        ray_per = marginal("ray, warm workers", n, executor=ex, **probes, **common)
        ray.shutdown()
    print(f"per-task difference (ray - local pool, marginal): {1000 * (ray_per - local):+.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
