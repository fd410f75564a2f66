"""Where the static stage's wall time goes (the compile half of `tileprobe audit` and `tileprobe tune`; printed,
no asserts).

For one probe and arch it prints, each in fresh processes on this machine:

* a bare Python start, and the import of ``cuda.tile._compile`` (which imports torch: cuTile's ``_ir.core_ops``),
  once and ``--jobs`` times at once (what a pool of spawned compile workers pays before its first compile);
* loading the probe file in its contained child, with and without the lookup of cuTile's default tileiras;
* the whole audit (``--no-store``) with SASS (nvdisasm per variant) and without, and per variant the compiler's own
  time (the records' ``compile_s``): the wall beyond the slowest variant's compile is the stage's overhead.

    python benchmarks/bench_compile_stage.py [--probe examples/rms_norm_large.py] [--arch sm_90] [--jobs N]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def _wall(argv: list[str], n: int = 1) -> float:
    """Seconds for ``n`` copies of ``argv`` started together to all finish."""
    t0 = time.perf_counter()
    with ThreadPoolExecutor(n) as ex:
        codes = list(ex.map(lambda _: subprocess.run(argv, capture_output=True).returncode, range(n)))
    if any(codes):
        raise SystemExit(f"{argv} failed: exit codes {codes}")
    return time.perf_counter() - t0


def _loader_s(probe: str, arch: str, find_compiler: bool) -> float:
    from tileprobe.audit.contained import load_probe_files
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        (rep,) = load_probe_files([probe], [arch], tmp_root=tmp, jobs=1, find_compiler=find_compiler)
        took = time.perf_counter() - t0
    if rep.errors:
        raise SystemExit(f"{probe}: {rep.errors}")
    return took


def _audit(probe: str, arch: str, jobs: int, sass: bool) -> tuple[float, list[float]]:
    """(wall s, each variant's compile_s) of ``tileprobe audit PROBE --no-store`` in a fresh process."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "a.json")
        argv = [sys.executable, "-m", "tileprobe", "audit", probe, "--arch", arch, "--no-store", "-j", str(jobs),
                "--format", "none", "--json", out] + ([] if sass else ["--no-sass"])
        wall = _wall(argv)
        with open(out) as f:
            return wall, [v["compile_s"] for v in json.load(f)["variants"]]


def main() -> None:
    from tileprobe.audit.compile import default_jobs
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--probe", default=os.path.join(ROOT, "examples", "rms_norm_large.py"))
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--jobs", type=int, default=default_jobs())
    a = ap.parse_args()
    py = sys.executable
    print(f"# static stage: {os.path.relpath(a.probe, ROOT)} on {a.arch}, {a.jobs} jobs, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    print(f"python start: {_wall([py, '-c', 'pass']):.2f} s")
    imp = [py, "-c", "import cuda.tile; from cuda.tile import _compile"]
    print(f"import cuda.tile._compile: {_wall(imp):.2f} s once, {_wall(imp, a.jobs):.2f} s for {a.jobs} at once")
    print(f"import torch: {_wall([py, '-c', 'import torch']):.2f} s")
    print(f"probe loader child: {_loader_s(a.probe, a.arch, False):.2f} s; with cuTile's tileiras lookup "
          f"{_loader_s(a.probe, a.arch, True):.2f} s")
    for sass in (True, False):
        wall, comp = _audit(a.probe, a.arch, a.jobs, sass)
        print(f"audit {'with' if sass else 'without'} SASS: {wall:.2f} s wall, {len(comp)} variants, compiler "
              f"{sum(comp):.2f} s in all, slowest {max(comp):.2f} s; wall beyond the slowest compile "
              f"{wall - max(comp):.2f} s")


if __name__ == "__main__":
    main()
