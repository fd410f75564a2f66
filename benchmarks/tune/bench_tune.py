"""Benchmark of ``tileprobe tune`` against cuTile's ``cuda.tile.tune.exhaustive_search``.

For each kernel — (a) the persistent RMSNorm at 524,288 × 512 bf16 (``examples/rms_norm_large.py``: one launch
≥ 0.5 ms at occupancy 1, about 0.29 ms at best; occupancy 1, 2, 4, 8, 16 × TMA on/off) and (b) TileGym's
``_matmul_kernel``, fp16 4096³ (``examples/tilegym_matmul_tune.py``: 48 configurations, tile M/N/K × occupancy ×
num_ctas) — it runs, in one session on the GPU machine, each in its own fresh process:

1. ``cutile``: cuda.tile.tune.exhaustive_search over the same configurations, cold (an empty cuTile cache dir);
2. ``tileprobe``: ``tileprobe tune``, cold (another empty cuTile cache dir and an empty tileprobe store);
3. ``dobench``: every configuration checked against the reference and timed by ``triton.testing.do_bench``
   (median; JIT through ``ct.launch``, reusing the cutile step's cuTile cache when it exists) — "best" is the lowest
   median among the correct ones;

then writes the report: each tool's wall time (measured around its process), tileprobe's split (start-up,
compile, GPU worker start, race), the candidates dropped per rule, each tool's pick, its do_bench median and the
ratio to the best (required ≤ 1.02 for tileprobe), and the wall-time ratio (aim ≤ 0.5). Everything goes under
``--out``: ``<kernel>-<step>.json``, the tools' output ``<kernel>-<step>.log``, ``bench_tune.json`` and
``bench_tune.txt``.

    python benchmarks/tune/bench_tune.py --out /tmp/bt                          # everything (about 10–15 minutes)
    python benchmarks/tune/bench_tune.py --out /tmp/bt --kernels rms --steps cutile,tileprobe,dobench
    python benchmarks/tune/bench_tune.py --out /tmp/bt --report                 # report from the JSON files there
    python benchmarks/tune/bench_tune.py --out /tmp/bt --quick                  # 3 RMSNorm and 8 matmul configurations
    python benchmarks/tune/bench_tune.py --out /tmp/bt --dry-run                # any CPU: spaces, static stage, no GPU

A failing step or configuration is recorded and the rest goes on.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import socket
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, ROOT)

KERNELS = {
    "rms": {"probe": os.path.join(ROOT, "benchmarks", "probes", "rms_norm_2m.py"),
            "quick": {"cases": {"ALLOW_TMA": [True]}, "hints": {"occupancy": [1, 2, 8]}}},
    "rms16k": {"probe": os.path.join(ROOT, "benchmarks", "probes", "rms_norm_16k.py"),
               "quick": {"cases": {"ALLOW_TMA": [True]}, "hints": {"occupancy": [1, 2, 8]}}},
    "fmha": {"probe": os.path.join(ROOT, "benchmarks", "probes", "tilegym_fmha.py"),
             "quick": {"cases": {"TILE_M": [64, 128], "TILE_N": [64]}, "hints": {"occupancy": [1, 2]}}},
    "matmul": {"probe": os.path.join(ROOT, "examples", "tilegym_matmul_tune.py"),
               "quick": {"cases": {"SIZE": [4096], "TILE_M": [128, 256], "TILE_N": [128], "TILE_K": [32, 64]},
                         "hints": {"occupancy": [1, 2], "num_ctas": [1]}}},
}
STEPS = ("cutile", "tileprobe", "dobench")
#: Steps run only when named: ``retune`` is tileprobe tune again on the tileprobe step's store (every variant
#: stored: the warm re-tune).
EXTRA_STEPS = ("retune",)
STEP_TIMEOUT_S = 580.0
REQUIRED_RATIO, AIM_WALL_RATIO = 1.02, 0.5

QUICK_PROBE = '''"""bench_tune.py --quick: {base} with a smaller search space."""
import dataclasses
from tileprobe.probe.define import load_probes
_base = load_probes({base!r})[0]
probe = dataclasses.replace(_base, cases={cases!r}, hints={hints!r})
'''


def probe_for(kernel: str, quick: bool, out: str) -> str:
    """The probe file of a kernel; with ``quick``, a wrapper with the smaller space, written under ``out``."""
    spec = KERNELS[kernel]
    if not quick:
        return spec["probe"]
    path = os.path.join(out, f"{kernel}_quick_probe.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(QUICK_PROBE.format(base=spec["probe"], **spec["quick"]))
    return path


def _fresh(path: str) -> str:
    if os.path.isdir(path):
        shutil.rmtree(path)
    elif os.path.exists(path):
        os.remove(path)
    return path


def run_step(kernel: str, step: str, probe: str, out: str, dry_run: bool) -> dict:
    """Run one step in a fresh process; its wall time is measured here, around the process."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(x for x in (ROOT, os.environ.get("PYTHONPATH")) if x))
    # dobench reuses the cutile step's cuTile cache; retune runs in the tileprobe step's environment (the same
    # CUDA_TILE_CACHE_DIR: a user's second run of the same command, so that the loaders' plan cache, keyed on the
    # environment, can answer: tileprobe/probe/plancache.py)
    owner = {"dobench": "cutile", "retune": "tileprobe"}.get(step, step)
    cache = os.path.join(out, f"cutile-cache-{kernel}-{owner}")
    env["CUDA_TILE_CACHE_DIR"] = cache if step in ("dobench", "retune") else _fresh(cache)
    result = os.path.join(out, f"{kernel}-{step}.json")
    if step in ("tileprobe", "retune"):
        store = os.path.join(out, f"store-{kernel}.sqlite")
        cmd = [sys.executable, "-m", "tileprobe", "tune", probe, "--store",
               _fresh(store) if step == "tileprobe" else store, "--json", result,
               "--export", _fresh(os.path.join(out, f"{kernel}-{step}-export.json"))]
        if dry_run:
            cmd += ["--dry-run", "--arch", "sm_90", "--num-sms", "132"]
    else:
        cmd = [sys.executable, os.path.join(HERE, "bench_tune_tools.py"), step, "--probe", probe, "--json", result]
        cmd += ["--dry-run"] if dry_run else []
    t0 = time.perf_counter()
    try:    # cwd: out, not the repository (``-m`` puts the cwd first on sys.path)
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=STEP_TIMEOUT_S, cwd=out)
        code, text = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as e:
        code, text = "timeout", f"{e.stdout or ''}{e.stderr or ''}\nstep timed out after {STEP_TIMEOUT_S:.0f} s"
    wall = time.perf_counter() - t0
    with open(os.path.join(out, f"{kernel}-{step}.log"), "w", encoding="utf-8") as f:
        f.write(f"$ {' '.join(cmd)}\n{text}")
    meta = {"kernel": kernel, "step": step, "command": cmd, "wall_s": wall, "exit": code, "machine": _header()}
    with open(os.path.join(out, f"{kernel}-{step}.meta.json"), "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=1)
    print(f"{kernel} {step}: exit {code}, {wall:.1f} s (log: {kernel}-{step}.log)", flush=True)
    return meta


def _load(out: str, name: str) -> dict | None:
    try:
        with open(os.path.join(out, name), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError):
        return None


def summarize(out: str, kernel: str) -> dict:
    """One kernel's figures from the step files under ``out`` (missing steps are None)."""
    cut, tp, db = (_load(out, f"{kernel}-{s}.json") for s in STEPS)
    meta = {s: _load(out, f"{kernel}-{s}.meta.json") for s in STEPS}
    timed = {r["label"]: r for r in (db or {}).get("rows", []) if r.get("status") == "ok"}
    best_us = (db or {}).get("best_us")
    prob = ((tp or {}).get("problems") or [None])[0] or {}
    picks = {"cutile": (cut or {}).get("best"), "tileprobe": (prob.get("pick") or {}).get("label")}
    s = {"kernel": kernel, "configs": len((cut or {}).get("configs") or []) or None, "best": (db or {}).get("best"),
         "best_us": best_us, "wall_s": {k: (m or {}).get("wall_s") for k, m in meta.items()},
         "exit": {k: (m or {}).get("exit") for k, m in meta.items()}, "tileprobe_times": (tp or {}).get("times"),
         "dropped": prob.get("dropped"), "verdict": prob.get("verdict"), "stop": prob.get("stop"),
         "rounds": len(prob.get("rounds") or []), "tie": [t["label"] for t in prob.get("tie") or []],
         "cutile_failures": len((cut or {}).get("failures") or []), "picks": {}}
    for tool, label in picks.items():
        us = (timed.get(label) or {}).get("median_us") if label else None
        s["picks"][tool] = {"label": label, "do_bench_us": us, "ratio": us / best_us if us and best_us else None}
    w = s["wall_s"]
    s["wall_ratio"] = w["tileprobe"] / w["cutile"] if w.get("tileprobe") and w.get("cutile") else None
    s["required_ok"] = (s["picks"]["tileprobe"]["ratio"] or 99) <= REQUIRED_RATIO
    s["rows"] = _rows(cut, prob, db)
    s["floor"] = floor(prob, (tp or {}).get("times") or {}, (meta.get("tileprobe") or {}).get("machine", {}).get("cpus"))
    rt = _load(out, f"{kernel}-retune.json")
    if rt:
        rprob = (rt.get("problems") or [None])[0] or {}
        s["retune"] = {"wall_s": (_load(out, f"{kernel}-retune.meta.json") or {}).get("wall_s"),
                       "times": rt.get("times"), "pick": (rprob.get("pick") or {}).get("label")}
    return s


def floor(prob: dict, times: dict, cpus: int | None) -> dict:
    """The floor of a cold tune : the static stage's max(slowest compile, Σ compile ÷ CPUs), from each
    candidate's compile_s, plus the race; and the wall time above it (the tune's own total, start-up included)."""
    comp = [r.get("compile_s") or 0.0 for r in prob.get("candidates") or [] if r.get("config")]
    if not comp or not cpus:
        return {}
    static = max(max(comp), sum(comp) / cpus)
    total = (times.get("total_s") or 0.0)
    return {"static_s": static, "race_s": times.get("race_s"), "floor_s": static + (times.get("race_s") or 0.0),
            "above_s": total - static - (times.get("race_s") or 0.0),
            "compile_above_s": (times.get("compile_s") or 0.0) - static}


def _rows(cut, prob, db) -> list[dict]:
    cut_by = {m["label"]: m for m in (cut or {}).get("successes") or []}
    tp_by = {r["label"]: r for r in prob.get("candidates") or [] if r.get("config")}
    out = []
    for r in (db or {}).get("rows") or []:
        c, t = cut_by.get(r["label"], {}), tp_by.get(r["label"], {})
        out.append({"label": r["label"], "do_bench_us": r.get("median_us"), "do_bench_status": r.get("status"),
                    "cutile_mean_us": c.get("mean_us"), "cutile_margin_us": c.get("error_margin_us"),
                    "cutile_samples": c.get("samples"), "tileprobe_us": t.get("median_us"),
                    "tileprobe_ci": [t.get("ci_lo_us"), t.get("ci_hi_us")], "tileprobe_status": t.get("status"),
                    "tileprobe_n": t.get("n"), "sm_mhz": [(r.get(k) or {}).get("sm_mhz")
                                                           for k in ("clocks_before", "clocks_after")]})
    return out


def _f(v, spec=".1f", unit="") -> str:
    return "-" if v is None else f"{format(v, spec)}{unit}"


def report_text(header: dict, sums: list[dict]) -> str:
    lines = [f"# tileprobe tune vs cuda.tile.tune — {header['date']}", f"machine: {header['gpu']}, "
             f"{header['cpus']} CPUs, host {header['host']}; python {header['python']}", ""]
    for s in sums:
        t, w, p = s.get("tileprobe_times") or {}, s["wall_s"], s["picks"]
        lines += [f"## {s['kernel']}: {s['configs']} configurations; best by do_bench: {s['best']} "
                  f"{_f(s['best_us'], ',.1f', ' µs')}",
                  f"cuda.tile.tune: wall {_f(w.get('cutile'), '.1f', ' s')} (exit {s['exit'].get('cutile')}), "
                  f"{s['cutile_failures']} failed configs; pick {p['cutile']['label']}: do_bench "
                  f"{_f(p['cutile']['do_bench_us'], ',.1f', ' µs')} = {_f(p['cutile']['ratio'], '.3f', '×')} best",
                  f"tileprobe tune: wall {_f(w.get('tileprobe'), '.1f', ' s')} (exit {s['exit'].get('tileprobe')}) = "
                  f"{_f(s['wall_ratio'], '.2f', '×')} cuda.tile.tune's (aim ≤ {AIM_WALL_RATIO}); split: start-up "
                  f"{_f(t.get('startup_s'), '.1f', ' s')}, compile {_f(t.get('compile_s'), '.1f', ' s')}, GPU worker start "
                  f"{_f(t.get('worker_start_s'), '.1f', ' s')} (waited {_f(t.get('worker_wait_s'), '.1f', ' s')} after "
                  f"compiling), race {_f(t.get('race_s'), '.1f', ' s')} (checks {_f(t.get('check_s'), '.1f', ' s')}), "
                  f"store {_f(t.get('store_s'), '.2f', ' s')}",
                  f"  floor: static {_f(s['floor'].get('static_s'), '.1f', ' s')} (max(slowest compile, Σ compile ÷ "
                  f"CPUs)) + race {_f(s['floor'].get('race_s'), '.1f', ' s')} = {_f(s['floor'].get('floor_s'), '.1f', ' s')}; "
                  f"above the floor: {_f(s['floor'].get('above_s'), '.1f', ' s')} (the static stage "
                  f"{_f(s['floor'].get('compile_above_s'), '.1f', ' s')} of it)",
                  *([f"  warm re-tune (every variant stored): wall {_f(s['retune']['wall_s'], '.1f', ' s')}, static stage "
                     f"{_f((s['retune']['times'] or {}).get('compile_s'), '.2f', ' s')}, GPU worker start "
                     f"{_f((s['retune']['times'] or {}).get('worker_start_s'), '.1f', ' s')} (waited "
                     f"{_f((s['retune']['times'] or {}).get('worker_wait_s'), '.1f', ' s')}), race "
                     f"{_f((s['retune']['times'] or {}).get('race_s'), '.1f', ' s')}, total "
                     f"{_f((s['retune']['times'] or {}).get('total_s'), '.1f', ' s')}; pick {s['retune']['pick']}"]
                    if s.get("retune") else []),
                  f"  dropped per rule: {s['dropped'] or {}}; race: {s['rounds']} rounds, stopped: {s['stop']}; "
                  f"verdict {s['verdict']}{' ' + str(s['tie']) if s['tie'] else ''}",
                  f"  pick {p['tileprobe']['label']}: do_bench {_f(p['tileprobe']['do_bench_us'], ',.1f', ' µs')} = "
                  f"{_f(p['tileprobe']['ratio'], '.3f', '×')} best — required ≤ {REQUIRED_RATIO}: "
                  f"{_verdict(s)}", "",
                  f"{'configuration':40} {'do_bench µs':>12} {'cutile µs':>18} {'tileprobe µs [95% CI]':>30} "
                  f"{'status':>16} {'SM MHz':>11}"]
        for r in sorted(s["rows"], key=lambda r: r["do_bench_us"] or float("inf")):
            ci = r["tileprobe_ci"]
            tp = (f"{_f(r['tileprobe_us'], ',.1f')} [{_f(ci[0], ',.1f')}, {_f(ci[1], ',.1f')}]"
                  if r["tileprobe_us"] is not None else "-")
            cu = (f"{_f(r['cutile_mean_us'], ',.1f')}±{_f(r['cutile_margin_us'], '.1f')}"
                  if r["cutile_mean_us"] is not None else "-")
            mhz = "/".join(_f(x, ".0f") for x in r["sm_mhz"])
            lines.append(f"{r['label'][:40]:40} {_f(r['do_bench_us'], ',.1f'):>12} {cu:>18} {tp:>30} "
                         f"{(r['tileprobe_status'] or '-') + '/' + (r['do_bench_status'] or '-'):>16} {mhz:>11}")
        lines.append("")
    return "\n".join(lines)


def _verdict(s: dict) -> str:
    if s["picks"]["tileprobe"]["ratio"] is None:
        return "n/a (no do_bench figure for tileprobe's pick)"
    return "PASS" if s["required_ok"] else "FAIL"


def _header() -> dict:
    gpu = "no GPU"
    if shutil.which("nvidia-smi"):
        try:
            gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm,power.limit",
                                  "--format=csv,noheader"], capture_output=True, text=True, timeout=30).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    return {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "gpu": gpu, "cpus": os.cpu_count(), "host": socket.gethostname(), "python": sys.version.split()[0]}


def report(out: str, kernels: list[str]) -> str:
    sums = [summarize(out, k) for k in kernels if _load(out, f"{k}-dobench.json") or _load(out, f"{k}-tileprobe.json")
            or _load(out, f"{k}-cutile.json")]
    metas = [_load(out, f"{k}-{s}.meta.json") for k in kernels for s in STEPS]
    header = next((m["machine"] for m in metas if m and m.get("machine")), None) or _header()   # where it ran
    text = report_text(header, sums)
    with open(os.path.join(out, "bench_tune.txt"), "w", encoding="utf-8") as f:
        f.write(text + "\n")
    with open(os.path.join(out, "bench_tune.json"), "w", encoding="utf-8") as f:
        json.dump({"header": header, "kernels": sums}, f, indent=1, default=str)
    return text


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="folder for every output (created)")
    ap.add_argument("--kernels", default="rms,matmul", help="comma-separated: rms, rms16k, fmha, matmul (default rms,matmul)")
    ap.add_argument("--steps", default=",".join(STEPS), help=f"comma-separated: {', '.join(STEPS + EXTRA_STEPS)} "
                    "(default all but retune, in this order: do_bench reuses the cutile step's cuTile cache; retune "
                    "reuses the tileprobe step's store)")
    ap.add_argument("--quick", action="store_true", help="smaller search spaces (3 RMSNorm, 8 matmul configurations)")
    ap.add_argument("--dry-run", action="store_true", help="no GPU: search spaces and tileprobe's static stage only")
    ap.add_argument("--report", action="store_true", help="only write the report from the JSON files in --out")
    a = ap.parse_args(argv)
    kernels = [k.strip() for k in a.kernels.split(",") if k.strip()]
    steps = [s.strip() for s in a.steps.split(",") if s.strip()]
    for name, allowed in ((kernels, KERNELS), (steps, STEPS + EXTRA_STEPS)):
        bad = [x for x in name if x not in allowed]
        if bad:
            ap.error(f"unknown {', '.join(bad)}; choose from {', '.join(allowed)}")
    os.makedirs(a.out, exist_ok=True)
    if not a.report:
        for k in kernels:
            probe = probe_for(k, a.quick, a.out)
            for step in steps:
                run_step(k, step, probe, a.out, a.dry_run)
    print(report(a.out, kernels))
    return 0


if __name__ == "__main__":
    sys.exit(main())
