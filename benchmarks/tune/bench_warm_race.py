"""The warm re-tune and the race's cost, this tree's tileprobe beside another tree's (main), on a GPU host.

Per kernel of ``bench_tune.py`` (rms16k, matmul, fmha), each command in a fresh process, its wall measured around it:

0. ``cutile`` (with ``--cutile``): ``cuda.tile.tune.exhaustive_search`` over the same space, cold (its own empty cuTile
   cache), in a fresh process (bench_tune_tools.py): the cold tune's wall is set against it;
1. ``cold``: ``tileprobe tune PROBE`` on an empty store (this tree);
2. ``warm``: the same again (every variant stored): the GPU worker starts in the command;
3. ``kw1`` … ``kwN``: the same with ``--keep-warm 120``: kw1 starts the kept-warm worker, the next ones reuse it;
4. ``base``, ``base2`` … (``--base-runs``): the warm re-tune by ``--base`` (another checkout, e.g. main) on a copy
   of the store — today's race, repeated for its own flip rate and regret;
5. ``graph`` (and ``base-graph`` with ``--base-graph``): ``--timing graph`` warm re-tunes;
6. ``oracle``: ``bench_tune_tools.py dobench`` (do_bench, two passes) over every configuration, or with
   ``--oracle-top K`` over the K fastest of the cold tune's table and every pick.

Then a table: per run the wall, tileprobe's own total, the GPU worker's start and wait, the race, the race's kernel
time, the pick and its do_bench ratio to the best; over the warm runs the picks' flip rate and regret. Everything
goes under ``--out`` (``<kernel>-<run>.json``/``.log``, ``summary.json``, ``summary.txt``).

    python benchmarks/tune/bench_warm_race.py --out /tmp/wr --kernels rms16k,matmul --base /path/to/main
    python benchmarks/tune/bench_warm_race.py --out /tmp/wr --report
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from bench_tune import KERNELS  # noqa: E402  (this folder's script, by path)

STEP_TIMEOUT_S = 300.0


def _env(root: str, out: str, kernel: str) -> dict:
    env = dict(os.environ, TILEPROBE_RUNTIME_DIR=os.path.join(out, "rt"))
    env["PYTHONPATH"] = os.pathsep.join(x for x in (root, os.environ.get("PYTHONPATH")) if x)
    env["CUDA_TILE_CACHE_DIR"] = os.path.join(out, f"cutile-cache-{kernel}")
    return env


def _logged(cmd: list[str], env: dict, out: str, log_name: str) -> tuple:
    """Run ``cmd`` in ``out`` (a fresh process, at most STEP_TIMEOUT_S), write its command and output to
    ``out/log_name``; returns (exit code or "timeout", wall seconds measured around the process)."""
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=STEP_TIMEOUT_S, cwd=out)
        code, text = p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        code, text = "timeout", f"{e.stdout or ''}{e.stderr or ''}"
    wall = time.perf_counter() - t0
    with open(os.path.join(out, log_name), "w", encoding="utf-8") as f:
        f.write(f"$ {' '.join(cmd)}\n{text}")
    return code, wall


def run(out: str, kernel: str, name: str, root: str, store: str, extra: list[str]) -> dict:
    """One ``tileprobe tune`` in a fresh process with ``root``'s tileprobe; returns its row."""
    probe = KERNELS[kernel]["probe"]
    result = os.path.join(out, f"{kernel}-{name}.json")
    cmd = [sys.executable, "-m", "tileprobe", "tune", probe, "--store", store, "--json", result, *extra]
    code, wall = _logged(cmd, _env(root, out, kernel), out, f"{kernel}-{name}.log")
    row = {"kernel": kernel, "run": name, "root": root, "exit": code, "wall_s": wall, "extra": extra}
    try:
        with open(result, encoding="utf-8") as f:
            res = json.load(f)
        prob = (res.get("problems") or [{}])[0]
        row.update(times=res.get("times"), pick=(prob.get("pick") or {}).get("label"), stop=prob.get("stop"),
                   rounds=len(prob.get("rounds") or []),
                   table=sorted(((c.get("median_us"), c.get("label")) for c in prob.get("candidates") or []
                                 if c.get("median_us")), key=lambda x: x[0]))
    except (OSError, ValueError):
        row["times"] = None
    t = row.get("times") or {}
    print(f"{kernel} {name}: exit {code}, wall {wall:.1f} s, race {t.get('race_s')}, worker start "
          f"{t.get('worker_start_s')} waited {t.get('worker_wait_s')}, pick {row.get('pick')}", flush=True)
    return row


def cutile(out: str, kernel: str, root: str) -> dict:
    """cuda.tile.tune.exhaustive_search over the kernel's space, cold, in a fresh process; its row (wall, pick)."""
    probe = KERNELS[kernel]["probe"]
    result = os.path.join(out, f"{kernel}-cutile.json")
    env = _env(root, out, kernel)
    env["CUDA_TILE_CACHE_DIR"] = cache = os.path.join(out, f"cutile-cache-{kernel}-cutile")
    shutil.rmtree(cache, ignore_errors=True)
    cmd = [sys.executable, os.path.join(HERE, "bench_tune_tools.py"), "cutile", "--probe", probe, "--json", result]
    code, wall = _logged(cmd, env, out, f"{kernel}-cutile.log")
    try:
        with open(result, encoding="utf-8") as f:
            pick = json.load(f).get("best")
    except (OSError, ValueError):
        pick = None
    print(f"{kernel} cutile: exit {code}, wall {wall:.1f} s, pick {pick}", flush=True)
    return {"kernel": kernel, "run": "cutile", "root": root, "exit": code, "wall_s": wall, "extra": [],
            "times": None, "pick": pick}


def oracle(out: str, kernel: str, labels: list[str] | None, root: str) -> dict | None:
    probe = KERNELS[kernel]["probe"]
    result = os.path.join(out, f"{kernel}-oracle.json")
    cmd = [sys.executable, os.path.join(HERE, "bench_tune_tools.py"), "dobench", "--probe", probe, "--json", result]
    if labels:
        with open(os.path.join(out, f"{kernel}-oracle-labels.json"), "w", encoding="utf-8") as f:
            json.dump(labels, f)
        cmd += ["--labels", os.path.join(out, f"{kernel}-oracle-labels.json")]
    env = _env(root, out, kernel)
    if os.path.isdir(os.path.join(out, f"cutile-cache-{kernel}-cutile")):   # the cutile step's kernels: no JIT wait
        env["CUDA_TILE_CACHE_DIR"] = os.path.join(out, f"cutile-cache-{kernel}-cutile")
    code, wall = _logged(cmd, env, out, f"{kernel}-oracle.log")
    print(f"{kernel} oracle: exit {code}, {wall:.1f} s", flush=True)
    try:
        with open(result, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def summary(rows: list[dict], oracles: dict) -> str:
    lines = ["kernel  run          exit  wall s  total s  worker start/waited s  race s  kernel s  pick  ratio"]
    by_kernel = collections.defaultdict(list)
    for r in rows:
        by_kernel[r["kernel"]].append(r)
    for kernel, rs in by_kernel.items():
        o = oracles.get(kernel) or {}
        timed = {x["label"]: x["median_us"] for x in o.get("rows", []) if x.get("status") == "ok"}
        best = o.get("best_us")
        for r in rs:
            t = r.get("times") or {}
            us = timed.get(r.get("pick"))
            r["ratio"] = us / best if us and best else None

            def f(k, t=t):
                return "-" if t.get(k) is None else f"{t[k]:.2f}"
            ratio = f"{r['ratio']:.3f}" if r["ratio"] else "-"
            lines.append(f"{kernel:7} {r['run']:12} {r['exit']!s:5} {r['wall_s']:7.1f} {f('total_s'):>8} "
                         f"{f('worker_start_s'):>10}/{f('worker_wait_s'):<10} {f('race_s'):>7} {f('race_kernel_s'):>8}"
                         f"  {r.get('pick')}  {ratio}")
        lines += _kernel_lines(kernel, rs, o)
    return "\n".join(lines)


def _flips(kernel: str, what: str, runs: list[dict], o: dict) -> list[str]:
    """The winner-flip rate (1 − the most frequent pick's share) and the regret (pick's do_bench ÷ best − 1)."""
    runs = [r for r in runs if r.get("pick")]
    if not runs:
        return []
    picks = collections.Counter(r["pick"] for r in runs)
    ratios = [r["ratio"] for r in runs if r.get("ratio")]
    return [f"  {kernel}: {len(runs)} {what}: flip rate {1 - picks.most_common(1)[0][1] / len(runs):.2f}; regret mean "
            + (f"{sum(ratios) / len(ratios) - 1:.4f} worst {max(ratios) - 1:.4f}" if ratios else "-")
            + f"; best {o.get('best')} {o.get('best_us')} µs"]


def _kernel_lines(kernel: str, rs: list[dict], o: dict) -> list[str]:
    """Per kernel: cold against cuda.tile.tune, warm total − race, graph against sustained, flips and regret."""
    by = {r["run"]: r for r in rs}
    lines = []
    cu, cold = by.get("cutile"), by.get("cold")
    if cu and cold and cu.get("wall_s"):
        lines.append(f"  {kernel}: cold tileprobe {cold['wall_s']:.1f} s / cuda.tile.tune {cu['wall_s']:.1f} s = "
                     f"{cold['wall_s'] / cu['wall_s']:.2f}x; picks' do_bench ratio: tileprobe "
                     f"{_r(cold.get('ratio'))}, cuda.tile.tune {_r(cu.get('ratio'))}")
    kw = [r for r in rs if r["run"].startswith("kw")]
    over = [r["times"]["total_s"] - r["times"]["race_s"] for r in kw
            if (r.get("times") or {}).get("total_s") is not None and r["times"].get("race_s") is not None]
    if over:
        lines.append(f"  {kernel}: kept-warm re-tunes' total - race: " + ", ".join(f"{x:.2f}" for x in over) + " s")
    races = {n: (by[n].get("times") or {}).get("race_s") for n in ("graph", "kw1", "kw2", "base-graph") if n in by}
    if races.get("graph") is not None:
        lines.append(f"  {kernel}: race s by mode: " + ", ".join(f"{n} {v:.2f}" for n, v in races.items()
                                                                 if v is not None))
    lines += _flips(kernel, "warm tunes (this tree, sustained)",
                    [r for r in rs if r["run"] == "warm" or r["run"].startswith("kw")], o)
    lines += _flips(kernel, "warm tunes by --base (today's race)",
                    [r for r in rs if r["run"].rstrip("0123456789") == "base"], o)
    return lines


def _r(x) -> str:
    return f"{x:.3f}" if x else "-"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--kernels", default="rms16k,matmul,fmha")
    ap.add_argument("--base", help="another checkout's root (today's tileprobe, e.g. main) for the 'base' runs")
    ap.add_argument("--base-graph", default="", help="kernels whose --timing graph re-tune runs with --base too")
    ap.add_argument("--keep-warm-runs", type=int, default=3)
    ap.add_argument("--base-runs", type=int, default=1, help="warm re-tunes by --base (default 1)")
    ap.add_argument("--cutile", action="store_true", help="first cuda.tile.tune cold over the same space")
    ap.add_argument("--oracle-top", type=int, default=0, help="do_bench only the K fastest of the cold table (0: all)")
    ap.add_argument("--no-oracle", action="store_true")
    ap.add_argument("--no-warm", action="store_true", help="skip the plain warm re-tune (the kept-warm ones only)")
    ap.add_argument("--no-graph", action="store_true", help="skip the --timing graph re-tune")
    ap.add_argument("--report", action="store_true")
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    if a.report:
        with open(os.path.join(a.out, "summary.json"), encoding="utf-8") as f:
            d = json.load(f)
        print(summary(d["rows"], d["oracles"]))
        return 0
    rows, oracles = [], {}
    for kernel in a.kernels.split(","):
        store = os.path.join(a.out, f"store-{kernel}.sqlite")
        for p in (store, os.path.join(a.out, f"cutile-cache-{kernel}")):
            shutil.rmtree(p, ignore_errors=True) if os.path.isdir(p) else (os.path.exists(p) and os.remove(p))
        if a.cutile:
            rows.append(cutile(a.out, kernel, ROOT))
        rows.append(run(a.out, kernel, "cold", ROOT, store, []))
        if not a.no_warm:
            rows.append(run(a.out, kernel, "warm", ROOT, store, []))
        for i in range(1, a.keep_warm_runs + 1):
            rows.append(run(a.out, kernel, f"kw{i}", ROOT, store, ["--keep-warm", "120"]))
        if a.base:
            base_store = os.path.join(a.out, f"store-{kernel}-base.sqlite")
            shutil.copyfile(store, base_store)
            for i in range(1, a.base_runs + 1):
                rows.append(run(a.out, kernel, "base" if i == 1 else f"base{i}", a.base, base_store, []))
        if not a.no_graph:
            rows.append(run(a.out, kernel, "graph", ROOT, store, ["--timing", "graph", "--keep-warm", "120"]))
        if a.base and kernel in a.base_graph.split(","):
            rows.append(run(a.out, kernel, "base-graph", a.base, os.path.join(a.out, f"store-{kernel}-base.sqlite"),
                            ["--timing", "graph"]))
        if not a.no_oracle:
            labels = None
            if a.oracle_top:
                table = next((r.get("table") for r in rows if r["kernel"] == kernel and r["run"] == "cold"), None) or []
                labels = sorted({lab for _, lab in table[:a.oracle_top]} |
                                {r["pick"] for r in rows if r["kernel"] == kernel and r.get("pick")})
            oracles[kernel] = oracle(a.out, kernel, labels, ROOT)
        with open(os.path.join(a.out, "summary.json"), "w", encoding="utf-8") as f:
            json.dump({"rows": rows, "oracles": oracles}, f, indent=1)
    stop = [sys.executable, "-c", "from tileprobe.run.keepwarm import stop_server; print('stopped', stop_server())"]
    subprocess.run(stop, env=_env(ROOT, a.out, "x"), timeout=60)
    text = summary(rows, oracles)
    with open(os.path.join(a.out, "summary.txt"), "w", encoding="utf-8") as f:
        f.write(text + "\n")
    with open(os.path.join(a.out, "summary.json"), "w", encoding="utf-8") as f:
        json.dump({"rows": rows, "oracles": oracles}, f, indent=1)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
