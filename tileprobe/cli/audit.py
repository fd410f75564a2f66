"""``tileprobe audit PROBE… --arch sm_90,sm_120``: compile ahead of time (no GPU), read cubins, judge each hint.

Python call: :func:`tileprobe.audit.audit` (``with_sass=True`` for the SASS traits, ``store=Store.open(None)`` for
the store), :func:`tileprobe.audit.pipeline.write_bundle` for ``--bundle``.
"""
from __future__ import annotations

import sys

from tileprobe.audit.pipeline import MAX_VARIANTS
from tileprobe.cli._common import (
    DEFAULT_ARCHS,
    add_executor_options,
    add_install_option,
    add_output_options,
    add_override_options,
    add_where_option,
    command_line,
    console,
    count,
    executor_of,
    open_store,
    overrides_of,
    progress_bar,
    resolve_tileiras,
    seconds,
    split,
    where_of,
)
from tileprobe.compile.job import DEFAULT_TIMEOUT_S
from tileprobe.errors import EXIT_COMPILE_FAILED, EXIT_INCOMPLETE, EXIT_OK, UsageError
from tileprobe.probe.contained import PROBE_TIMEOUT_S
from tileprobe.report.text import escape, say

# Imports inside functions here are lazy on purpose: at the module head they would add 0.97 s to its import
# (python -X importtime, the 2-core machine, 2026-12-02), paid by every command that imports it.

#: Statuses ``--strict`` counts as failures.
FAILED = ("compile_error", "compiler_crash", "timeout")


def add_parser(sub) -> None:
    """Register ``tileprobe audit``."""
    a = sub.add_parser("audit", help="compile probes ahead of time (no GPU) and judge each hint")
    a.add_argument("probes", nargs="+", metavar="PROBE", help="probe files (see README: Writing a probe)")
    a.add_argument("--arch", default=DEFAULT_ARCHS, help=f"comma-separated targets, sm_80 … sm_121 (default {DEFAULT_ARCHS})")
    a.add_argument("--tileiras", metavar="V1,V2", help="compiler versions to audit with (installed with "
                   "`tileprobe toolchain install`, or --install), e.g. 13.3.36,13.4.92; default: the one cuTile "
                   "would use")
    add_install_option(a)
    a.add_argument("--cuda-tile", metavar="VERSION", help="audit with this cuda-tile frontend instead of the one "
                   "installed here: an environment `tileprobe frontend install VERSION` made (the whole audit runs "
                   "with its interpreter; records name that version)")
    a.add_argument("--fixed-bytecode", action="store_true", help="with two or more --tileiras releases: cuTile "
                   "writes one bytecode, the version the oldest reads, for every release (records carry its hash: "
                   "`compare` then says whether only the compiler changed)")
    a.add_argument("--jobs", "-j", type=count, default=None, help="parallel compiles (default: all CPUs)")
    a.add_argument("--timeout", type=seconds, default=None, help="per-variant compiler timeout in seconds "
                   f"(default {DEFAULT_TIMEOUT_S:.0f} × the machine's load per CPU at the start, 1× to 4×; a probe's "
                   "timeout_s= wins)")
    a.add_argument("--no-sass", dest="sass", action="store_false", help="skip SASS traits (spills, TMA, matrix "
                   "instructions from nvdisasm); on by default when nvdisasm is installed")
    a.add_argument("--store", metavar="PATH", help="results store (default: the user data dir)")
    a.add_argument("--no-store", action="store_true", help="do not read or write the results store")
    a.add_argument("--bundle", metavar="DIR", help="also write DIR/audit.json and DIR/cubins/ for `tileprobe run "
                   "--bundle DIR` on a GPU machine without tileiras")
    a.add_argument("--compiler-timeout", type=seconds, default=None, metavar="S",
                   help="the program's compiler timeout (ct.compiler_timeout(S), e.g. TileGym's 5): flag the variants "
                   "whose compile time here exceeds it, with the margin")
    a.add_argument("--probe-timeout", type=seconds, default=PROBE_TIMEOUT_S, metavar="SECONDS",
                   help="seconds each step of probe code may take: importing the probe, importing its kernel, one "
                        f"args() call (default {PROBE_TIMEOUT_S:.0f}); past it the probe is an error, the others go on")
    a.add_argument("--max-variants", type=count, default=MAX_VARIANTS, metavar="N",
                   help=f"compile at most N variants (default {MAX_VARIANTS:,}); a larger audit is refused before it "
                        "starts and says how many it would be")
    a.add_argument("--strict", action="store_true", help=f"exit {EXIT_COMPILE_FAILED} when a variant fails to compile "
                   "(status compile_error, compiler_crash or timeout: every failure class, unsupported_feature and "
                   "unsupported_target included); without it failures are results and the exit code is 0")
    a.add_argument("--repeat", type=count, default=1, metavar="N", help="compile each variant N times and report "
                   "variants whose machine code differs between compiles (tileiras is not always deterministic)")
    a.add_argument("--retry-failed", action="store_true", help="compile again the variants the store holds as "
                   "failed (by default a stored failure is the answer and is not compiled again)")
    from tileprobe.schema import NOTEWORTHY_STATUSES  # what report.common.noteworthy prints under --brief
    a.add_argument("--brief", action="store_true", help="print reasons only for noteworthy verdicts "
                   f"({', '.join(NOTEWORTHY_STATUSES)}); failures and predicted hangs are still listed")
    a.add_argument("--summary", action="store_true", help="one line per kernel, arch and compiler instead of the "
                   "tables (variants, failures, registers, CTAs/SM, spills, verdict counts)")
    a.add_argument("--wide", action="store_true", help="every column at full width, whatever the terminal's width "
                   "(by default less important columns are dropped to fit, with a note)")
    add_where_option(a, "variants (every value of a hint is still compiled: verdicts compare them)")
    add_override_options(a)
    add_executor_options(a)
    a.set_defaults(func=cmd_audit, command_line=None)
    add_output_options(a)


def cmd_audit(args) -> int:
    """Run ``tileprobe audit`` for parsed arguments; returns the exit code (README, "Exit codes"): 0 when every
    probe loaded and every requested variant has a result; 3 when a probe could not be loaded or a requested arch or
    compiler could not be used (the rest is audited and saved); 4 with ``--strict`` when a variant failed."""
    from tileprobe.audit import audit
    from tileprobe.audit.pipeline import write_bundle
    from tileprobe.model.sass import have_nvdisasm
    if args.cuda_tile:
        from tileprobe.frontend import run_with
        code = run_with(args.cuda_tile, args.raw_argv)
        if code is not None:
            return code
    err = console(stderr=True)
    if not split(args.arch):
        raise UsageError(f"--arch {args.arch!r} names no architecture; e.g. --arch sm_90,sm_120")
    _warn_jit_environment(err)
    where, overrides = where_of(args), overrides_of(args)
    tcs, tc_errors = resolve_tileiras(args.tileiras, args.install)
    if args.tileiras and not tcs:
        from tileprobe.errors import IncompleteError  # README "Exit codes": a requested compiler could not be used: 3
        raise IncompleteError("no requested compiler can be used:\n  " + "\n  ".join(tc_errors))
    store = open_store(args)
    prog, cb = progress_bar(err)
    with executor_of(args) as ex, prog, _bytecode_fixed(args, tcs):
        result = audit(args.probes, split(args.arch), toolchains=tcs, jobs=args.jobs,
                       timeout_s=args.timeout, with_sass=args.sass and have_nvdisasm(), store=store, progress=cb,
                       repeat=args.repeat, where=where, retry_failed=args.retry_failed,
                       probe_timeout_s=args.probe_timeout, max_variants=args.max_variants, executor=ex,
                       compiler_timeout_s=args.compiler_timeout, **overrides)
    result.target_errors[:0] = tc_errors
    _print_problems(err, result)
    if store is not None:
        store.save_audit(result, " ".join(sys.argv[1:]) if args.command_line is None else args.command_line)
    if args.bundle:
        # the bundle says how it was made
        result.environment["audit_command"] = args.command_line or command_line()
        write_bundle(args.bundle, result)
    from tileprobe.select import select_or_explain
    shown = select_or_explain(result.records, where)
    emit(result, shown, args)
    if args.repeat > 1:
        say(err, repeat_line(result.records, args.repeat))
    say(err, _summary(result, len(shown) if where else None))
    if not result.complete:
        return EXIT_INCOMPLETE
    if args.strict and any(r.status in FAILED for r in result.records):
        return EXIT_COMPILE_FAILED
    return EXIT_OK


def _print_problems(err, result) -> None:
    """Each arch or compiler that could not be used, each broken probe (once, with file:line), each note."""
    for e in result.target_errors:
        err.print(f"[red]not audited[/]: {escape(e)}", highlight=False, soft_wrap=True)
    for e in result.probe_errors:
        err.print(f"[red]probe error[/]: {escape(e)}", highlight=False, soft_wrap=True)
    for note in result.notes:
        say(err, f"note: {note}")


def _warn_jit_environment(err) -> None:
    """Once per audit: a CUDA_HOME / CUDA_PATH that would break the user's own JIT compile (no libnvvm, not a
    folder, empty), as ``tileprobe doctor`` says it (:func:`tileprobe.analyses.doctor.jit_environment_findings`).
    The audit's compiles drop these variables, so they succeed; the program run with them would not. With neither
    variable set there is nothing to check, and cuTile is not imported here (its import takes seconds and makes a
    temp folder that a SIGKILLed audit would leave behind)."""
    import os
    if not (os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")):
        return
    from tileprobe.analyses.doctor import jit_environment_findings
    for f in jit_environment_findings():
        say(err, f"warning: {f.message} Fix: {f.fix}. (The audit's own compiles drop {f.topic}; `tileprobe "
                 "doctor` checks the whole setup.)")


def repeat_line(records, repeat: int) -> str:
    """What ``--repeat N`` found, also when every compile agreed: ``repeat 3: every one of the 24 compiled
    variants gave the same machine code 3 times`` or the variants that did not."""
    done = [r for r in records if r.deterministic is not None]
    varied = [r for r in done if r.deterministic is False]
    if not varied:
        return (f"repeat {repeat}: each of the {len(done)} compiled variant(s) gave the same machine code in all "
                f"{repeat} compiles")
    from tileprobe.report.common import run_label
    names = "; ".join(f"{run_label(r)} ({len(r.code_hashes)} codes)" for r in varied[:5])
    more = f"; and {len(varied) - 5} more" if len(varied) > 5 else ""
    return (f"repeat {repeat}: {len(varied)} of {len(done)} compiled variant(s) gave different machine code between "
            f"compiles: {names}{more}")


def _summary(result, shown: int | None = None) -> str:
    """The last line: variants audited and failed (by class), probe and target errors, wall time; with
    ``--where`` (``shown``), how many it selected: every value of a hint is audited, the verdicts compare them."""
    from tileprobe.report.common import failure_counts
    failed_rows = [r for r in result.records if r.status in FAILED]
    failed = len(failed_rows)
    broken = sum(1 for r in result.records if r.status == "probe_error")
    summary = f"{len(result.records)} variants" + (
        f" ({shown} shown by --where; the other hint values were audited for the verdicts)"
        if shown is not None and shown != len(result.records) else "") + f", {failed} failed to compile"
    if failed:
        summary += f" ({failure_counts(failed_rows)})"
    if broken or result.probe_errors:
        summary += (f", {len(result.probe_errors)} probe error(s) listed above"
                    + (f" ({broken} variant(s) not built)" if broken else ""))
    if result.target_errors:
        summary += f", {len(result.target_errors)} arch(s) or compiler(s) not usable"
    hangs = sum(1 for r in result.records if r.ok and r.hang_risk)
    if hangs:
        summary += f", {hangs} predicted to hang (register pool)"
    slow = [r for r in result.records if r.exceeds_compile_timeout]
    if slow:
        summary += (f", {len(slow)} compile(s) past the compiler timeout of "
                    f"{slow[0].compile_timeout.timeout_s:g} s")
    return f"{summary}, {result.wall_s:.1f} s"


def emit(result, records, args) -> None:
    """Write ``--json`` and print ``--format`` (terminal tables, Markdown or nothing) for the ``records`` of an
    :class:`~tileprobe.audit.AuditResult` (all of them, or a ``--where`` selection: the advice still weighs every
    audited value, :meth:`~tileprobe.audit.pipeline.AuditResult.advice`)."""
    environment = result.environment
    if args.json:
        from tileprobe.judge.pruned import pruned_space
        from tileprobe.schema import dump, json_text, write_text
        doc = dump(records, environment)
        doc["pruned_space"] = [c.to_dict() for c in pruned_space(records)]   # per case, the distinct builds
        write_text(args.json, json_text(doc))
    fmt = getattr(args, "format", "table")
    if fmt == "markdown" and args.json != "-":     # `--json -`: standard output holds the JSON alone
        from tileprobe.report.markdown import audit_markdown
        from tileprobe.report.text import clean
        sys.stdout.write(clean(audit_markdown(records, environment, command=command_line(),
                                              advice=result.advice(records))))
    elif fmt == "table" and args.json != "-":
        if getattr(args, "summary", False):
            from tileprobe.report.terminal import render_summary
            render_summary(records, console())
            return
        from tileprobe.report.terminal import render_audit
        render_audit(records, console(), brief=getattr(args, "brief", False), wide=getattr(args, "wide", False),
                     advice=result.advice(records))


def _bytecode_fixed(args, tcs):
    """``--fixed-bytecode``: :func:`tileprobe._cutile.fixed_bytecode` for the audit's releases (a null context
    without it). Raises UsageError with fewer than two releases."""
    import contextlib

    from tileprobe import _cutile
    if not getattr(args, "fixed_bytecode", False):
        return contextlib.nullcontext()
    if len(tcs or ()) < 2:
        raise UsageError("--fixed-bytecode holds the bytecode fixed across compilers: give two or more, e.g. "
                         "--tileiras 13.3.36,13.4.92")
    return _cutile.fixed_bytecode([tc.version for tc in tcs])
