"""``tileprobe bisect PROBE --arch A --where … --property … --good V --bad V``: the first tileiras release where a
property of one variant changed.

By time, split across machines: ``--bundle-out DIR`` (where tileiras is) compiles the variant with
every published release from GOOD to BAD that lists the target into one bundle; ``--bundle DIR PROBE --property
"time within 5%"`` (where the GPU is) runs every release of it, interleaved, and names the first release where the
property fails. With a run property and neither option, one machine (tileiras and a GPU) does both.

Python calls: :func:`tileprobe.analyses.bisect.bisect`, :mod:`tileprobe.analyses.bisect_time`.
"""
from __future__ import annotations

import sys

from tileprobe.cli._common import (
    add_install_option,
    add_output_options,
    command_line,
    confirmed,
    console,
    count,
    write_json_doc,
)
from tileprobe.report.text import clean, say

# Imports inside functions here are lazy on purpose: at the module head they would add 0.41 s to its import
# (python -X importtime, the 2-core machine, 2026-12-02), paid by every command that imports it.


def add_parser(sub) -> None:
    """Register ``tileprobe bisect``."""
    p = sub.add_parser("bisect", help="first tileiras release where a property of a variant changed")
    p.add_argument("probe", metavar="PROBE", nargs="?", help="the probe file (with --bundle: where its code is "
                   "imported from; a bundle is data)")
    p.add_argument("--arch", help="one target, e.g. sm_120 (not with --bundle: the bundle's)")
    p.add_argument("--where", default=None, metavar="NAME=VALUE,...", help='the variant: case constants and hint '
                   'values, e.g. "GATHER=True,LOOP=True,occupancy=2" (tuples as the tables print them, TILE=128×128, '
                   'or as Python, TILE=(128,128); default: every variant of the probe)')
    p.add_argument("--property", required=True, help='what to test, in `tileprobe gate --expect` form, e.g. '
                   '"occupancy honoured", "registers<=128", "ctas_per_sm>=2", "no spills"; or on status: '
                   '"compiles", "no crash", and (with GPU runs in --store) "no hang", "correct"; by time on the GPU: '
                   '"time within 5%%" (median within 5 %% of the good release\'s, beyond noise), "no slower" (than '
                   'the good release, beyond noise), "no hang", "correct"')
    p.add_argument("--good", help="a release where the property has its old value, e.g. 13.3.36")
    p.add_argument("--bad", help="a release where it changed, e.g. 13.4.92")
    p.add_argument("--bundle-out", metavar="DIR", help="CPU side of a bisect by time: compile the variant with "
                   "every published release from --good to --bad that lists --arch into one bundle DIR, and stop")
    p.add_argument("--bundle", metavar="DIR", help="GPU side: run every release of the bundle DIR (from "
                   "--bundle-out), interleaved, and name the first release where --property fails")
    p.add_argument("--rounds", type=count, default=3, help="GPU side: interleaved sweeps whose samples are pooled "
                   "(default 3)")
    p.add_argument("--reps", type=count, default=None, help="GPU side: timed launches per variant and round "
                   "(default 100)")
    p.add_argument("--jobs", "-j", type=count, default=None)
    p.add_argument("--store", metavar="PATH", help="results store to reuse compiles from and take GPU runs from "
                   "(\"no hang\", \"correct\"); default: the user data dir's")
    p.add_argument("--no-store", action="store_true", help="compile every step again, store nothing")
    p.add_argument("--cuda-tile", metavar="VERSION", help="bisect with this cuda-tile frontend instead of the one "
                   "installed here (an environment `tileprobe frontend install VERSION` made; the whole bisect runs "
                   "with its interpreter)")
    p.add_argument("--fixed-bytecode", action="store_true", help="every step compiles one bytecode, the version "
                   "the oldest release reads, so that a change found is tileiras' (each step names its bytecode)")
    add_install_option(p)
    add_output_options(p)
    p.set_defaults(func=cmd_bisect)


def _asking(run):
    """``run(install)`` with ``--install``'s value; when releases in between are missing and standard input and
    error are a terminal, one question names them and their size, and a yes runs it again installing them
    (releases are installed only when asked). Raises what ``run`` raises otherwise."""
    from tileprobe.toolchain import ReleasesNotInstalled

    def go(args):
        try:
            return run(args.install)
        except ReleasesNotInstalled as e:
            if args.install or not confirmed(f"bisect needs {len(e.versions)} release(s) not installed here: "
                                             f"{', '.join(e.versions)} (about {e.size_bytes / 1e6:,.0f} MB in all). "
                                             "Download and install them?"):
                raise
            return run(True)
    return go


def cmd_bisect(args) -> int:
    """Run ``tileprobe bisect`` for parsed arguments, printing each step; returns the exit code."""
    from tileprobe.analyses.bisect import bisect
    from tileprobe.analyses.bisect_time import parse_run_property
    from tileprobe.errors import TileprobeError
    if args.cuda_tile:
        from tileprobe.frontend import run_with
        code = run_with(args.cuda_tile, args.raw_argv)
        if code is not None:
            return code
    con = console(stderr=args.json == "-")      # `--json -`: standard output holds the JSON alone
    if args.bundle:
        return _gpu_side(args, args.bundle, con)
    if not (args.probe and args.arch and args.good and args.bad):
        raise TileprobeError("bisect needs PROBE, --arch, --good and --bad (or --bundle DIR PROBE on the GPU side)")
    if args.bundle_out:
        return _cpu_side(args, args.bundle_out, con)
    if parse_run_property(args.property) is not None and not _static_run_property(args):
        import tempfile
        with tempfile.TemporaryDirectory(prefix="tileprobe-bisect-") as tmp:
            _cpu_side(args, tmp, con)
            return _gpu_side(args, tmp, con)

    def show_versions(versions):
        say(con, f"bisecting {len(versions)} releases: {', '.join(versions)}")

    def show_step(s):
        parts = ", ".join(f"{k} {v}" for k, v in s.parts.items() if k != "tileiras" and v)
        say(con, f"  tileiras {s.version}: {'holds' if s.holds else 'does not hold'}"
                 + (f" ({s.measured})" if s.measured else "") + (f" [with {parts}]" if parts else "")
                 + f" — {s.summary}")

    store = None
    if not args.no_store:      # the store by default (nothing stored is compiled again)
        from tileprobe.store import Store
        store = Store.open(args.store)
    try:
        res = _asking(lambda install: bisect(args.probe, arch=args.arch, where=args.where, prop=args.property,
                                             good=args.good, bad=args.bad, jobs=args.jobs, on_versions=show_versions,
                                             on_step=show_step, store=store, install=install,
                                             fixed_bytecode=args.fixed_bytecode))(args)
    finally:
        if store is not None:
            store.close()
    if args.format == "markdown":
        from tileprobe.report.markdown import bisect_markdown
        sys.stdout.write(clean(bisect_markdown(res, command_line())))
    else:
        say(con, f"first release where `{args.property}` changed: tileiras {res.first_bad} "
                 f"(last like {res.versions[0]}: {res.last_good})")
        from tileprobe.analyses.bisect import bytecode_verdict
        side = bytecode_verdict(res.steps, args.fixed_bytecode)
        if side:
            say(con, side)
        for w in res.warnings():
            say(con, f"warning: {w}")
    if args.json:
        write_json_doc(args.json, res.to_dict())
    return 0


def _static_run_property(args) -> bool:
    """``no hang`` / ``correct`` with --store: the stored runs answer (a bisection on status), no GPU needed."""
    return not args.no_store and args.property.strip().lower() in ("no hang", "no hangs", "correct")


def _cpu_side(args, out_dir: str, con) -> int:
    """Compile every release that lists the target into one bundle (``--bundle-out``)."""
    from tileprobe.analyses.bisect_time import prepare_bundle
    from tileprobe.analyses.gate import parse_where

    def show(keep, skipped):
        say(con, f"releases that compile {args.arch}: {', '.join(keep)}")
        for v, why in skipped.items():
            say(con, f"  skipped {v}: {why}")

    keep, _, size = _asking(lambda install: prepare_bundle(
        args.probe, out_dir, arch=args.arch, where=parse_where(args.where), good=args.good, bad=args.bad,
        jobs=args.jobs, on_versions=show, install=install))(args)
    say(con, f"bundle {out_dir}: {len(keep)} releases, {size / 1e6:.2f} MB; on the GPU machine: tileprobe bisect "
             f"--bundle {out_dir} {args.probe} --property \"{args.property}\"")
    return 0


def _gpu_side(args, bundle: str, con) -> int:
    """Run every release of the bundle, interleaved, and print each release's time and the answer."""
    from tileprobe.analyses.bisect_time import bisect_bundle
    res = bisect_bundle(bundle, [args.probe] if args.probe else [], args.property, rounds=args.rounds,
                        reps=args.reps,
                        on_gpu=lambda g: say(con, f"GPU: {g.get('name')} ({g.get('sm')}), driver {g.get('driver')}"))
    if args.format == "markdown":
        from tileprobe.report.markdown import time_bisect_markdown
        sys.stdout.write(clean(time_bisect_markdown(res, command_line())))
    else:
        say(con, f"every release measured ({res.rounds} interleaved rounds, samples pooled; no binary search: "
                 "timing is cheap next to compiling):")
        for s in res.steps:
            say(con, f"  tileiras {s.version}: {'holds' if s.holds else 'FAILS'} — {s.summary}")
        for v, why in res.skipped.items():
            say(con, f"  skipped {v}: {why}")
        say(con, res.conclusion())
    if args.json:
        write_json_doc(args.json, res.to_dict())
    return 0
