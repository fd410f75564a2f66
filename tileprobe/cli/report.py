"""``tileprobe report -o report.html``: one self-contained HTML report from the store and/or result JSON files.

Python call: :func:`tileprobe.report.html.write_html_report`.
"""
from __future__ import annotations

from tileprobe.report.text import say
from tileprobe.cli._common import add_where_option, console, where_of


def add_parser(sub) -> None:
    """Register ``tileprobe report``."""
    p = sub.add_parser("report", help="write one self-contained HTML report (tables, plots, remarks)",
                       description="Write one self-contained HTML file from the results store and/or "
                                   "result JSON files (tileprobe audit --json).")
    p.add_argument("--store", metavar="PATH", help="results store (default: $TILEPROBE_STORE or the user data dir; "
                   "read when given or when no --json is given)")
    p.add_argument("--json", action="append", metavar="FILE", help="result JSON file (repeatable)")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="HTML file to write")
    p.add_argument("--kernel", help="only this kernel (probe label)")
    p.add_argument("--arch", help="only this arch, e.g. sm_120")
    p.add_argument("--tileiras", metavar="TEXT", help="only compiler builds containing TEXT, e.g. 13.4")
    p.add_argument("--audit", type=int, metavar="ID", help="only the records of this stored audit (tileprobe history)")
    p.add_argument("--title", default="tileprobe report", help="page title")
    add_where_option(p, "variants")
    p.set_defaults(func=cmd_report)


def cmd_report(args) -> int:
    """Run ``tileprobe report`` for parsed arguments; returns the exit code."""
    from tileprobe.report.html import NO_MATPLOTLIB, have_matplotlib, write_html_report
    records = write_html_report(args.output, store=args.store, json_files=args.json or (), kernel=args.kernel,
                                arch=args.arch, tileiras=args.tileiras, audit_id=args.audit, title=args.title,
                                where=where_of(args))
    note = "" if have_matplotlib() else f" (tables only: {NO_MATPLOTLIB})"
    say(console(stderr=True), f"wrote {args.output}: {len(records)} variants{note}")
    return 0
