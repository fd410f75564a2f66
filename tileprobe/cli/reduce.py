"""``tileprobe reduce PROBE --arch A --where … --property … (--tileiras V | --good V1 --bad V2) [-o DIR]``: the
smallest kernel that still has the property, as a standalone kernel, a probe and a Markdown bug report.

Python call: :func:`tileprobe.reduce.engine.reduce` (and :mod:`tileprobe.reduce.output` for the files).
"""
from __future__ import annotations

import os

from tileprobe.cli._common import add_install_option, arch_target, budget_seconds, console, count, seconds


def add_parser(sub) -> None:
    """Register ``tileprobe reduce``."""
    p = sub.add_parser("reduce", help="cut a kernel down to the smallest one that keeps a property (a compiler bug "
                                      "report)",
                       description="Cut PROBE's kernel, at the variant --where names, down to the smallest kernel for "
                       "which the property still holds under --tileiras (or holds under --good and not under --bad, "
                       "a regression); each candidate is compiled in the audit's contained children. Writes to -o: "
                       "the reduced standalone kernel, a probe that reproduces the property with `tileprobe audit`, "
                       "and REPORT.md (the cases under both compilers, the environment, what the kernel needs). A "
                       "stopped run goes on from its journal in -o; --budget returns the smallest so far "
                       "(docs/REDUCE.md).")
    p.add_argument("probe", metavar="PROBE", help="a probe file that defines its kernel (and @ct.function helpers)")
    p.add_argument("--arch", required=True, type=arch_target, help="one target, e.g. sm_120")
    p.add_argument("--where", default=None, metavar="NAME=VALUE,...", help='the variant, e.g. '
                   '"GATHER=True,LOOP=True,occupancy=2": case constants are folded into the kernel')
    p.add_argument("--property", required=True, help='what to keep: a `gate --expect` form ("occupancy honoured", '
                   '"no spills", "no hang risk", "registers<=128"), "occupancy ignored", "spills", "hang risk", '
                   '"compiler crash", "compile error" (kept by the message\'s first line) or "compile error '
                   '\\"TEXT\\""')
    p.add_argument("--tileiras", help="the compiler the property holds under (default: cuTile's)")
    p.add_argument("--good", metavar="V", help="with --bad: a release under which the property has the value it "
                   "has on the probe there (e.g. 13.3.36: the hint honoured)")
    p.add_argument("--bad", metavar="V", help="with --good: a release under which the property's value differs "
                   "(e.g. 13.4.92: the hint ignored); every candidate kept keeps both values (a regression)")
    p.add_argument("-o", "--out", default="reduced", metavar="DIR", help="where the kernel, probe, REPORT.md and "
                   "the journal go (default ./reduced); run again with the same arguments to resume")
    p.add_argument("--budget", type=budget_seconds, default=None, metavar="SECONDS",
                   help="stop this long after the check of the probe as given (that check is not cut; its time "
                        "is printed) with the smallest kernel so far (said as such)")
    p.add_argument("--compile-timeout", type=seconds, default=300.0, metavar="S",
                   help="per-variant compile limit: a candidate that hangs the compiler is not interesting "
                        "(default 300)")
    p.add_argument("--jobs", "-j", type=count, default=None, help="parallel compiles of a batch of candidates "
                   "(default: all CPUs; a batch is twice this many candidates, at least 4)")
    p.add_argument("--store", metavar="PATH", help="results store (compiles reused: a resumed reduction compiles "
                   "nothing twice); default: the user data dir's")
    p.add_argument("--no-store", action="store_true", help="store nothing")
    add_install_option(p)
    p.set_defaults(func=cmd_reduce)


def cmd_reduce(args) -> int:
    """Run ``tileprobe reduce``; 0 when the written probe shows the property, 1 when it does not."""
    from tileprobe.analyses.gate import parse_where
    from tileprobe.cli._common import open_store, toolchains
    from tileprobe.errors import UsageError
    from tileprobe.reduce.prop import parse_property
    prop = parse_property(args.property)
    if bool(args.good) != bool(args.bad) or (args.good and args.tileiras):
        raise UsageError("give --tileiras V (a property under one compiler) or both --good V1 and --bad V2 (a "
                         "regression), not a mix")
    specs = [args.good, args.bad] if args.good else ([args.tileiras] if args.tileiras else [])
    tcs = toolchains(",".join(specs), args.install) if specs else None
    if tcs is None:
        from tileprobe.toolchain import pip_toolchain
        tc = pip_toolchain()
        if tc is None:
            raise UsageError("no pip tileiras in this environment: name the compiler with --tileiras V")
        tcs = [tc]
    if args.good and len(tcs) != 2:
        raise UsageError(f"--good {args.good} and --bad {args.bad} are the same compiler: give two releases")
    where = parse_where(args.where)
    con = console(stderr=True)
    store = open_store(args)
    out_dir = os.path.abspath(args.out)
    try:
        red = _run(args, con, prop, tcs, where, store, out_dir)
        return _write(args, con, red, prop, tcs, store, out_dir)
    finally:
        if store is not None:
            store.close()


def _run(args, con, prop, tcs, where, store, out_dir):
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from tileprobe.reduce.engine import reduce
    from tileprobe.report.text import clean
    state = {"size": None}
    with Progress(TextColumn("[bold]reduce[/]"), BarColumn(), TextColumn("{task.description}"),
                  TimeElapsedColumn(), console=con, transient=True) as bar:
        task = bar.add_task("checking the property on the probe as given", total=None)

        def progress(event, info):
            if event == "resumed":      # a Resumed: said at the start, not only at the end
                bar.console.print(f"resumed from {info.journal}: {info.candidates} candidates compiled, {info.kept} "
                                  f"steps kept and {info.wall_s:.0f} s in the runs before", markup=False)
            elif event == "restarted":  # a journal of other arguments or another environment: not resumed
                bar.console.print(f"{info}: written for other arguments or under another tileprobe, cuda-tile, "
                                  "compiler or nvidia-* package: starting afresh (it is overwritten)", markup=False)
            elif event == "start":
                state["size"] = info["size"]
                bar.console.print(f"start: {clean(str(info['size']))} (the probe as given checked in "
                                  f"{info['check_s']:.1f} s{'; the budget starts now' if args.budget is not None else ''})"
                                  f"\n  {clean(info['line'])}", markup=False)
            elif event == "batch":
                bar.update(task, description=f"{info['compiled']} candidates compiled"
                           + (f", now {state['size']}" if state["size"] else ""))
            elif event == "kept":
                state["size"] = info["size"]
                bar.console.print(f"kept: {clean(info['label'])} → {clean(str(info['size']))}", markup=False)
            elif event == "needs":
                bar.update(task, description="what matters: each construct once more on its own")
        return reduce(args.probe, arch=args.arch, where=where, prop=prop, toolchains=tcs, regression=bool(args.good),
                      out_dir=out_dir, budget_s=args.budget, jobs=args.jobs, store=store,
                      compile_timeout_s=args.compile_timeout, progress=progress)


def _write(args, con, red, prop, tcs, store, out_dir) -> int:
    from tileprobe.audit.pipeline import audit
    from tileprobe.reduce.output import REPORT_FILE, write_file, write_standalone
    from tileprobe.reduce.report import markdown
    from tileprobe.report.text import clean
    w = write_standalone(red.source, out_dir)
    records = audit([w.probe], [args.arch], toolchains=tcs, store=store, with_sass=True).records
    with open(w.kernel) as f:
        ksrc = f.read()
    md = markdown(red, probe=args.probe, arch=args.arch, where=args.where or "", prop=prop.text,
                  versions=[t.version for t in tcs], regression=bool(args.good), kernel_source=ksrc, records=records)
    write_file(os.path.join(out_dir, REPORT_FILE), md)
    head = "smallest so far (the budget ran out)" if red.stopped_by_budget else "reduced"
    con.print(f"{head}: {red.original_size} → {red.final_size}; {red.candidates} candidates compiled in "
              f"{red.wall_s:.0f} s" + (f" ({red.reused} of their compiles, one per variant and compiler, "
                                       "answered from an equal bytecode's without tileiras)" if red.reused else "") + (f" (resumed: {red.earlier_candidates} candidates and {red.earlier_wall_s:.0f} s "
                                       "in the runs before)" if red.resumed else ""), markup=False)
    if red.stopped_by_budget:
        con.print("what matters was not checked (the budget ran out): the same command again goes on from the "
                  f"journal in {out_dir}", markup=False)
    needed = [n.construct for n in red.needs if n.verdict == "needed"]
    if needed:
        con.print("needs: " + clean("; ".join(needed)), markup=False)
    if red.removed:
        con.print("not needed: " + clean(", ".join(red.removed)), markup=False)
    con.print(f"wrote {w.kernel}, {w.probe}, {os.path.join(out_dir, REPORT_FILE)}", markup=False)
    kept = _written_keeps(red, prop, tcs, records, where_hints(args))
    if kept:
        con.print(f"the written probe keeps the property: {kept}", markup=False)
        return 0
    con.print("the written probe does NOT keep the property under a plain audit (tileiras may not build the same "
              "code for it as for the candidate: see REPORT.md's table); the reduced kernel is written all the same",
              markup=False)
    return 1


def where_hints(args) -> dict:
    """The hint items of ``--where`` (the variants the property is checked on)."""
    from tileprobe.analyses.gate import parse_where
    from tileprobe.model.hints import KERNEL_HINTS
    return {k: v for k, v in parse_where(args.where).items() if k in KERNEL_HINTS}


def _written_keeps(red, prop, tcs, records, hints) -> str:
    """The audit lines per compiler when the written probe's records have the property as the start did, else
    ``""``."""
    from tileprobe.reduce.prop import checked, judge
    from tileprobe.schema import short_build
    from tileprobe.select import select
    recs = select(records, hints) if hints else list(records)
    lines = []
    for tc, (_, want, _) in zip(tcs, red.start.judgements):
        j = judge(prop if not red.needle else _with_needle(prop, red.needle),
                  [r for r in recs if short_build(r.tileiras) == f"tileiras {tc.version}"])
        if j.holds != want or not checked(j.line):
            return ""
        lines.append(f"{tc.version}: {j.line}")
    return "; ".join(lines)


def _with_needle(prop, needle):
    import dataclasses
    return dataclasses.replace(prop, needle=needle)
