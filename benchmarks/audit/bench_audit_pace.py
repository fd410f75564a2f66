"""Audit at the compiler's pace: the wall time of ``tileprobe audit PROBES --arch ARCH`` on an empty store beside
its floor, Σ ``compile_s`` (tileiras' own time, from the records) ÷ cores, and their ratio. The SASS facts are read
(the default) unless ``--no-sass``; ``--tree DIR`` runs another checkout's tileprobe (a ``git archive`` of an older
commit) for a before/after on one machine. Each run is a child process with its own empty store and temp folder.

    python benchmarks/audit/bench_audit_pace.py [--arch sm_120] [--no-sass] [--tree DIR] [--jobs N] [PROBE ...]

Prints one line per run: wall s, Σ compile_s, cores, floor s, ratio, the CPU time of the audit and every process
it started (on a machine loaded by others the CPU time says more than the wall time), variants, the SASS facts read (records with
traits), and the machine's load average at the start and the end (the ratio holds only on an idle machine).
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _children_cpu() -> float:
    """CPU seconds (user + system) of the finished child processes and their reaped descendants."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _pythonpath(tree: str) -> str:
    """``tree`` first, then this process's ``PYTHONPATH`` less any tileprobe checkout (a folder holding
    ``tileprobe/__init__.py``): the probes' own packages (``tilegym`` installed with ``pip --target``) stay
    importable, and only ``tree``'s tileprobe runs."""
    rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
            if p and not os.path.exists(os.path.join(p, "tileprobe", "__init__.py"))]
    return os.pathsep.join([tree, *rest])


def run_audit(probes: list[str], arch: str, jobs: int, sass: bool, tree: str) -> dict:
    """One audit in a child process on an empty store: its wall time and its records' figures."""
    with tempfile.TemporaryDirectory(prefix="bench-audit-pace-") as tmp:
        out = os.path.join(tmp, "audit.json")
        cmd = [sys.executable, "-m", "tileprobe", "audit", *probes, "--arch", arch, "--jobs", str(jobs),
               "--store", os.path.join(tmp, "store.sqlite"), "--json", out, "--format", "none"]
        if not sass:
            cmd.append("--no-sass")
        env = {**os.environ, "PYTHONPATH": _pythonpath(tree), "TMPDIR": tmp}
        load0 = os.getloadavg()[0]
        t0, cpu0 = time.perf_counter(), _children_cpu()
        proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
        wall, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
        if not os.path.exists(out):
            raise SystemExit(f"the audit wrote no {out} (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
        with open(out) as f:
            records = json.load(f)["variants"]
    compile_s = sum(r.get("compile_s") or 0.0 for r in records)
    return {"wall_s": wall, "cpu_s": cpu, "compile_s": compile_s, "jobs": jobs, "floor_s": compile_s / jobs,
            "ratio": wall / (compile_s / jobs) if compile_s else float("nan"), "variants": len(records),
            "with_traits": sum(1 for r in records if (r.get("sass") or {}).get("instructions") is not None),
            "load": (load0, os.getloadavg()[0]), "exit": proc.returncode}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("probes", nargs="*", help="probe files (default: examples/*.py of --tree)")
    ap.add_argument("--arch", default="sm_120")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="compile workers = cores (default: all)")
    ap.add_argument("--no-sass", action="store_true", help="audit without the SASS facts (the floor's floor)")
    ap.add_argument("--tree", default=ROOT, help="the checkout whose tileprobe runs (default: this one)")
    a = ap.parse_args(argv)
    tree = os.path.abspath(a.tree)
    probes = a.probes or sorted(glob.glob(os.path.join(tree, "examples", "*.py")))
    r = run_audit(probes, a.arch, a.jobs, not a.no_sass, tree)
    print(f"audit {len(probes)} probe file(s) --arch {a.arch} --jobs {a.jobs}{' --no-sass' if a.no_sass else ''} "
          f"({tree}): wall {r['wall_s']:.1f} s; Σ compile_s {r['compile_s']:.1f} s ÷ {r['jobs']} cores = "
          f"{r['floor_s']:.1f} s; ratio {r['ratio']:.2f}×; CPU of all its processes {r['cpu_s']:.1f} s; {r['variants']} variants, {r['with_traits']} with SASS "
          f"traits; load average {r['load'][0]:.1f} → {r['load'][1]:.1f}; exit {r['exit']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
