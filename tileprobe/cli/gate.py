"""``tileprobe gate PROBE --arch A --expect …``: a CI check, exit 1 with a reason per failed expectation.

Python call: :func:`tileprobe.analyses.gate.run_gate`.
"""
from __future__ import annotations

import argparse
import shlex

from tileprobe.cli._common import add_install_option, console, count, open_store, seconds, toolchains, write_json_doc
from tileprobe.report.text import say

# Imports inside functions here are lazy on purpose: at the module head they would add 0.34 s to its import
# (python -X importtime, the 2-core machine, 2026-12-02), paid by every command that imports it.


def add_parser(sub) -> None:
    """Register ``tileprobe gate`` (exit 1 with a reason per failed expectation; see :mod:`tileprobe.analyses.gate`)."""
    from tileprobe.analyses.gate import forms
    p = sub.add_parser("gate", help="CI check: audit selected variants, test expectations (exit 1 on failure)",
                       description="Audit the selected variants of a probe (reusing the results store) and "
                                   "check expectations; exit 1 with a reason per failure.",
                       epilog="expectations:\n" + forms(), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("probe", metavar="PROBE", help="probe file")
    p.add_argument("--arch", required=True, help="one target, e.g. sm_120")
    p.add_argument("--tileiras", metavar="V", help="compiler version(s), e.g. 13.3.36 (managed toolchains); "
                   "default: the one cuTile would use")
    add_install_option(p)
    from tileprobe.cli._common import add_where_option
    add_where_option(p, "variants to check")
    p.add_argument("--expect", action="append", metavar="EXPR", help="an expectation (repeatable; forms below)")
    p.add_argument("--baseline", metavar="STORE_OR_JSON", help="results store or result JSON to compare with")
    p.add_argument("--runs", metavar="RUN_JSON", help="check the records of this run JSON (e.g. `tileprobe run "
                   "--bundle DIR PROBE --json new.json` on the GPU machine: a new release's run) instead of auditing "
                   "here; with --baseline and --expect \"time no worse than baseline\"")
    p.add_argument("--runs-tileiras", metavar="TEXT", help="use the --runs records of this compiler build")
    p.add_argument("--baseline-tileiras", metavar="TEXT", help="use the baseline's records of this compiler build")
    p.add_argument("--allow-unchecked", action="store_true", help="pass when an expectation cannot be checked "
                   "(e.g. time with no run records); default: such an expectation fails")
    p.add_argument("--store", metavar="PATH", help="results store (default: $TILEPROBE_STORE or the user data dir)")
    p.add_argument("--no-store", action="store_true", help="do not read or write the results store")
    p.add_argument("--jobs", "-j", type=count, default=None, help="parallel compiles (default: all CPUs)")
    p.add_argument("--timeout", type=seconds, default=None, help="per-variant compiler timeout in seconds")
    p.add_argument("--json", metavar="FILE", help="also write the outcome (failures, variants) as JSON; - for stdout "
                   "(the report then goes to stderr)")
    p.set_defaults(func=cmd_gate)


def cmd_gate(args) -> int:
    """Run ``tileprobe gate`` for parsed arguments; returns 0 when every expectation holds, else 1."""
    from tileprobe.analyses.gate import parse_where, run_gate
    from tileprobe.report.terminal import gate_text
    tcs, store = toolchains(args.tileiras, args.install), open_store(args)
    g = run_gate(args.probe, args.arch, args.expect or [], where=parse_where(args.where), toolchains=tcs,
                 store=store, baseline=args.baseline, runs=args.runs, runs_tileiras=args.runs_tileiras,
                 baseline_tileiras=args.baseline_tileiras, allow_unchecked=args.allow_unchecked, jobs=args.jobs,
                 timeout_s=args.timeout, command_line=_command_line(args))
    say(console(stderr=args.json == "-"), gate_text(g))      # `--json -`: standard output holds the JSON alone
    if args.json:
        write_json_doc(args.json, g.to_dict())
    return 0 if g.passed else 1


def _command_line(args) -> str:
    """The gate's command line as stored with its audit (rebuilt from ``args``: main(argv) may run in-process)."""
    parts = ["gate", args.probe, "--arch", args.arch]
    for flag, value in (("--tileiras", args.tileiras), ("--where", args.where), ("--baseline", args.baseline)):
        if value:
            parts += [flag, value]
    for e in args.expect or []:
        parts += ["--expect", e]
    return shlex.join(parts)
