"""Terminal output (rich): the audit's tables (one per kernel, compiler build and arch, like the occupancy report's
log), and the tables and reports of compare, doctor, gate, history, toolchain list and run."""
from __future__ import annotations

from typing import Callable, Iterable, Sequence

from rich.console import Console
from rich.table import Table

from ..analyses.compare import Comparison
from ..analyses.doctor import Finding
from ..analyses.gate import GateResult
from ..analyses.history import History
from ..audit.explain import advice
from ..model.arch import NOT_SOURCED
from ..schema import VariantRecord
from .common import (NUMERIC, RUN_COLUMNS, best_lines, case_columns, fmt_kv, group_tables, headers, hint_columns,
                     noteworthy, ptx_text, record_side, remark_lines, row_cells, run_label, sass_columns, short_build,
                     verdict_cells, verdict_columns)
from .text import cell, escape, say

_STYLE = {"honoured": "green", "met": "cyan", "partial": "yellow", "ignored": "bold red", "infeasible": "magenta",
          "changed": "blue", "unchanged": "dim", "baseline": "dim",
          "ok": "green", "wrong": "bold red", "hang": "bold red", "crash": "bold red"}


def _styled(text: str):
    """A verdict or status cell, coloured when it is one tileprobe knows (stored text is never markup)."""
    return cell(text, _STYLE.get(text, ""))


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
        table = Table(title=cell(f"{kernel} · {arch} · {short_build(tileiras)}"), title_justify="left")
        for h in headers(hints, cases):
            table.add_column(cell(h), justify="right" if h in NUMERIC else "left", no_wrap=True)
        for name, _ in extra_columns_t:
            table.add_column(cell(name), justify="right")
        for h in vcols:
            table.add_column(cell(f"{h} verdict" if len(vcols) > 1 else "verdict"), no_wrap=True)
        for r in rows:
            extra = [cell(fn(r)) for _, fn in extra_columns_t]
            table.add_row(*map(cell, row_cells(r, hints, cases)), *extra,
                          *(_styled(c) for c in verdict_cells(r, vcols)))
        console.print(table)
        if arch in NOT_SOURCED:
            say(console, f"  {NOT_SOURCED[arch]}")
        if reasons:
            _print_reasons(console, rows, brief)
        console.print()
    if reasons:
        lines = advice(records)
        if lines:
            say(console, "advice:")
            for line in lines:
                say(console, f"  {line}")


def _print_reasons(console: Console, rows: list[VariantRecord], brief: bool) -> None:
    shown_remarks: set = set()
    for r in rows:
        label = " ".join(f"{k}={v}" for k, v in [*r.case.items(), *r.hints.items()]) or "declared hints"
        if not r.ok:
            msg = (r.error or "").strip().splitlines()
            say(console, f"  {label}: {r.status}: {msg[0] if msg else ''}")
            if r.repro:
                say(console, f"    repeat: {r.repro}")
            continue
        for hint, v in r.verdicts.items():
            if not brief or noteworthy(v):
                say(console, f"  {label}: {hint} {v['status']}: {v['reason']}")
        if r.deterministic is False:
            say(console, f"    tileiras gave {len(r.code_hashes)} different machine codes over repeated compiles of "
                         "this variant; verdicts treat any shared code as the same")
        if brief:
            continue
        ptx = ptx_text(r)
        if ptx:
            say(console, f"    PTX: {ptx}")
        rem = tuple(remark_lines(r))
        if rem and rem not in shown_remarks:
            shown_remarks.add(rem)
            for line in rem:
                say(console, f"    remark: {line}")


# --- compare ------------------------------------------------------------------------------------------------------

def render_compare(comparison: Comparison, console: Console | None = None) -> None:
    """A rich table: mark, variant, A and B resources/verdicts, what changed; then the legend and the counts."""
    changes, console = comparison.changes, console or Console()
    t = Table(title=cell(f"A: {comparison.name_a}\nB: {comparison.name_b}"), title_justify="left")
    for h in ("", "variant", "A", "B", "what changed"):
        t.add_column(h)
    style = {"!": "bold red", "*": "green", "x": "yellow"}
    for c in changes:
        m = c.mark
        t.add_row(cell(m, style.get(m, "")), cell(c.label()), cell(record_side(c.a)), cell(record_side(c.b)),
                  cell("; ".join(c.details)))
    console.print(t)
    say(console, "! regression   * improvement   x code or resources changed, same residency and verdicts   "
                 "= same machine code   ? on one side only")
    n = sum(c.kind == "regression" for c in changes)
    say(console, f"{n} regression(s), {sum(c.kind == 'improvement' for c in changes)} improvement(s), "
                 f"{sum(c.kind == 'changed' for c in changes)} changed, {sum(c.kind == 'same' for c in changes)} same")


# --- doctor -------------------------------------------------------------------------------------------------------

_LEVEL_MARK = {"ok": "[green]✓[/]", "warn": "[yellow]![/]", "error": "[bold red]✗[/]"}


def render_doctor(findings: Sequence[Finding], console: Console) -> None:
    """Print findings: a mark (✓ ! ✗), the topic, the message, and the fix on its own line."""
    for f in findings:
        console.print(f"{_LEVEL_MARK[f.level]} [bold]{escape(f.topic)}[/]: {escape(f.message)}")
        if f.fix:
            console.print(f"    [cyan]fix[/]: {escape(f.fix)}")


# --- gate ---------------------------------------------------------------------------------------------------------

def gate_text(g: GateResult) -> str:
    """The gate's report: one block per expectation (ok / FAIL / CANNOT CHECK) with a line per failing variant."""
    lines = []
    for e in g.expectations:
        fails = [f for f in g.failures if f.expectation == e.text]
        hard = [f for f in fails if not f.unchecked]
        if not fails:
            lines.append(f"ok    {e.text} ({len(g.records)} variant(s))")
            continue
        tag = "FAIL " if hard or not g.allow_unchecked else "SKIP "
        what = "cannot be checked" if not hard else f"{len(hard)} of {len(g.records)} variant(s)"
        lines.append(f"{tag} {e.text}: {what}")
        lines.extend(f"      {f}" for f in fails)
    failed = {f.expectation for f in g.failures if not f.unchecked or not g.allow_unchecked}
    if g.passed:
        lines.append(f"gate passed: {len(g.expectations)} expectation(s) on {len(g.records)} variant(s)")
    else:
        lines.append(f"gate FAILED: {len(failed)} of {len(g.expectations)} expectation(s) not met on "
                     f"{len(g.records)} variant(s)")
    return "\n".join(lines)


# --- history ------------------------------------------------------------------------------------------------------

def _table(title: str, headers: Sequence[str], rows: Iterable[Sequence[str]]) -> Table:
    t = Table(title=cell(title), title_justify="left")
    for h in headers:
        t.add_column(cell(h))
    for row in rows:
        t.add_row(*map(cell, row))
    return t


def _num(v, spec: str = "") -> str:
    return "-" if v is None else format(v, spec)


def render_history(hist: History, console: Console, limit: int | None = None) -> None:
    """The store's path, then tables of its audits, compiles and (when any) runs; with ``limit``, a note that
    only the newest ``limit`` of each are listed."""
    say(console, f"store: {hist.store}")
    console.print(_table("audits", ("id", "when (UTC)", "host", "variants", "s", "command"),
                         [(str(a["id"]), a["created"][:19], a["host"] or "", str(a["n_variants"]),
                           f"{a['wall_s'] or 0:.1f}", a["command_line"] or "") for a in hist.audits]))
    console.print(_table("compiles", ("when (UTC)", "kernel", "case", "hints", "arch", "tileiras", "status", "regs",
                                      "CTAs/SM", "µs"),
                         [(c["created"][:19], c["kernel"], fmt_kv(c["case"]), fmt_kv(c["hints"]), c["arch"],
                           c["tileiras"] or "", c["status"], _num(c["registers"]), _num(c["ctas_per_sm"]),
                           _num(c["median_us"], ".1f")) for c in hist.compiles]))
    if hist.runs:
        console.print(_table("runs", ("when (UTC)", "kernel", "case", "hints", "arch", "GPU", "driver", "status",
                                      "µs"),
                             [(r["created"][:19], r["kernel"], fmt_kv(r["case"]), fmt_kv(r["hints"]), r["arch"],
                               r["gpu"] or "", r["driver"] or "", r["status"] or "", _num(r["median_us"], ".1f"))
                              for r in hist.runs]))
    if limit:
        say(console, f"(newest {limit} of each; --limit 0 lists all, --json/--csv export all)")


# --- toolchain list -----------------------------------------------------------------------------------------------

def render_toolchains(toolchains: Sequence, console: Console, empty_hint: str) -> None:
    """A table of :class:`~tileprobe.toolchain.Toolchain` s (version, source, nvcc and nvvm pins, path), or
    ``empty_hint`` when there are none."""
    if not toolchains:
        say(console, empty_hint)
        return
    from ..toolchain import NVCC_PKG, NVVM_PKG
    table = Table("version", "source", "nvcc", "nvvm")
    table.add_column("path", overflow="fold")
    for t in toolchains:
        src = "pip (this environment)" if t.source == "pip" else t.source
        table.add_row(*map(cell, (t.version, src, t.pins.get(NVCC_PKG, ""), t.pins.get(NVVM_PKG, ""), t.root)))
    console.print(table)


# --- run ----------------------------------------------------------------------------------------------------------

def render_run(records: Sequence[VariantRecord], console: Console) -> None:
    """The audit tables with the run columns (:data:`~tileprobe.report.common.RUN_COLUMNS`), each failed run's
    first error line and every timing warning, then the best hint per case."""
    render_audit(records, console, extra_columns=RUN_COLUMNS)
    for r in records:
        run = r.run or {}
        if run.get("status") not in (None, "ok") or run.get("warnings"):
            msg = (run.get("error") or "").strip().splitlines()
            if run.get("status") != "ok":
                say(console, f"  {run_label(r)}: {run.get('status')}: {msg[0] if msg else ''}")
            for w in run.get("warnings") or []:
                say(console, f"  {run_label(r)}: warning: {w}")
    for line in best_lines(records):
        say(console, line)
