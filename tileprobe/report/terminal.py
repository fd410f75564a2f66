"""Terminal tables (rich): one table per kernel, compiler build and arch, like the occupancy report's log."""
from __future__ import annotations

from typing import Callable, Iterable

from rich.console import Console
from rich.table import Table

from ..schema import VariantRecord
from .common import NUMERIC, case_columns, group_tables, headers, hint_columns, row_cells, short_build, verdict_cells

_STYLE = {"honoured": "green", "partial": "yellow", "ignored": "bold red", "infeasible": "magenta",
          "ok": "green", "wrong": "bold red", "hang": "bold red", "crash": "bold red"}


def _styled(text: str) -> str:
    style = _STYLE.get(text)
    return f"[{style}]{text}[/]" if style else text


def render_audit(records: Iterable[VariantRecord], console: Console | None = None, reasons: bool = True,
                 extra_columns: list[tuple[str, Callable[[VariantRecord], str]]] | None = None) -> None:
    """Print one table per (kernel, tileiras, arch); below it each non-honoured verdict's reason and each
    failure's message and repro command. ``extra_columns``: (header, cell function) pairs, e.g. run times."""
    console = console or Console()
    for (kernel, tileiras, arch), rows in group_tables(records).items():
        hints, cases = hint_columns(rows), case_columns(rows)
        table = Table(title=f"{kernel} · {arch} · {short_build(tileiras)}", title_justify="left")
        for h in headers(hints, cases):
            table.add_column(h, justify="right" if h in NUMERIC else "left", no_wrap=h in NUMERIC)
        for name, _ in extra_columns or []:
            table.add_column(name, justify="right")
        for h in hints:
            table.add_column(f"{h} verdict" if len(hints) > 1 else "verdict", no_wrap=True)
        for r in rows:
            extra = [fn(r) for _, fn in extra_columns or []]
            table.add_row(*row_cells(r, hints, cases), *extra, *(_styled(c) for c in verdict_cells(r, hints)))
        console.print(table)
        if reasons:
            _print_reasons(console, rows)
        console.print()


def _print_reasons(console: Console, rows: list[VariantRecord]) -> None:
    for r in rows:
        label = " ".join(f"{k}={v}" for k, v in [*r.case.items(), *r.hints.items()]) or "declared hints"
        if not r.ok:
            msg = (r.error or "").strip().splitlines()
            console.print(f"  {label}: {r.status}: {msg[0] if msg else ''}", markup=False, highlight=False)
            if r.repro:
                console.print(f"    repeat: {r.repro}", markup=False, highlight=False, soft_wrap=True)
            continue
        for hint, v in r.verdicts.items():
            if v["status"] != "honoured":
                console.print(f"  {label}: {hint} {v['status']}: {v['reason']}", markup=False, highlight=False)
