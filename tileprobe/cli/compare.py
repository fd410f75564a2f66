"""``tileprobe compare A B`` / ``--probe P --tileiras A,B``: what changed between two compilers or result sets.

Python call: :func:`tileprobe.analyses.compare.compare_results`.
"""
from __future__ import annotations

import sys

from tileprobe.cli._common import (
    DEFAULT_ARCHS,
    add_install_option,
    add_output_options,
    add_where_option,
    command_line,
    console,
    count,
    progress_bar,
    split,
    toolchains,
    where_of,
    write_json_doc,
)
from tileprobe.errors import UsageError
from tileprobe.report.text import clean, say

# Imports inside functions here are lazy on purpose: at the module head they would add 0.34 s to its import
# (python -X importtime, the 2-core machine, 2026-12-02), paid by every command that imports it.


def add_parser(sub) -> None:
    """Register ``tileprobe compare``."""
    p = sub.add_parser("compare", help="what changed between two compiler versions or two result sets")
    p.add_argument("results", nargs="*", metavar="RESULT", help="two result JSON files / stored audit ids, or one "
                   "file with two compiler builds")
    p.add_argument("--probe", help="audit this probe with the two --tileiras versions and compare them")
    p.add_argument("--tileiras", metavar="A,B", help="two compiler versions (with --probe); with --cuda-tile A,B: "
                   "the one compiler both use")
    p.add_argument("--cuda-tile", metavar="A,B", help="with --probe: audit with two cuda-tile frontends (environments "
                   "`tileprobe frontend install` made, or the one installed here) and one compiler, and compare them")
    p.add_argument("--fixed-bytecode", action="store_true", help="with --probe --tileiras A,B: both compilers get "
                   "one bytecode, the version the older reads, so that a change is the compiler's")
    add_install_option(p)
    p.add_argument("--arch", default=DEFAULT_ARCHS, help="targets (with --probe)")
    p.add_argument("--jobs", "-j", type=count, default=None)
    p.add_argument("--store", metavar="PATH", help="results store: stored audit ids, and with --probe the variants "
                   "already audited (never compiled again); default: the user data dir")
    p.add_argument("--no-store", action="store_true", help="with --probe: compile everything, store nothing")
    p.add_argument("--no-sass", dest="sass", action="store_false", default=None,
                   help="with --probe: skip the SASS traits (spills are then guessed from the stack frame)")
    p.add_argument("--regressions", action="store_true", help="list only the regressions (the counts still "
                   "cover every variant)")
    p.add_argument("--wide", action="store_true", help="A and B side by side in a table (with --probe: and the audit "
                   "tables, at full width)")
    p.add_argument("--details", action="store_true", help="list every changed variant, not only one line per kind "
                   "of change (regressions and improvements are always listed)")
    p.add_argument("--tables", action="store_true", help="with --probe: the audit tables of both compilers too, "
                   "after the comparison")
    add_where_option(p, "variants")
    add_output_options(p)
    p.set_defaults(func=cmd_compare)


def cmd_compare(args) -> int:
    """Run ``tileprobe compare`` for parsed arguments; returns the exit code (0: compared, whatever changed)."""
    import contextlib
    import tempfile

    from tileprobe import _cutile
    from tileprobe.analyses.compare import compare_results
    tcs = None
    if args.probe and len(split(args.tileiras)) == 2:
        tcs = toolchains(args.tileiras, args.install)   # a release not installed: installed only when asked
        if tcs is not None and len(tcs) < 2:     # each compiler is resolved once: one named twice was compiled
            from tileprobe.errors import shown  # against itself (a hostile tester, 2026-12-05)
            raise UsageError(f"--tileiras {shown(args.tileiras)} names one compiler twice: compare needs two "
                             "different ones, e.g. --tileiras 13.3.36,13.4.92")
    fixed: contextlib.AbstractContextManager[object] = contextlib.nullcontext()   # or the fixed bytecode's
    if args.fixed_bytecode:
        if not (args.probe and tcs):
            raise UsageError("--fixed-bytecode needs --probe and two --tileiras releases, e.g. --tileiras "
                             "13.3.36,13.4.92")
        fixed = _cutile.fixed_bytecode([tc.version for tc in tcs])
    prog, cb = progress_bar(console(stderr=True))
    with prog, fixed, tempfile.TemporaryDirectory(prefix="tileprobe-frontends-") as tmp:
        if args.cuda_tile:
            args.results, args.probe = _audit_frontends(args, tmp), None
        c = compare_results(args.results, probe=args.probe, tileiras=split(args.tileiras), archs=split(args.arch),
                            jobs=args.jobs, store=args.store, use_store=not args.no_store, with_sass=args.sass,
                            where=where_of(args), progress=cb)
    if args.regressions:
        c = c.only(("regression",))
    text_out = args.json != "-"          # `--json -`: standard output holds the JSON alone
    if args.json:
        write_json_doc(args.json, c.to_json())
    if args.format == "markdown" and text_out:
        from tileprobe.report.markdown import compare_markdown
        sys.stdout.write(clean(compare_markdown(c, command_line(), details=args.details)))
    elif args.format == "table" and text_out:
        from tileprobe.report.terminal import render_compare
        out = console()
        render_compare(c, out, wide=args.wide, details=args.details)    # the comparison first, short
        if c.audited and (args.tables or args.wide):
            from tileprobe.report.terminal import render_audit
            from tileprobe.select import select
            render_audit(select(c.audited, where_of(args)), out, wide=args.wide, advice=c.advice)
        elif c.audited:
            say(out, "the audit tables of both compilers: add --tables (or `tileprobe audit PROBE --tileiras A,B`)")
    return 0


def _audit_frontends(args, tmp: str) -> list[str]:
    """``--cuda-tile A,B``: audit ``--probe`` with each frontend (its environment's interpreter, or this one for the
    cuda-tile installed here) and the one ``--tileiras`` (default: the one cuTile would pick), each writing a result
    file in ``tmp``; returns the two files. Raises UsageError for other than two versions or no --probe,
    ToolchainError for a frontend with no environment, TileprobeError when an audit fails."""
    import os
    import subprocess

    from tileprobe import frontend
    from tileprobe.errors import TileprobeError
    from tileprobe.procs import preexec_die_with_parent
    fronts = split(args.cuda_tile)
    if len(fronts) != 2 or not args.probe or len(split(args.tileiras)) > 1:
        raise UsageError("--cuda-tile A,B compares two frontends with one compiler: give --probe, two versions "
                         "(e.g. --cuda-tile 1.6.0,1.7.0) and at most one --tileiras")
    out = []
    for i, version in enumerate(fronts):
        path = f"{tmp}/{i}-cuda-tile-{version}.json"
        argv = ["audit", args.probe, "--arch", args.arch, "--summary", "--json", path,
                *(["--tileiras", args.tileiras] if args.tileiras else []), *(["--install"] if args.install else []),
                *(["--jobs", str(args.jobs)] if args.jobs else []), *(["--store", args.store] if args.store else []),
                *(["--no-store"] if args.no_store else []), *(["--where", args.where] if args.where else [])]
        cmd, env = frontend.command_for(version, argv)
        proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, text=True, errors="replace",
                              preexec_fn=preexec_die_with_parent(os.getpid()))   # it ends when this process ends
        sys.stderr.write(proc.stdout)       # its summary lines go to standard error: the comparison owns stdout
        if proc.returncode != 0:
            raise TileprobeError(f"the audit with cuda-tile {version} failed (exit {proc.returncode}; its messages "
                                 "are above)")
        out.append(path)
    return out
