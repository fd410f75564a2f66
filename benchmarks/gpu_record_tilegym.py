"""Record a TileGym program on a GPU, audit the recorded probes, and compare machine code with JIT (issue 12).

Step 1, on the GPU machine (tileiras on PATH, CUDA_HOME unset)::

    python3 benchmarks/gpu_record_tilegym.py record --out OUT

runs ``benchmarks/tilegym_workload.py`` (6 TileGym ops through their public torch API, outputs checked against torch)
under ``tileprobe record`` with a fresh cuTile compile cache (``OUT/cutile-cache``), so every cubin JIT builds lands
there; writes the probes (``OUT/record/probes``, ``OUT/record/record.json``), the JIT cubins (``OUT/jit/*.cubin`` +
``index.json``), probes read back from the compile cache (``OUT/from-cache``) and ``OUT/environment.json``.

Step 2, where tileiras is (the CPU machine, or the GPU machine itself)::

    python benchmarks/gpu_record_tilegym.py check --out OUT

audits, for the arch the JIT cubins are for, exactly the variants the program launched (each recorded case with
the hints it was launched with), and compares each audited cubin's machine-code hash (``CubinInfo.code_sha256``)
with the JIT cubin of the same symbol and the same embedded hints. Prints a table, writes ``OUT/check.json``, exits
0 when every launched variant matches. ``all`` runs both steps on one machine.
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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
WORKLOAD = os.path.join(ROOT, "benchmarks", "tilegym_workload.py")


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
    """Copy every cubin of cuTile's compile cache to ``out_dir/<key>.cubin`` with its symbols (``index.json``)."""
    os.makedirs(out_dir, exist_ok=True)
    conn = sqlite3.connect(f"file:{os.path.join(cache_dir, 'cache.db')}?mode=ro", uri=True)
    rows = conn.execute("SELECT key, blob, metadata FROM cache").fetchall()
    conn.close()
    index = []
    for key, blob, meta in rows:
        md = json.loads(meta) if meta else {}
        with open(os.path.join(out_dir, key + ".cubin"), "wb") as f:
            f.write(bytes(blob))
        index.append({"file": key + ".cubin", "symbols": md.get("kernel_names") or [],
                      "compiler_version": (md.get("compiler_version") or "").strip().splitlines()[-2:],
                      "compile_s": md.get("compilation_time_seconds")})
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
        with open(os.path.join(out, "jit", e["file"]), "rb") as f:
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


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("step", choices=["record", "check", "all"])
    p.add_argument("--out", required=True, help="folder for everything this writes")
    p.add_argument("--autotune", action="store_true", help="let TileGym autotune (default: TILEGYM_DISABLE_AUTOTUNE=1)")
    p.add_argument("--top", type=int, default=10, help="cases per probe")
    p.add_argument("--jobs", type=int, default=None, help="parallel compiles in the check")
    a = p.parse_args()
    rc = 0
    if a.step in ("record", "all"):
        rc = step_record(a.out, a.autotune, a.top)
    if a.step in ("check", "all") and rc == 0:
        rc = step_check(a.out, a.jobs)
    return rc


if __name__ == "__main__":
    sys.exit(main())
