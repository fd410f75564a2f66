"""Cold vs warm audits through the results store (a warm re-audit compiles nothing, < 1 s per 100 variants).

    python benchmarks/store/bench_store.py                      # bundled probes, sm_90 and sm_120, a fresh temp store
    python benchmarks/store/bench_store.py --arch sm_90 --jobs 2 --store /tmp/bench.sqlite

Prints, for the same command line (``tileprobe audit PROBES --arch ARCHS --store S``):

* cold: a fresh process and an empty store (every variant compiled);
* warm: a fresh process again, store filled (the process start, imports and ``tileiras --version`` included);
* warm in-process: ``audit()`` repeated in one process after a first warm call (imports done), the median of
  ``--repeat`` runs, and that time per 100 variants — the marginal cost the issue's target is about;
* how many variants the warm runs handed to the compiler (must be 0);
* the fixed cost of a fresh process (Python start, importing tileprobe and cuTile's compiler module), which a warm
  CLI audit pays once whatever the number of variants.
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
PROBES = ["examples/rms_norm.py", "examples/w4a16_gemm.py"]


def compile_rows(path: str) -> dict[str, str]:
    with sqlite3.connect(path) as c:
        return dict(c.execute("SELECT key, created FROM compiles"))


def timed_cli(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-3000:]}")
    return wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--probes", nargs="+", default=PROBES)
    ap.add_argument("--arch", default="sm_90,sm_120")
    ap.add_argument("--store", help="store to use (default: a new temp file; an existing store makes 'cold' warm)")
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=5, help="in-process warm repetitions (median reported)")
    args = ap.parse_args()
    store = args.store or os.path.join(tempfile.mkdtemp(prefix="bench-store-"), "results.sqlite")
    cmd = [sys.executable, "-m", "tileprobe", "audit", *args.probes, "--arch", args.arch, "--store", store,
           "--format", "none"] + (["--jobs", str(args.jobs)] if args.jobs else [])

    fixed_s = min(timed_cli([sys.executable, "-c", "import tileprobe.cli, tileprobe.audit, cuda.tile._compile"])
                  for _ in range(3))
    cold_s = timed_cli(cmd)
    rows = compile_rows(store)
    warm_s = timed_cli(cmd)
    recompiled_cli = sum(1 for k, created in compile_rows(store).items() if rows.get(k) != created)

    import tileprobe.audit.pipeline as audit_mod
    import tileprobe.compile.pool as compile_mod
    from tileprobe.store import Store
    handed = []
    real = compile_mod.compile_variants

    def counting(variants, **kw):   # the pipeline streams variants: keep them, then hand the same ones on
        variants = list(variants)
        handed.extend(variants)
        return real(variants, **kw)
    audit_mod.compile_variants = counting
    archs = args.arch.split(",")
    with Store.open(store) as s:
        first = audit_mod.audit(args.probes, archs, store=s)   # imports cuTile, warms caches
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            audit_mod.audit(args.probes, archs, store=s)
            times.append(time.perf_counter() - t0)
    n = len(first.records)
    warm_in = statistics.median(times)
    print(f"store benchmark, {datetime.date.today()}, {platform.node()} ({os.cpu_count()} CPUs), "
          f"python {platform.python_version()}")
    print(f"probes: {' '.join(args.probes)}; arch: {args.arch}; variants: {n} "
          f"({sum(not r.ok for r in first.records)} failed to compile, stored as results)")
    print(f"cold audit (fresh process, empty store):  {cold_s:8.2f} s")
    print(f"warm audit (fresh process, full store):   {warm_s:8.2f} s   recompiled: {recompiled_cli}")
    print(f"warm audit in-process (median of {args.repeat}):  {warm_in:8.3f} s   "
          f"= {warm_in / n * 100:.3f} s per 100 variants (target < 1 s)   handed to the compiler: {len(handed)}")
    print(f"  of which process start + imports alone: {fixed_s:8.2f} s (python -c 'import tileprobe.audit, "
          "cuda.tile._compile': fixed, not per variant)")
    print(f"warm fresh process, per 100 variants after that fixed cost: {(warm_s - fixed_s) / n * 100:.2f} s")


if __name__ == "__main__":
    main()
