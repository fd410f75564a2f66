"""Benchmark of ``tileprobe tune --budget`` on a large space ("a ≥ 400-configuration space
with --budget 30: pick within 1.02× of the full compile-and-race pick by do_bench").

On the GPU machine, each step in its own fresh process, cold (an empty store and cuTile cache each):

1. ``full``: ``tileprobe tune PROBE`` — every configuration compiled and raced;
2. ``budget``: ``tileprobe tune PROBE --budget S`` — the budgeted search (tileprobe/tune/search.py);
3. ``dobench``: ``triton.testing.do_bench`` of both picks and of the full tune's five fastest
   (benchmarks/tune/bench_tune_tools.py ``dobench --labels --passes 6``: a 500-ms heat-up, then six passes alternating
   their order; the median of the six medians). Two passes left do_bench's own spread near the 2 % being judged:
   two configurations with the same machine code read 206.4 and 214.2 µs (H200, 2026-12-03). When each configuration's
   first pass came right after its JIT, on an idled GPU, it read up to 10 % below its later passes (docs/LOG.md
   §37): the checks and JITs now come first;

then prints each step's wall time (measured around its process), how much of the space the budget compiled and
timed, both picks, their do_bench medians and the ratio (required ≤ 1.02). Files under ``--out``.

    python benchmarks/tune/bench_budget.py --out /tmp/bb                     # benchmarks/probes/tilegym_matmul_486.py, 30 s
    python benchmarks/tune/bench_budget.py --out /tmp/bb --budget 30 --probe P --steps budget,dobench
    python benchmarks/tune/bench_budget.py --out /tmp/bb --report            # report from the JSON files there
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HERE = os.path.dirname(os.path.abspath(__file__))
PROBE = os.path.join(ROOT, "benchmarks", "probes", "tilegym_matmul_486.py")
STEPS = ("full", "budget", "dobench")
STEP_TIMEOUT_S = 580.0
REQUIRED_RATIO = 1.02
sys.path.insert(0, HERE)
from bench_tune import _fresh  # noqa: E402 — the same empty-path helper as bench_tune's steps


def _run(name: str, cmd: list[str], out: str, env: dict) -> dict:
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=STEP_TIMEOUT_S, cwd=out)
        code, text = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as e:
        code, text = "timeout", f"{e.stdout or ''}{e.stderr or ''}\nstep timed out"
    wall = time.perf_counter() - t0
    with open(os.path.join(out, f"{name}.log"), "w", encoding="utf-8") as f:
        f.write(f"$ {' '.join(cmd)}\n{text}")
    meta = {"step": name, "command": cmd, "wall_s": wall, "exit": code}
    with open(os.path.join(out, f"{name}.meta.json"), "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=1)
    print(f"{name}: exit {code}, {wall:.1f} s", flush=True)
    return meta


def _env(out: str, name: str) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(x for x in (ROOT, os.environ.get("PYTHONPATH")) if x))
    env["CUDA_TILE_CACHE_DIR"] = _fresh(os.path.join(out, f"cutile-cache-{name}"))
    return env


def tune_step(name: str, probe: str, out: str, budget: float | None, seed: int = 0) -> dict:
    """``tileprobe tune`` cold, with or without ``--budget``."""
    cmd = [sys.executable, "-m", "tileprobe", "tune", probe, "--store", _fresh(os.path.join(out, f"{name}.sqlite")),
           "--json", os.path.join(out, f"{name}.json")]
    cmd += ["--budget", str(budget), "--seed", str(seed)] if budget is not None else []
    return _run(name, cmd, out, _env(out, name))


def _load(out: str, name: str) -> dict | None:
    try:
        with open(os.path.join(out, name), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _problem(d: dict | None) -> dict:
    return ((d or {}).get("problems") or [{}])[0]


def _pick(d: dict | None) -> str | None:
    return (_problem(d).get("pick") or {}).get("label")


#: do_bench passes over the labels (module doc, 3.).
DOBENCH_PASSES = 6


def dobench_step(probe: str, out: str, picks: list[str | None] | None = None) -> dict:
    """do_bench of the full tune's pick, of ``picks`` (default: the budgeted tune's, ``budget.json``) and of the
    full tune's five fastest, in one run (bench_budget_seeds.py passes every seed's pick)."""
    full = _load(out, "full.json")
    picks = [_pick(_load(out, "budget.json"))] if picks is None else picks
    rows = sorted((r for r in _problem(full).get("candidates") or [] if r.get("median_us") and r.get("config")),
                  key=lambda r: r["median_us"])
    labels = list(dict.fromkeys([x for x in (_pick(full), *picks) if x] + [r["label"] for r in rows[:5]]))
    path = os.path.join(out, "labels.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(labels, f)
    cmd = [sys.executable, os.path.join(HERE, "bench_tune_tools.py"), "dobench", "--probe", probe, "--json",
           os.path.join(out, "dobench.json"), "--labels", path, "--passes", str(DOBENCH_PASSES)]
    return _run("dobench", cmd, out, _env(out, "dobench"))


def _final_lines(final: dict | None) -> list[str]:
    """The budgeted tune's steady-state final: passes, whether the budget cut it, its time per batch and the
    seconds it was left (tileprobe/tune/race.py, RaceOutcome.final); none without a final."""
    if not final:
        return []
    n, wall = final.get("batches"), final.get("wall_s")
    per = f", {1000.0 * wall / n:,.0f} ms per batch" if n and wall is not None else ""
    left = final.get("budget_left_s")
    how = (", cut by the budget" if final.get("cut") else "") + (
        f", skipped: {final['skipped']}" if final.get("skipped") else "")
    return [f"  final: {len(final.get('contenders') or [])} contenders, {final.get('passes')} pass(es){how}; "
            f"{n} batches in {wall if wall is not None else '?'} s{per}"
            + (f"; {left:.2f} s of the budget left when it began" if left is not None else "")]


def report(out: str) -> str:
    """The figures of the steps found under ``out``."""
    full, budget, db = _load(out, "full.json"), _load(out, "budget.json"), _load(out, "dobench.json") or {}
    walls = {s: (_load(out, f"{s}.meta.json") or {}).get("wall_s") for s in STEPS}
    us = {r["label"]: r["median_us"] for r in db.get("rows") or []
          if r.get("status") == "ok" and isinstance(r.get("median_us"), (int, float))}
    lines = [f"# bench_budget: {os.path.basename(PROBE)}"]
    for name, d in (("full", full), ("budget", budget)):
        p, t = _problem(d), (d or {}).get("times") or {}
        cov = p.get("coverage") or {}
        lines.append(f"{name}: wall {walls.get(name) or 0:.1f} s (tune total {t.get('total_s') or 0:.1f} s: compile "
                     f"{t.get('compile_s') or 0:.1f} s, race {t.get('race_s') or 0:.1f} s); compiled "
                     f"{cov.get('compiled')} of {cov.get('configurations')}, timed {cov.get('timed')}; pick "
                     f"{_pick(d)}: tune {(p.get('pick') or {}).get('median_us')} µs, do_bench {us.get(_pick(d))} µs")
    passes = {r["label"]: r.get("median_us_passes") or [] for r in db.get("rows") or [] if r.get("status") == "ok"}
    for name, d in (("full", full), ("budget", budget)):
        got = passes.get(_pick(d)) or []
        if got:
            lines.append(f"  {name} pick's do_bench passes: {', '.join(f'{x:,.1f}' for x in got)} µs")
    a, b = us.get(_pick(full)), us.get(_pick(budget))
    if a and b:
        ratio = b / a
        lines.append(f"budget pick / full pick by do_bench: {ratio:.3f}× — required ≤ {REQUIRED_RATIO}: "
                     f"{'PASS' if ratio <= REQUIRED_RATIO else 'FAIL'}")
    if us:
        best = min(us, key=us.get)
        lines.append(f"fastest by do_bench among those timed: {best} {us[best]:,.1f} µs")
    for n in _problem(budget).get("notes") or []:
        if n.startswith("budgeted search"):
            lines.append(f"  {n}")
    lines += _final_lines(_problem(budget).get("final"))
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "bench_budget.txt"), "w", encoding="utf-8") as f:
        f.write(text)
    return text


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--probe", default=PROBE)
    ap.add_argument("--budget", type=float, default=30.0)
    ap.add_argument("--seed", type=int, default=0, help="the budgeted tune's --seed (its sample's tie-breaks)")
    ap.add_argument("--steps", default=",".join(STEPS))
    ap.add_argument("--report", action="store_true", help="only the report from the files under --out")
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    if not a.report:
        steps = [s.strip() for s in a.steps.split(",") if s.strip()]
        for s in steps:
            if s not in STEPS:
                ap.error(f"unknown step {s!r}: use {', '.join(STEPS)}")
            if s == "full":
                tune_step("full", a.probe, a.out, None)
            elif s == "budget":
                tune_step("budget", a.probe, a.out, a.budget, a.seed)
            else:
                dobench_step(a.probe, a.out)
    print(report(a.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
