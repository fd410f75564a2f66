"""``tileprobe history``: list stored audits, compiles and runs; export JSON or CSV.

Python calls: :func:`tileprobe.analyses.history.history`, :func:`~tileprobe.analyses.history.write_history_json`,
:func:`~tileprobe.analyses.history.write_history_csv`.
"""
from __future__ import annotations

import sys

from tileprobe.cli._common import add_where_option, console, count_or_zero, where_of
from tileprobe.report.text import say

# Imports inside functions here are lazy on purpose: at the module head they would add 0.40 s to its import
# (python -X importtime, the 2-core machine, 2026-12-02), paid by every command that imports it.


def add_parser(sub) -> None:
    """Register ``tileprobe history``."""
    p = sub.add_parser("history", help="list stored audits, compiles and runs; export JSON/CSV",
                       description="List what the results store holds, newest first.")
    p.add_argument("--store", metavar="PATH", help="results store (default: $TILEPROBE_STORE or the user data dir)")
    p.add_argument("--kernel", help="only this kernel (probe label)")
    p.add_argument("--arch", help="only this arch, e.g. sm_90")
    p.add_argument("--tileiras", metavar="TEXT", help="only compiler builds containing TEXT, e.g. 13.4")
    p.add_argument("--limit", type=count_or_zero, default=20, help="rows listed per table (default 20; 0: all)")
    p.add_argument("--json", metavar="FILE", help="export the matching records (result schema) plus audits and runs; "
                   "- for stdout")
    p.add_argument("--csv", metavar="FILE", help="export one row per matching compile; - for stdout")
    add_where_option(p, "compiles (and their runs and audits)")
    p.set_defaults(func=cmd_history)


def cmd_history(args) -> int:
    """Run ``tileprobe history`` for parsed arguments; returns the exit code."""
    from tileprobe.analyses.history import history, write_history_csv, write_history_json
    from tileprobe.store import Store
    filters = dict(kernel=args.kernel, arch=args.arch, tileiras=args.tileiras, where=where_of(args))
    with Store.open(args.store, must_exist=bool(args.store), check=True) as store:
        err = console(stderr=True)
        if args.json:
            n = write_history_json(store, _dest(args.json), **filters)
            if args.json != "-":                 # as `report -o FILE` says what it wrote
                say(err, f"wrote {args.json}: {n} variant{'' if n == 1 else 's'}")
        if args.csv == "-":          # stored names and case values reach the terminal as text (report/text.py)
            import io

            from tileprobe.report.text import clean
            buf = io.StringIO()
            write_history_csv(store, buf, **filters)
            sys.stdout.write(clean(buf.getvalue()))
        elif args.csv:
            n = write_history_csv(store, args.csv, **filters)
            say(err, f"wrote {args.csv}: {n} row{'' if n == 1 else 's'}")
        if "-" in (args.json, args.csv):
            return 0
        from tileprobe.report.terminal import render_history
        render_history(history(store, **filters, limit=args.limit), console(), limit=args.limit)
    return 0


def _dest(path: str):
    return sys.stdout if path == "-" else path
