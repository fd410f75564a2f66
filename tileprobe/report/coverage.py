"""``tileprobe use --coverage``: the run's coverage as a table on stderr, from a
:class:`~tileprobe.record.coverage.Coverage` (given, never computed here)."""
from __future__ import annotations

import json

from rich.table import Table

from tileprobe.report.text import cell, say


def _pct(share: float | None) -> str:
    return "-" if share is None else f"{share:.1f} %"


def render_coverage(cov, err) -> None:
    """Print ``cov`` on the console ``err``: one row per kernel (searches answered / from the table's default /
    pinned / missed / stale / off; launches that ran a table configuration, the program's own search's, no search),
    the totals with their shares, then each miss with its reason and the nearest row. Kernel names, reasons and
    configurations are untrusted text (:func:`tileprobe.report.text.cell`)."""
    (a, t), (la, lt) = cov.searches, cov.launches
    say(err, f"coverage: {a:,}/{t:,} searches answered ({_pct(cov.search_share)}), {la:,}/{lt:,} launches of "
             f"searching kernels ran a table configuration ({_pct(cov.launch_share)}); {cov.processes} process(es); "
             "launches are host-side ct.launch calls, GPU time is not measured")
    if not cov.kernels:
        _unreadable(cov, err)
        return
    table = Table(title="coverage per kernel", title_justify="left")
    for col in ("kernel", "answered", "default", "pinned", "missed", "stale", "off", "launches: table", "own search",
                "no search"):
        table.add_column(col, justify="left" if col == "kernel" else "right")
    for k in cov.kernels:
        s = k.searches
        table.add_row(cell(k.kernel), *(cell(f"{v:,}") for v in (
            s["answered"], s["default"], s["pinned"], s["missed"], s["stale"], s["off"], k.launches_table,
            k.launches_own, k.launches_none)))
    err.print(table)
    for k in cov.kernels:
        for m in k.misses:
            near = m.nearest
            where = (f"nearest row {near.key[:8]} ({near.problem}, distance {near.distance:g}): "
                     f"{json.dumps(near.config, sort_keys=True)}") if near is not None else "no row of this kernel"
            say(err, f"{m.outcome}: {m.kernel} {m.key[:8]} ({m.problem}) ×{m.calls}: {m.reason}; {where}")
    _unreadable(cov, err)


def _unreadable(cov, err) -> None:
    if cov.unreadable:
        say(err, f"{cov.unreadable} unreadable coverage line(s) skipped (a process killed mid-write, or a line or "
                 "file no tileprobe wrote)")
