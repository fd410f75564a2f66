"""Audit cost: tileiras runs per variant, audit overhead, and the parallel speed-up (printed, no asserts).

The audit runs with a counting tileiras: a wrapper script that logs every invocation, then runs the real compiler.
It prints, for ``--jobs 1`` and ``--jobs N`` (default: all CPUs this process may use):

* the wall time, the compiler's own time (the records' ``compile_s`` summed) and the wall time beyond it;
* tileiras runs: one compile per variant, plus the version probes (``--version`` and cuTile's bytecode-version
  probe), wanted once per toolchain and worker, not per variant (88 extra runs for 88 variants before);
* the speed-up of N workers over one, next to the machine's load average (other work on the machine takes CPUs).

    python benchmarks/audit/bench_audit.py [--probes examples/rms_norm.py examples/w4a16_gemm.py] [--arch sm_90,sm_120]
"""
import argparse
import datetime
import os
import platform
import stat
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from tileprobe._cutile import which_tool  # noqa: E402
from tileprobe.procs import default_jobs  # noqa: E402
from tileprobe.audit.pipeline import audit  # noqa: E402


def counting_tileiras(folder: str) -> tuple[str, str]:
    """A tileiras that appends ``compile`` or ``probe`` (version and bytecode-version probes) to a log, then runs
    the real one. Returns (its path, the log's path)."""
    log = os.path.join(folder, "runs.log")
    path = os.path.join(folder, "tileiras")
    with open(path, "w") as f:
        f.write(f"""#!/bin/bash
case "$*" in
  *--version*|*/probe1[0-9]*) echo probe >> {log};;
  *) echo compile >> {log};;
esac
exec {which_tool('tileiras')} "$@"
""")
    os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)
    return path, log


def run(probes, archs, jobs, tileiras, log):
    open(log, "w").close()
    t0 = time.perf_counter()
    result = audit(probes, archs, toolchains=[{"tileiras": tileiras}], jobs=jobs, with_sass=False)
    wall = time.perf_counter() - t0
    with open(log) as f:
        runs = f.read().split()
    compile_s = sum(r.compile_s for r in result.records)
    return wall, compile_s, runs.count("compile"), runs.count("probe"), result


def main():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap = argparse.ArgumentParser()
    ap.add_argument("--probes", nargs="+", default=[os.path.join(root, "examples", "rms_norm.py"),
                                                    os.path.join(root, "examples", "w4a16_gemm.py")])
    ap.add_argument("--arch", default="sm_90,sm_120")
    ap.add_argument("--jobs", type=int, default=default_jobs())
    a = ap.parse_args()
    print(f"tileprobe audit benchmark — {platform.node()}, {os.cpu_count()} CPUs ({default_jobs()} usable), "
          f"{datetime.datetime.now():%Y-%m-%d %H:%M}, load average {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as tmp:
        tileiras, log = counting_tileiras(tmp)
        walls = {}
        for jobs in dict.fromkeys([1, a.jobs]):
            wall, compile_s, compiles, probes, result = run(a.probes, a.arch.split(","), jobs, tileiras, log)
            n = len(result.records)
            walls[jobs] = wall
            print(f"jobs={jobs}: {n} variants in {wall:.1f} s (load average {os.getloadavg()[0]:.1f}); tileiras "
                  f"{compile_s:.1f} s in all; wall time beyond tileiras / jobs: {wall - compile_s / jobs:+.1f} s "
                  "(worker start, probe loading, cuTile's front end, cubin reading, verdicts)")
            print(f"  tileiras runs: {compiles} compiles for {n} variants, {probes} version probes "
                  f"({probes / jobs:.1f} per worker; {max(0, compiles - n) + probes / max(n, 1):.2f} extra runs per "
                  "variant)")
        if a.jobs > 1:
            print(f"speed-up of {a.jobs} workers over 1: {walls[1] / walls[a.jobs]:.2f}x")


if __name__ == "__main__":
    main()
