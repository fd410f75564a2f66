"""``tileprobe run PROBE… [--arch sm_90] [--bundle DIR] [--timeout S] [--reps N] [--json FILE] [--format …]``.

Audits the probes for this GPU's architecture (or loads the audit a --bundle directory carries from a machine
with tileiras), then checks and times every variant in a worker under a watchdog, and prints the audit table
with status, time and occupancy columns, and the best hint per case with its speed-up over the default.
Exit code: 0 when the sweep ran (variants that are wrong, hang or crash are results), 1 when it could not run.

Python call: :func:`tileprobe.run.session.run_sweep`.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

from tileprobe.cli._common import (
    add_executor_options,
    add_output_options,
    add_override_options,
    add_where_option,
    arch_target,
    command_line,
    console,
    count,
    count_or_zero,
    executor_of,
    gpus_of,
    overrides_of,
    seconds,
    where_of,
)
from tileprobe.jsonrecord import from_dict
from tileprobe.report.text import clean, escape, say

# Imports inside functions here are lazy on purpose: at the module head they would add 0.32 s to its import
# (python -X importtime, the 2-core machine, 2026-12-02), paid by every command that imports it.


def add_parser(sub) -> None:
    """Register ``tileprobe run``."""
    from tileprobe.run.timing import DEFAULT_REPS
    from tileprobe.run.watchdog import DEFAULT_TIMEOUT_S
    p = sub.add_parser("run", help="check and time every variant on this machine's GPU (hangs and crashes "
                       "are contained)", description=__doc__.split("\n\n")[1])   # plain text: --help prints it
    p.add_argument("probes", nargs="*", metavar="PROBE", help="probe files (with --bundle: which of its probes to "
                   "run; their code is imported from these files only, never from the paths the bundle records)")
    p.add_argument("--arch", type=arch_target, help="target to audit and run (default: this GPU's, e.g. sm_90)")
    p.add_argument("--bundle", metavar="DIR", help="run the audit in DIR (audit.json + cubins/<sha256>.cubin, "
                   "written by `tileprobe audit --bundle DIR` where tileiras is) instead of compiling here; a bundle "
                   "is data: name its probe files too")
    p.add_argument("--timeout", type=seconds, default=DEFAULT_TIMEOUT_S,
                   help=f"per-variant limit in seconds before it is called a hang (default {DEFAULT_TIMEOUT_S:g})")
    p.add_argument("--reps", type=count, default=DEFAULT_REPS, help=f"timed repetitions (default {DEFAULT_REPS})")
    p.add_argument("--warmup", type=count_or_zero, default=None, help="minimum warm-up launches (default 10, and ≥ 25 ms)")
    p.add_argument("--seed", type=int, default=0, help="base seed of the random inputs (variant i uses seed + i)")
    p.add_argument("--timing", choices=["sustained", "burst", "eager", "graph"], default="sustained",
                   help="sustained: back to back as triton's do_bench (default); burst: samples each alone, as "
                        "cuda.tile.tune; eager: host-inclusive, launch then wait; graph: CUDA-graph replay "
                        "(docs/TUNE.md)")
    p.add_argument("--jobs", "-j", type=count, default=None, help="parallel compiles for the audit (default: all CPUs)")
    p.add_argument("--store", metavar="PATH", help="results store (default: the user data dir)")
    p.add_argument("--no-store", action="store_true", help="do not read or write the results store")
    p.add_argument("--wide", action="store_true", help="every column at full width, whatever the terminal's width")
    p.add_argument("--run-hang-risk", action="store_true", help="launch the variants the register-pool check "
                   "predicts to hang too (default: named before the sweep and recorded as skipped, not launched)")
    add_where_option(p, "variants to run (verdicts still compare every hint value)")
    add_override_options(p)
    add_executor_options(p, gpus=True)
    p.set_defaults(func=cmd_run)
    add_output_options(p)


def cmd_run(args) -> int:
    """Run ``tileprobe run`` for parsed arguments; returns the exit code."""
    from tileprobe.store import Store
    err = console(stderr=True)
    # run_sweep refuses neither probes nor bundle: no store then; a bundle's compiles and runs are stored too
    store = Store.open(args.store) if (args.probes or args.bundle) and not args.no_store else None
    with executor_of(args) as ex:
        result = _sweep(args, ex, store, err)
    if result.store_error:
        say(err, f"not stored: {result.store_error}")
    elif (n := from_dict(_StoredAudit, result.environment).stored_audit) and \
            len({r.tileiras for r in result.records}) == 2:
        say(err, f"stored as audit {n}: compare its two releases with `tileprobe compare {n}`")
    emit(result, args)
    for s in result.skipped:
        say(err, f"skipped: {s}")
    say(err, _summary(result))
    if result.aborted:
        err.print(f"[bold red]sweep stopped[/]: {escape(result.aborted)}", highlight=False)
        return 1
    statuses = [r.run.status for r in result.records if r.run]
    if args.bundle and (not result.ran or all(s == "error" for s in statuses)):   # not a success
        say(err, f"tileprobe: --bundle {args.bundle}: " + ("nothing was run" if not result.ran else
                                                          f"every one of the {len(statuses)} runs failed (error)"))
        return 1
    return 0


def _sweep(args, ex, store, err):
    from tileprobe.report.common import run_cell, run_label
    from tileprobe.run.session import run_sweep
    return run_sweep(
        args.probes, arch=args.arch, bundle=args.bundle, store=store, timeout_s=args.timeout, reps=args.reps,
        warmup=args.warmup, seed=args.seed, jobs=args.jobs, command_line=command_line(), timing_mode=args.timing,
        where=where_of(args), gpus=gpus_of(args), executor=ex, **overrides_of(args),
        run_hang_risk=args.run_hang_risk, on_hang_risk=lambda rs, launched: hang_risk_lines(err, rs, launched),
        on_gpu=lambda gpu: say(err, _gpu_line(gpu)),
        on_probe_error=lambda e: err.print(f"[red]probe error[/]: {escape(e)}", highlight=False),
        progress=lambda i, n, r: say(err, f"[{i}/{n}] {run_label(r)}: {run_cell(r)}"))


def hang_risk_lines(err, records, launched: bool) -> None:
    """Name the variants predicted to hang before a sweep or a race (``run`` and ``tune``)."""
    from tileprobe.run.session import hang_risk_label
    what = "launching them anyway (--run-hang-risk)" if launched else "not launched (--run-hang-risk launches them)"
    say(err, f"predicted hang (register pool) in {len(records)} variant{'s' if len(records) != 1 else ''}: {what}")
    for r in records:
        say(err, f"  {hang_risk_label(r)}: {r.pool_reason}")


@dataclass(frozen=True)
class _StoredAudit:
    """What ``run`` reads of a sweep's environment: the audit id it was stored as (None: not stored)."""
    stored_audit: Any = None


@dataclass(frozen=True)
class _WorkerSlot:
    """One GPU worker of a sweep (:func:`tileprobe.run.multi` writes it): its device ``index``, whether it shared
    its GPU with another worker (``shared_gpu``), and why it failed to start (``error``; None: it started)."""
    index: Any = None
    shared_gpu: Any = None
    error: Any = None


@dataclass(frozen=True)
class _GpuInfo:
    """The GPU a sweep's worker reported (``on_gpu``): name, arch (``sm``), SM count, driver, and its workers
    (``gpus``: :class:`_WorkerSlot` objects, when more than one)."""
    name: Any = None
    sm: Any = None
    num_sms: Any = None
    driver: Any = None
    gpus: list[_WorkerSlot] = field(default_factory=list)


def _gpu_line(doc: dict) -> str:
    gpu = from_dict(_GpuInfo, {k: v for k, v in doc.items() if v is not None})
    line = f"GPU: {gpu.name} ({gpu.sm}, {gpu.num_sms} SMs, driver {gpu.driver})"
    if len(gpu.gpus) > 1:
        line += "; workers: " + ", ".join(f"GPU {g.index}" + (" (shared)" if g.shared_gpu else "")
                                          + (f" failed: {str(g.error)[:80]}" if g.error else "") for g in gpu.gpus)
    return line


def _summary(result) -> str:
    counts: dict[str, int] = {}
    for r in result.records:
        if r.run:
            counts[r.run.status] = counts.get(r.run.status, 0) + 1
    return (f"{result.ran} variants run ({', '.join(f'{n} {s}' for s, n in sorted(counts.items())) or 'none'}), "
            f"{result.restarts} worker restarts, {result.wall_s:.1f} s")


def emit(result, args) -> None:
    """Write the JSON (``--json``) and print the tables (``--format``) of a run."""
    from tileprobe.schema import write_json
    if args.json:
        write_json(result.records, result.environment, args.json)
    fmt = getattr(args, "format", "table")
    if fmt == "markdown":
        from tileprobe.report.markdown import run_markdown
        sys.stdout.write(clean(run_markdown(result.records, result.environment, command=command_line(),
                                            advice=result.advice(), best=result.best_hints())))
    elif fmt == "table" and args.json != "-":
        from tileprobe.report.terminal import render_run
        render_run(result.records, console(), wide=getattr(args, "wide", False), advice=result.advice(),
                   best=result.best_hints())
