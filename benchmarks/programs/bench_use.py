"""On a GPU: TileGym's own autotune against a tileprobe table, end to end (benchmarks/programs/run.sh OUT use).

Steps, each a fresh process, in this order (the program is benchmarks/programs/tilegym_autotune_program.py):

  c. ``tileprobe tune --budget 90 --export T -- python PROGRAM`` from nothing (empty cuTile cache, empty store): wall time;
     its recording also warms cuTile's cache (TileGym's own search JIT-compiles every configuration)
  a. ``python PROGRAM`` (warm cuTile cache, TileGym's own autotune): wall time
  b. ``tileprobe use T -- python PROGRAM`` (warm cache, searches answered from T): wall time; b/a must be ≤ 0.4
  d. ``python PROGRAM --bench-space D.json``: triton do_bench of every configuration of every search; per kernel the
     table's pick, TileGym's pick (from c's recording) and the best, as do_bench medians (table ≤ 1.02 × both)
  e. ``tileprobe use FORGED -- python PROGRAM`` with every row's tileiras build forged: refused with the reason (one
     stderr line per search), and the program still runs (every op ok)

Writes ``OUT/results.json`` and ``OUT/summary.txt`` and prints the summary.

    python benchmarks/programs/bench_use.py --out DIR [--ops bmm,fmha,...] [--dry-run]

``--dry-run`` (any CPU) prints the steps' commands, checks the program parses, and composes a summary from the
files of an earlier run in DIR when there are (``summarize``, what tests/test_use.py checks on CPU data).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAM = os.path.join(HERE, "tilegym_autotune_program.py")
FORGED_TILEIRAS = "Cuda compilation tools, release 13.3, V13.3.36"


def steps(out: str, ops: str) -> list[tuple[str, list[str]]]:
    """(step, argv) in the order they run."""
    py, prog = sys.executable, [sys.executable, PROGRAM, "--ops", ops]
    tp = [py, "-m", "tileprobe.cli"]
    table, forged = os.path.join(out, "table.json"), os.path.join(out, "forged.json")
    return [("c", tp + ["tune", "--budget", "90", "--export", table, "--", *prog]),
            ("a", prog),
            ("b", tp + ["use", table, "--", *prog]),
            ("d", prog + ["--bench-space", os.path.join(out, "space.json")]),
            ("e", tp + ["use", forged, "--", *prog])]


def forge(table: str, forged: str) -> int:
    """Copy ``table`` with every row's tileiras build replaced by another release; the rows forged."""
    with open(table) as f:
        doc = json.load(f)
    n = 0
    for rows in doc["kernels"].values():
        for row in rows:
            row["tileiras"] = FORGED_TILEIRAS
            n += 1
    with open(forged, "w") as f:
        json.dump(doc, f, indent=1)
    return n


def run_step(name: str, argv: list[str], out: str, env: dict) -> dict:
    t = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t
    for stream, text in (("stdout", proc.stdout), ("stderr", proc.stderr)):
        with open(os.path.join(out, f"{name}.{stream}.txt"), "w") as f:
            f.write(text)
    ops = re.findall(r"^(\w+): (?:rel\. error .* (ok|WRONG)(?: \(.*\))?|(FAILED) .*)$", proc.stdout, re.M)
    return {"step": name, "argv": argv, "rc": proc.returncode, "wall_s": round(wall, 2),
            "ops": {o: (ok or failed) for o, ok, failed in ops},
            "use_lines": [ln for ln in proc.stderr.splitlines() if ln.startswith("tileprobe use:")]}


def summarize(out: str, results: dict) -> list[str]:
    """The summary lines from the step results and the files in ``out`` (table, recording, do_bench space)."""
    lines = []
    walls = {s["step"]: s["wall_s"] for s in results.get("steps", [])}
    if "a" in walls and "b" in walls:
        r = walls["b"] / walls["a"] if walls["a"] else float("nan")
        lines.append(f"(a) TileGym's own autotune, warm cache: {walls['a']:.1f} s; (b) with the table: "
                     f"{walls['b']:.1f} s = {r:.2f}x ({'met' if r <= 0.4 else 'NOT met'}: required <= 0.4x)")
    if "c" in walls:
        lines.append(f"(c) tileprobe tune -- PROGRAM from nothing: {walls['c']:.1f} s")
    for s in results.get("steps", []):
        bad = [o for o, v in s["ops"].items() if v != "ok"]
        lines.append(f"    step {s['step']}: rc {s['rc']}, ops {len(s['ops']) - len(bad)}/{len(s['ops'])} ok"
                     + (f" (not ok: {', '.join(bad)})" if bad else ""))
    lines += kernel_lines(out)
    e = next((s for s in results.get("steps", []) if s["step"] == "e"), None)
    if e is not None:
        stale = [ln for ln in e["use_lines"] if "stale row: tileiras build" in ln]
        ok = e["rc"] == 0 and all(v == "ok" for v in e["ops"].values()) and stale
        lines.append(f"(e) forged tileiras build: {len(stale)} search(es) refused with the reason, program rc "
                     f"{e['rc']}: {'met' if ok else 'NOT met'}")
        lines += [f"    {ln}" for ln in stale[:5]]
    return lines


def kernel_lines(out: str) -> list[str]:
    """(d): per search, do_bench of the table's pick, TileGym's pick and the best of the program's whole space."""
    try:
        with open(os.path.join(out, "table.json")) as f:
            table = json.load(f)
        with open(os.path.join(out, "table.json.record", "record.json")) as f:
            searches = {s["key"]: s for s in json.load(f)["searches"]}
        with open(os.path.join(out, "space.json")) as f:
            space = {s["key"]: s for s in json.load(f)}
    except (OSError, ValueError, KeyError) as e:
        return [f"(d) not available: {e}"]
    picks = {r["search"]["key"]: r["search"]["config_index"] for rows in table["kernels"].values() for r in rows
             if r.get("search")}
    lines = ["(d) do_bench µs      configs  table pick      TileGym pick    best            table/TileGym  table/best"]
    for key, s in searches.items():
        sp = space.get(key)
        if sp is None or key not in picks:
            lines.append(f"    {s['name']} ({key[:8]}): {'no do_bench' if sp is None else 'no table row'}")
            continue
        us = sp["us"]
        ok = [i for i, t in enumerate(us) if t is not None]
        best = min(ok, key=lambda i: us[i]) if ok else None
        t, g = picks[key], s.get("program_pick")

        def cell(i):
            return f"C{i} {us[i]:,.1f}" if i is not None and us[i] is not None else f"C{i} -"
        rt = us[t] / us[g] if g is not None and us[t] and us[g] else None
        rb = us[t] / us[best] if best is not None and us[t] else None
        verdict = "met" if rt is not None and rb is not None and rt <= 1.02 and rb <= 1.02 else "NOT met"
        lines.append(f"    {s['name'][:18]:<18} {len(us):>3}  {cell(t):<15} {cell(g):<15} {cell(best):<15} "
                     f"{rt if rt is None else round(rt, 3)!s:>13}  {rb if rb is None else round(rb, 3)!s:>10}  "
                     f"{verdict} (<= 1.02x)")
    return lines


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="results folder")
    p.add_argument("--ops", default="bmm,fmha,matmul,softmax,group_gemm")
    p.add_argument("--dry-run", action="store_true", help="print the steps; summarize an earlier run in --out")
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    plan = steps(os.path.abspath(a.out), a.ops)
    if a.dry_run:
        for name, argv in plan:
            print(f"step {name}: {' '.join(argv)}")
        subprocess.run([sys.executable, PROGRAM, "--ops", a.ops, "--list"], check=True)
        prior = os.path.join(a.out, "results.json")
        results = json.load(open(prior)) if os.path.exists(prior) else {"steps": []}
        print("\n".join(summarize(a.out, results)))
        return 0
    env = dict(os.environ)
    cache = os.path.join(a.out, "..", "use-cutile-cache")
    shutil.rmtree(cache, ignore_errors=True)
    env.update(CUDA_TILE_CACHE_DIR=os.path.abspath(cache), TILEPROBE_STORE=os.path.join(a.out, "store.sqlite"),
               XDG_CACHE_HOME=os.path.join(a.out, "..", "use-xdg"))
    results = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "steps": []}
    for name, argv in plan:
        if name == "e":
            if not os.path.exists(os.path.join(a.out, "table.json")):
                continue
            results["forged_rows"] = forge(os.path.join(a.out, "table.json"), os.path.join(a.out, "forged.json"))
        res = run_step(name, argv, a.out, env)
        results["steps"].append(res)
        print(f"step {name}: rc {res['rc']}, {res['wall_s']:.1f} s, ops {res['ops']}", flush=True)
        with open(os.path.join(a.out, "results.json"), "w") as f:
            json.dump(results, f, indent=1)
    text = "\n".join(summarize(a.out, results))
    with open(os.path.join(a.out, "summary.txt"), "w") as f:
        f.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
