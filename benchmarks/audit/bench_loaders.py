"""Loader children kept for a tune ("the static stage near its floor"): the phases of a dry-run tune with
one loader child per job (``TILEPROBE_KEEP_LOADERS=0``, as before) and with the children kept for the command
(:func:`tileprobe.probe.contained.loader_sessions`, the default). Printed, no asserts.

Each run is a fresh ``tileprobe tune PROBE --dry-run --arch sm_90 --num-sms 132 --no-store -j 2 --json …`` with
``TILEPROBE_PLAN_CACHE=0`` (every loader imports the probe for real); the two modes alternate in each repeat so
that a loaded machine weighs on them alike. Per mode it prints the JSON's ``times`` (``plan_s``: the plan, the
first import of the probe; ``compile_s``: the audit's load and the compiles; ``facts_s``, the rest of ``total_s``
after the start-up: the dedupe and its launch facts), their medians, and checks that both modes gave the same
candidates (config, status, grid, group, resources).

    python benchmarks/audit/bench_loaders.py [--probe examples/tilegym_matmul_tune.py] [--repeat 3]
        [--shrink TILE_M=128] [--hint occupancy=1]

``--shrink`` is passed as ``--where`` and ``--hint`` as ``--hint``: a full compile of the 48 matmul configurations
on 2 cores takes minutes, and the loaders' share does not depend on how many configurations compile.

Then, per mode in a fresh process with a warm zygote, the seconds of each load a tune makes, one after the other:
``load_space`` (the plan), :func:`~tileprobe.probe.contained.load_probe_files` (the audit's load) twice, and
``load_space`` again (standing for a batch of launch facts, a task on the same file).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODES = {"one child per job": "0", "kept children": "1"}
VOLATILE = ("compile_s", "created", "times", "environment")


def _tune(probe: str, keep: str, where: list[str], hints: list[str]) -> tuple[dict, dict]:
    """(times, the JSON less its volatile fields) of one dry-run tune in a fresh process."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "t.json")
        argv = [sys.executable, "-m", "tileprobe", "tune", probe, "--dry-run", "--arch", "sm_90", "--num-sms", "132",
                "--no-store", "-j", "2", "--format", "none", "--json", out]
        argv += [a for w in where for a in ("--where", w)] + [a for h in hints for a in ("--hint", h)]
        env = dict(os.environ, TILEPROBE_PLAN_CACHE="0", TILEPROBE_KEEP_LOADERS=keep,
                   PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}")
        with open(out) as f:
            doc = json.load(f)
    return doc["times"], _stable(doc)


def _stable(value):
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


_PHASES = r"""
import contextlib, sys, time
from tileprobe.probe.contained import load_probe_files, loader_sessions
from tileprobe.probe.zygote import warm_starts
from tileprobe.procs import owned_tempdir
from tileprobe.tune.static import load_space
probe, keep, where = sys.argv[1], sys.argv[2] == "1", dict(w.split("=", 1) for w in sys.argv[3:])
where = {k: int(v) if v.isdigit() else v for k, v in where.items()}
with warm_starts(), loader_sessions() if keep else contextlib.nullcontext():
    for what in ("load_space", "load_probe_files", "load_probe_files", "load_space"):
        t0 = time.perf_counter()
        if what == "load_space":
            errors = load_space([probe], where=where or None)[1]
        else:
            with owned_tempdir("load") as tmp:
                errors = load_probe_files([probe], ["sm_90"], tmp_root=tmp, num_sms=132)[0].errors
        assert not errors, errors
        print(f"{what} {time.perf_counter() - t0:.2f}", flush=True)
"""


def _phases(probe: str, keep: str, where: list[str]) -> list[tuple[str, float]]:
    """(load, seconds) of each load of :data:`_PHASES` in a fresh process."""
    env = dict(os.environ, TILEPROBE_PLAN_CACHE="0", TILEPROBE_KEEP_LOADERS=keep,
               PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-c", _PHASES, probe, keep, *where], capture_output=True, text=True,
                          env=env, cwd=ROOT)
    if proc.returncode != 0:
        raise SystemExit(f"the loads failed:\n{proc.stdout}{proc.stderr}")
    return [(w, float(s)) for w, s in (ln.split() for ln in proc.stdout.splitlines())]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--probe", default=os.path.join(ROOT, "examples", "tilegym_matmul_tune.py"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--shrink", action="append", default=[], help="a --where NAME=VALUE (repeatable)")
    ap.add_argument("--hint", action="append", default=[], help="a --hint NAME=VALUES (repeatable)")
    args = ap.parse_args()
    got: dict[str, list[dict]] = {m: [] for m in MODES}
    docs: dict[str, dict] = {}
    for r in range(args.repeat):
        for mode, keep in (MODES.items() if r % 2 == 0 else reversed(MODES.items())):
            times, docs[mode] = _tune(args.probe, keep, args.shrink, args.hint)
            times["facts_s"] = times["total_s"] - sum(times.get(k) or 0.0 for k in ("startup_s", "plan_s", "compile_s",
                                                                                   "store_s"))
            got[mode].append(times)
            print(f"  {mode:18} run {r + 1}: " + "  ".join(f"{k} {times[k]:6.2f}" for k in
                                                           ("plan_s", "compile_s", "facts_s", "total_s")), flush=True)
    print(f"\n{os.path.relpath(args.probe, ROOT)} --dry-run --arch sm_90 --num-sms 132 --no-store -j 2 "
          + " ".join([f"--where {w}" for w in args.shrink] + [f"--hint {h}" for h in args.hint])
          + f"  (TILEPROBE_PLAN_CACHE=0, median of {args.repeat})")
    for mode, runs in got.items():
        med = {k: statistics.median(t[k] for t in runs) for k in ("plan_s", "compile_s", "facts_s", "total_s")}
        print(f"  {mode:18} " + "  ".join(f"{k} {v:6.2f}" for k, v in med.items()))
    print("same candidates in both modes:", docs["one child per job"] == docs["kept children"])
    print("\neach load in turn, s (a warm zygote, TILEPROBE_PLAN_CACHE=0):")
    for mode, keep in MODES.items():
        print(f"  {mode:18} " + "  ".join(f"{w} {t:.2f}" for w, t in _phases(args.probe, keep, args.shrink)))


if __name__ == "__main__":
    main()
