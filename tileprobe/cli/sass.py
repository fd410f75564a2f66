"""``tileprobe sass PROBE --arch A --where … [--ptx] [--diff NAME=VALUE | --tileiras A,B]``: the machine code of one
variant, or a readable diff of two (two values of a hint or case constant, or two compilers).

Python calls: :func:`tileprobe.analyses.machine_code.variant_cubins`, :func:`~tileprobe.analyses.machine_code.sass_listing`,
:func:`~tileprobe.analyses.machine_code.ptx_listing`, :func:`~tileprobe.analyses.machine_code.diff_variants`.
"""
from __future__ import annotations

import argparse
import sys

from tileprobe.cli._common import add_install_option, add_where_option, console, open_store, toolchains, where_of
from tileprobe.errors import TileprobeError
from tileprobe.select import WhereError

# Imports inside functions here are lazy on purpose: at the module head they would add 0.48 s to its import
# (python -X importtime, the 2-core machine, 2026-12-02), paid by every command that imports it.


def add_parser(sub) -> None:
    """Register ``tileprobe sass``."""
    p = sub.add_parser("sass", help="one variant's SASS (or PTX), or the diff of two variants' machine code",
                       description="Print the SASS of the one variant --where selects (from the store when it is "
                                   "there, else compiled), or compare two: --diff NAME=VALUE (another value of a hint "
                                   "or case constant) or --tileiras A,B (two compilers).")
    p.add_argument("probe", metavar="PROBE", help="probe file")
    p.add_argument("--arch", required=True, type=one_target, help="one target, e.g. sm_90")
    add_where_option(p, "variant (name every case constant and hint that varies)")
    p.add_argument("--ptx", action="store_true", help="print the PTX tileiras embedded in the cubin instead")
    p.add_argument("--diff", metavar="NAME=VALUE", help="compare with the variant that has this value instead, "
                   "e.g. --diff occupancy=1")
    p.add_argument("--tileiras", metavar="V or A,B", help="the compiler (default: cuTile's); two versions: compare "
                   "the variant's machine code between them")
    add_install_option(p)
    p.add_argument("--full", action="store_true", help="with a diff: every aligned line (default: at most 200)")
    p.add_argument("--store", metavar="PATH", help="results store (default: the user data dir)")
    p.add_argument("--no-store", action="store_true", help="compile here, store nothing")
    p.add_argument("--jobs", "-j", type=int, default=None, help="parallel compiles (default: all CPUs)")
    p.set_defaults(func=cmd_sass)


def one_target(text: str) -> str:
    """argparse type of ``sass --arch``: one target (``sm_90``); two or none is a usage error (exit 2)."""
    from tileprobe.cli._common import split
    targets = split(text)
    if len(targets) != 1:
        raise argparse.ArgumentTypeError(
            f"{text!r} names {len(targets) or 'no'} target{'' if len(targets) == 1 else 's'}; sass reads one variant "
            f"on one target: give one, e.g. --arch {targets[0] if targets else 'sm_90'} (for another target, run "
            "sass again)")
    return targets[0]


def cmd_sass(args) -> int:
    """Run ``tileprobe sass`` for parsed arguments; returns the exit code."""
    from tileprobe.analyses.machine_code import diff_variants, ptx_listing, sass_listing, variant_cubins
    from tileprobe.select import parse_where
    where = where_of(args)
    if not where:
        raise WhereError("--where is missing: sass prints one variant; name it with --where, giving every case "
                         "constant and hint that varies, e.g. --where \"GATHER=True,occupancy=2\"")
    tcs = toolchains(args.tileiras, args.install)
    if args.diff and tcs and len(tcs) > 1:
        raise TileprobeError("compare two hint values (--diff) or two compilers (--tileiras A,B), not both at once")
    store = open_store(args)
    import shlex
    typed = shlex.join(args.raw_argv) if getattr(args, "raw_argv", None) else None   # stored whole, as audit's
    try:
        codes = variant_cubins(args.probe, args.arch, where, toolchains=tcs, store=store, jobs=args.jobs,
                               command_line=typed)
        if args.diff:
            other = {**where, **parse_where(args.diff, "--diff")}
            try:
                codes = codes[:1] + variant_cubins(args.probe, args.arch, other, toolchains=tcs[:1] if tcs else None,
                                                   store=store, jobs=args.jobs, command_line=typed)[:1]
            except WhereError as e:   # the selection that failed is --diff's value, not --where
                raise WhereError(f"--diff {args.diff}: {str(e).removeprefix('--where ')}") from None
    finally:
        if store is not None:
            store.close()
    if len(codes) == 1:
        sys.stdout.write(ptx_listing(codes[0]) if args.ptx else sass_listing(codes[0]))
        return 0
    if args.ptx:
        raise TileprobeError("--ptx prints one variant's PTX; drop --diff / the second --tileiras")
    from tileprobe.report.terminal import render_sass_diff
    render_sass_diff(diff_variants(codes[0], codes[1]), codes[0].record, codes[1].record, console(), full=args.full)
    return 0



