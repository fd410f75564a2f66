"""``tileprobe tune PROBE… [--budget S] [--strategy race|exhaustive] [--timing sustained|burst] [--export FILE]
[--bundle DIR] [--arch ARCH] [--store PATH | --no-store] [--json FILE] [--dry-run]``.

Finds the fastest correct configuration (tunable case values × hints) of each kernel and problem case on this
machine's GPU: compiles the candidates in parallel (or takes them from the store or a bundle) while the GPU worker
starts, drops failed compiles and times identical launches once, races the rest with successive elimination,
checks the winner and every candidate within noise of it, and prints what happened with the time split.
Exit code: 0 when the tune ran (failed candidates are results), 1 when it could not run.
"""
from __future__ import annotations

import contextlib
import sys

from tileprobe.report.text import cell, say

# Argument parsing and printing only: the domain is ``tileprobe.tune``.
#: Table order of the candidates' fates.
_FATES = ("winner", "tie", "ok", "eliminated", "wrong", "hang", "crash", "error", "skipped")
#: Rows a problem's table shows in full; past it, the finalists only, with counts (``--all``: every row).
ROWS_SHOWN = 20


def add_parser(subparsers, add_common=None) -> None:
    """Register ``tileprobe tune`` (the CLI's plug-in hook; ``add_common`` is not used: tune has its own
    ``--json``)."""
    from tileprobe.run.watchdog import DEFAULT_TIMEOUT_S
    from tileprobe.cli._common import count, seconds
    p = subparsers.add_parser("tune", help="the fastest correct hints and tunable values per problem on this GPU",
                              description=__doc__.split("\n\n")[1])
    p.add_argument("probes", nargs="*", metavar="PROBE", help="probe files (README: Tuning); or, after --, a "
                   "COMMAND whose cuda.tile.tune searches are recorded and tuned (README: Tuning a program)")
    p.add_argument("--refresh", metavar="TABLE", help="re-tune TABLE's stale rows (another tileiras build, "
                   "cuda-tile, GPU or kernel source) and its noted misses from the probes recorded beside it; says "
                   "which winners changed and what keeping the old one costs")
    p.add_argument("--record-dir", metavar="DIR", help="with -- COMMAND: where the recording and its tuning probes "
                   "go (default: TABLE.record beside the --export table)")
    p.add_argument("--budget", type=seconds, default=None, metavar="SECONDS",
                   help="time for the races, shared among the problems (default: until each is decided)")
    p.add_argument("--strategy", choices=["race", "exhaustive"], default="race",
                   help="race: successive elimination (default); exhaustive: every candidate sampled alike")
    p.add_argument("--timing", choices=["sustained", "burst", "eager", "graph"], default="sustained",
                   help="sustained: back to back as triton's do_bench (default); burst: short batches with gaps, as "
                        "cuda.tile.tune; eager: host-inclusive, launch then wait, as a program does; graph: CUDA-graph "
                        "replay, as serving stacks run kernels (docs/TUNE.md)")
    p.add_argument("--export", metavar="FILE", help="write the tuned configurations as JSON for host code "
                   "(merged into FILE if it is a tune table)")
    p.add_argument("--bundle", metavar="DIR", help="take the compiled candidates from `tileprobe audit --bundle DIR` "
                   "(made where tileiras is); the probe files are still given, and probe code is imported only from them")
    p.add_argument("--arch", help="target (default: this GPU's)")
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
    p.add_argument("--jobs", "-j", type=count, default=None, help="parallel compiles (default: all CPUs)")
    p.add_argument("--seed", type=int, default=0, help="seed of the inputs and of the rounds' order")
    p.add_argument("--tie-pct", type=float, default=1.0, help="medians within this %% of the best are a tie "
                   "(default 1: what one variant reproduces between processes, docs/NOTES.md)")
    p.add_argument("--max-samples", type=int, default=300, help="samples per candidate at most (default 300)")
    p.add_argument("--num-sms", type=int, default=None, help="SM count the grids are made for (default: the GPU's; "
                   "give it with --dry-run to find duplicate launches)")
    p.add_argument("--dry-run", action="store_true", help="static stage only: compile, drop, dedupe; no GPU")
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
    startup_s = process_age_s()
    if args.bundle:       # the bundle is checked before any GPU is looked for (issue 25)
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
                seed=args.seed, tie_pct=args.tie_pct, max_samples=args.max_samples, num_sms=args.num_sms,
                dry_run=args.dry_run, progress=_progress(err), startup_s=startup_s, where=where_of(args),
                executor=ex, watchdog=wd, probe_timeout_s=args.probe_timeout, run_hang_risk=args.run_hang_risk,
                **overrides_of(args))


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


def _progress(console):
    """Progress lines on stderr: compile count, GPU, each race's start and rounds."""
    def cb(kind, data):
        if kind == "compile" and data[0] == "total":
            say(console, f"compiling {data[1]} candidates …" if data[1] else
                         "nothing to compile: every candidate's compile is in the store")
        elif kind == "worker":
            say(console, f"GPU: {data.get('name')} ({data.get('sm')}, {data.get('num_sms')} SMs, driver "
                         f"{data.get('driver')})")
        elif kind == "hang_risk":
            from tileprobe.cli.run import hang_risk_lines
            hang_risk_lines(console, *data)
        elif kind == "race":
            waiting = sum(1 for c in data.candidates if c.status == "compiling")
            say(console, f"racing {data.problem.probe.label} {data.problem.label}: " + (
                f"{len(data.raced())} candidates" if not waiting else
                f"while compiling: candidates join as their compiles land ({waiting} to come)"))
        elif kind == "joined":
            say(console, f"  round {data['round']}: {len(data['ids'])} compiled candidate(s) joined")
        elif kind == "round":
            gone = f", eliminated {len(data['eliminated'])}" if data["eliminated"] else ""
            failed = f", failed {', '.join(data['failed'])}" if data["failed"] else ""
            say(console, f"  round {data['round']}: {data['racing']} racing{gone}{failed}, {data['left']} left "
                         f"({data['wall_s']:.1f} s)")
        elif kind == "rejudge":
            say(console, f"  back in the race: {', '.join(data['back'])} (the leader's later samples no longer beat "
                         "them)")
    return cb


# --- printing ---------------------------------------------------------------------------------------------------

def _us(v) -> str:
    return "-" if v is None else f"{v:,.1f}"


def _ci(r: dict) -> str:
    if r.get("ci_lo_us") is None:
        return "-"
    return f"[{r['ci_lo_us']:,.1f}, {r['ci_hi_us']:,.1f}]"


def render(result, console, all_rows: bool = False) -> None:
    """Print every problem of a :class:`~tileprobe.tune.result.TuneResult`, then the time split. A problem of more
    than :data:`ROWS_SHOWN` candidates shows its finalists' rows, the count per fate and one line per duplicate group,
    unless ``all_rows``."""
    env = result.environment
    say(console, f"timing: {env.get('timing')} · strategy: {env.get('strategy')} · arch {env.get('arch')}"
                 f"{' · dry run (static stage only)' if result.dry_run else ''}")
    for p in result.problems:
        _render_problem(p, console, all_rows)
    say(console, time_line(result.times))


def _counts(d: dict) -> str:
    return f" ({', '.join(f'{k}: {n}' for k, n in d.items())})" if d else ""


def summary_line(p) -> str:
    """``12 configurations: 7 rejected by constraints (fits: 4, …), 1 failed (compile_error: 1), 1 duplicate
    launches → 3 to time``."""
    rejected = {k[len("constraint:"):]: n for k, n in p.dropped.items() if k.startswith("constraint:")}
    own = rejected.pop("programs_own", None) is not None     # a recorded search: only the program's are its space
    failed = {k: n for k, n in p.dropped.items() if not k.startswith("constraint:")
              and k not in ("duplicate_launch", "hang_risk")}
    hangs = p.dropped.get("hang_risk", 0)
    rows = [r for r in p.candidates if r.get("config") is not None]
    timed = sum(1 for r in rows if r.get("same_launch_as") is None and r.get("status") not in failed
                and r.get("status") != "hang_risk")
    from tileprobe.tune.pipeline import NO_SM_COUNT
    dupes = ("duplicate launches not looked for (no SM count)" if NO_SM_COUNT in (p.notes or [])
             else f"{p.dropped.get('duplicate_launch', 0)} duplicate launches")
    return (f"{len(rows) + sum(rejected.values())} configurations{' (the program' + chr(39) + 's)' if own else ''}: "
            f"{sum(rejected.values())} rejected by constraints{_counts(rejected)}, {sum(failed.values())} failed{_counts(failed)}, "
            + (f"{hangs} predicted to hang (not launched), " if hangs else "") + f"{dupes} → {timed} to time")


def fate_counts(rows: list[dict]) -> dict[str, int]:
    """Candidates per fate (``winner``, ``tie``, ``eliminated`` …, and ``duplicate_launch`` for the members timed
    through another), in table order."""
    out: dict[str, int] = {}
    for r in rows:
        fate = "duplicate_launch" if r.get("same_launch_as") else r.get("status") or "-"
        out[fate] = out.get(fate, 0) + 1
    order = {s: i for i, s in enumerate(_FATES + ("duplicate_launch",))}
    return dict(sorted(out.items(), key=lambda kv: order.get(kv[0], len(order))))


def duplicate_lines(rows: list[dict]) -> list[str]:
    """One line per group of identical launches: ``A = B, C (timed once, as A)``."""
    groups: dict[str, list[str]] = {}
    for r in rows:
        if r.get("same_launch_as"):
            groups.setdefault(r["same_launch_as"], []).append(r["label"])
    return [f"{rep} = {', '.join(members)} (timed once, as {rep})" for rep, members in groups.items()]


def _shown(rows: list[dict], all_rows: bool) -> list[dict]:
    """The rows the table prints: all, or past :data:`ROWS_SHOWN` the finalists (the best timed ones in a dry run
    or when none is a finalist)."""
    if all_rows or len(rows) <= ROWS_SHOWN:
        return rows
    final = [r for r in rows if r.get("status") in ("winner", "tie")]
    if final:
        return final
    timed = sorted((r for r in rows if not r.get("same_launch_as") and r.get("median_us") is not None),
                   key=lambda r: r["median_us"])
    return timed[:5] or [r for r in rows if not r.get("same_launch_as") and r.get("status") == "ok"][:ROWS_SHOWN]


def _render_problem(p, console, all_rows: bool = False) -> None:
    from rich.table import Table
    from tileprobe.report.common import short_build
    say(console, f"\n{p.kernel} · {p.arch} · {p.label} · {short_build(p.tileiras) if p.tileiras else ''}",
        style="bold")
    say(console, "  " + summary_line(p))
    if p.rounds:
        n = sum(r.get("n") or 0 for r in p.candidates if r.get("same_launch_as") is None)
        say(console, f"  race: {len(p.rounds)} rounds, {n:,} samples, stopped: {p.stop}; {p.race_s:.1f} s")
    cov = getattr(p, "coverage", None) or {}
    if cov:
        say(console, f"  searched: {cov['compiled']:,} of {cov['configurations']:,} configurations compiled, "
                     f"{cov['timed']:,} timed (the others: duplicates, failures, rejections, or the budget)")
    best = (p.pick or {}).get("median_us")
    t = Table(show_edge=False, pad_edge=False)
    for h in ("configuration", "status", "n", "median µs", "95% CI µs", "vs pick", "grid", "regs", "CTAs/SM",
              "stack B / STL", "SM MHz", "note"):
        t.add_column(h, justify="right" if h not in ("configuration", "status", "note") else "left",
                     no_wrap=h != "note", overflow="fold" if h == "note" else "ellipsis")
    rows = [r for r in p.candidates if r.get("config") is not None]
    by_label = {r["label"]: (i, r) for i, r in enumerate(rows)}
    shown = _shown(rows, all_rows)
    for r in sorted(shown, key=lambda r: _rank(*by_label[r.get("same_launch_as") or r["label"]], r)):
        t.add_row(*map(cell, (r["label"], r["status"], str(r.get("n") or "-"), _us(r.get("median_us")), _ci(r),
                              f"{r['median_us'] / best:.3f}×" if best and r.get("median_us") else "-", _grid(r),
                              str(r.get("registers") or "-"), str(r.get("ctas_per_sm") or "-"), _spill(r), _mhz(r),
                              _note(r))))
    console.print(t)
    if len(shown) < len(rows):
        say(console, f"  {len(shown)} of {len(rows)} rows shown (--all: every row; --json keeps them all); per fate: "
                     + ", ".join(f"{k} {n}" for k, n in fate_counts(rows).items()))
        for line in duplicate_lines(rows):
            say(console, "  duplicate launches: " + line)
    for line in verdict_lines(p, compact=len(shown) < len(rows)):
        say(console, "  " + line)


def _rank(position: int, timed: dict, r: dict) -> tuple:
    """Fate, median, declaration order; a duplicate right under the candidate timed for it."""
    order = {s: i for i, s in enumerate(_FATES)}
    return (order.get(timed["status"], len(order)), timed.get("median_us") or float("inf"), position, r is not timed)


def _grid(r: dict) -> str:
    g = r.get("grid")
    return "-" if not g else "×".join(str(x) for x in (g[:1] if g[1:] == [1, 1] else g))


def _spill(r: dict) -> str:
    stack = "-" if r.get("stack_bytes") is None else str(r["stack_bytes"])
    stl = (r.get("spills") or {}).get("spill_stores")
    return stack if stl is None else f"{stack}/{stl}"


def _mhz(r: dict) -> str:
    sm = (r.get("clocks") or {}).get("sm_mhz")
    if not sm:
        return "-"
    text = f"{sm[0]:.0f}" if sm[0] == sm[1] else f"{sm[0]:.0f}–{sm[1]:.0f}"
    return text + (" moved" if r.get("clocks_moved") else "")


def _note(r: dict) -> str:
    if r.get("same_launch_as"):
        return f"= {r['same_launch_as']}"
    if r["status"] in ("winner", "tie", "eliminated"):
        return ""
    return (r.get("reason") or "").strip().splitlines()[0][:100] if r.get("reason") else ""


def verdict_lines(p, compact: bool = False) -> list[str]:
    """The winner or the tie with intervals, the check, failed and skipped candidates, the compiler comparison.
    ``compact``: failed candidates as one line per fate and first line of reason, with a count."""
    out = []
    pick = p.pick
    if p.verdict == "winner":
        out.append(f"winner: {pick['label']}: {_us(pick.get('median_us'))} µs {_ci(pick)} ({pick.get('n')} samples)"
                   f"{_check_text(pick)}")
    elif p.verdict == "tie":
        out.append(f"tie (within noise, {len(p.tie)} candidates; pick = lowest median): " +
                   "; ".join(f"{t['label']} {_us(t.get('median_us'))} µs {_ci(t)}" for t in p.tie) + _check_text(pick))
    elif p.verdict == "none":
        out.append("no winner: no candidate ran correctly")
    failed: dict[tuple, list[str]] = {}
    for r in p.candidates:
        if r.get("config") is not None and r.get("status") not in ("ok", "winner", "tie", "eliminated",
                                                                     "duplicate_launch"):
            reason = (r.get("reason") or "").strip().splitlines()
            failed.setdefault((r["status"], reason[0][:200] if reason else ""), []).append(r["label"])
        if r.get("check") and r["check"].get("status") == "unchecked":
            out.append(f"unchecked: {r['label']}: {r['check'].get('message')}")
    for (status, reason), labels in failed.items():
        if compact and len(labels) > 1:
            out.append(f"{status}: {len(labels)} candidates ({labels[0]}, …): {reason}")
        else:
            out.extend(f"{status}: {label}: {reason}" for label in labels)
    out.extend(p.notes)
    if p.previous:
        out.append(previous_line(p.previous))
    return out


def _check_text(r: dict | None) -> str:
    c = (r or {}).get("check") or {}
    if c.get("status") == "ok" and c.get("rel_err") is not None:
        return f"; checked against the {c.get('against')}: rel. error {c['rel_err']:.2g} ≤ {c.get('tolerance'):.2g}"
    return f"; check: {c.get('status')}" if c else ""


def previous_line(prev: dict) -> str:
    """What changed since the tune with the previous compiler."""
    from tileprobe.report.common import short_build
    before = short_build(prev.get("tileiras_before") or "")
    if not prev.get("changed"):
        return f"since the tune with {before}: same winner"
    now = prev.get("old_pick_now") or {}
    old = prev.get("pick_before") or {}
    label = " ".join(f"{k}={v}" for k, v in {**(old.get("case") or {}), **(old.get("hints") or {})}.items())
    text = f"since the tune with {before}: the winner changed (was {label or 'declared hints'}"
    if now.get("median_us") is not None:
        text += f", now {now['median_us']:,.1f} µs ({now.get('status')})"
        if prev.get("loss_pct") is not None:
            text += f": keeping it would lose {prev['loss_pct']:.1f} % against the new winner"
        if prev.get("old_pick_change_pct") is not None:
            text += f"; it took {prev['median_us_before']:,.1f} µs with {before} ({prev['old_pick_change_pct']:+.1f} %)"
    else:
        text += ", not timed in this tune"
    return text + ")"


def time_line(times: dict) -> str:
    """``time: start-up 1.9 s · plan 0.2 s · compile 12.1 s · GPU worker start 7.9 s (waited 0.0 s) · …``"""
    def s(key):
        v = times.get(key)
        return "-" if v is None else f"{v:.1f} s"
    parts = [f"start-up {s('startup_s')}", f"plan {s('plan_s')}", f"compile {s('compile_s')}"]
    if times.get("worker_start_s") is not None:
        parts.append(f"GPU worker start {s('worker_start_s')} (waited {s('worker_wait_s')} after compiling)")
    if times.get("race_s") is not None:
        parts.append(f"race {s('race_s')} (checks {s('check_s')})")
    parts += [f"store {s('store_s')}", f"total {s('total_s')}"]
    return "time: " + " · ".join(parts)
