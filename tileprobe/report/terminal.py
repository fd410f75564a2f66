"""Terminal tables (rich): one table per kernel, compiler build and arch, like the occupancy report's log."""
from __future__ import annotations

from typing import Callable, Iterable

from rich.console import Console
from rich.table import Table

from ..schema import VariantRecord
from .common import (NUMERIC, case_columns, group_tables, headers, hint_columns, verdict_columns, ptx_text, remark_lines, row_cells,
                     sass_columns, short_build, verdict_cells, noteworthy)

_STYLE = {"honoured": "green", "met": "cyan", "partial": "yellow", "ignored": "bold red", "infeasible": "magenta",
          "changed": "blue", "unchanged": "dim", "baseline": "dim",
          "ok": "green", "wrong": "bold red", "hang": "bold red", "crash": "bold red"}


def _styled(text: str) -> str:
    style = _STYLE.get(text)
    return f"[{style}]{text}[/]" if style else text


def render_audit(records: Iterable[VariantRecord], console: Console | None = None, reasons: bool = True,
                 extra_columns: list[tuple[str, Callable[[VariantRecord], str]]] | None = None,
                 brief: bool = False) -> None:
    """Print one table per (kernel, tileiras, arch); below it every verdict's reason (only the noteworthy ones —
    partial, ignored, infeasible, unchanged — when ``brief``), the compiler's PTX decision and remarks, each failure's message and repro command; then
    static advice. ``extra_columns``: (header, cell function) pairs, e.g. run times."""
    console = console or Console()
    records = list(records)
    for (kernel, tileiras, arch), rows in group_tables(records).items():
        hints, cases, vcols = hint_columns(rows), case_columns(rows), verdict_columns(rows)
        extra_columns_t = sass_columns(rows) + list(extra_columns or [])
        table = Table(title=f"{kernel} · {arch} · {short_build(tileiras)}", title_justify="left")
        for h in headers(hints, cases):
            table.add_column(h, justify="right" if h in NUMERIC else "left", no_wrap=True)
        for name, _ in extra_columns_t:
            table.add_column(name, justify="right")
        for h in vcols:
            table.add_column(f"{h} verdict" if len(vcols) > 1 else "verdict", no_wrap=True)
        for r in rows:
            extra = [fn(r) for _, fn in extra_columns_t]
            table.add_row(*row_cells(r, hints, cases), *extra, *(_styled(c) for c in verdict_cells(r, vcols)))
        console.print(table)
        if reasons:
            _print_reasons(console, rows, brief)
        console.print()
    if reasons:
        from ..explain import advice
        lines = advice(records)
        if lines:
            console.print("advice:", highlight=False)
            for line in lines:
                console.print(f"  {line}", markup=False, highlight=False)


def _print_reasons(console: Console, rows: list[VariantRecord], brief: bool) -> None:
    shown_remarks: set = set()
    for r in rows:
        label = " ".join(f"{k}={v}" for k, v in [*r.case.items(), *r.hints.items()]) or "declared hints"
        if not r.ok:
            msg = (r.error or "").strip().splitlines()
            console.print(f"  {label}: {r.status}: {msg[0] if msg else ''}", markup=False, highlight=False)
            if r.repro:
                console.print(f"    repeat: {r.repro}", markup=False, highlight=False, soft_wrap=True)
            continue
        for hint, v in r.verdicts.items():
            if not brief or noteworthy(v):
                console.print(f"  {label}: {hint} {v['status']}: {v['reason']}", markup=False, highlight=False)
        if r.deterministic is False:
            console.print(f"    tileiras gave {len(r.code_hashes)} different machine codes over repeated compiles of "
                          "this variant; verdicts treat any shared code as the same", markup=False, highlight=False)
        if brief:
            continue
        ptx = ptx_text(r)
        if ptx:
            console.print(f"    PTX: {ptx}", markup=False, highlight=False)
        rem = tuple(remark_lines(r))
        if rem and rem not in shown_remarks:
            shown_remarks.add(rem)
            for line in rem:
                console.print(f"    remark: {line}", markup=False, highlight=False)
