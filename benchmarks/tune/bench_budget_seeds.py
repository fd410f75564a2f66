"""``tileprobe tune --budget`` over many seeds against one full tune, judged by one do_bench run.

For the Done-when line "`--budget 30` on a space of ≥ 600 configurations: pick ≤ 1.02× on at least 9 of 10 seeds"
(default probe: ``benchmarks/probes/tilegym_matmul_648.py``). On the GPU machine, each tune a fresh process, cold
(an empty store and cuTile cache each; bench_budget.py's helpers):

1. ``full``: the full compile-and-race tune, once;
2. ``budget-S`` for each seed S: ``tileprobe tune PROBE --budget B --seed S``;
3. one ``do_bench`` run (bench_tune_tools.py ``dobench``, six passes alternating their order) over the full tune's
   pick, its five fastest, and every seed's pick, so that all picks are judged in the same passes;

then prints, per seed, its wall time, how much it compiled and timed, its pick and the pick's do_bench median over
the best median among all judged configurations (the oracle here: the full tune timed every configuration, and the
judge re-times its five fastest and every pick).

    python benchmarks/tune/bench_budget_seeds.py --out /tmp/bbs --seeds 0-9
    python benchmarks/tune/bench_budget_seeds.py --out /tmp/bbs --report
"""
from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import bench_budget as bb  # noqa: E402 — the same steps, one seed at a time

PROBE = os.path.join(ROOT, "benchmarks", "probes", "tilegym_matmul_648.py")
REQUIRED_RATIO = 1.02


def _seeds(text: str) -> list[int]:
    """``0-9`` or ``0,3,5``: the seeds, in order."""
    if "-" in text:
        lo, hi = text.split("-", 1)
        return list(range(int(lo), int(hi) + 1))
    return [int(x) for x in text.split(",") if x.strip()]


def report(out: str, seeds: list[int]) -> str:
    """Each seed's line and the count within REQUIRED_RATIO of the best judged configuration."""
    db = bb._load(out, "dobench.json") or {}
    us = {r["label"]: r["median_us"] for r in db.get("rows") or []
          if r.get("status") == "ok" and isinstance(r.get("median_us"), (int, float))}
    best = min(us.values()) if us else None
    full = bb._load(out, "full.json")
    fw = (bb._load(out, "full.meta.json") or {}).get("wall_s")
    lines = [f"# bench_budget_seeds: {len(seeds)} seeds; full tune wall {fw or 0:.1f} s, pick {bb._pick(full)} "
             f"do_bench {us.get(bb._pick(full))} µs; best judged {best} µs"]
    ok = 0
    for s in seeds:
        d = bb._load(out, f"budget-{s}.json")
        wall = (bb._load(out, f"budget-{s}.meta.json") or {}).get("wall_s")
        cov = bb._problem(d).get("coverage") or {}
        p = bb._pick(d)
        r = (us[p] / best) if (p in us and best) else None
        ok += bool(r is not None and r <= REQUIRED_RATIO)
        lines.append(f"seed {s}: wall {wall or 0:.1f} s; compiled {cov.get('compiled')} of {cov.get('configurations')}, "
                     f"timed {cov.get('timed')}; pick {p}: do_bench {us.get(p)} µs = "
                     f"{'%.3f' % r if r is not None else '?'}× the best")
    lines.append(f"within {REQUIRED_RATIO}× of the best: {ok} of {len(seeds)} seeds (required: 9 of 10)")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "bench_budget_seeds.txt"), "w", encoding="utf-8") as f:
        f.write(text)
    return text


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--probe", default=PROBE)
    ap.add_argument("--budget", type=float, default=30.0)
    ap.add_argument("--seeds", default="0-9", help="0-9 or 0,3,5")
    ap.add_argument("--steps", default="full,budget,dobench")
    ap.add_argument("--report", action="store_true")
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    seeds = _seeds(a.seeds)
    steps = [] if a.report else [s.strip() for s in a.steps.split(",") if s.strip()]
    if "full" in steps:
        bb.tune_step("full", a.probe, a.out, None)
    if "budget" in steps:
        for s in seeds:
            bb.tune_step(f"budget-{s}", a.probe, a.out, a.budget, s)
    if "dobench" in steps:
        bb.dobench_step(a.probe, a.out, [bb._pick(bb._load(a.out, f"budget-{s}.json")) for s in seeds])
    print(report(a.out, seeds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
