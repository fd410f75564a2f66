"""Terminal tables (rich): one table per kernel and compiler build, like the occupancy report's log."""
from __future__ import annotations

from typing import Iterable

from rich.console import Console
from rich.table import Table

from ..schema import VariantRecord
from .common import HEADERS, group_tables, row_cells

_STYLE = {"honoured": "green", "partial": "yellow", "ignored": "bold red", "infeasible": "magenta"}


def _verdict_cell(r: VariantRecord) -> str:
    if not r.ok:
        return f"[bold red]{r.status}[/]"
    parts = []
    for hint, v in r.verdicts.items():
        style = _STYLE.get(v["status"], "")
        parts.append(f"{hint} [{style}]{v['status']}[/]" if style else f"{hint} {v['status']}")
    return ", ".join(parts) or "-"


def render_audit(records: Iterable[VariantRecord], console: Console | None = None, reasons: bool = True,
                 extra_columns: list[tuple[str, callable]] | None = None) -> None:
    """Print one table per (kernel, tileiras) and, below it, each verdict's reason and each failure's message."""
    console = console or Console()
    for (kernel, tileiras), rows in group_tables(records).items():
        table = Table(title=f"{kernel} — {tileiras or 'tileiras ?'}", title_justify="left", show_lines=False)
        for h in HEADERS:
            table.add_column(h, justify="right" if h in ("threads", "regs", "shared B", "stack B", "CTAs/SM") else "left")
        for name, _ in extra_columns or []:
            table.add_column(name, justify="right")
        table.add_column("verdict")
        for r in rows:
            extra = [fn(r) for _, fn in extra_columns or []]
            table.add_row(*row_cells(r), *extra, _verdict_cell(r))
        console.print(table)
        if reasons:
            for r in rows:
                label = f"{r.arch} {' '.join(f'{k}={v}' for k, v in r.case.items())} " \
                        f"{' '.join(f'{k}={v}' for k, v in r.hints.items())}".strip()
                if not r.ok:
                    msg = (r.error or "").strip().splitlines()
                    console.print(f"  [red]{label}: {r.status}[/]: {msg[0] if msg else ''}", markup=True,
                                  highlight=False)
                    if r.repro:
                        console.print(f"    repeat: {r.repro}", markup=False, highlight=False)
                    continue
                for hint, v in r.verdicts.items():
                    if v["status"] != "honoured":
                        console.print(f"  {label}: {hint} {v['status']}: {v['reason']}", markup=False,
                                      highlight=False)
        console.print()
