"""On a GPU: a new shape tuned from a warm start (the table's nearest row's pick raced first) against a cold start.

The program is benchmarks/programs/warm_start_program.py (a cuTile matmul that searches 81 configurations with
``cuda.tile.tune.exhaustive_search`` at the shape it is given). Steps, each a fresh process:

  base  ``tileprobe tune --export base.json -- python PROGRAM KNOWN``: the table holds the known shape's row
  miss  ``tileprobe use base.json -- python PROGRAM NEW``: the new shape is a miss, noted in base.json.misses.jsonl
  then, ``--repeats`` times, in alternating order (cold first, then warm first):
  cold  ``tileprobe tune --refresh cold.json --budget B``: cold.json is base.json without the kernel's rows (no
        neighbour: a cold start), with the noted miss and the recording copied; a fresh results store
  warm  ``tileprobe tune --refresh warm.json --budget B``: warm.json is base.json as it is (the known shape's row is
        the new shape's nearest: its pick is raced first); a fresh results store

Per arm: the command's wall time, the pick of the new shape and its median (µs), and for the warm arm the "warm
start:" line. The summary gives warm/cold wall time and the warm pick's median over the cold pick's (goal ≤ 1.02).

    python benchmarks/programs/bench_warm_start.py --out DIR [--known 4096] [--new 3072] [--budget 20] [--repeats 2]
    python benchmarks/programs/bench_warm_start.py --out DIR --dry-run      # any CPU: the commands, no GPU

``--dry-run`` prints the steps' commands, lists the program's space and shows which configuration a warm start
would race first from a made-up known row (the ordering code that runs on the GPU host), and summarises an earlier
run's ``DIR/results.json`` when there is one.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PROGRAM = os.path.join(HERE, "warm_start_program.py")
KERNEL = "matmul"


def tp(*args: str) -> list[str]:
    return [sys.executable, "-m", "tileprobe.cli", *args]


def base_steps(out: str, known: int, new: int) -> list[tuple[str, list[str]]]:
    base = os.path.join(out, "base.json")
    return [("base", tp("tune", "--export", base, "--", sys.executable, PROGRAM, str(known))),
            ("miss", tp("use", base, "--", sys.executable, PROGRAM, str(new)))]


def arm_step(out: str, arm: str, r: int, budget: float) -> tuple[str, list[str]]:
    return f"{arm}{r}", tp("tune", "--refresh", os.path.join(out, f"{arm}{r}.json"), "--budget", f"{budget:g}")


def prepare(out: str, arm: str, r: int) -> str:
    """The arm's table: base.json (warm) or base.json without the kernel's rows (cold), with the noted misses and
    the recording copied beside it."""
    base = os.path.join(out, "base.json")
    table = os.path.join(out, f"{arm}{r}.json")
    doc = json.load(open(base))
    if arm == "cold":
        doc["kernels"].pop(KERNEL, None)
    with open(table, "w") as f:
        json.dump(doc, f, indent=1)
    shutil.copy(base + ".misses.jsonl", table + ".misses.jsonl")
    shutil.rmtree(table + ".record", ignore_errors=True)
    shutil.copytree(base + ".record", table + ".record")
    return table


def run(name: str, argv: list[str], out: str, env: dict) -> dict:
    t0 = time.perf_counter()
    p = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT)
    wall = time.perf_counter() - t0
    with open(os.path.join(out, f"{name}.log"), "w") as f:
        f.write(f"$ {' '.join(argv)}\nexit {p.returncode}, {wall:.1f} s\n--- stdout\n{p.stdout}--- stderr\n{p.stderr}")
    warm = [ln for ln in p.stderr.splitlines() if ln.startswith("warm start:")]
    return {"step": name, "exit": p.returncode, "wall_s": wall, "warm_line": warm[0] if warm else None}


def new_row(table: str, known: int) -> dict | None:
    """The kernel's row of the new shape (not the known one) in ``table``: pick and median."""
    rows = json.load(open(table))["kernels"].get(KERNEL) or []
    for row in rows:
        if (row.get("search") or {}).get("dims", [known])[0] != known:
            return {"pick": row["search"].get("config"), "median_us": row.get("median_us"),
                    "final_us": row.get("final_us"), "dims": row["search"].get("dims")}
    return None


def summarize(results: dict) -> str:
    lines = [f"warm start, new shape {results['new']} from known {results['known']}, --budget {results['budget']:g}"
             f" ({results.get('machine', '?')}, {results.get('date', '?')})"]
    for s in results["steps"]:
        row = s.get("row") or {}
        lines.append(f"  {s['step']:>6}: exit {s['exit']}, {s['wall_s']:.1f} s, pick {row.get('pick')} "
                     f"{row.get('median_us') or float('nan'):.1f} µs" + (f"  [{s['warm_line']}]" if s.get("warm_line")
                                                                         else ""))
    pairs = [(c, w) for c in results["steps"] for w in results["steps"]
             if c["step"].startswith("cold") and w["step"] == "warm" + c["step"][4:]]
    for c, w in pairs:
        cu, wu = (c.get("row") or {}).get("median_us"), (w.get("row") or {}).get("median_us")
        ratio = f"{wu / cu:.3f}" if cu and wu else "n/a"
        lines.append(f"  repeat {c['step'][4:]}: warm/cold wall {w['wall_s'] / c['wall_s']:.2f}× "
                     f"({w['wall_s']:.1f} / {c['wall_s']:.1f} s); warm pick / cold pick median {ratio} (goal ≤ 1.02)")
    return "\n".join(lines)


def dry_run(args) -> int:
    for name, argv in base_steps(args.out, args.known, args.new):
        print(f"{name}: {' '.join(argv)}")
    for r in range(args.repeats):
        for arm in (("cold", "warm") if r % 2 == 0 else ("warm", "cold")):
            print(f"{arm}{r}: {' '.join(arm_step(args.out, arm, r, args.budget)[1])}  (table prepared from base.json)")
    subprocess.run([sys.executable, PROGRAM, "--list"], check=True)
    sys.path.insert(0, ROOT)
    from tileprobe.tune.warm import KnownPick, config_text, warm_labels
    from warm_start_program import SPACE
    labels = {config_text(vars(c), {"occupancy": c.occupancy}): f"C{i}" for i, c in enumerate(SPACE)}
    made_up = KnownPick((args.known,) * 3, config_text(vars(SPACE[40]), {"occupancy": SPACE[40].occupancy}),
                        f"a made-up row of {args.known}³")
    print(f"a warm start of {args.new}³ from {made_up.where} (pick C40 = {vars(SPACE[40])}) races first: "
          f"{warm_labels([made_up], (args.new,) * 3, labels)}")
    found = os.path.join(args.out, "results.json")
    if os.path.exists(found):
        print(summarize(json.load(open(found))))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--known", type=int, default=4096)
    ap.add_argument("--new", type=int, default=3072)
    ap.add_argument("--budget", type=float, default=20.0)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.dry_run:
        return dry_run(args)
    sys.path.insert(0, HERE)
    env = dict(os.environ, TILEPROBE_STORE=os.path.join(args.out, "store-base.sqlite"))
    results = {"known": args.known, "new": args.new, "budget": args.budget, "steps": [],
               "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
               "machine": subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                                         capture_output=True, text=True).stdout.strip() or "no GPU answered"}
    for name, argv in base_steps(args.out, args.known, args.new):
        results["steps"].append(run(name, argv, args.out, env))
    for r in range(args.repeats):
        for arm in (("cold", "warm") if r % 2 == 0 else ("warm", "cold")):
            table = prepare(args.out, arm, r)
            name, argv = arm_step(args.out, arm, r, args.budget)
            env_arm = dict(env, TILEPROBE_STORE=os.path.join(args.out, f"store-{name}.sqlite"))   # no compile reused
            step = run(name, argv, args.out, env_arm)
            step["row"] = new_row(table, args.known)
            results["steps"].append(step)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    text = summarize(results)
    with open(os.path.join(args.out, "summary.txt"), "w") as f:
        f.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
