"""Audit overhead and parallel speed-up, printed (no asserts).

For the bundled probes, compares the audit's wall time with the compiler's own time for the same variants:
``export_kernel`` per variant (cuTile's front end + tileiras, what compiling by hand costs) and tileiras alone.
Then the same audit with all CPUs, for the speed-up from parallel compiles.

    python benchmarks/bench_audit.py [--probes examples/rms_norm.py examples/w4a16_gemm.py] [--arch sm_90,sm_120]
"""
import argparse
import datetime
import os
import platform
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tileprobe.audit.pipeline import plan_variants, record_from  # noqa: E402
from tileprobe.audit.compile import default_jobs  # noqa: E402
from tileprobe.audit.pool import compile_variants  # noqa: E402
from tileprobe.audit.probe import load_probes  # noqa: E402
from tileprobe.audit.verdict import assign_verdicts  # noqa: E402


def run(variants, jobs):
    t0 = time.perf_counter()
    results = list(compile_variants(variants, jobs=jobs))
    records = [record_from(r) for r in results]
    assign_verdicts(records, ["occupancy"])
    wall = time.perf_counter() - t0
    return wall, results


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser()
    ap.add_argument("--probes", nargs="+", default=[os.path.join(root, "examples", "rms_norm.py"),
                                                    os.path.join(root, "examples", "w4a16_gemm.py")])
    ap.add_argument("--arch", default="sm_90,sm_120")
    a = ap.parse_args()
    probes = [p for path in a.probes for p in load_probes(path)]
    variants = plan_variants(probes, a.arch.split(","))
    print(f"tileprobe audit benchmark — {platform.node()}, {os.cpu_count()} CPUs, "
          f"{datetime.datetime.now():%Y-%m-%d %H:%M}, {len(variants)} variants")
    wall1, res1 = run(variants, 1)
    export = sum(r.export_s for r in res1)
    tileiras = sum(r.compile_s for r in res1)
    print(f"jobs=1: audit wall {wall1:.1f} s; export_kernel total {export:.1f} s; tileiras alone {tileiras:.1f} s")
    print(f"  audit overhead over export_kernel: {100 * (wall1 / export - 1):+.1f}% "
          f"({wall1 - export:.1f} s: worker start, signature inference, cubin reading, occupancy, verdicts)")
    jobs = default_jobs()
    if jobs > 1:
        walln, _ = run(variants, jobs)
        print(f"jobs={jobs}: audit wall {walln:.1f} s; speed-up {wall1 / walln:.2f}x over jobs=1")


if __name__ == "__main__":
    main()
