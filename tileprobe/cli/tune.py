"""``tileprobe tune PROBE… [--budget S] [--strategy race|exhaustive] [--timing sustained|burst] [--export FILE]
[--bundle DIR] [--arch ARCH] [--store PATH | --no-store] [--json FILE] [--dry-run]``.

Finds the fastest correct configuration (tunable case values × hints) of each kernel and problem case on this
machine's GPU: compiles the candidates in parallel (or takes them from the store or a bundle) while the GPU worker
starts, drops failed compiles and times identical launches once, races the rest with successive elimination,
checks the winner and every candidate within noise of it, and prints what happened with the time split.
Exit code: 0 when the tune ran (failed candidates are results), 1 when it could not run, 3 when a probe (its
import, constraints, grid() or args()) failed and the other probes were still tuned (README: Exit codes).
"""
from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass, field
from typing import Any

from tileprobe.jsonrecord import from_dict
from tileprobe.report.text import say

# Imports inside functions here are lazy on purpose: at the module head they would add 0.56 s to its import
# (python -X importtime, the 2-core machine, 2026-12-02), paid by every command that imports it.

# Argument parsing, progress lines and the exit code only: the domain is ``tileprobe.tune``, the tables
# ``tileprobe.report.tune``.


def add_parser(subparsers, add_common=None) -> None:
    """Register ``tileprobe tune`` (the CLI's plug-in hook; ``add_common`` is not used: tune has its own
    ``--json``)."""
    from tileprobe.cli._common import arch_target, budget_seconds, count, percent, seconds
    from tileprobe.report.tune import ROWS_SHOWN
    from tileprobe.run.keepwarm import DEFAULT_IDLE_S
    from tileprobe.run.watchdog import DEFAULT_TIMEOUT_S
    p = subparsers.add_parser("tune", help="the fastest correct hints and tunable values per problem on this GPU",
                              description=__doc__.split("\n\n")[1])
    p.add_argument("probes", nargs="*", metavar="PROBE", help="probe files (README: Tuning); or, after --, a "
                   "COMMAND whose cuda.tile.tune searches are recorded and tuned (README: Tuning a program)")
    p.add_argument("--refresh", metavar="TABLE", help="re-tune TABLE's stale rows (another tileiras build, "
                   "cuda-tile, GPU or kernel source) and its noted misses from the probes recorded beside it; says "
                   "which winners changed and what keeping the old one costs")
    p.add_argument("--record-dir", metavar="DIR", help="with -- COMMAND: where the recording and its tuning probes "
                   "go (default: TABLE.record beside the --export table)")
    p.add_argument("--budget", type=budget_seconds, default=None, metavar="SECONDS",
                   help="the command's wall time, Python's start-up included, shared among the problems (default: "
                   "until each is decided): the races; and for a problem of more than 4 × --jobs configurations the "
                   "compiles too: a balanced sample first, then the neighbours of the race's leaders, compiled while "
                   "the race runs; what was not reached is not_searched (docs/TUNE.md, \"Budgeted search\"); "
                   "under a power-capped GPU a share is kept for the steady-state final")
    p.add_argument("--strategy", choices=["race", "exhaustive"], default="race",
                   help="race: successive elimination (default); exhaustive: every candidate sampled alike")
    p.add_argument("--timing", choices=["sustained", "burst", "eager", "graph"], default="sustained",
                   help="sustained: back to back as triton's do_bench (default); burst: short batches with gaps, as "
                        "cuda.tile.tune; eager: host-inclusive, launch then wait, as a program does; graph: CUDA-graph "
                        "replay, as serving stacks run kernels (docs/TUNE.md). sustained ends with a steady-state "
                        "final when a power or thermal limit set the clocks: the pick and those within 12 %% of it timed "
                        "again with 75 ms warm-ups (docs/TUNE.md, \"The steady-state final\")")
    p.add_argument("--no-final", action="store_true", help="no steady-state final: the race's own pick, as cut by "
                   "its short batches")
    p.add_argument("--export", metavar="FILE", help="write the tuned configurations as JSON for host code "
                   "(merged into FILE if it is a tune table)")
    p.add_argument("--bundle", metavar="DIR", help="take the compiled candidates from `tileprobe audit --bundle DIR` "
                   "(made where tileiras is); the probe files are still given, and probe code is imported only from them")
    p.add_argument("--arch", type=arch_target, help="target (default: this GPU's)")
    p.add_argument("--store", metavar="PATH", help="results store (default: $TILEPROBE_STORE or the user data dir)")
    p.add_argument("--no-store", action="store_true", help="do not read or write the results store")
    p.add_argument("--json", metavar="FILE", help="also write the whole result as JSON (tileprobe/tune/result.py); "
                   "- for stdout")
    p.add_argument("--format", choices=["table", "none"], default="table", help="print tables (default) or nothing")
    p.add_argument("--all", action="store_true", dest="all_rows",
                   help=f"print every candidate's row (by default, past {ROWS_SHOWN} rows: the finalists, the counts "
                        "per fate and one line per duplicate group; --json keeps everything)")
    p.add_argument("--timeout", type=seconds, default=DEFAULT_TIMEOUT_S,
                   help=f"per GPU task (a batch or a check) before it is a hang, s (default {DEFAULT_TIMEOUT_S:g})")
    p.add_argument("--keep-warm", type=seconds, nargs="?", const=DEFAULT_IDLE_S, default=None, metavar="SECONDS",
                   help="keep the GPU worker (torch, a CUDA context: seconds to start) running for the next tune "
                        f"until it has been idle SECONDS (default {DEFAULT_IDLE_S:g}); also $TILEPROBE_KEEP_WARM "
                        "(docs/TUNE.md, 'The kept-warm GPU worker')")
    p.add_argument("--compile-timeout", type=seconds, default=300.0, metavar="SECONDS",
                   help="per-candidate compiler timeout, s (default 300; a probe's timeout_s= wins); a candidate past "
                        "it is a failed compile, status timeout")
    p.add_argument("--jobs", "-j", type=count, default=None, help="parallel compiles (default: all CPUs)")
    p.add_argument("--seed", type=int, default=0, help="seed of the inputs and of the rounds' order")
    p.add_argument("--tie-pct", type=percent, default=1.0, help="medians (and steady-state final figures) within "
                   "this %% of the best are a tie (default 1: what one variant reproduces between processes, "
                   "docs/LOG.md)")
    p.add_argument("--max-samples", type=count, default=300, help="samples per candidate at most (default 300)")
    p.add_argument("--num-sms", type=int, default=None, help="SM count the grids are made for (default: the GPU's; "
                   "give it with --dry-run to find duplicate launches)")
    p.add_argument("--dry-run", action="store_true", help="static stage only: compile, drop, dedupe; no GPU")
    p.add_argument("--bit-exact", action="store_true", help="drop every candidate whose output differs in any bit "
                   "from the default configuration's (the program's first), not only beyond the dtype's tolerance; "
                   "the table's rows say which checks their pick passed")
    p.add_argument("--run-hang-risk", action="store_true", help="race the candidates the register-pool check "
                   "predicts to hang too (default: named, dropped under the rule hang_risk, not launched)")
    from tileprobe.probe.contained import PROBE_TIMEOUT_S
    p.add_argument("--probe-timeout", type=seconds, default=PROBE_TIMEOUT_S, metavar="SECONDS",
                   help="seconds each step of probe code may take (import, constraints, grid(), args()); probe code "
                        f"runs in contained processes, as in audit (default {PROBE_TIMEOUT_S:g})")
    from tileprobe.cli._common import add_executor_options, add_override_options, add_where_option
    add_where_option(p, "configurations")
    add_override_options(p)
    add_executor_options(p, gpus=True)
    p.set_defaults(func=cmd_tune)


def command_of(args) -> list[str] | None:
    """The COMMAND after ``--`` (``tileprobe tune [options] -- COMMAND …``), or None when probes were given."""
    raw = getattr(args, "raw_argv", None) or []
    if "--" not in raw:
        return None
    return list(raw[raw.index("--") + 1:])


def cmd_tune(args) -> int:
    """Run ``tileprobe tune`` for parsed arguments; returns the exit code."""
    from tileprobe.cli._common import console as _console
    from tileprobe.errors import TileprobeError
    command = command_of(args)
    from tileprobe.run.early import keep_warm_env_error
    if why := keep_warm_env_error():
        from tileprobe.errors import UsageError
        raise UsageError(why)
    if command is not None and len(args.probes or []) > len(command):
        from tileprobe.errors import UsageError
        extra = " ".join(args.probes[:len(args.probes) - len(command)])
        raise UsageError(f"probe files ({extra}) and `-- COMMAND` given together: tune either probes "
                         "(tileprobe tune PROBE …) or a program's searches (tileprobe tune -- COMMAND), not both")
    if args.dry_run and (args.export or command is not None):
        say(_console(stderr=True), f"--dry-run: no table is written ({args.export or 'the default table'} is left "
                                   "as it is); drop --dry-run to write it")
    if command is not None or args.refresh:
        from tileprobe.cli.tune_program import cmd_tune_program
        return cmd_tune_program(args, command, run_tune, report)
    if not args.probes:
        raise TileprobeError("nothing to tune: give probe files, `-- COMMAND` (a program that calls "
                             "cuda.tile.tune.exhaustive_search) or --refresh TABLE")
    err = _console(stderr=True)
    return report(args, run_tune(args, err), err)


def run_tune(args, err):
    """The tune of ``args.probes`` with the store, the GPU worker and progress lines; the ``TuneResult``."""
    from tileprobe.tune.pipeline import process_age_s
    startup_s = getattr(args, "startup_s", None)   # set by `tune -- COMMAND` before the program ran
    startup_s = process_age_s() if startup_s is None else startup_s
    if args.bundle:       # the bundle is checked before any GPU is looked for
        from tileprobe.run.session import load_bundle
        load_bundle(args.bundle)
    store = None
    if not args.no_store:
        from tileprobe.store import Store
        store = Store.open(args.store)
    try:
        with _gpu_worker(args, err) as (ex, wd):
            result = _tune(args, ex, wd, store, startup_s, err)
    finally:
        if store is not None:
            store.close()
    return result


def report(args, result, err) -> int:
    """Write ``--json``, print the tables and the probe errors; the exit code (1 when the tune stopped)."""
    from tileprobe.cli._common import console as _console
    if args.json:
        _write_json(result, args.json)
    if args.format == "table" and args.json != "-":
        from tileprobe.report.tune import render
        render(result, _console(), all_rows=args.all_rows)
    for e in result.probe_errors:
        say(err, f"probe error: {e}")
    if result.aborted:
        say(err, f"tune stopped: {result.aborted}")
        return 1
    from tileprobe.errors import EXIT_INCOMPLETE
    return EXIT_INCOMPLETE if result.probe_errors else 0    # as audit: a probe (or its grid/args) failed


def _tune(args, ex, wd, store, startup_s, err):
    from tileprobe.cli._common import overrides_of, where_of
    from tileprobe.tune.pipeline import tune
    return tune(args.probes, arch=args.arch, budget_s=args.budget, strategy=args.strategy, timing=args.timing,
                export=args.export, bundle=args.bundle, store=store, jobs=args.jobs, timeout_s=args.timeout,
                compile_timeout_s=args.compile_timeout, seed=args.seed, tie_pct=args.tie_pct,
                max_samples=args.max_samples, num_sms=args.num_sms, final=not args.no_final,
                dry_run=args.dry_run, progress=_progress(err), startup_s=startup_s, where=where_of(args),
                executor=ex, watchdog=wd, probe_timeout_s=args.probe_timeout, run_hang_risk=args.run_hang_risk,
                warm_first=getattr(args, "warm_first", None), **tasks_of(args),
                **overrides_of(args))


def tasks_of(args) -> dict:
    """The tune's ``tasks=`` and ``check_first=`` for ``--bit-exact`` (the bit-exact check task, every candidate
    checked before its first batch), else none (the default tasks, the finalists checked)."""
    if not getattr(args, "bit_exact", False):
        return {}
    from tileprobe.tune.gpu import BIT_EXACT_CHECK_TASK, TIME_TASK
    return {"tasks": (TIME_TASK, BIT_EXACT_CHECK_TASK), "check_first": True}


@contextlib.contextmanager
def _gpu_worker(args, err):
    """(executor or None, the race's GPU worker or None): the race runs on one GPU, the first of ``--gpus``
    (docs/SCALE.md, "Tuning on several GPUs"); with ``--executor ray``, a one-GPU Ray actor."""
    from tileprobe.cli._common import executor_of, gpus_of
    gpus = gpus_of(args)
    with executor_of(args) as ex:
        if args.dry_run or (gpus is None and ex is None):
            yield ex, None
            return
        gpus = gpus or [0]
        if len(gpus) > 1:
            say(err, f"tune races on one GPU: GPU {gpus[0]} (of --gpus {args.gpus}); batches timed on two GPUs, or "
                     "on a GPU shared with another worker, are not one sample (docs/SCALE.md)")
        if ex is not None and ex.name != "local":
            wd = ex.gpu_slots([gpus[0]], timeout_s=args.timeout)[0]
        else:
            from tileprobe.run.watchdog import Watchdog
            wd = Watchdog(timeout_s=args.timeout, env={"CUDA_VISIBLE_DEVICES": str(gpus[0])})
        try:
            yield ex, wd
        finally:
            wd.close()


def _write_json(result, dest: str) -> None:
    from tileprobe.schema import json_text
    text = json_text(result.to_dict())
    if dest == "-":
        sys.stdout.write(text)
        return
    with open(dest, "w", encoding="utf-8") as f:
        f.write(text)


@dataclass
class WorkerEvent:
    """The GPU worker's start as the tune's progress reports it (the worker's GPU facts; ``kept_warm``: the
    keep-warm note of a worker kept between commands)."""
    name: Any = None
    sm: Any = None
    num_sms: Any = None
    driver: Any = None
    kept_warm: Any = None


@dataclass
class RoundEvent:
    """One race round as the tune's progress reports it (:class:`tileprobe.tune.race.Race`'s round log): its
    number, the candidates racing, the ids eliminated and failed in it, those left, its wall time (s)."""
    round: int
    racing: int
    left: int
    wall_s: float
    eliminated: list = field(default_factory=list)
    failed: list = field(default_factory=list)


def _progress(console, ticker=None):
    """Progress lines on stderr: compile count, GPU, each race's start and rounds; when stderr is not a terminal,
    also ``compiled 12/40 candidates (1 failed), 25 s`` lines while the compiles run (``ticker``, else a
    :class:`~tileprobe.cli._common.CompileTicker` with its 10 s / 15 s intervals)."""
    from tileprobe.cli._common import CompileTicker
    plain = None if console.is_terminal else ticker or CompileTicker(console, noun="candidates")
    plan = None          # the plan of the race under way: its final's line names launches as the result does

    def cb(kind, data):
        nonlocal plan
        if kind == "compile" and data[0] == "total":
            say(console, f"compiling {data[1]} candidates …" if data[1] else
                         "nothing to compile: every candidate's compile is in the store")
            if plain is not None:
                plain.start(data[1])
        elif kind == "compile" and plain is not None and data[0] in ("failed", "advance"):
            (plain.fail if data[0] == "failed" else plain.advance)(data[1])
        elif kind == "worker":
            gpu = from_dict(WorkerEvent, data, where="the GPU worker's start")
            say(console, f"GPU: {gpu.name} ({gpu.sm}, {gpu.num_sms} SMs, driver "
                         f"{gpu.driver})" + (f"; worker {gpu.kept_warm}" if gpu.kept_warm else ""))
        elif kind == "hang_risk":
            from tileprobe.cli.run import hang_risk_lines
            hang_risk_lines(console, *data)
        elif kind == "race":
            plan = data
            waiting = sum(1 for c in data.candidates if c.status == "compiling")
            unreached = sum(1 for c in data.candidates if c.status == "not_searched")
            say(console, f"racing {data.problem.probe.label} {data.problem.label}: " + (
                f"while the budgeted search compiles: candidates join as their compiles land (of {unreached:,} "
                "configurations not reached yet)" if unreached else
                f"{len(data.raced())} candidates" if not waiting else
                f"while compiling: candidates join as their compiles land ({waiting} to come)"))
        elif kind == "joined":
            say(console, f"  round {data['round']}: {len(data['ids'])} compiled candidate(s) joined")
        elif kind == "round":
            r = from_dict(RoundEvent, data, where="a race round")
            gone = f", eliminated {len(r.eliminated)}" if r.eliminated else ""
            failed = f", failed {', '.join(r.failed)}" if r.failed else ""
            say(console, f"  round {r.round}: {r.racing} racing{gone}{failed}, {r.left} left ({r.wall_s:.1f} s)")
        elif kind == "rejudge":
            say(console, f"  back in the race: {', '.join(data['back'])} (the leader's later samples no longer beat "
                         "them)")
        elif kind == "final":
            from tileprobe.report.tune import final_line
            from tileprobe.tune.assemble import final_named
            say(console, "  " + final_line(final_named(plan, data) if plan is not None else data))
    return cb
