"""``tileprobe bisect PROBE --arch A --where … --property … --good V --bad V``: the first tileiras release where a
property of one variant changed.

Python call: :func:`tileprobe.analyses.bisect.bisect`.
"""
from __future__ import annotations

import sys

from ..report.text import clean, say
from ._common import add_output_options, command_line, console, count, write_json_doc


def add_parser(sub) -> None:
    """Register ``tileprobe bisect``."""
    p = sub.add_parser("bisect", help="first tileiras release where a property of a variant changed")
    p.add_argument("probe", metavar="PROBE")
    p.add_argument("--arch", required=True, help="one target, e.g. sm_120")
    p.add_argument("--where", default="", metavar="NAME=VALUE,...", help='the variant: case constants and hint '
                   'values, e.g. "GATHER=True,LOOP=True,occupancy=2" (tuples as the tables print them, TILE=128×128, '
                   'or as Python, TILE=(128,128); default: every variant of the probe)')
    p.add_argument("--property", required=True, help='what to test, in `tileprobe gate --expect` form, e.g. '
                   '"occupancy honoured", "registers<=128", "ctas_per_sm>=2", "no spills"; or on status: '
                   '"compiles", "no crash", and (with GPU runs in --store) "no hang", "correct"')
    p.add_argument("--good", required=True, help="a release where the property has its old value, e.g. 13.3.36")
    p.add_argument("--bad", required=True, help="a release where it changed, e.g. 13.4.92")
    p.add_argument("--jobs", "-j", type=count, default=None)
    p.add_argument("--store", metavar="PATH", help="results store to reuse compiles from and take GPU runs from "
                   "(\"no hang\", \"correct\"); default: none")
    add_output_options(p)
    p.set_defaults(func=cmd_bisect)


def cmd_bisect(args) -> int:
    """Run ``tileprobe bisect`` for parsed arguments, printing each step; returns the exit code."""
    from ..analyses.bisect import bisect
    con = console()

    def show_versions(versions):
        say(con, f"bisecting {len(versions)} releases: {', '.join(versions)}")

    def show_step(s):
        say(con, f"  tileiras {s.version}: {'holds' if s.holds else 'does not hold'} — {s.summary}")

    store = None
    if args.store:
        from ..store import Store
        store = Store.open(args.store)
    try:
        res = bisect(args.probe, arch=args.arch, where=args.where, prop=args.property, good=args.good, bad=args.bad,
                     jobs=args.jobs, on_versions=show_versions, on_step=show_step, store=store)
    finally:
        if store is not None:
            store.close()
    if args.format == "markdown":
        from ..report.markdown import bisect_markdown
        sys.stdout.write(clean(bisect_markdown(res, command_line())))
    else:
        say(con, f"first release where `{args.property}` changed: tileiras {res.first_bad} "
                 f"(last like {res.versions[0]}: {res.last_good})")
    if args.json:
        write_json_doc(args.json, res.to_dict())
    return 0
