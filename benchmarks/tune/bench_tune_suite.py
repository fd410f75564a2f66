"""GPU suite for ``tileprobe tune`` (issue 43's "Done when"): on three problem regimes, cold tune against
cuda.tile.tune's ``exhaustive_search`` on the same space, the warm re-tune's split, and the winner-flip rate and
regret over repeated warm tunes, each pick judged by do_bench.

It drives ``benchmarks/tune/bench_tune.py`` (imported by that path: its steps run each tool in a fresh process and its
``dobench`` step is the oracle: every configuration checked and timed by ``triton.testing.do_bench``):

1. per regime, the steps ``cutile``, ``tileprobe`` (cold: empty store and cuTile cache), ``dobench``;
2. ``--repeats`` warm re-tunes (bench_tune's ``retune`` step: the tileprobe step's store, every variant stored),
   each kept as ``<kernel>-retune-<i>.json``;
3. the summary: the wall ratio against its target, the pick's do_bench ratio to the best (≤ 1.02), the warm
   re-tune's split (GPU worker start and how long it was waited for, store reading, race, the race's kernel time
   and efficiency) against "race + 1 s", and over the repeats the winner-flip rate (1 − the most frequent pick's
   share) and the regret (each pick's do_bench ratio to the best, minus 1: mean and worst).

    python benchmarks/tune/bench_tune_suite.py --out /tmp/bts                 # 3 regimes × (3 steps + 5 re-tunes)
    python benchmarks/tune/bench_tune_suite.py --out /tmp/bts --regimes launch --repeats 2 --quick
    python benchmarks/tune/bench_tune_suite.py --out /tmp/bts --report        # summary from the files there
    python benchmarks/tune/bench_tune_suite.py --out /tmp/bts --dry-run --quick   # any CPU: the plumbing only

Everything goes under ``--out`` (bench_tune's files, ``suite.json``, ``suite.txt``). Not run yet on a GPU
(2026-12-05: written on the CPU-only machine; see benchmarks/tune/README.md).
"""
from __future__ import annotations

import argparse
import collections
import importlib.util
import json
import os
import shutil
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH_TUNE = os.path.join(HERE, "bench_tune.py")

#: The regimes: bench_tune's kernel, its wall-ratio target against cuda.tile.tune (issue 43), and what it stands for.
REGIMES = {
    "launch": ("rms16k", 0.5, "launch-bound: the seed's RMSNorm at 16k rows, kernels of tens of µs"),
    "matmul": ("matmul", 0.3, "matmul-like: TileGym's fp16 matmul, 0.2-0.3 ms kernels"),
    "attention": ("fmha", 0.2, "attention-like: TileGym's FMHA, 1-80 ms kernels"),
}
PICK_RATIO = 1.02
WARM_OVER_RACE_S = 1.0


def bench_tune():
    """benchmarks/tune/bench_tune.py as a module (it stays where it is: it is imported by its path)."""
    spec = importlib.util.spec_from_file_location("bench_tune", BENCH_TUNE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _load(path: str) -> dict | None:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError):
        return None


def run_regime(bt, kernel: str, out: str, repeats: int, quick: bool, dry_run: bool) -> None:
    """The cold steps, then ``repeats`` warm re-tunes, each kept under its own name."""
    probe = bt.probe_for(kernel, quick, out)
    for step in bt.STEPS:
        bt.run_step(kernel, step, probe, out, dry_run)
    for i in range(1, repeats + 1):
        bt.run_step(kernel, "retune", probe, out, dry_run)
        for ext in ("json", "meta.json", "log"):
            src = os.path.join(out, f"{kernel}-retune.{ext}")
            if os.path.exists(src):
                shutil.copyfile(src, os.path.join(out, f"{kernel}-retune-{i}.{ext}"))


def repeats_summary(out: str, kernel: str, best_us: float | None, timed: dict) -> dict:
    """Picks, flip rate and regret over the kept re-tunes; the first one's split."""
    picks, splits = [], []
    i = 1
    while (tune := _load(os.path.join(out, f"{kernel}-retune-{i}.json"))) is not None:
        prob = (tune.get("problems") or [None])[0] or {}
        picks.append((prob.get("pick") or {}).get("label"))
        meta = _load(os.path.join(out, f"{kernel}-retune-{i}.meta.json")) or {}
        splits.append({**(tune.get("times") or {}), "wall_s": meta.get("wall_s")})
        i += 1
    if not picks:
        return {}
    named = [p for p in picks if p]
    counts = collections.Counter(named)
    ratios = [timed[p] / best_us for p in picks if p in timed and best_us]
    first = splits[0]
    race, kernel_s = first.get("race_s"), first.get("race_kernel_s")
    return {"picks": picks, "flip_rate": 1 - counts.most_common(1)[0][1] / len(named) if named else None,
            "regret_mean": statistics.fmean(r - 1 for r in ratios) if ratios else None,
            "regret_max": max(r - 1 for r in ratios) if ratios else None, "split": first,
            "efficiency": kernel_s / race if race and kernel_s is not None else None,
            "warm_ok": (first.get("total_s") is not None and race is not None
                        and first["total_s"] <= race + WARM_OVER_RACE_S)}


def summarize(bt, out: str, regimes: list[str]) -> dict:
    rows = []
    for name in regimes:
        kernel, target, what = REGIMES[name]
        s = bt.summarize(out, kernel)
        db = _load(os.path.join(out, f"{kernel}-dobench.json")) or {}
        timed = {r["label"]: r["median_us"] for r in db.get("rows", []) if r.get("status") == "ok"}
        rows.append({"regime": name, "what": what, "kernel": kernel, "configs": s["configs"],
                     "wall_s": s["wall_s"], "wall_ratio": s["wall_ratio"], "wall_target": target,
                     "wall_ok": s["wall_ratio"] is not None and s["wall_ratio"] <= target,
                     "pick_ratio": s["picks"]["tileprobe"]["ratio"],
                     "pick_ok": (s["picks"]["tileprobe"]["ratio"] or 99) <= PICK_RATIO,
                     "cold_times": s.get("tileprobe_times"),
                     "repeats": repeats_summary(out, kernel, s["best_us"], timed)})
    return {"header": bt._header(), "regimes": rows}


def _f(v, spec=".2f") -> str:
    return "-" if v is None else format(v, spec)


def _ok(flag: bool | None, value) -> str:
    """``ok`` / ``NOT MET``, or ``n/a`` when the figure it judges is missing (a dry run, a failed step)."""
    return "n/a" if value is None else "ok" if flag else "NOT MET"


def text(summary: dict) -> str:
    h = summary["header"]
    lines = [f"# tileprobe tune suite — {h['date']}", f"machine: {h['gpu']}, {h['cpus']} CPUs, host {h['host']}", ""]
    for r in summary["regimes"]:
        w, rep = r["wall_s"], r["repeats"]
        split = rep.get("split") or {}
        lines += [f"## {r['regime']} ({r['kernel']}, {r['configs']} configurations): {r['what']}",
                  f"cold: tileprobe {_f(w.get('tileprobe'), '.1f')} s vs cuda.tile.tune {_f(w.get('cutile'), '.1f')} s "
                  f"= {_f(r['wall_ratio'])}× (target ≤ {r['wall_target']}: {_ok(r['wall_ok'], r['wall_ratio'])}); "
                  f"pick {_f(r['pick_ratio'], '.3f')}× do_bench's best (≤ {PICK_RATIO}: "
                  f"{_ok(r['pick_ok'], r['pick_ratio'])})",
                  f"warm re-tune: total {_f(split.get('total_s'), '.1f')} s; GPU worker start "
                  f"{_f(split.get('worker_start_s'), '.1f')} s (waited {_f(split.get('worker_wait_s'), '.1f')} s); "
                  f"reading the store {_f(split.get('compile_s'), '.2f')} s; race {_f(split.get('race_s'), '.1f')} s "
                  f"(kernel time {_f(split.get('race_kernel_s'))} s, efficiency {_f(rep.get('efficiency'), '.1%')}); "
                  f"≤ race + {WARM_OVER_RACE_S:.0f} s: {_ok(rep.get('warm_ok'), split.get('race_s'))}",
                  f"{len(rep.get('picks') or [])} warm tunes: picks {rep.get('picks')}; winner-flip rate "
                  f"{_f(rep.get('flip_rate'), '.0%')}; regret mean {_f(rep.get('regret_mean'), '.2%')}, worst "
                  f"{_f(rep.get('regret_max'), '.2%')}", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--regimes", default=",".join(REGIMES), help=f"comma-separated: {', '.join(REGIMES)}")
    ap.add_argument("--repeats", type=int, default=5, help="warm re-tunes for the flip rate (default 5)")
    ap.add_argument("--quick", action="store_true", help="bench_tune's smaller spaces")
    ap.add_argument("--dry-run", action="store_true", help="no GPU: the plumbing only")
    ap.add_argument("--report", action="store_true", help="only the summary from the files in --out")
    a = ap.parse_args(argv)
    regimes = [r.strip() for r in a.regimes.split(",") if r.strip()]
    bad = [r for r in regimes if r not in REGIMES]
    if bad or a.repeats < 1:
        ap.error(f"unknown regime {', '.join(bad)} (choose from {', '.join(REGIMES)})" if bad else "--repeats ≥ 1")
    bt = bench_tune()
    os.makedirs(a.out, exist_ok=True)
    if not a.report:
        for r in regimes:
            run_regime(bt, REGIMES[r][0], a.out, a.repeats, a.quick, a.dry_run)
    summary = summarize(bt, a.out, regimes)
    with open(os.path.join(a.out, "suite.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1, default=str)
    out = text(summary)
    with open(os.path.join(a.out, "suite.txt"), "w", encoding="utf-8") as f:
        f.write(out + "\n")
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
