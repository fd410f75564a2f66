"""``tileprobe report -o report.html``: one self-contained HTML report from the store and/or result JSON files.

Python call: :func:`write_html_report` (the records from :func:`tileprobe.analyses.history.load_records`, what
changed between compilers from :func:`tileprobe.analyses.compare.compiler_steps_by_kernel`, the page from
:func:`tileprobe.report.html.render_html`).
"""
from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tileprobe.cli._common import add_where_option, console, where_of
from tileprobe.report.text import say

# Imports inside functions here are lazy on purpose: at the module head they would add 0.41 s to its import
# (python -X importtime, the 2-core machine, 2026-12-02), paid by every command that imports it.

if TYPE_CHECKING:
    from tileprobe.schema import VariantRecord


def add_parser(sub) -> None:
    """Register ``tileprobe report``."""
    p = sub.add_parser("report", help="write one self-contained HTML report (tables, plots, remarks)",
                       description="Write one self-contained HTML file from the results store and/or "
                                   "result JSON files (tileprobe audit --json).")
    p.add_argument("--store", metavar="PATH", help="results store (default: $TILEPROBE_STORE or the user data dir; "
                   "read when given or when no --json is given)")
    p.add_argument("--json", action="append", metavar="FILE", help="result JSON file (repeatable)")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="HTML file to write (- for stdout)")
    p.add_argument("--kernel", help="only this kernel (probe label)")
    p.add_argument("--arch", help="only this arch, e.g. sm_120")
    p.add_argument("--tileiras", metavar="TEXT", help="only compiler builds containing TEXT, e.g. 13.4")
    p.add_argument("--audit", type=int, metavar="ID", help="only the records of this stored audit (tileprobe history)")
    p.add_argument("--title", default="tileprobe report", help="page title")
    add_where_option(p, "variants")
    p.set_defaults(func=cmd_report)


def cmd_report(args) -> int:
    """Run ``tileprobe report`` for parsed arguments; returns the exit code."""
    from tileprobe.report.html import NO_MATPLOTLIB, have_matplotlib
    kw = dict(store=args.store, json_files=args.json or (), kernel=args.kernel, arch=args.arch,
              tileiras=args.tileiras, audit_id=args.audit, title=args.title, where=where_of(args))
    if args.output == "-":       # the page on stdout, written whole once it is complete
        import tempfile
        with tempfile.TemporaryDirectory(prefix="tileprobe-report-") as d:
            path = os.path.join(d, "report.html")
            records = write_html_report(path, **kw)
            with open(path, "rb") as f:
                sys.stdout.flush()
                sys.stdout.buffer.write(f.read())
                sys.stdout.flush()
    else:
        records = write_html_report(args.output, **kw)
    note = "" if have_matplotlib() else f" (tables only: {NO_MATPLOTLIB})"
    where = "the HTML to stdout" if args.output == "-" else args.output
    say(console(stderr=True), f"wrote {where}: {len(records)} variants{note}")
    return 0


def write_html_report(output: str, *, store: str | None = None, json_files: Sequence[str] = (),
                      use_store: bool | None = None, kernel: str | None = None, arch: str | None = None,
                      tileiras: str | None = None, audit_id: int | None = None,
                      title: str = "tileprobe report", where: dict | None = None) -> list[VariantRecord]:
    """``tileprobe report``: write one self-contained HTML file ``output`` from result JSON files and/or the
    results store (:func:`tileprobe.analyses.history.load_records`); return the records it shows.

    ``use_store`` None: read the store when ``store`` or ``audit_id`` is given or no ``json_files`` are.
    ``kernel``, ``arch``, ``tileiras`` (substring of the build), ``audit_id``, ``where`` (case and hint values,
    :mod:`tileprobe.select`): filters, as ``tileprobe history``.

    Raises:
        TileprobeError: no records match (the message says how to get some), or a source cannot be read.
        OSError: ``output`` cannot be written.
    """
    from tileprobe.analyses.compare import compiler_steps_by_kernel
    from tileprobe.analyses.history import load_records
    from tileprobe.errors import TileprobeError
    from tileprobe.report.html import write_report
    if use_store is None:
        use_store = bool(store) or not json_files or audit_id is not None
    records, sources = load_records(store=store, json_files=json_files, use_store=use_store, kernel=kernel,
                                    arch=arch, tileiras=tileiras, audit_id=audit_id, where=where)
    if not records:
        raise TileprobeError(f"no records to report from {', '.join(sources)}: audit with a store first "
                             "(tileprobe audit PROBE --store PATH) or pass --json FILE from `tileprobe audit --json`.")
    write_report(records, output, title=title, sources=sources, compiler_steps=compiler_steps_by_kernel(records))
    return records
