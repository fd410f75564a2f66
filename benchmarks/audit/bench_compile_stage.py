"""Where the static stage's wall time goes (the compile half of `tileprobe audit` and `tileprobe tune`; printed,
no asserts).

For one probe and arch it prints, each in fresh processes on this machine:

* a bare Python start, and the import of ``cuda.tile._compile`` (which imports torch: cuTile's ``_ir.core_ops``),
  once and ``--jobs`` times at once (what a pool of spawned compile workers pays before its first compile);
* loading the probe file in its contained child, with and without the lookup of cuTile's default tileiras;
* the whole audit (``--no-store``) with SASS (nvdisasm per variant) and without, and per variant the compiler's own
  time (the records' ``compile_s``): the wall beyond the slowest variant's compile is the stage's overhead.

    python benchmarks/audit/bench_compile_stage.py [--probe examples/rms_norm_large.py] [--arch sm_90] [--jobs N]

``--warm TREE,TREE… --probes 'examples/*.py' --archs sm_90,sm_120 [--repeat 3]`` instead times a *warm* re-audit
(every variant already in one store, filled first) with each source tree's tileprobe (PYTHONPATH=TREE), the trees
alternated in each repeat so that a loaded machine weighs on them alike: wall s, CPU s of the process tree, and
per 100 variants beyond a bare Python start (aim: < 1 s).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
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
    from tileprobe.probe.contained import load_probe_files
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


def _timed(argv: list[str], env: dict, cwd: str) -> tuple[float, float]:
    """(wall s, CPU s of the children reaped meanwhile) of one run of ``argv`` in ``cwd`` (not a source tree: with
    ``-m``, the cwd comes first on sys.path and its ``tileprobe`` would win over PYTHONPATH's)."""
    import resource
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    code = subprocess.run(argv, env=env, capture_output=True, cwd=cwd).returncode
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if code:
        raise SystemExit(f"{argv} failed: exit code {code}")
    return wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def warm(trees: list[str], probes: list[str], archs: str, repeat: int, store: str | None = None) -> None:
    """Warm re-audits with each tree's tileprobe, alternated (module doc); ``store``: an existing store to use
    (default: a new one, filled first)."""
    import statistics
    with tempfile.TemporaryDirectory() as tmp:
        store, out = store or os.path.join(tmp, "store.sqlite"), os.path.join(tmp, "a.json")
        probes = [os.path.abspath(p) for p in probes]
        argv = [sys.executable, "-m", "tileprobe", "audit", *probes, "--arch", archs, "--store", store,
                "--format", "none", "--json", out]
        envs = {t: dict(os.environ, PYTHONPATH=os.path.abspath(t)) for t in trees}
        t0 = time.perf_counter()
        subprocess.run(argv, env=envs[trees[0]], capture_output=True, check=True, cwd=tmp)
        with open(out) as f:
            n = len(json.load(f)["variants"])
        for t in trees:      # each tree's own caches warm too (its compiler facts)
            subprocess.run(argv, env=envs[t], capture_output=True, check=True, cwd=tmp)
        print(f"# warm re-audit: {' '.join(probes)} --arch {archs}: {n} variants; store filled in "
              f"{time.perf_counter() - t0:.1f} s; {os.cpu_count()} CPUs; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
        py = [_timed([sys.executable, "-c", "pass"], os.environ, tmp)[0] for _ in range(3)]
        runs: dict[str, list] = {t: [] for t in trees}
        for i in range(repeat):
            for t in trees:
                load = os.getloadavg()[0]
                wall, cpu = _timed(argv, envs[t], tmp)
                runs[t].append((wall, cpu, load))
                print(f"  {t} run {i + 1}: {wall:.2f} s wall, {cpu:.2f} s CPU, load average {load:.2f}", flush=True)
        start = statistics.median(py)
        for t, rs in runs.items():
            wall = statistics.median(r[0] for r in rs)
            print(f"{t}: median {wall:.2f} s wall, {statistics.median(r[1] for r in rs):.2f} s CPU; beyond a Python "
                  f"start ({start:.2f} s): {(wall - start) / n * 100:.2f} s per 100 variants")


def main() -> None:
    from tileprobe.procs import default_jobs
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--probe", default=os.path.join(ROOT, "examples", "rms_norm_large.py"))
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--jobs", type=int, default=default_jobs())
    ap.add_argument("--warm", help="comma-separated source trees: time warm re-audits with each (module doc)")
    ap.add_argument("--probes", default="examples/*.py", help="with --warm: probe files (a glob)")
    ap.add_argument("--archs", default="sm_90,sm_120", help="with --warm: targets")
    ap.add_argument("--repeat", type=int, default=3, help="with --warm: runs per tree")
    ap.add_argument("--store", help="with --warm: use this store (already filled) instead of a new one")
    a = ap.parse_args()
    if a.warm:
        import glob
        warm([t for t in a.warm.split(",") if t], sorted(glob.glob(a.probes)) or [a.probes], a.archs, a.repeat, a.store)
        return
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
