"""Record a TileGym program on a GPU, audit the recorded probes, and compare machine code with JIT.

Step 1, on the GPU machine (tileiras on PATH, CUDA_HOME unset)::

    python3 benchmarks/programs/gpu_record_tilegym.py record --out OUT

runs ``benchmarks/programs/tilegym_workload.py`` (6 TileGym ops through their public torch API, outputs checked against torch)
under ``tileprobe record`` with a fresh cuTile compile cache (``OUT/cutile-cache``), so every cubin JIT builds lands
there; writes the probes (``OUT/record/probes``, ``OUT/record/record.json``), the JIT cubins (``OUT/jit/*.cubin`` +
``index.json``), probes read back from the compile cache (``OUT/from-cache``) and ``OUT/environment.json``.

Step 2, where tileiras is (the CPU machine, or the GPU machine itself)::

    python benchmarks/programs/gpu_record_tilegym.py check --out OUT

audits, for the arch the JIT cubins are for, exactly the variants the program launched (each recorded case with
the hints it was launched with), and compares each audited cubin's machine-code hash (``CubinInfo.code_sha256``)
with the JIT cubin of the same symbol and the same embedded hints. Prints a table, writes ``OUT/check.json``, exits
0 when every launched variant matches. ``all`` runs both steps on one machine.

Step 3, ``tune``, on the GPU machine (≤ 3 minutes; every file under ``OUT/tune``)::

    python3 benchmarks/programs/gpu_record_tilegym.py tune --out OUT [--record DIR] [--budget 45]

takes the recorded probe of TileGym's softmax kernel (``DIR/probes/_softmax_kernel.py``, default ``OUT/record``;
when it is missing, records ``tilegym_workload.py --ops softmax`` into ``OUT/tune/record`` first), writes a tunable form of it beside
the results (:data:`FITS`: the problem named by the kernel's parameters, the output checked against torch, the
hints TileGym itself tunes for this kernel), runs ``tileprobe tune … --export OUT/tune/tuned.json``, then
``benchmarks/programs/tilegym_tuned_softmax.py``, a host program that reads the table with the README's reader (no
tileprobe), launches the kernel with ``replace_hints(**hints)`` and checks it against ``torch.softmax``. One line
per step; exit 0 when the tune named a configuration and the host program's output was right. ``--dry-run`` (no
GPU): the probe written and loaded, the candidates compiled and deduplicated (``tileprobe tune --dry-run``), and,
with ``--table FILE``, the host program's dry run on that table; without a record folder it uses the H200
recording kept in ``tests/data/record/h200``.
"""
from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import shutil
import sqlite3
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
WORKLOAD = os.path.join(ROOT, "benchmarks", "programs", "tilegym_workload.py")
HOST_PROGRAM = os.path.join(ROOT, "benchmarks", "programs", "tilegym_tuned_softmax.py")
H200_LOG = os.path.join(ROOT, "tests", "data", "record", "h200", "launches-tilegym-2026-12-01.jsonl")


def _version(pkg: str) -> str | None:
    try:
        return importlib.metadata.version(pkg)
    except importlib.metadata.PackageNotFoundError:
        return None


def _tileiras() -> dict:
    path = shutil.which("tileiras")
    out = {"path": path, "build": None}
    if path:
        env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH")}
        proc = subprocess.run([path, "--version"], capture_output=True, text=True, env=env)
        out["build"] = [ln for ln in proc.stdout.splitlines() if "release" in ln][-1:] or proc.stdout.strip()
    return out


def environment() -> dict:
    """Provenance of this machine: Python, packages, tileiras, GPU and driver (nvidia-smi), CUDA_HOME."""
    env = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "python": sys.version.split()[0],
           "cuda_tile": _version("cuda-tile"), "tilegym": _version("tilegym"), "torch": _version("torch"),
           "tileiras": _tileiras(), "CUDA_HOME": os.environ.get("CUDA_HOME")}
    if shutil.which("nvidia-smi"):
        q = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.max.sm",
                            "--format=csv,noheader"], capture_output=True, text=True)
        env["gpu"] = q.stdout.strip()
    return env


# --- step 1: record --------------------------------------------------------------------------------------

def export_jit_cubins(cache_dir: str, out_dir: str) -> list[dict]:
    """Copy every cubin of cuTile's compile cache to ``out_dir/<key>.cubin``; ``index.json`` lists each with its
    symbols, arch, machine-code hash and embedded hints, so the check can run from the index alone (the GPU
    session's results are packed without cubins)."""
    from tileprobe.model.cubin import CubinInfo
    from tileprobe.record.cache import embedded_hints
    os.makedirs(out_dir, exist_ok=True)
    conn = sqlite3.connect(f"file:{os.path.join(cache_dir, 'cache.db')}?mode=ro", uri=True)
    rows = conn.execute("SELECT key, blob, metadata FROM cache").fetchall()
    conn.close()
    index = []
    for key, blob, meta in rows:
        md = json.loads(meta) if meta else {}
        with open(os.path.join(out_dir, key + ".cubin"), "wb") as f:
            f.write(bytes(blob))
        info = CubinInfo.from_bytes(bytes(blob))
        index.append({"file": key + ".cubin", "symbols": md.get("kernel_names") or [],
                      "compiler_version": (md.get("compiler_version") or "").strip().splitlines()[-2:],
                      "compile_s": md.get("compilation_time_seconds"), "arch": info.arch,
                      "code_sha256": info.code_sha256, "hints": embedded_hints(bytes(blob), info.arch)})
    with open(os.path.join(out_dir, "index.json"), "w") as f:
        json.dump(index, f, indent=1)
    return index


def step_record(out: str, autotune: bool, top: int) -> int:
    from tileprobe.record.session import record
    os.makedirs(out, exist_ok=True)
    env = environment()
    print(f"environment: {json.dumps(env)}", flush=True)
    if env["CUDA_HOME"]:
        print("warning: CUDA_HOME is set; an older toolkit there makes tileiras 13.4 fail (unset it)", flush=True)
    cache = os.path.join(out, "cutile-cache")
    shutil.rmtree(cache, ignore_errors=True)
    os.environ["CUDA_TILE_CACHE_DIR"] = cache            # a fresh cache: every JIT compile of the run lands there
    if not autotune:
        os.environ["TILEGYM_DISABLE_AUTOTUNE"] = "1"     # TileGym's fixed choices (e.g. RoPE occupancy=9)
    result = record([sys.executable, WORKLOAD], os.path.join(out, "record"), top=top, force=True)
    print(f"workload exit code {result.exit_code}; {result.recording.total_launches} launches in "
          f"{len(result.recording.processes)} process(es); {len(result.written)} probe(s):", flush=True)
    for path, plan in result.written:
        print(f"  {os.path.relpath(path, out)}: {plan.kernel.spec()} — {plan.total} launches, "
              f"{len(plan.cases)} case(s), hints {plan.hints}", flush=True)
    for note in result.notes + result.recording.errors:
        print(f"  note: {note}", flush=True)
    index = export_jit_cubins(cache, os.path.join(out, "jit"))
    print(f"{len(index)} JIT cubin(s) in the compile cache -> {os.path.join(out, 'jit')}", flush=True)
    try:
        from tileprobe.record.cache import probes_from_cache
        fc = probes_from_cache(cache, os.path.join(out, "from-cache"), kernels=["tilegym.ops.cutile"], force=True)
        print(f"{len(fc.written)} probe skeleton(s) from the compile cache -> {os.path.join(out, 'from-cache')}")
    except Exception as e:   # a bonus: the check does not depend on it
        print(f"  note: probes from the cache not written: {type(e).__name__}: {e}")
    env["workload_exit_code"] = result.exit_code
    with open(os.path.join(out, "environment.json"), "w") as f:
        json.dump(env, f, indent=1)
    return 0 if result.written else 1


# --- step 2: check ---------------------------------------------------------------------------------------

def _jit_entries(out: str) -> list[dict]:
    from tileprobe.model.cubin import CubinInfo
    from tileprobe.record.cache import embedded_hints
    with open(os.path.join(out, "jit", "index.json")) as f:
        index = json.load(f)
    entries = []
    for e in index:
        path = os.path.join(out, "jit", e["file"])
        if not os.path.exists(path) and "code_sha256" in e:
            entries.append(e)            # packed without its cubin: the index has what the check needs
            continue
        with open(path, "rb") as f:
            data = f.read()
        info = CubinInfo.from_bytes(data)
        entries.append({**e, "arch": info.arch, "code_sha256": info.code_sha256,
                        "hints": embedded_hints(data, info.arch)})
    return entries


def launched_variants(summary: dict, record_dir: str) -> set:
    """(probe path, case label, sorted variant hints) of every launched variant in ``record.json``."""
    wanted = set()
    for p in summary["probes"]:
        path = os.path.abspath(os.path.join(record_dir, p["file"]))
        for c in p["cases"]:
            for launched in c["launched"]:
                wanted.add((path, c["label"], json.dumps(launched["variant_hints"], sort_keys=True)))
    return wanted


def step_check(out: str, jobs: int | None) -> int:
    from tileprobe.audit import audit
    from tileprobe.record.cache import embedded_hints
    record_dir = os.path.join(out, "record")
    with open(os.path.join(record_dir, "record.json")) as f:
        summary = json.load(f)
    jit = _jit_entries(out)
    archs = sorted({e["arch"] for e in jit})
    wanted = launched_variants(summary, record_dir)
    paths = sorted({w[0] for w in wanted})
    print(f"auditing {len(wanted)} launched variant(s) of {len(paths)} probe(s) for {', '.join(archs)}; "
          f"{len(jit)} JIT cubin(s) to compare with", flush=True)
    res = audit(paths, archs, jobs=jobs, select=lambda v: (
        os.path.abspath(v.probe_path), v.case_dict.get("launch"), json.dumps(v.hints_dict, sort_keys=True)) in wanted)
    rows = []
    for r in res.records:
        row = {"kernel": r.kernel, "case": r.case.get("launch"), "hints": r.hints, "arch": r.arch,
               "status": r.status, "symbol": r.symbol, "audit_code_sha256": r.code_sha256, "error": r.error}
        same_symbol = [e for e in jit if r.symbol in e["symbols"] and e["arch"] == r.arch]
        if r.ok:
            mine = embedded_hints(res.cubins[r.cubin_sha256], r.arch)
            same = [e for e in same_symbol if e["hints"] == mine] or same_symbol
            row["jit_code_sha256"] = sorted({e["code_sha256"] for e in same})
            row["result"] = ("match" if r.code_sha256 in row["jit_code_sha256"] else
                             "no JIT cubin" if not same else "DIFFERENT")
        else:
            row["result"] = r.status
        rows.append(row)
    for p in res.probe_errors:
        rows.append({"kernel": "?", "result": "probe_error", "error": p})
    matched = sum(1 for r in rows if r["result"] == "match")
    kernels = {r["kernel"] for r in rows if r["result"] == "match"}
    print(f"{'kernel':42s} {'case':4s} {'hints':28s} {'audit code':14s} {'JIT code':14s} result")
    for r in rows:
        print(f"{r['kernel'][:42]:42s} {str(r.get('case')):4s} {json.dumps(r.get('hints'))[:28]:28s} "
              f"{(r.get('audit_code_sha256') or '-')[:12]:14s} {','.join(x[:12] for x in r.get('jit_code_sha256', [])) or '-':14s} "
              f"{r['result']}{': ' + r['error'][:120] if r.get('error') and r['result'] != 'match' else ''}")
    covered = {r["symbol"] for r in rows}
    extra = [e for e in jit if not set(e["symbols"]) & covered]
    print(f"{matched} of {len(rows)} launched variant(s) have the JIT cubin's machine code, {len(kernels)} kernel(s); "
          f"{len(extra)} JIT cubin(s) belong to no launched variant (autotune trials, backward kernels ...)")
    data = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "environment": environment(),
            "audit_environment": res.environment, "rows": rows, "matched": matched, "kernels_matched": sorted(kernels),
            "jit_cubins": len(jit), "jit_cubins_not_launched": [e["symbols"] for e in extra]}
    with open(os.path.join(out, "check.json"), "w") as f:
        json.dump(data, f, indent=1)
    return 0 if rows and matched == len(rows) else 1


# --- step 3: tune a recorded probe and read its export back from host code --------------------------------

#: How a recorded probe is made tunable, per kernel: the arguments it writes (``arrays.empty``: poisoned, checked),
#: the problem's names (the kernel's own parameter names) with the recorded argument that holds each value, the
#: reference (a lambda on the launch arguments as torch tensors), the hints to tune, the grid as the host computes
#: it, and the host program that reads the table. Softmax: tilegym 1.5.1 ``ops/cutile/softmax.py``
#: (``_launch_softmax_kernel``: grid ``min(SMs x 4, rows)``; it tunes ``num_worker_warps`` over None, 4, 8 at the
#: declared occupancy 4; "worker warps above 8 can hang the gather kernels").
FITS = {
    "_softmax_kernel": {
        "outputs": (0,),
        "problem": {"N_ROWS": 2, "DIM_COLS": 4},
        "reference": "lambda case, a: {0: torch.softmax(a[1].float(), dim=-1).to(a[0].dtype)}",
        "hints": {"occupancy": [None, 1, 2, 8], "num_worker_warps": [None, 4, 8]},
        "grid": "lambda case, hints, num_sms: (min(num_sms * 4, case['N_ROWS']), 1, 1)",
        "host": HOST_PROGRAM,
        "ops": "softmax",
    },
}


def tunable_probe(recorded: str, kernel: str, out_dir: str, hints: dict | None = None) -> tuple[str, dict]:
    """Write ``out_dir/<kernel>_tunable.py``: the recorded probe ``recorded`` (imported by path: its kernel,
    arguments and case) made tunable per :data:`FITS`. Returns (path, problem values)."""
    fit = FITS[kernel]
    import importlib.util
    from tileprobe.probe.define import SpecArrays
    spec = importlib.util.spec_from_file_location(f"recorded_{kernel}", recorded)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)                           # the recorded probe: ARGS, LAUNCHES, probe
    label = mod.probe.cases["launch"][0]                   # the most frequent case
    launched = mod.ARGS[label](SpecArrays())
    problem = {name: launched[i] for name, i in fit["problem"].items()}
    rel = os.path.relpath(os.path.abspath(recorded), os.path.abspath(out_dir))
    lines = [
        f'"""{kernel} from the recorded probe {rel} (case {label}), made tunable by',
        "benchmarks/programs/gpu_record_tilegym.py tune: the problem named by the kernel's parameters "
        f"({', '.join(problem)}),",
        f"outputs {list(fit['outputs'])} poisoned and checked against torch, the grid as the host computes it, "
        "and the hints to tune.",
        '"""',
        "import importlib.util", "import os", "", "import torch", "", "from tileprobe import Probe", "",
        "_spec = importlib.util.spec_from_file_location(",
        f"    'recorded_{kernel}', os.path.join(os.path.dirname(os.path.abspath(__file__)), {rel!r}))",
        "recorded = importlib.util.module_from_spec(_spec)", "_spec.loader.exec_module(recorded)",
        f"LABEL = {label!r}", f"PROBLEM = {problem!r}", f"OUTPUTS = {tuple(fit['outputs'])!r}", "", "",
        "def args(case, arrays):",
        "    assert {k: case[k] for k in PROBLEM} == PROBLEM, 'only the recorded problem is described'",
        "    a = list(recorded.ARGS[LABEL](arrays))",
        "    for i in OUTPUTS:",
        "        a[i] = arrays.empty(tuple(a[i].shape), a[i].dtype)",
        "    return tuple(a)", "", "",
        "probe = Probe(", "    kernel=recorded.probe.kernel,", "    args=args,",
        "    cases={k: [v] for k, v in PROBLEM.items()},",
        f"    hints={hints or fit['hints']!r},",
        f"    grid={fit['grid']},", f"    reference={fit['reference']},", f"    name={kernel!r},", ")", ""]
    path = os.path.join(out_dir, f"{kernel}_tunable.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
    return path, problem


def _recorded_probe(out: str, record_dir: str, kernel: str, dry_run: bool) -> tuple[str, str]:
    """The recorded probe file and how it came to be: found in ``record_dir``, else made in ``OUT/tune/record``
    (recorded now, or from the H200 log in a dry run; an existing recording is never replaced)."""
    for folder in (record_dir, os.path.join(out, "tune", "record")):
        path = os.path.join(folder, "probes", f"{kernel}.py")
        if os.path.exists(path):
            return path, f"recorded probe {path}"
    record_dir = os.path.join(out, "tune", "record")
    if dry_run:
        from tileprobe.record.session import probes_from_log
        from tileprobe.record.hook import launch_dir
        os.makedirs(launch_dir(record_dir), exist_ok=True)
        shutil.copy(H200_LOG, launch_dir(record_dir))
        probes_from_log(record_dir)
        return path, f"no GPU: probes from the H200 recording {os.path.relpath(H200_LOG, ROOT)} -> {path}"
    from tileprobe.record.session import record
    os.environ["CUDA_TILE_CACHE_DIR"] = os.path.join(out, "tune", "cutile-cache")
    os.environ["TILEGYM_DISABLE_AUTOTUNE"] = "1"
    result = record([sys.executable, WORKLOAD, "--ops", FITS[kernel]["ops"]], record_dir, force=True)
    if result.exit_code != 0 or not os.path.exists(path):
        raise SystemExit(f"[tune 1/4] recording {WORKLOAD} --ops {FITS[kernel]['ops']} failed (exit "
                         f"{result.exit_code}); see {record_dir}")
    return path, f"recorded {result.recording.total_launches} launch(es) of tilegym_workload.py --ops " \
                 f"{FITS[kernel]['ops']} -> {path}"


def _tune_line(res_json: str, export: str, took_s: float) -> tuple[str, bool]:
    with open(res_json) as f:
        res = json.load(f)
    problems = res.get("problems") or []
    if not problems:
        return f"no problem tuned ({took_s:.0f} s)", False
    p = problems[0]
    cands = [c for c in p.get("candidates", []) if c.get("config")]
    dropped = ", ".join(f"{n} {rule}" for rule, n in sorted((p.get("dropped") or {}).items())) or "none dropped"
    if p.get("verdict") == "not_run":
        to_time = sum(1 for c in cands if c.get("status") == "ok")
        return f"{len(cands)} candidate(s) compiled, {to_time} to time ({dropped}); {took_s:.0f} s", False
    pick = p.get("pick") or {}
    named = p.get("verdict") in ("winner", "tie")
    where = f"; export {export}" if named and export else ""
    return (f"{p.get('verdict')}: {pick.get('label', '-')} {pick.get('median_us') or 0:.1f} us "
            f"(check: {(pick.get('check') or {}).get('status', '-')}); {len(cands)} candidate(s)"
            f"{where}; {took_s:.0f} s"), named


def step_tune(out: str, record_dir: str | None, kernel: str, budget_s: float, jobs: int | None, dry_run: bool,
              hints: dict | None, table: str | None) -> int:
    import time
    tune_dir = os.path.join(out, "tune")
    os.makedirs(tune_dir, exist_ok=True)
    record_dir = record_dir or os.path.join(out, "record")
    recorded, how = _recorded_probe(out, record_dir, kernel, dry_run)
    print(f"[tune 1/4] {how}", flush=True)
    probe_path, problem = tunable_probe(recorded, kernel, tune_dir, hints)
    from tileprobe.probe.define import load_probes
    probe = load_probes(probe_path)[0]
    print(f"[tune 2/4] tunable probe {probe_path}: problem {problem}, hints {probe.hints} "
          f"({len(probe.hint_grid())} configurations)", flush=True)
    export = None if dry_run else os.path.join(tune_dir, "tuned.json")
    res_json = os.path.join(tune_dir, "tune.json")
    cmd = [sys.executable, "-m", "tileprobe.cli", "tune", probe_path, "--store", os.path.join(tune_dir, "results.sqlite"),
           "--json", res_json]
    cmd += ["--dry-run", "--arch", "sm_90", "--num-sms", "132"] if dry_run else ["--export", export, "--budget",
                                                                                  str(budget_s)]
    cmd += ["--jobs", str(jobs)] if jobs else []
    t0 = time.perf_counter()
    with open(os.path.join(tune_dir, "tune.txt"), "w") as log:
        log.write("$ " + " ".join(cmd) + "\n")
        log.flush()
        proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=tune_dir, timeout=budget_s + 120)
    took = time.perf_counter() - t0
    if proc.returncode != 0 or not os.path.exists(res_json):
        print(f"[tune 3/4] tileprobe tune failed (exit {proc.returncode}, {took:.0f} s): see {tune_dir}/tune.txt")
        return 1
    line, named = _tune_line(res_json, export, took)
    print(f"[tune 3/4] tileprobe tune{' --dry-run' if dry_run else ''}: {line} (log {tune_dir}/tune.txt)", flush=True)
    table = table or export
    if table is None:
        print("[tune 4/4] host program: skipped (a dry run exports no table; --table FILE reads one)")
        return 0
    if not dry_run and not named:
        print("[tune 4/4] host program: skipped (the tune named no configuration)")
        return 1
    rc, line = run_host(kernel, table, problem, tune_dir, dry_run)
    print(f"[tune 4/4] {line}", flush=True)
    return rc


def run_host(kernel: str, table: str, problem: dict, tune_dir: str, dry_run: bool) -> tuple[int, str]:
    """Run the kernel's host program on ``table`` with no tileprobe on its path (its output in
    ``tune_dir/host.txt``); return its exit code and the line to print."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                                        if p and os.path.realpath(p) != os.path.realpath(ROOT))
    env["CUDA_TILE_CACHE_DIR"] = os.path.join(tune_dir, "cutile-cache")
    host = [sys.executable, FITS[kernel]["host"], table, "--rows", str(problem["N_ROWS"]), "--cols",
            str(problem["DIM_COLS"])] + (["--dry-run"] if dry_run else [])
    proc = subprocess.run(host, capture_output=True, text=True, env=env, cwd=tune_dir, timeout=120)
    with open(os.path.join(tune_dir, "host.txt"), "w") as f:
        f.write("$ " + " ".join(host) + "\n" + proc.stdout + proc.stderr)
    last = (proc.stdout.strip().splitlines() or [f"no output; exit {proc.returncode}"])[-1]
    return proc.returncode, f"{last} (exit {proc.returncode}; log {tune_dir}/host.txt)"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("step", choices=["record", "check", "all", "tune"])
    p.add_argument("--out", required=True, help="folder for everything this writes")
    p.add_argument("--autotune", action="store_true", help="let TileGym autotune (default: TILEGYM_DISABLE_AUTOTUNE=1)")
    p.add_argument("--top", type=int, default=10, help="cases per probe")
    p.add_argument("--jobs", type=int, default=None, help="parallel compiles in the check and the tune")
    p.add_argument("--record", help="tune: the record folder (default OUT/record; recorded when it lacks the probe)")
    p.add_argument("--kernel", default="_softmax_kernel", choices=sorted(FITS), help="tune: the recorded kernel")
    p.add_argument("--budget", type=float, default=45.0, help="tune: seconds for the race (default 45)")
    p.add_argument("--hints", type=json.loads, default=None, help="tune: the hint grid as JSON (default: FITS)")
    p.add_argument("--dry-run", action="store_true", help="tune: no GPU (compile and dedupe only)")
    p.add_argument("--table", help="tune: the host program reads this table (default: the tune's export)")
    a = p.parse_args()
    rc = 0
    if a.step == "tune":
        return step_tune(a.out, a.record, a.kernel, a.budget, a.jobs, a.dry_run, a.hints, a.table)
    if a.step in ("record", "all"):
        rc = step_record(a.out, a.autotune, a.top)
    if a.step in ("check", "all") and rc == 0:
        rc = step_check(a.out, a.jobs)
    return rc


if __name__ == "__main__":
    sys.exit(main())
