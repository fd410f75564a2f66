"""``tileprobe record``'s summary: the launches recorded, the notes, and the table of probe files written, from a
:class:`~tileprobe.record.session.RecordResult` (``tileprobe/cli/record.py`` prints it on stderr)."""
from __future__ import annotations

import os

from rich.table import Table

from tileprobe.report.text import cell, say


def render_record(result, err, out_dir: str) -> None:
    """Print a recording's result on the console ``err``: the launches and processes recorded (and the command's
    exit code), the recording's errors and notes, then one row per probe written (path, kernel, launches, cases,
    cases left out, hints) and how to audit them; ``out_dir``: the recording's folder (its ``probes/``)."""
    rec = result.recording
    if rec is not None:
        say(err, f"recorded {rec.total_launches:,} launches in {len(rec.processes)} process(es)"
                 + (f"; the command exited with {result.exit_code}" if result.exit_code is not None else ""))
        for e in rec.errors:
            say(err, f"recording failed: {e}")
        line = exit_error_line(rec)
        if line:
            say(err, line)
        if rec.unreadable:
            say(err, f"{len(rec.unreadable)} unreadable log line(s) skipped (a process ended mid-write?): "
                     f"{rec.unreadable[0]}")
    for note in result.notes:
        say(err, f"note: {note}")
    if not result.written:
        say(err, "no cuda.tile launch was seen: no probe written")
        return
    table = Table(title="probes written", title_justify="left")
    for col in ("probe", "kernel", "launches", "cases", "left out", "hints"):
        table.add_column(col, justify="right" if col in ("launches", "cases", "left out") else "left")
    for path, plan in result.written:
        total = "-" if plan.total is None else f"{plan.total:,}"
        cells = [os.path.relpath(path), plan.kernel.spec() or f"{plan.kernel.name} (TODO: not importable)",
                 total, str(len(plan.cases)), str(len(plan.omitted)),
                 " ".join(f"{h}={v}" for h, v in plan.hints.items()) or "declared"]
        table.add_row(*map(cell, cells))   # names and paths are text, never markup
    err.print(table)
    say(err, f"summary: {os.path.relpath(result.summary_path)}; audit them with: tileprobe audit "
             f"{os.path.relpath(os.path.join(out_dir, 'probes'))}/*.py --arch sm_90")


def exit_error_line(rec) -> str:
    """What the processes that ended on an uncaught exception said (the recording's ``exit_errors``), quoted: for
    want of a GPU (``Recording.gpu_missing``) said first and as such, with the fix; '' when none did."""
    if not rec.exit_errors:
        return ""
    n = len(rec.exit_errors)
    who = f"{n} of the {len(rec.processes)} recorded process(es)"
    if rec.gpu_missing:
        return (f"the program failed for want of a GPU ({who} ended on an error): \"{rec.gpu_missing}\"; run the "
                "command on a machine with an NVIDIA GPU and a CUDA build of its libraries")
    return f"the program failed ({who} ended on an error): \"{rec.exit_errors[0]}\""

