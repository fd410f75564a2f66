"""``tileprobe run PROBE… [--arch sm_90] [--bundle DIR] [--timeout S] [--reps N] [--json FILE] [--format …]``.

Audits the probes for this GPU's architecture (or loads the audit a ``--bundle`` directory carries from a machine
with tileiras), then checks and times every variant in a worker under a watchdog, and prints the audit table
with status, time and occupancy columns, and the best hint per case with its speed-up over the default.
Exit code: 0 when the sweep ran (``wrong``/``hang``/``crash`` variants are results), 1 when it could not run.
"""
from __future__ import annotations

import sys

from ..errors import TileprobeError


def add_parser(subparsers, add_common) -> None:
    """Register ``tileprobe run`` (the CLI's plug-in hook)."""
    from .timing import DEFAULT_REPS
    from .watchdog import DEFAULT_TIMEOUT_S
    p = subparsers.add_parser("run", help="check and time every variant on this machine's GPU (hangs and crashes "
                              "are contained)", description=__doc__.split("\n\n")[1])
    p.add_argument("probes", nargs="*", metavar="PROBE", help="probe files (with --bundle: which of its probes to "
                   "run, and where their files are on this machine; default all)")
    p.add_argument("--arch", help="target to audit and run (default: this GPU's, e.g. sm_90)")
    p.add_argument("--bundle", metavar="DIR", help="run the audit in DIR (audit.json + cubins/<sha256>.cubin, "
                   "written by `tileprobe audit --bundle DIR` where tileiras is) instead of compiling here")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S,
                   help=f"per-variant limit in seconds before it is called a hang (default {DEFAULT_TIMEOUT_S:g})")
    p.add_argument("--reps", type=int, default=DEFAULT_REPS, help=f"timed repetitions (default {DEFAULT_REPS})")
    p.add_argument("--warmup", type=int, default=None, help="minimum warm-up launches (default 10, and ≥ 25 ms)")
    p.add_argument("--seed", type=int, default=0, help="base seed of the random inputs (variant i uses seed + i)")
    p.add_argument("--timing", choices=["sustained", "burst"], default="sustained", help="sustained: back to back "
                   "as triton's do_bench (default); burst: samples each alone, as cuda.tile.tune (docs/TUNE.md)")
    p.add_argument("--jobs", "-j", type=int, default=None, help="parallel compiles for the audit (default: all CPUs)")
    p.add_argument("--store", metavar="PATH", help="results store (default: the user data dir)")
    p.add_argument("--no-store", action="store_true", help="do not read or write the results store")
    p.set_defaults(func=cmd_run)
    add_common(p)


def cmd_run(args) -> int:
    """Run ``tileprobe run`` for parsed arguments; returns the exit code."""
    from rich.console import Console
    from .session import run_probes
    from .watchdog import Watchdog
    err = Console(stderr=True, highlight=False)
    if not args.probes and not args.bundle:
        raise TileprobeError("give probe files to audit and run, or --bundle DIR with an audit made elsewhere")
    store = None if args.bundle or args.no_store else _store(args)
    with Watchdog(timeout_s=args.timeout) as wd:
        gpu = wd.start()
        err.print(f"GPU: {gpu.get('name')} ({gpu.get('sm')}, {gpu.get('num_sms')} SMs, driver {gpu.get('driver')})")
        records, env, cubins, search = _audit_or_bundle(args, gpu, err, store)
        result = run_probes(records, cubins, probe_paths=args.probes, search_dirs=search, timeout_s=args.timeout,
                            reps=args.reps, warmup=args.warmup, seed=args.seed, watchdog=wd, environment=env,
                            timing_mode=args.timing,
                            progress=lambda i, n, r: err.print(f"[{i}/{n}] {_label(r)}: {run_cell(r)}",
                                                               markup=False))
    if store is not None:
        _save_runs(store, result, err)
    emit(result, args)
    for s in result.skipped:
        err.print(f"skipped: {s}", markup=False)
    counts = {}
    for r in result.records:
        if r.run:
            counts[r.run["status"]] = counts.get(r.run["status"], 0) + 1
    err.print(f"{result.ran} variants run ({', '.join(f'{n} {s}' for s, n in sorted(counts.items())) or 'none'}), "
              f"{result.restarts} worker restarts, {result.wall_s:.1f} s", markup=False)
    if result.aborted:
        err.print(f"[bold red]sweep stopped[/]: {result.aborted}")
        return 1
    return 0


def _audit_or_bundle(args, gpu: dict, err, store):
    import os
    from ..arch import get_arch
    if args.bundle:
        from .session import load_bundle
        records, env, cubins = load_bundle(args.bundle)
        if args.probes:
            names = {os.path.basename(p) for p in args.probes}
            records = [r for r in records if os.path.basename(r.probe) in names]
        if args.arch:
            records = [r for r in records if get_arch(r.arch).name == get_arch(args.arch).name]
        return records, env, cubins, [args.bundle, os.getcwd()]
    from ..audit import audit
    arch = get_arch(args.arch or gpu["sm"]).name
    result = audit(args.probes, [arch], jobs=args.jobs, store=store)
    if store is not None:
        store.save_audit(result, " ".join(["tileprobe", *sys.argv[1:]]))
    for e in result.probe_errors:
        err.print(f"[red]probe error[/]: {e}")
    return result.records, result.environment, result.cubins, [os.getcwd()]


def _store(args):
    from ..store import Store
    return Store.open(args.store)


def _save_runs(store, result, err) -> None:
    from ..errors import StoreError
    gpu = result.environment.get("gpu", {})
    for r in result.records:
        if r.run:
            try:
                store.save_run(r, r.run, gpu)
            except StoreError as e:
                err.print(f"not stored: {e}", markup=False)
                return


# --- output ------------------------------------------------------------------------------------------------

def _label(r) -> str:
    return " ".join([r.kernel, r.arch, *(f"{k}={v}" for k, v in [*r.case.items(), *r.hints.items()])])


def run_cell(r) -> str:
    """``ok 26.0 µs ±1.2%`` / ``wrong (rel err 0.31)`` / ``hang`` … for one record."""
    run = r.run or {}
    st = run.get("status")
    if st is None:
        return "-"
    t = f" {run['median_us']:,.1f} µs ±{run.get('spread_pct') or 0:.1f}%" if run.get("median_us") is not None else ""
    if st == "wrong" and run.get("rel_err") is not None:
        return f"wrong (rel err {run['rel_err']:.3g}){t}"
    return f"{st}{t}"


#: (header, cell function) pairs for the run columns beside the audit's.
RUN_COLUMNS = [
    ("status", lambda r: (r.run or {}).get("status") or "-"),
    ("median µs", lambda r: _fmt((r.run or {}).get("median_us"), ",.1f")),
    ("IQR %", lambda r: _fmt((r.run or {}).get("spread_pct"), ".1f")),
    ("rel err", lambda r: _fmt((r.run or {}).get("rel_err"), ".2g")),
    ("drv CTAs/SM", lambda r: _occ_cell(r.run or {})),
]


def _fmt(v, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def _occ_cell(run: dict) -> str:
    d = run.get("driver_ctas_per_sm")
    if d is None:
        return "-"
    return f"{d}" if run.get("occupancy_agrees") is not False else f"{d} ≠ {run.get('static_ctas_per_sm')}"


def best_lines(records) -> list[str]:
    """One line per kernel case: the fastest correct hint and its speed-up over the default variant."""
    from .session import best_hints
    out = []
    for b in best_hints(records):
        case = " ".join(f"{k}={v}" for k, v in b["case"].items())
        hints = " ".join(f"{k}={v}" for k, v in b["best_hints"].items()) or "declared hints"
        line = f"{b['kernel']} {b['arch']} {case}: best {hints} {b['best_us']:,.1f} µs"
        if b["speedup"] is not None:
            dflt = " ".join(f"{k}={v}" for k, v in b["default_hints"].items()) or "declared hints"
            line += f", {b['speedup']:.2f}× vs default {dflt} {b['default_us']:,.1f} µs"
        out.append(line)
    return out


def run_markdown(records, environment: dict, command: str = "") -> str:
    """The audit's Markdown, then a run table (status, times, error, occupancy) and the best hints."""
    from ..report.markdown import audit_markdown, table_md
    parts = [audit_markdown(records, environment, command=command), "\n## tileprobe run\n\n"]
    gpu = environment.get("gpu") or {}
    if gpu:
        parts.append(f"GPU: {gpu.get('name')} ({gpu.get('sm')}), driver {gpu.get('driver')}, SM clock "
                     f"{gpu.get('clock_sm_mhz')} MHz (max {gpu.get('clock_max_sm_mhz')}), "
                     f"memory clock {gpu.get('clock_mem_mhz')} MHz\n\n")
    rows = [[r.kernel, r.arch, " ".join(f"{k}={v}" for k, v in r.case.items()) or "-",
             " ".join(f"{k}={v}" for k, v in r.hints.items()) or "-", *[fn(r) for _, fn in RUN_COLUMNS],
             ((r.run or {}).get("error") or "").splitlines()[0][:120] if (r.run or {}).get("error") else ""]
            for r in records if r.run]
    parts.append(table_md(["kernel", "arch", "case", "hints", *[h for h, _ in RUN_COLUMNS], "error"], rows))
    best = best_lines(records)
    if best:
        parts.append("\n" + "\n".join(f"- {b}" for b in best) + "\n")
    return "".join(parts)


def emit(result, args) -> None:
    """Write the JSON (``--json``) and print the tables (``--format``)."""
    from ..schema import write_json
    if args.json:
        write_json(result.records, result.environment, args.json)
    fmt = getattr(args, "format", "table")
    if fmt == "markdown":
        sys.stdout.write(run_markdown(result.records, result.environment,
                                      command=" ".join(["tileprobe", *sys.argv[1:]])))
    elif fmt == "table" and args.json != "-":
        from rich.console import Console
        from ..report.terminal import render_audit
        console = Console(highlight=False, width=None if sys.stdout.isatty() else 200)   # logs: no squeezing
        render_audit(result.records, console, extra_columns=RUN_COLUMNS)
        for r in result.records:
            run = r.run or {}
            if run.get("status") not in (None, "ok") or run.get("warnings"):
                msg = (run.get("error") or "").strip().splitlines()
                if run.get("status") != "ok":
                    console.print(f"  {_label(r)}: {run.get('status')}: {msg[0] if msg else ''}", markup=False)
                for w in run.get("warnings") or []:
                    console.print(f"  {_label(r)}: warning: {w}", markup=False)
        for line in best_lines(result.records):
            console.print(line, markup=False)
