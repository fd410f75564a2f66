"""``tileprobe doctor``: which tileiras cuTile would pick and why; CUDA_HOME traps and version mismatches.

Python call: :func:`tileprobe.analyses.doctor.diagnose`. Exit code 0: no errors found, 1: at least one.
"""
from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

from tileprobe.cli._common import add_output_options, console
from tileprobe.report.text import clean

# Imports inside functions here are lazy on purpose: at the module head they would add 0.33 s to its import
# (python -X importtime, the 2-core machine, 2026-12-02), paid by every command that imports it.


def add_parser(sub) -> None:
    """Register ``tileprobe doctor``."""
    p = sub.add_parser("doctor", help="explain which tileiras cuTile uses and why compiles fail")
    add_output_options(p)
    p.set_defaults(func=cmd_doctor)


def cmd_doctor(args) -> int:
    """Run ``tileprobe doctor`` for parsed arguments; returns 1 when a finding is an error, else 0."""
    from tileprobe.analyses.doctor import diagnose
    findings = diagnose()
    if args.json:
        doc = {"findings": [dataclasses.asdict(f) for f in findings]}
        if args.json == "-":
            print(json.dumps(doc, indent=1))
        else:
            Path(args.json).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    if args.format == "markdown":
        from tileprobe.report.markdown import doctor_markdown
        sys.stdout.write(clean(doctor_markdown(findings)))
    elif args.format == "table" and args.json != "-":
        from tileprobe.report.terminal import render_doctor
        render_doctor(findings, console())
    return 1 if any(f.level == "error" for f in findings) else 0
